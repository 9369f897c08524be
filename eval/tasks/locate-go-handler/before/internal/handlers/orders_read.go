package handlers

import (
	"net/http"
)

// ListOrders serves GET /v1/orders.
func (h *Handlers) ListOrders(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.st.List())
}

// GetOrder serves GET /v1/orders/{id}.
func (h *Handlers) GetOrder(w http.ResponseWriter, r *http.Request) {
	o, ok := h.st.Get(r.PathValue("id"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, o)
}
