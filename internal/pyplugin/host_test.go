package pyplugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The Python host survives any line nekro could send it (the RPC server
// bounds what the sandbox sends, and this is the layer behind it): a
// request nested 5000 deep, a JSON value that is not an object, bad
// UTF-8. Each failing request gets an answer; the process keeps its pid.
func TestPythonHostSurvivesUnreadableLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	set, err := Load(ctx, Options{Dirs: []string{"testdata/guarded"}, CacheDir: t.TempDir(), PluginsDir: t.TempDir()})
	if err != nil || len(set.hosts) != 1 {
		t.Fatalf("load: %v %v", err, set.Failed)
	}
	defer set.Close()
	var h *host
	for _, hh := range set.hosts {
		h = hh
	}
	call := func(args string) (string, error) {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		raw, err := h.request(c, message{Op: "call", Args: json.RawMessage(args)}, "")
		return string(raw), err
	}
	pid, err := call(`{"method":"guard_pid","args":{},"ctx":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	if _, err := call(`{"method":"echo_value","args":{"value":` + deep + `},"ctx":{}}`); err == nil ||
		!strings.Contains(err.Error(), "could not be read") || !strings.Contains(err.Error(), "RecursionError") {
		t.Errorf("a 5000-deep request: want an error saying it could not be read, got %v", err)
	}
	if _, err := call(`{"method":"echo_value","args":{"value":"a` + "\xff" + `b"},"ctx":{}}`); err != nil {
		t.Errorf("bad UTF-8: %v", err)
	}
	// Not an object: nekro never sends one, the host answers it anyway.
	p, _ := h.current(ctx)
	id := int64(1 << 40)
	ch := make(chan message, 1)
	p.pmu.Lock()
	p.pending[id] = ch
	p.pmu.Unlock()
	p.wmu.Lock()
	p.conn.Write([]byte(`{"id":1099511627776,"op":"call"` + "\n")) // truncated object
	p.wmu.Unlock()
	select {
	case m := <-ch:
		if !strings.Contains(string(m.Error), "could not be read") {
			t.Errorf("truncated line: %s", m.Error)
		}
	case <-ctx.Done():
		t.Fatal("the truncated line was never answered")
	}
	if again, err := call(`{"method":"guard_pid","args":{},"ctx":{}}`); err != nil || again != pid {
		t.Errorf("after the hostile lines: pid %s (was %s), %v: the process restarted", again, pid, err)
	}
}
