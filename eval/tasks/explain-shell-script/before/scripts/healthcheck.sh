#!/usr/bin/env bash
# Restart the ledger service when /healthz stops answering.
set -u
if ! curl -fsS --max-time 5 http://127.0.0.1:7400/healthz >/dev/null; then
    logger -t ledger-health "healthz failed, restarting ledger"
    systemctl restart ledger
fi
