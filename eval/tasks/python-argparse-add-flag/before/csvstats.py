#!/usr/bin/env python3
"""Print the count, min, max and mean of one numeric column of a CSV file."""
import argparse
import csv
import statistics
import sys


def column_values(path, column):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        names = reader.fieldnames or []
        if column not in names:
            sys.exit(f"csvstats: no column {column!r} in {path}; columns: {', '.join(names)}")
        return [float(row[column]) for row in reader if row[column].strip()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", help="the CSV file, with a header row")
    parser.add_argument("-c", "--column", required=True, help="the numeric column to summarise")
    args = parser.parse_args(argv)

    values = column_values(args.path, args.column)
    if not values:
        sys.exit(f"csvstats: column {args.column!r} has no values")
    print(f"count {len(values)}")
    print(f"min {min(values):.2f}")
    print(f"max {max(values):.2f}")
    print(f"mean {statistics.mean(values):.2f}")


if __name__ == "__main__":
    main()
