// Package stats summarizes measured durations for nekro's benchmarks:
// percentiles, throughput and ratios against a baseline. It is apart from
// package bench so every bench (kv, files, server) can use it without
// importing the others.
package stats

import (
	"fmt"
	"slices"
	"time"
)

// Stats summarizes a set of durations.
type Stats struct {
	N             int
	P50, P99, Max time.Duration
	Total         time.Duration
}

// Summarize computes Stats over ds (which it sorts).
func Summarize(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	slices.Sort(ds)
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return Stats{N: len(ds), P50: q(0.50), P99: q(0.99), Max: ds[len(ds)-1], Total: total}
}

// PerSecond is the throughput if the durations ran back to back.
func (s Stats) PerSecond() float64 {
	if s.Total <= 0 {
		return 0
	}
	return float64(s.N) / s.Total.Seconds()
}

// Ratio formats a/b as "1.23x".
func Ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

// Micros formats a duration in microseconds.
func Micros(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1000) }
