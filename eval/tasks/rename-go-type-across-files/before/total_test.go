package main

import (
	"strings"
	"testing"
)

func TestTotal(t *testing.T) {
	lines := []OrderLine{{SKU: "A1", Quantity: 2, Cents: 150}, {SKU: "B2", Quantity: 1, Cents: 99}}
	if got := Total(lines); got != 399 {
		t.Fatalf("Total = %d, want 399", got)
	}
}

func TestParseLines(t *testing.T) {
	lines, err := ParseLines(strings.NewReader("A1,2,150\n\nB2,1,99\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := OrderLine{SKU: "B2", Quantity: 1, Cents: 99}
	if len(lines) != 2 || lines[1] != want {
		t.Fatalf("got %v", lines)
	}
}
