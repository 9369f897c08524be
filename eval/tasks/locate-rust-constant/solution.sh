#!/usr/bin/env bash
# Answer-only task: the constant is in src/net/backoff.rs with the value 12.
grep -rn 'const MAX_UPLOAD_RETRIES' src/
