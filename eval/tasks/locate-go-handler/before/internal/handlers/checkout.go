package handlers

import (
	"encoding/json"
	"net/http"

	"example.com/ordersvc/internal/store"
)

type placeOrderRequest struct {
	Customer string       `json:"customer"`
	Lines    []store.Line `json:"lines"`
}

func (h *Handlers) PlaceOrder(w http.ResponseWriter, r *http.Request) {
	var req placeOrderRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request body", http.StatusBadRequest)
		return
	}
	if req.Customer == "" || len(req.Lines) == 0 {
		http.Error(w, "customer and lines are required", http.StatusUnprocessableEntity)
		return
	}
	o := h.st.Create(req.Customer, req.Lines)
	writeJSON(w, http.StatusCreated, o)
}

func (h *Handlers) CancelOrder(w http.ResponseWriter, r *http.Request) {
	if !h.st.Cancel(r.PathValue("id")) {
		http.NotFound(w, r)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
