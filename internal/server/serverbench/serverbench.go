// Package serverbench measures chat turns through nekro serve's HTTP API
// against a bare sandboxed run of the same code measured in the same
// process, with an instant scripted model, so the figures show what the
// chat machinery adds around a run.
package serverbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/llm"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/bench/stats"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/server"
	"github.com/nekro-go/nekro/plugin"
)

// Options size the benchmark.
type Options struct {
	Turns   int // sequential turns (and bare runs) for the latency figures; default 50
	Chats   int // chats talking at once in the load phase; default 100
	PerChat int // turns each chat waits for in the load phase; default 5
	// DataDir is a scratch directory the sandbox user can traverse.
	DataDir string
	Python  string
	// NoSpares turns the server's warm sandboxes off (nekro serve keeps
	// them on), to see what they cost or save under load.
	NoSpares bool
	Log      *slog.Logger
}

// pause precedes each measured run or turn.
const pause = 20 * time.Millisecond

// toolCode is the turn's script: three TOOL calls.
const toolCode = `a = bench_sum(1, 2)
b = bench_sum(a, 3)
c = bench_sum(b, 4)
assert c == 10, c`

// plugins are the compiled-in plugins (the production binary's: the
// built-ins) and the bench's own, which mounts toolCode's TOOL; the bench
// does not depend on the document examples being compiled in.
func plugins() []*plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "Turn bench", ModuleName: "turnbench", Author: "nekro"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "bench_sum", Doc: "Add two integers."},
		func(_ *plugin.Ctx, a struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (int, error) {
			return a.A + a.B, nil
		})
	return slices.Concat(pluginhost.Registered(), []*plugin.Plugin{p})
}

// Result holds the figures, for tests and callers that check goals.
type Result struct {
	Bare, Turn, Overhead stats.Stats
	OverheadRatio        float64 // p50 overhead / p50 bare run
	LoadTurns            int
	LoadWall             time.Duration
	PeakRSS              int64 // bytes, the server process's high-water mark during the load
	Lost, Twice          int
	// Burst: messages posted all at once, so they arrive during turns and
	// queue; each must be answered exactly once.
	BurstMessages         int
	BurstWall             time.Duration
	BurstLost, BurstTwice int
}

