const config = require('./config');

// Jobs get twice the request timeout unless told otherwise.
class JobQueue {
  constructor() {
    this.jobs = [];
  }

  push(name, timeout = config.DEFAULT_TIMEOUT * 2) {
    this.jobs.push({ name, timeout });
    return this;
  }

  describe() {
    return this.jobs.map((j) => `${j.name} (${j.timeout} ms)`).join(', ');
  }
}

module.exports = { JobQueue };
