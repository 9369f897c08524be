#!/usr/bin/env bash
set -e
sed -i 's/return subtotal > FREE_SHIPPING_THRESHOLD/return subtotal >= FREE_SHIPPING_THRESHOLD/' shop/shipping.py
python3 -m unittest
