package bench_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/bench"
	"github.com/nekro-go/nekro/internal/runtime"
	_ "github.com/nekro-go/nekro/plugins/all"
)

// The load bench at a small size, with serve's defaults: every message is
// answered once, and the report has its figures. Three messages a chat:
// a chat's third run in a row leaves a warm spare, so the tree has
// processes to count however fast the turns go (two messages once ended
// in 300 ms, between two samples).
func TestLoadSmall(t *testing.T) {
	dir, err := os.MkdirTemp("", "nekro-bench-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o711)
	cfg := app.Config{DataDir: filepath.Join(dir, "data"), Log: slog.New(slog.DiscardHandler),
		Sandbox: app.SandboxConfig{Python: "/usr/bin/python3", Zygotes: 8},
		Runtime: runtime.Config{WarmSpares: true, SharedIdle: 30 * time.Minute}}
	var out bytes.Buffer
	res, err := bench.Load(context.Background(), &out, cfg, bench.LoadOptions{Chats: 3, Messages: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Passes) != 1 {
		t.Fatalf("%d passes", len(res.Passes))
	}
	p := res.Passes[0]
	if p.Turns != 9 || p.Lost != 0 || p.Twice != 0 || p.First.N != 3 || p.Rest.N != 6 {
		t.Fatalf("pass %+v", p)
	}
	if p.CPU <= 0 || p.Settled < p.CPU || p.PeakPSS <= 0 || p.PeakProcs <= 0 || res.BareCPU.N < 10 {
		t.Fatalf("figures %+v, baseline %+v", p, res.BareCPU)
	}
	// Each message's stages: its POST, then its turn's start, then its
	// answer, all in the same post-to-answer time.
	if p.Post.N != 9 || p.Claim.N != 9 || p.Turn.N != 9 || p.Post.P50 <= 0 || p.Turn.P50 <= 0 ||
		p.Claim.Max < p.Post.Max || p.Claim.Max > p.All.Max || p.Turn.Max > p.All.Max {
		t.Fatalf("stages: post %+v, claim %+v, turn %+v, post-to-answer %+v", p.Post, p.Claim, p.Turn, p.All)
	}
	if res.FirstRun.N == 0 || res.FirstRun.N != res.FirstBare.N || res.FirstRun.P50 <= 0 {
		t.Fatalf("first runs %+v against bare %+v", res.FirstRun, res.FirstBare)
	}
	for _, want := range []string{"turns/s", "p99", "CPU per turn", "peak PSS", "processes peak", "lost: 0, answered twice: 0", "a new chat's first run", "until a turn claimed the message"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}
