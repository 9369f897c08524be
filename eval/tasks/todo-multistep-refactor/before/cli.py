#!/usr/bin/env python3
"""wordcount: count the words, lines and characters of a text file."""
import argparse
import logging
import sys

log = logging.getLogger("wordcount")


def count(text):
    """(words, lines, characters) of `text`."""
    return len(text.split()), len(text.splitlines()), len(text)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="wordcount", description=__doc__)
    parser.add_argument("path", help="the text file to count")
    parser.add_argument("--lines", action="store_true", help="also print the number of lines")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    log.debug("reading %s", args.path)
    try:
        with open(args.path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        log.error("cannot read %s: %s", args.path, e)
        return 1
    words, lines, chars = count(text)
    log.debug("read %d characters", chars)
    print(f"{words} words")
    if args.lines:
        print(f"{lines} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
