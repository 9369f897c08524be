const { normalize_sku } = require('../lib/sku');
module.exports = (s) => normalize_sku(s);
