#!/usr/bin/env bash
# Summarise the log files in logs/: lines, errors and warnings per file, then a status line.
set -u

total_errors=0
total_warnings=0
for f in logs/*.log; do
    lines=$(wc -l < "$f")
    errors=$(grep -c 'ERROR' "$f")
    warnings=$(grep -c 'WARN' "$f")
    printf '%-12s %4d lines %3d errors %3d warnings\n' "$(basename "$f")" "$lines" "$errors" "$warnings"
    total_errors=$((total_errors + errors))
    total_warnings=$((total_warnings + warnings))
done

if [ "$total_errors" -gt 0 ]
    echo "status: FAILING ($total_errors errors, $total_warnings warnings)"
else
    echo "status: ok ($total_warnings warnings)"
fi
