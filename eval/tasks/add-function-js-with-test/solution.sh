#!/usr/bin/env bash
set -e
python3 - <<'PY'
p = "src/money.js"
s = open(p).read()
s = s.replace("module.exports = { formatCents, splitCents };", '''/** "$1,299.00" -> 129900, "12.34" -> 1234, "7" -> 700 */
function parseCents(text) {
  const cleaned = String(text).trim().replace(/[$,\\s]/g, '');
  if (!/^-?\\d+(\\.\\d+)?$/.test(cleaned)) throw new TypeError(`not a price: ${text}`);
  return Math.round(Number(cleaned) * 100);
}

module.exports = { formatCents, splitCents, parseCents };''')
open(p, "w").write(s)
p = "test/money.test.js"
s = open(p).read()
s = s.replace("const { formatCents, splitCents } = require('../src/money');",
              "const { formatCents, splitCents, parseCents } = require('../src/money');")
s = s.replace("\nconsole.log('money tests passed');", '''
assert.equal(parseCents('12.34'), 1234);
assert.equal(parseCents('$1,299.00'), 129900);
assert.equal(parseCents('7'), 700);
assert.equal(parseCents('$4.35'), 435);
assert.throws(() => parseCents('abc'), TypeError);

console.log('money tests passed');''')
open(p, "w").write(s)
PY
node test/money.test.js
