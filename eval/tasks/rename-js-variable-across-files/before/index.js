const { DEFAULT_TIMEOUT } = require('./config');
const { requestOptions } = require('./client');
const { JobQueue } = require('./queue');

console.log(`default timeout: ${DEFAULT_TIMEOUT} ms`);
console.log(JSON.stringify(requestOptions('https://example.com/api')));
console.log(JSON.stringify(requestOptions('https://example.com/slow', { timeout: 10000 })));
console.log(new JobQueue().push('resize').push('upload', 500).describe());
