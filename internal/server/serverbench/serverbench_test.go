package serverbench_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/server/serverbench"
	_ "github.com/nekro-go/nekro/plugins/all"
)

// The benchmark at a small size: every turn completes, nothing is lost or
// answered twice, and the report has its figures.
func TestBenchmarkSmall(t *testing.T) {
	dir, err := os.MkdirTemp("", "nekro-bench-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o711)
	var out bytes.Buffer
	res, err := serverbench.Run(context.Background(), &out, serverbench.Options{
		Turns: 3, Chats: 4, PerChat: 3, DataDir: filepath.Join(dir, "d"), Python: "/usr/bin/python3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.LoadTurns != 12 || res.Lost != 0 || res.Twice != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.BurstMessages != 3 || res.BurstLost != 0 || res.BurstTwice != 0 {
		t.Fatalf("burst: %d messages, %d lost, %d answered twice", res.BurstMessages, res.BurstLost, res.BurstTwice)
	}
	if res.Bare.N != 3 || res.Turn.N != 3 || res.OverheadRatio <= 0 {
		t.Fatalf("latency figures %+v", res)
	}
	for _, want := range []string{"of the bare run", "turns/s", "peak RSS", "lost: 0, answered twice: 0"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}
