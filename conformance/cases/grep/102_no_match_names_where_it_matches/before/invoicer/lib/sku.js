'use strict';

// Upper-case and strip separators so "ab-12 3" and "AB123" are the same SKU.
function normalize_sku(raw) {
  return raw.toUpperCase().replace(/[\s-]/g, '');
}

module.exports = { normalize_sku };
