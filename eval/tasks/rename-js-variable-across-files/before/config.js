// Settings shared by the HTTP client and the job queue.
const DEFAULT_TIMEOUT = 3000;
const RETRY_COUNT = 2;
const USER_AGENT = 'fetcher/1.4';

module.exports = { DEFAULT_TIMEOUT, RETRY_COUNT, USER_AGENT };
