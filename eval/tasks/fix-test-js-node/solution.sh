#!/usr/bin/env bash
set -e
sed -i 's|const minutes = Math.floor(totalSeconds / 60);|const minutes = Math.floor((totalSeconds % 3600) / 60);|' lib/duration.js
node test.js
