package server

import (
	"net/http"

	"example.com/ordersvc/internal/handlers"
	"example.com/ordersvc/internal/store"
)

// New wires the routes to their handlers.
func New(st store.Store) http.Handler {
	h := handlers.New(st)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", handlers.Health)
	mux.HandleFunc("GET /v1/orders", h.ListOrders)
	mux.HandleFunc("GET /v1/orders/{id}", h.GetOrder)
	mux.HandleFunc("POST /v1/orders", h.PlaceOrder)
	mux.HandleFunc("POST /v1/orders/{id}/cancel", h.CancelOrder)
	return logRequests(mux)
}
