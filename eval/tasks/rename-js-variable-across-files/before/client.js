const { DEFAULT_TIMEOUT, RETRY_COUNT, USER_AGENT } = require('./config');

function requestOptions(url, overrides = {}) {
  return {
    url,
    headers: { 'User-Agent': USER_AGENT },
    timeout: overrides.timeout ?? DEFAULT_TIMEOUT,
    retries: overrides.retries ?? RETRY_COUNT,
  };
}

module.exports = { requestOptions };
