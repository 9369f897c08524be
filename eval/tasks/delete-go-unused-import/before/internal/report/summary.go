package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Result is one request of a load test.
type Result struct {
	Endpoint string        `json:"endpoint"`
	Status   int           `json:"status"`
	Latency  time.Duration `json:"latency_ns"`
}

// Summary is the per-endpoint view of a run.
type Summary struct {
	Endpoint string
	Count    int
	Errors   int
	P50      time.Duration
	P95      time.Duration
}

// Summarize groups results by endpoint, sorted by endpoint name.
func Summarize(results []Result) []Summary {
	by := map[string][]Result{}
	for _, r := range results {
		by[r.Endpoint] = append(by[r.Endpoint], r)
	}
	out := make([]Summary, 0, len(by))
	for ep, rs := range by {
		lat := make([]time.Duration, len(rs))
		errs := 0
		for i, r := range rs {
			lat[i] = r.Latency
			if r.Status >= 500 {
				errs++
			}
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		out = append(out, Summary{
			Endpoint: ep,
			Count:    len(rs),
			Errors:   errs,
			P50:      percentile(lat, 50),
			P95:      percentile(lat, 95),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Endpoint < out[j].Endpoint })
	return out
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	idx := (len(sorted)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return sorted[idx]
}

// Print writes the summaries as a table to w (os.Stdout in the CLI).
func Print(w io.Writer, sums []Summary) error {
	header := fmt.Sprintf("%-24s %7s %7s %9s %9s", "endpoint", "count", "errors", "p50", "p95")
	if _, err := fmt.Fprintln(w, header); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, strings.Repeat("-", len(header))); err != nil {
		return err
	}
	for _, s := range sums {
		_, err := fmt.Fprintf(w, "%-24s %7d %7d %9s %9s\n", s.Endpoint, s.Count, s.Errors,
			s.P50.Round(time.Millisecond), s.P95.Round(time.Millisecond))
		if err != nil {
			return err
		}
	}
	return nil
}
