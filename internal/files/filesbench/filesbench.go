// Package filesbench measures forwarding a file into a sandbox's shared
// directory against `cp` of the same file, in the same run: the figures
// behind `nekro bench files`.
package filesbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/plugin"
)

// Options size a run.
type Options struct {
	Dir    string // scratch directory, on the filesystem to measure
	Size   int64  // file size in bytes; default 256 MiB
	Rounds int    // forwards (and cps) each; default 5
}

// Run forwards a Size-byte file from a plugin's data directory into
// /app/shared with MixedForwardFile, Rounds times, alternating with `cp` of
// the same file into the same directory, and prints throughput, the ratio
// to cp, the Go heap allocated per forward and the growth of the process's
// peak RSS.
func Run(ctx context.Context, w io.Writer, o Options) error {
	if o.Size <= 0 {
		o.Size = 256 << 20
	}
	if o.Rounds <= 0 {
		o.Rounds = 5
	}
	cp, err := exec.LookPath("cp")
	if err != nil {
		return fmt.Errorf("bench files: %w", err)
	}
	l, err := files.OpenLayout(o.Dir)
	if err != nil {
		return err
	}
	fsys, err := files.NewFS(l, plugin.RunInfo{ChatKey: "bench"}, files.Options{})
	if err != nil {
		return err
	}
	dir, err := l.EnsurePluginDir("bench.files")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(fsys.SharedPath(), 0o755); err != nil {
		return fmt.Errorf("bench files: %w", err)
	}
	src := filepath.Join(dir, "model.bin")
	if err := writeRandom(src, o.Size); err != nil {
		return err
	}
	pfs := fsys.ForPlugin("bench.files")
	cpDst := filepath.Join(fsys.SharedPath(), "cp.bin")
	fwDst := filepath.Join(fsys.SharedPath(), "model.bin")

	hwm0 := peakRSS()
	var cpTime, fwTime time.Duration
	var heap uint64
	var m0, m1 runtime.MemStats
	for i := range o.Rounds {
		runCp := func() error {
			t0 := time.Now()
			if out, err := exec.CommandContext(ctx, cp, src, cpDst).CombinedOutput(); err != nil {
				return fmt.Errorf("cp: %w: %s", err, out)
			}
			cpTime += time.Since(t0)
			return os.Remove(cpDst)
		}
		if i%2 == 0 { // alternate, so neither always runs on a cooler cache
			if err := runCp(); err != nil {
				return err
			}
		}
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		if _, err := pfs.MixedForwardFile(ctx, src, ""); err != nil {
			return err
		}
		fwTime += time.Since(t0)
		runtime.ReadMemStats(&m1)
		heap += m1.TotalAlloc - m0.TotalAlloc
		if err := os.Remove(fwDst); err != nil {
			return err
		}
		if i%2 == 1 {
			if err := runCp(); err != nil {
				return err
			}
		}
	}
	hwm1 := peakRSS()
	mb := float64(o.Size) * float64(o.Rounds) / (1 << 20)
	fmt.Fprintf(w, "MixedForwardFile of a %d MiB host file into /app/shared, %d rounds, vs cp of the same file:\n", o.Size>>20, o.Rounds)
	fmt.Fprintf(w, "  forward  %7.0f MiB/s\n", mb/fwTime.Seconds())
	fmt.Fprintf(w, "  cp       %7.0f MiB/s  (baseline, includes starting cp)\n", mb/cpTime.Seconds())
	fmt.Fprintf(w, "  ratio    %7.2fx cp  (goal >= 0.8x)\n", cpTime.Seconds()/fwTime.Seconds())
	fmt.Fprintf(w, "  heap     %7d bytes allocated per forward\n", heap/uint64(o.Rounds))
	if hwm0 > 0 && hwm1 > 0 {
		fmt.Fprintf(w, "  peak RSS grew by %d KiB while forwarding %d MiB\n", hwm1-hwm0, o.Size>>20)
	}
	return nil
}

// writeRandom writes size random bytes in 1 MiB chunks, so the copy moves
// real blocks and the setup never holds the file in memory.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench files: %w", err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	for written := int64(0); written < size; written += int64(len(buf)) {
		for i := 0; i+8 <= len(buf); i += 8 {
			v := r.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-written)]); err != nil {
			return fmt.Errorf("bench files: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("bench files: %w", err)
	}
	return f.Close()
}

// peakRSS returns the process's peak resident set size in KiB (VmHWM), or
// 0 where /proc does not tell.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
