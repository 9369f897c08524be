'use strict';

const assert = require('node:assert/strict');
const { cartSummary } = require('../src/cart');

assert.equal(cartSummary([{ qty: 2, unitCents: 1250 }, { qty: 1, unitCents: 99 }]), '2 items, $25.99');
console.log('cart tests passed');
