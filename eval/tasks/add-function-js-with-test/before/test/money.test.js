'use strict';

const assert = require('node:assert/strict');
const { formatCents, splitCents } = require('../src/money');

assert.equal(formatCents(0), '$0.00');
assert.equal(formatCents(5), '$0.05');
assert.equal(formatCents(129900), '$1,299.00');
assert.equal(formatCents(-250), '-$2.50');
assert.throws(() => formatCents(1.5), TypeError);

assert.deepEqual(splitCents(1000, 3), [334, 333, 333]);
assert.deepEqual(splitCents(6, 3), [2, 2, 2]);

console.log('money tests passed');
