package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/kv"
	"github.com/nekro-go/nekro/internal/kv/sqlite"
	"github.com/nekro-go/nekro/plugin"
)

// The durability test runs this test binary again as a writer child (the
// shape of the MCP SDK's cmd_test): with NEKRO_KV_WRITER set, TestMain
// writes forever instead of running tests.
func TestMain(m *testing.M) {
	if path := os.Getenv("NEKRO_KV_WRITER"); path != "" {
		writer(path, os.Getenv("NEKRO_KV_ROUND"))
		return
	}
	os.Exit(m.Run())
}

const durPlugin = "nekro.durability"

// durValue is iteration i's value: sizes vary from a few bytes to 64 KiB
// so that commits span several WAL pages and checkpoints happen.
func durValue(round string, i int) string {
	n := 8 + (i*7919)%1000
	if i%97 == 0 {
		n = 64 << 10
	}
	head := fmt.Sprintf("%s/%d/", round, i)
	return head + strings.Repeat(string(rune('a'+i%26)), n)
}

// writer is the child. Iteration i sets key k<i>, every tenth iteration
// deletes k<i-5>, then it increments the counter with Update; only then
// it prints "ack i". Every line printed is a promise that those writes are
// durable.
func writer(path, round string) {
	ctx := context.Background()
	eng, err := sqlite.Open(ctx, path, db.SQLiteOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ns := kv.New(eng, kv.Options{}).For(durPlugin)
	s := plugin.Chat(round)
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		if _, err := ns.Set(ctx, s, "k"+strconv.Itoa(i), durValue(round, i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if i%10 == 9 {
			if _, err := ns.Delete(ctx, s, "k"+strconv.Itoa(i-5)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		if _, err := ns.Update(ctx, s, "counter", func(cur string, _ bool) (string, error) {
			n, _ := strconv.Atoi(cur)
			return strconv.Itoa(n + 1), nil
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "ack %d\n", i)
		out.Flush()
	}
}

// TestKillLosesNoAcknowledgedWrite kills a writer with SIGKILL mid-stream,
// three times at random points, and checks after each kill that every
// acknowledged write (and delete) is there and the file is intact.
func TestKillLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	path := filepath.Join(t.TempDir(), "nekro.db")
	lastAck := map[string]int{}
	for r := range 3 {
		round := fmt.Sprintf("round%d", r)
		killAfter := 300 + rand.IntN(1500)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "NEKRO_KV_WRITER="+path, "NEKRO_KV_ROUND="+round)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		last := -1
		sc := bufio.NewScanner(stdout)
		killed := false
		for sc.Scan() {
			var i int
			if _, err := fmt.Sscanf(sc.Text(), "ack %d", &i); err != nil || i != last+1 {
				t.Fatalf("round %s: bad line %q after ack %d", round, sc.Text(), last)
			}
			last = i
			if !killed && i >= killAfter {
				// Kill while the writer is in the middle of its next writes;
				// acks already in the pipe still count.
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %s: writer ended with %v, not by SIGKILL", round, err)
		}
		lastAck[round] = last
		t.Logf("round %s: killed after %d acknowledged iterations", round, last+1)
		verify(t, path, lastAck)
	}
}

func verify(t *testing.T, path string, lastAck map[string]int) {
	t.Helper()
	ctx := context.Background()
	d, err := db.OpenSQLite(ctx, path, db.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := sqlite.New(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	ns := kv.New(eng, kv.Options{}).For(durPlugin)
	for round, last := range lastAck {
		s := plugin.Chat(round)
		for i := 0; i <= last; i++ {
			v, ok, err := ns.Get(ctx, s, "k"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			deleted := i%10 == 4 && i+5 <= last
			// The iteration after the last ack may have committed its
			// delete before the kill: either state is right.
			if i%10 == 4 && i+5 == last+1 {
				if ok && v != durValue(round, i) {
					t.Fatalf("%s: k%d holds a wrong value", round, i)
				}
				continue
			}
			switch {
			case deleted && ok:
				t.Fatalf("%s: k%d was deleted (acknowledged) but is back", round, i)
			case !deleted && !ok:
				t.Fatalf("%s: acknowledged k%d is lost (last ack %d)", round, i, last)
			case !deleted && v != durValue(round, i):
				t.Fatalf("%s: k%d holds a wrong value", round, i)
			}
		}
		c, _, err := ns.Get(ctx, s, "counter")
		if err != nil {
			t.Fatal(err)
		}
		// The iteration after the last ack may have committed its update
		// before the kill, never more.
		if n, _ := strconv.Atoi(c); n != last+1 && n != last+2 {
			t.Fatalf("%s: counter = %q after %d acknowledged increments", round, c, last+1)
		}
	}
	// Usage bookkeeping survived too.
	u, err := eng.Usage(ctx, durPlugin)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	if err := d.Read.QueryRowContext(ctx, `SELECT count(*) FROM kv WHERE plugin = ?`, durPlugin).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if u.Keys != rows {
		t.Fatalf("usage counts %d keys, the table has %d", u.Keys, rows)
	}
}
