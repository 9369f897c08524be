'use strict';
const { normalize_sku } = require('./lib/sku');

console.log(normalize_sku(process.argv[2] || ''));
