package vectorbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A small run prints one row per size with the loop's ratio.
func TestRunPrintsRatios(t *testing.T) {
	var out bytes.Buffer
	err := Run(context.Background(), &out, Options{Dir: t.TempDir(), Chunks: []int{50, 400}, Dim: 24, Clusters: 3, Searches: 3, TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"plain Go loop p50", "\n50 ", "\n400 ", "x  "} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	if err := Run(context.Background(), &out, Options{Dir: t.TempDir(), Chunks: []int{10}, Dim: 0, Searches: 1, TopK: 1}); err == nil {
		t.Fatal("dimension 0 was accepted")
	}
}
