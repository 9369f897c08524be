package main

import "fmt"

// OrderLine is one line of an order: a product, how many, and the unit price in cents.
type OrderLine struct {
	SKU      string
	Quantity int
	Cents    int
}

// Amount is the line's price in cents.
func (l OrderLine) Amount() int {
	return l.Quantity * l.Cents
}

func (l OrderLine) String() string {
	return fmt.Sprintf("%s x%d @ %d", l.SKU, l.Quantity, l.Cents)
}
