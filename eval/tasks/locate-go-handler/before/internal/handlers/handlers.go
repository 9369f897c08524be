package handlers

import (
	"encoding/json"
	"net/http"

	"example.com/ordersvc/internal/store"
)

// Handlers holds what the order endpoints need.
type Handlers struct {
	st store.Store
}

func New(st store.Store) *Handlers { return &Handlers{st: st} }

// Health answers the liveness probe.
func Health(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
