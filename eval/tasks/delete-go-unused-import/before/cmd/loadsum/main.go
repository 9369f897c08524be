package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"example.com/loadsum/internal/report"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: loadsum RESULTS.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	var results []report.Result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r report.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	if err := report.Print(os.Stdout, report.Summarize(results)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
