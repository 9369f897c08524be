#!/usr/bin/env bash
# usage: restore.sh ARCHIVE
# Stops the service, unpacks ARCHIVE over the data directory, starts it again.
set -euo pipefail
archive=$1
systemctl stop ledger
tar -xzf "$archive" -C /srv/ledger
systemctl start ledger
