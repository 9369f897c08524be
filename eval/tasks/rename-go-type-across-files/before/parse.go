package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseLines reads "SKU,quantity,cents" records, one a line; blank lines are skipped.
func ParseLines(r io.Reader) ([]OrderLine, error) {
	var lines []OrderLine
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		parts := strings.Split(text, ",")
		if len(parts) != 3 {
			return nil, fmt.Errorf("line %d: want 3 fields, got %d", n, len(parts))
		}
		qty, err := strconv.Atoi(parts[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: quantity: %w", n, err)
		}
		cents, err := strconv.Atoi(parts[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: price: %w", n, err)
		}
		lines = append(lines, OrderLine{SKU: parts[0], Quantity: qty, Cents: cents})
	}
	return lines, sc.Err()
}
