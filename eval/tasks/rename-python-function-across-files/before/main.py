from invoice import render
from orders import Order

order = Order(
    "ACME Ltd",
    [("widget", 3, 2.50), ("gadget", 1, 10.00), ("gizmo", 2, 4.25)],
    discount=10,
)
print(render(order))
