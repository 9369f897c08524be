#!/usr/bin/env bash
# Answer-only task: routes.go maps POST /v1/orders to h.PlaceOrder, defined in internal/handlers/checkout.go.
grep -n '"POST /v1/orders"' internal/server/routes.go
grep -rn 'func (h \*Handlers) PlaceOrder' internal/
