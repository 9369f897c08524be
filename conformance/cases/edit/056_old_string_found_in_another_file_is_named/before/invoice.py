from pricing import apply_discount, calc_total
