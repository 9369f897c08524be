import pricing
from orders import Order


def render(order: Order) -> str:
    lines = [f"Invoice for {order.customer}"]
    for name, qty, price in order.items:
        lines.append(f"  {name:<10} {qty:>3} x {price:>7.2f}")
    lines.append(f"  subtotal:  {pricing.calc_total(order.items):>10.2f}")
    lines.append(f"  discount:  {order.discount:>9}%")
    lines.append(f"  total:     {pricing.add_tax(order.total()):>10.2f}")
    return "\n".join(lines)
