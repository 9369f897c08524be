#!/usr/bin/env bash
set -e
sed -i -e 's/^DATABASE_HOST=.*/DATABASE_HOST=db-staging-2.internal/' -e 's/^DEBUG=true$/DEBUG=false/' deploy/staging.env
cat deploy/staging.env