// Run measures and writes a report to w.
func Run(ctx context.Context, w io.Writer, opt Options) (*Result, error) {
	if opt.Turns <= 0 {
		opt.Turns = 50
	}
	if opt.Chats <= 0 {
		opt.Chats = 100
	}
	if opt.PerChat <= 0 {
		opt.PerChat = 5
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	res := &Result{}

	// The baseline: the same code as a bare sandboxed run, in a runtime
	// configured as the server's (warm spares on).
	all := plugins()
	bareApp, err := app.Open(ctx, app.Config{DataDir: filepath.Join(opt.DataDir, "bare"), Log: opt.Log,
		Sandbox: app.SandboxConfig{Python: opt.Python}, Runtime: runtime.Config{WarmSpares: true}, Host: host.Config{Plugins: all}})
	if err != nil {
		return nil, err
	}
	defer bareApp.Close(context.WithoutCancel(ctx))
	rt := bareApp.Host

	// Turns: the model answers every request at once with the same code.
	model, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		ids := answering.FindStringSubmatch(r.Last())
		if ids == nil {
			return llmtest.Code(toolCode)
		}
		return llmtest.Code(toolCode + "\nsend_msg_text(_ck, " + strconv.Quote("answered: "+ids[1]) + ")")
	})
	if err != nil {
		return nil, err
	}
	defer model.Close()
	srv, err := app.Serve(ctx, app.Config{DataDir: filepath.Join(opt.DataDir, "serve"),
		Sandbox: app.SandboxConfig{Python: opt.Python}, Runtime: runtime.Config{WarmSpares: !opt.NoSpares},
		Host: host.Config{Plugins: all},
		LLM:  llm.Config{BaseURL: model.URL, Model: "instant"}},
		server.Options{Listen: "127.0.0.1:0", Token: "bench", Log: opt.Log})
	if err != nil {
		return nil, err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	c := &client{base: "http://" + srv.Addr, token: srv.Token}

	// Bare runs and turns alternate, with the same pause before each (a
	// chat's messages are not microseconds apart), so both see the same
	// machine and the same warm-spare state.
	var bare, e2e, overhead []time.Duration
	ev, err := c.subscribe(ctx, "latency")
	if err != nil {
		return nil, err
	}
	for i := range opt.Turns + 3 {
		time.Sleep(pause)
		start := time.Now()
		r, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: "latency", UserID: "u1", Code: toolCode})
		if err != nil {
			return nil, err
		}
		d := time.Since(start)
		if r.StopType.String() != "NORMAL" {
			return nil, fmt.Errorf("bare run ended %s: %s", r.StopType, r.Output)
		}
		if i >= 3 { // warm-up
			bare = append(bare, d)
		}

		time.Sleep(pause)
		start = time.Now()
		if err := c.post(ctx, "latency", fmt.Sprintf("message %d", i)); err != nil {
			return nil, err
		}
		t, err := ev.waitTurn(ctx)
		if err != nil {
			return nil, err
		}
		d = time.Since(start)
		if t.Status != chat.TurnDone {
			return nil, fmt.Errorf("latency turn %d ended %s: %s", t.ID, t.Status, t.Error)
		}
		if i >= 3 {
			e2e = append(e2e, d)
			overhead = append(overhead, d-time.Duration(t.ModelUS)*time.Microsecond)
		}
	}
	ev.close()
	res.Bare = stats.Summarize(bare)
	res.Turn, res.Overhead = stats.Summarize(e2e), stats.Summarize(overhead)
	res.OverheadRatio = float64(res.Overhead.P50) / float64(res.Bare.P50)

	// Load: many chats at once, each waiting for its answer before it
	// talks again.
	resetPeakRSS()
	debug.FreeOSMemory()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, opt.Chats)
	for i := range opt.Chats {
		wg.Go(func() {
			key := fmt.Sprintf("load-%03d", i)
			ev, err := c.subscribe(ctx, key)
			if err != nil {
				errs <- err
				return
			}
			defer ev.close()
			for j := range opt.PerChat {
				if err := c.post(ctx, key, fmt.Sprintf("turn %d", j)); err != nil {
					errs <- err
					return
				}
				t, err := ev.waitTurn(ctx)
				if err != nil {
					errs <- fmt.Errorf("chat %s: %w", key, err)
					return
				}
				if t.Status != chat.TurnDone {
					errs <- fmt.Errorf("chat %s: turn %d ended %s: %s", key, t.ID, t.Status, t.Error)
					return
				}
			}
		})
	}
	wg.Wait()
	res.LoadWall = time.Since(start)
	res.PeakRSS = peakRSS()
	close(errs)
	for err := range errs {
		return nil, err
	}
	res.LoadTurns = opt.Chats * opt.PerChat
	for i := range opt.Chats {
		lost, twice, err := c.audit(ctx, fmt.Sprintf("load-%03d", i))
		if err != nil {
			return nil, err
		}
		res.Lost += lost
		res.Twice += twice
	}

	// Burst: a quarter of the chats each post all their messages at once,
	// without waiting: most arrive while a turn runs and must queue.
	burstChats := max(1, opt.Chats/4)
	start = time.Now()
	var bwg sync.WaitGroup
	berrs := make(chan error, burstChats*opt.PerChat)
	for i := range burstChats {
		for j := range opt.PerChat {
			bwg.Go(func() {
				if err := c.post(ctx, fmt.Sprintf("burst-%03d", i), fmt.Sprintf("burst %d", j)); err != nil {
					berrs <- err
				}
			})
		}
	}
	bwg.Wait()
	close(berrs)
	for err := range berrs {
		return nil, err
	}
	res.BurstMessages = burstChats * opt.PerChat
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		lost, twice := 0, 0
		for i := range burstChats {
			l, tw, err := c.audit(ctx, fmt.Sprintf("burst-%03d", i))
			if err != nil {
				return nil, err
			}
			lost, twice = lost+l, twice+tw
		}
		res.BurstLost, res.BurstTwice = lost, twice
		if lost == 0 || time.Now().After(deadline) {
			break
		}
	}
	res.BurstWall = time.Since(start)

	fmt.Fprintf(w, "turn overhead: one run with three TOOL calls, instant scripted model (%d turns)\n", opt.Turns)
	fmt.Fprintf(w, "  %-34s p50 %-10s p99 %-10s\n", "bare sandboxed run (baseline)", ms(res.Bare.P50), ms(res.Bare.P99))
	fmt.Fprintf(w, "  %-34s p50 %-10s p99 %-10s\n", "turn via API, end to end", ms(res.Turn.P50), ms(res.Turn.P99))
	fmt.Fprintf(w, "  %-34s p50 %-10s p99 %-10s  %s of the bare run (goal <= 1.30x)\n", "turn minus model time",
		ms(res.Overhead.P50), ms(res.Overhead.P99), stats.Ratio(res.Overhead.P50, res.Bare.P50))
	spares := "on"
	if opt.NoSpares {
		spares = "off"
	}
	fmt.Fprintf(w, "load: %d chats x %d turns at once (server's warm spares %s)\n", opt.Chats, opt.PerChat, spares)
	fmt.Fprintf(w, "  %d turns in %s: %.1f turns/s (sequential turns: %.1f/s, %.2fx)\n", res.LoadTurns,
		res.LoadWall.Round(time.Millisecond), float64(res.LoadTurns)/res.LoadWall.Seconds(),
		1/res.Turn.P50.Seconds(), float64(res.LoadTurns)/res.LoadWall.Seconds()*res.Turn.P50.Seconds())
	fmt.Fprintf(w, "  peak RSS of the server process: %.1f MiB (sandboxes are separate processes)\n", float64(res.PeakRSS)/(1<<20))
	fmt.Fprintf(w, "  messages lost: %d, answered twice: %d\n", res.Lost, res.Twice)
	fmt.Fprintf(w, "burst: %d chats x %d messages posted at once (they queue behind running turns)\n", burstChats, opt.PerChat)
	fmt.Fprintf(w, "  %d messages answered in %s; lost: %d, answered twice: %d\n", res.BurstMessages,
		res.BurstWall.Round(time.Millisecond), res.BurstLost, res.BurstTwice)
	return res, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// answering finds the ids a turn answers in its history prompt.
