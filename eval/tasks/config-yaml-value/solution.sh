#!/usr/bin/env bash
set -e
# Only the billing-worker Deployment's replicas line (the second "replicas: 1" is in staging, untouched).
sed -i '/name: billing-worker/,/^---/ s/^  replicas: 1$/  replicas: 4/' deploy/app.yaml
grep -n 'replicas' deploy/app.yaml
