package files

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

// BenchmarkMixedForwardFile forwards a file from a plugin's data directory
// into /app/shared and, in the same run and on the same file, times `cp` to
// the same directory. It reports:
//
//	x_cp         forwarding throughput as a multiple of cp's (goal >= 0.8)
//	MB/s         forwarding throughput
//	heap-B/op    bytes the Go heap allocated per forward (flat in size)
//
// Run: go test -run '^$' -bench MixedForwardFile -benchtime 4x ./internal/files
func BenchmarkMixedForwardFile(b *testing.B) {
	cp, err := exec.LookPath("cp")
	if err != nil {
		b.Skip("cp not found")
	}
	for _, size := range []int64{16 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("size=%dMiB", size>>20), func(b *testing.B) {
			l := Layout{Root: b.TempDir()}
			fsys, err := NewFS(l, plugin.RunInfo{ChatKey: "bench"}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			dir, err := l.EnsurePluginDir("bench.files")
			if err != nil {
				b.Fatal(err)
			}
			if err := os.MkdirAll(fsys.SharedPath(), 0o755); err != nil {
				b.Fatal(err)
			}
			src := filepath.Join(dir, "model.bin")
			writeRandomFile(b, src, size)
			pfs := fsys.ForPlugin("bench.files")
			ctx := context.Background()
			cpDst := filepath.Join(fsys.SharedPath(), "cp.bin")
			fwDst := filepath.Join(fsys.SharedPath(), "model.bin")

			var cpTime, fwTime time.Duration
			var heap uint64
			var m0, m1 runtime.MemStats
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				runCp := func() {
					b.StopTimer()
					t0 := time.Now()
					if out, err := exec.Command(cp, src, cpDst).CombinedOutput(); err != nil {
						b.Fatalf("cp: %v: %s", err, out)
					}
					cpTime += time.Since(t0)
					os.Remove(cpDst)
					b.StartTimer()
				}
				if i%2 == 0 { // alternate, so neither always runs on a cooler cache
					runCp()
				}
				runtime.ReadMemStats(&m0)
				t0 := time.Now()
				if _, err := pfs.MixedForwardFile(ctx, src, ""); err != nil {
					b.Fatal(err)
				}
				fwTime += time.Since(t0)
				runtime.ReadMemStats(&m1)
				heap += m1.TotalAlloc - m0.TotalAlloc
				b.StopTimer()
				os.Remove(fwDst)
				b.StartTimer()
				if i%2 == 1 {
					runCp()
				}
			}
			b.ReportMetric(float64(cpTime)/float64(fwTime), "x_cp")
			b.ReportMetric(float64(heap)/float64(b.N), "heap-B/op")
		})
	}
}

// writeRandomFile writes size bytes of random data in 1 MiB chunks, so the
// copy has real blocks to move and the setup does not hold the file in
// memory.
func writeRandomFile(b *testing.B, path string, size int64) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	for written := int64(0); written < size; written += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := r.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}