var answering = regexp.MustCompile(`Answer the new message\(s\) ([#0-9, ]+)\.`)

type client struct {
	base, token string
}

func (c *client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return http.DefaultClient.Do(req)
}

func (c *client) post(ctx context.Context, chatKey, text string) error {
	resp, err := c.do(ctx, "POST", "/api/chats/"+chatKey+"/messages", map[string]string{"user_id": "u1", "text": text})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("post to %s: %d %s", chatKey, resp.StatusCode, b)
	}
	io.Copy(io.Discard, resp.Body)
	return nil
}

// audit checks that every user message of the chat was answered exactly
// once: the assistant's answers name the ids they answer.
func (c *client) audit(ctx context.Context, chatKey string) (lost, twice int, err error) {
	resp, err := c.do(ctx, "GET", "/api/chats/"+chatKey+"/messages", nil)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var h struct{ Messages []chat.Message }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, 0, err
	}
	lost, twice = stats.AuditAnswers(h.Messages)
	return lost, twice, nil
}

type events struct {
	resp  *http.Response
	turns chan chat.Turn
	errc  chan error
}

// subscribe opens the chat's event stream; waitTurn returns each finished
// turn.
func (c *client) subscribe(ctx context.Context, chatKey string) (*events, error) {
	resp, err := c.do(ctx, "GET", "/api/chats/"+chatKey+"/events", nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("events of %s: %d", chatKey, resp.StatusCode)
	}
	e := &events{resp: resp, turns: make(chan chat.Turn, 16), errc: make(chan error, 1)}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	sc.Scan() // the subscription comment: the stream is live
	go func() {
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev chat.Event
			if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == chat.EventTurn && ev.Turn.Status != chat.TurnRunning {
				e.turns <- *ev.Turn
			}
		}
		e.errc <- fmt.Errorf("event stream of %s ended: %v", chatKey, sc.Err())
	}()
	return e, nil
}

func (e *events) waitTurn(ctx context.Context) (chat.Turn, error) {
	select {
	case t := <-e.turns:
		return t, nil
	case err := <-e.errc:
		return chat.Turn{}, err
	case <-ctx.Done():
		return chat.Turn{}, ctx.Err()
	case <-time.After(2 * time.Minute):
		return chat.Turn{}, fmt.Errorf("no turn finished within 2 minutes")
	}
}

func (e *events) close() { e.resp.Body.Close() }

// resetPeakRSS resets the process's RSS high-water mark (Linux).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns VmHWM, the process's peak resident set, in bytes.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
