package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSummarizeSortsAndCountsErrors(t *testing.T) {
	sums := Summarize([]Result{
		{Endpoint: "/b", Status: 200, Latency: 5 * time.Millisecond},
		{Endpoint: "/a", Status: 503, Latency: 9 * time.Millisecond},
		{Endpoint: "/a", Status: 200, Latency: 3 * time.Millisecond},
	})
	if len(sums) != 2 || sums[0].Endpoint != "/a" || sums[0].Errors != 1 || sums[0].Count != 2 {
		t.Fatalf("got %+v", sums)
	}
}

func TestPrintHeader(t *testing.T) {
	var buf bytes.Buffer
	if err := Print(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "endpoint") {
		t.Fatalf("got %q", buf.String())
	}
}
