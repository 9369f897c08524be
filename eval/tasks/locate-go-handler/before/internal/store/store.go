package store

import (
	"fmt"
	"sync"
)

type Line struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type Order struct {
	ID        string `json:"id"`
	Customer  string `json:"customer"`
	Lines     []Line `json:"lines"`
	Cancelled bool   `json:"cancelled"`
}

type Store interface {
	List() []Order
	Get(id string) (Order, bool)
	Create(customer string, lines []Line) Order
	Cancel(id string) bool
}

type Memory struct {
	mu     sync.Mutex
	next   int
	orders map[string]Order
}

func NewMemory() *Memory { return &Memory{orders: map[string]Order{}} }

func (m *Memory) List() []Order {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Order, 0, len(m.orders))
	for _, o := range m.orders {
		out = append(out, o)
	}
	return out
}

func (m *Memory) Get(id string) (Order, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.orders[id]
	return o, ok
}

func (m *Memory) Create(customer string, lines []Line) Order {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	o := Order{ID: fmt.Sprintf("o-%d", m.next), Customer: customer, Lines: lines}
	m.orders[o.ID] = o
	return o
}

func (m *Memory) Cancel(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.orders[id]
	if !ok {
		return false
	}
	o.Cancelled = true
	m.orders[id] = o
	return true
}
