'use strict';

const { formatCents } = require('./money');

function cartSummary(lines) {
  const total = lines.reduce((sum, l) => sum + l.qty * l.unitCents, 0);
  return `${lines.length} items, ${formatCents(total)}`;
}

module.exports = { cartSummary };
