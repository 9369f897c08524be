#!/usr/bin/env bash
set -e
cat > scripts/count_errors.sh <<'SH'
#!/usr/bin/env bash
# For each logs/*.log, print "<file name> <number of lines containing ERROR>", sorted by name.
for f in logs/*.log; do
    printf '%s %s\n' "$(basename "$f")" "$(grep -c ERROR "$f" || true)"
done | sort
SH
chmod +x scripts/count_errors.sh
mkdir -p reports
bash scripts/count_errors.sh > reports/errors.txt
cat reports/errors.txt
