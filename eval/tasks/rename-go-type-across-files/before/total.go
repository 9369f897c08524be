package main

// Total sums the amounts of all lines, in cents.
func Total(lines []OrderLine) int {
	sum := 0
	for _, l := range lines {
		sum += l.Amount()
	}
	return sum
}

// Largest returns the line with the highest amount, and false when there are no lines.
func Largest(lines []OrderLine) (OrderLine, bool) {
	var best OrderLine
	found := false
	for _, l := range lines {
		if !found || l.Amount() > best.Amount() {
			best, found = l, true
		}
	}
	return best, found
}
