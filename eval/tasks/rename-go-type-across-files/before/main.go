package main

import (
	"fmt"
	"os"
)

func main() {
	lines, err := ParseLines(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d lines, total %d cents\n", len(lines), Total(lines))
	if l, ok := Largest(lines); ok {
		fmt.Println("largest:", l)
	}
}
