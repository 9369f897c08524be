sed -i 's/\bDEFAULT_TIMEOUT\b/REQUEST_TIMEOUT_MS/g' config.js client.js queue.js index.js
