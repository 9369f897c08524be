#!/usr/bin/env bash
set -euo pipefail

APP_ROOT=/srv/ledger
SRC="$APP_ROOT/data"
DEST="${LEDGER_BACKUP_DIR:-/mnt/nas/ledger-backups}"
KEEP_DAYS=21
STAMP=$(date +%Y%m%d-%H%M)
ARCHIVE="$DEST/ledger-$STAMP.tar.gz"

mkdir -p "$DEST"

# The cache is rebuilt on start; no point storing it.
tar --exclude="$SRC/cache" -czf "$ARCHIVE.partial" -C "$(dirname "$SRC")" "$(basename "$SRC")"
mv "$ARCHIVE.partial" "$ARCHIVE"

find "$DEST" -maxdepth 1 -name 'ledger-*.tar.gz' -mtime +"$KEEP_DAYS" -delete

echo "$(date -Is) backup ok: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1))"
