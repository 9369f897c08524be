#!/usr/bin/env bash
# Print the last 5 lines of every log, with a header per file.
for f in logs/*.log; do
    echo "== $f"
    tail -n 5 "$f"
done
