// Package legacy serves the v0 API that the old mobile app still calls.
package legacy

import (
	"io"
	"net/http"
)

// CreateOrder served POST /orders in the v0 API; it now only forwards to /v1/orders.
func CreateOrder(w http.ResponseWriter, r *http.Request) {
	resp, err := http.Post("http://localhost:8081/v1/orders", "application/json", r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
