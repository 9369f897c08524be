import argparse
import os
import subprocess
import sys

from . import config


def main(argv=None):
    cfg = config.load()
    p = argparse.ArgumentParser(prog="snip")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("add").add_argument("name")
    sub.add_parser("find").add_argument("query")
    sub.add_parser("show").add_argument("name")
    args = p.parse_args(argv)

    cfg["home"].mkdir(parents=True, exist_ok=True)
    if args.cmd == "add":
        subprocess.run([cfg["editor"], str(cfg["home"] / args.name)], check=False)
    elif args.cmd == "find":
        hits = [f.name for f in sorted(cfg["home"].iterdir()) if args.query in f.read_text(errors="replace")]
        print("\n".join(hits[: cfg["max_results"]]))
    elif args.cmd == "show":
        path = cfg["home"] / args.name
        if not path.exists():
            sys.exit(f"snip: no snippet {args.name}")
        sys.stdout.write(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
