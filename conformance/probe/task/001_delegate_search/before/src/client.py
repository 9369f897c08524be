from retry import MAX_RETRIES
