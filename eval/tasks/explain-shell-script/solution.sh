#!/usr/bin/env bash
# Answer-only task: read the script.
cat scripts/nightly_backup.sh
