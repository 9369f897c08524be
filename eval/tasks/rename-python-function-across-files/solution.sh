sed -i 's/\bcalc_total\b/compute_order_total/g' pricing.py orders.py invoice.py test_pricing.py
