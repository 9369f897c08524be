#!/usr/bin/env bash
set -e
sed -i 's/^  pool_size: 10$/  pool_size: 10\n  connect_timeout_s: 10/' config/settings.yaml
cat config/settings.yaml
