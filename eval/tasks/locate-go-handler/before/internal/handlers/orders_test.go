package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"example.com/ordersvc/internal/store"
)

// POST /v1/orders with a valid body creates the order.
func TestPlaceOrderCreates(t *testing.T) {
	h := New(store.NewMemory())
	body := `{"customer":"ada","lines":[{"sku":"AB-001","qty":2}]}`
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.PlaceOrder(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d, want 201", rec.Code)
	}
}

func TestListOrdersEmpty(t *testing.T) {
	h := New(store.NewMemory())
	rec := httptest.NewRecorder()
	h.ListOrders(rec, httptest.NewRequest(http.MethodGet, "/v1/orders", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
}
