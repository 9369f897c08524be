'use strict';

const assert = require('node:assert/strict');
const { formatDuration } = require('./lib/duration');
const { badgeText } = require('./lib/badge');

const cases = [
  [0, '0s'],
  [59, '59s'],
  [61, '1m 01s'],
  [3725, '1h 02m 05s'],
  [7200, '2h 00m 00s'],
  [93784, '1d 2h 03m 04s'],
];

let failed = 0;
for (const [input, want] of cases) {
  try {
    assert.equal(formatDuration(input), want);
    console.log(`ok   formatDuration(${input}) = ${want}`);
  } catch (e) {
    failed++;
    console.log(`FAIL formatDuration(${input}): want ${want}, got ${formatDuration(input)}`);
  }
}

assert.throws(() => formatDuration(-1), RangeError);
assert.equal(badgeText('api', null), 'api: down');
assert.equal(badgeText('api', 61), 'api: up 1m 01s');

if (failed) {
  console.log(`${failed} failed`);
  process.exit(1);
}
console.log('all passed');
