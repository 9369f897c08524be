sed -i 's/^WEBHOOK_MAX_RETRIES = 5$/WEBHOOK_MAX_RETRIES = 8/' src/gateway/settings.py
