// Sales per region for the month in sales.json, largest first, with each region's share.
const fs = require('fs');
const path = require('path');

const data = JSON.parse(fs.readFileSync(path.join(__dirname, 'sales.json'), 'utf8'));

const byRegion = {};
for (const sale of data.sales) {
  byRegion[sale.region] = (byRegion[sale.region] || 0) + sale.amount;
}

const format = {
  currency: (n) => `$${n.toFixed(2)}`,
  percent: (n) => `${(n * 100).toFixed(1)}%`
  plain: (n) => String(n),
};

const total = Object.values(byRegion).reduce((a, b) => a + b, 0);
console.log(`Sales for ${data.month} (${format.plain(data.sales.length)} sales)`);
for (const [region, amount] of Object.entries(byRegion).sort((a, b) => b[1] - a[1])) {
  console.log(`${region.padEnd(8)}${format.currency(amount).padStart(10)}${format.percent(amount / total).padStart(8)}`);
}
console.log(`${'total'.padEnd(8)}${format.currency(total).padStart(10)}`);
