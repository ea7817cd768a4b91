package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nekro-go/nekro/internal/bench/stats"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/host"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/runtime"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/bwrap"
	"github.com/nekro-go/nekro/internal/server"
	"github.com/nekro-go/nekro/plugin"
)

// SpineOptions sizes the spine benchmark.
type SpineOptions struct {
	Runs  int // sandboxed `pass` runs and bare interpreter starts
	Calls int // TOOL calls in each call benchmark
	// Zygotes is nekro serve's --zygotes for the active-chat rows (0:
	// fresh sandboxes and warm spares only).
	Zygotes int
	// Template starts fresh sandboxes from the bwrap backend's shared
	// template (--sandbox-template).
	Template bool
}

// benchPlugin has the one TOOL both call paths use.
func benchPlugin() *plugin.Plugin {
	p := plugin.New(plugin.Meta{Name: "bench", ModuleName: "bench", Author: "nekro"})
	plugin.MountSandboxMethod(p, plugin.Method{Type: plugin.Tool, Name: "bench_add", Doc: "Add."},
		func(_ *plugin.Ctx, a struct {
			A int `json:"a"`
			B int `json:"b"`
		}) (int, error) {
			return a.A + a.B, nil
		})
	return p
}

// pyBenchPlugin is bench_add as a Python plugin written to the documents.
const pyBenchPlugin = `from nekro_agent.api.plugin import NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(name="Bench", module_name="benchpy", description="bench", version="1", author="nekro", url="https://example.org")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "bench_py_add")
async def bench_py_add(_ctx: AgentCtx, a: int, b: int) -> int:
    """Add."""
    return a + b
`

// callLoop is the Python every call benchmark runs: it times each call and
// prints the latencies in nanoseconds.
const callLoop = `
import time, sys
lat = []
for i in range(%d):
    t = time.perf_counter_ns()
    r = CALL(i, 1)
    lat.append(time.perf_counter_ns() - t)
    assert r == i + 1, r
sys.stdout.write(" ".join(map(str, lat)) + "\n")
`

// referenceClient calls the method the way the reference's api_caller.py
// does: one HTTP POST over a new loopback TCP connection per call.
const referenceClient = `
import http.client, json
def CALL(a, b):
    c = http.client.HTTPConnection("127.0.0.1", %d)
    c.request("POST", "/api/ext/rpc_exec", body=json.dumps({"method": "bench_add", "args": {"a": a, "b": b}}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    c.close()
    return json.loads(body)
`

// Spine runs the runtime spine's benchmarks and writes a report to w.
func Spine(ctx context.Context, w io.Writer, dataDir, python string, opt SpineOptions) error {
	if opt.Runs <= 0 {
		opt.Runs = 30
	}
	if opt.Calls <= 0 {
		opt.Calls = 10000
	}
	p := benchPlugin()
	// A Python plugin with the same method, for the Python-plugin row.
	pyDir := dataDir + "-pyplugins"
	if err := os.MkdirAll(pyDir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(pyDir)
	if err := os.WriteFile(filepath.Join(pyDir, "benchpy.py"), []byte(pyBenchPlugin), 0o644); err != nil {
		return err
	}
	coldApp, err := app.Open(ctx, app.Config{DataDir: dataDir, PluginDirs: []string{pyDir}, Sandbox: app.SandboxConfig{Python: python, Template: opt.Template},
		Host:    host.Config{Plugins: []*plugin.Plugin{p}},
		Runtime: runtime.Config{Limits: sandbox.Limits{Timeout: 10 * time.Minute, OutputBytes: 64 << 20}}})
	if err != nil {
		return err
	}
	defer coldApp.Close(ctx)
	rt := coldApp.Host
	if python == "" {
		python = "/usr/bin/python3"
	}

	// (a) Start-up: a sandboxed run of `pass` against a bare interpreter,
	// interleaved so all see the same machine state. Cold: the sandbox
	// starts on request. Warm: the runtime keeps a started sandbox per
	// active chat (Config.WarmSpares, what `nekro serve` uses); the chat's
	// previous run ended 50 ms earlier, less than any model reply takes.
	warmApp, err := app.Open(ctx, app.Config{DataDir: dataDir + "-warm", Sandbox: app.SandboxConfig{Python: python, Template: opt.Template},
		Host: host.Config{Plugins: []*plugin.Plugin{p}}, Runtime: runtime.Config{WarmSpares: true}})
	if err != nil {
		return err
	}
	defer warmApp.Close(ctx)
	warmRT := warmApp.Host
	var bare, cold, warm, inProc []time.Duration
	timed := func(r *host.Host) (time.Duration, *runtime.ExecResult, error) {
		t := time.Now()
		res, err := r.Exec(ctx, runtime.ExecRequest{ChatKey: "bench", Code: "pass"})
		if err == nil && res.StopType != sandbox.Normal {
			err = fmt.Errorf("sandboxed pass ended %s: %s", res.StopType, res.Output)
		}
		return time.Since(t), res, err
	}
	for i := 0; i < opt.Runs+2; i++ {
		t := time.Now()
		if out, err := exec.CommandContext(ctx, python, "-c", "pass").CombinedOutput(); err != nil {
			return fmt.Errorf("bare python: %v: %s", err, out)
		}
		d := time.Since(t)
		dc, res, err := timed(rt)
		if err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		dw, _, err := timed(warmRT)
		if err != nil {
			return err
		}
		if i >= 2 { // warm-up
			bare = append(bare, d)
			cold = append(cold, dc)
			warm = append(warm, dw)
			inProc = append(inProc, res.Duration)
		}
	}
	sb, sc, sw := stats.Summarize(bare), stats.Summarize(cold), stats.Summarize(warm)
	fmt.Fprintf(w, "== start-up, %d runs each\n", opt.Runs)
	fmt.Fprintf(w, "bare `%s -c pass`      p50 %6.1f ms  p99 %6.1f ms\n", python, ms(sb.P50), ms(sb.P99))
	fmt.Fprintf(w, "sandboxed `pass`, cold start        p50 %6.1f ms  p99 %6.1f ms  (%s; in the sandbox process %.1f ms)\n",
		ms(sc.P50), ms(sc.P99), stats.Ratio(sc.P50, sb.P50), ms(stats.Summarize(inProc).P50))
	fmt.Fprintf(w, "sandboxed `pass`, warm chat         p50 %6.1f ms  p99 %6.1f ms  (%s)\n", ms(sw.P50), ms(sw.P99), stats.Ratio(sw.P50, sb.P50))
	fmt.Fprintf(w, "goal: <= 1.5x bare at p50\n")
	if err := activeChatRows(ctx, w, dataDir, python, p, opt.Runs, opt.Zygotes, opt.Template, sb.P50); err != nil {
		return err
	}
	fmt.Fprintln(w)

	// (b) TOOL calls from sandboxed Python over the run's socket.
	res, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: "bench",
		Code: strings.Replace(fmt.Sprintf(callLoop, opt.Calls), "CALL(", "bench_add(", 1)})
	if err != nil {
		return err
	}
	if res.StopType != sandbox.Normal {
		return fmt.Errorf("call benchmark ended %s: %s", res.StopType, res.Output)
	}
	ours, err := parseLatencies(res.Output)
	if err != nil {
		return err
	}

	// Baseline: the same method behind a loopback HTTP endpoint, one new
	// TCP connection per call, from an unsandboxed interpreter (a sandbox
	// has no network).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	m := pluginhost.Methods(p)[0]
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var req struct {
			Args map[string]json.RawMessage `json:"args"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), 400)
			return
		}
		out, err := pluginhost.Call(m, pluginhost.NewCtx(r.Context(), p, &pluginhost.RunEnv{}), req.Args)
		if err != nil {
			http.Error(rw, err.Error(), 500)
			return
		}
		rw.Write(out)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	script := fmt.Sprintf(referenceClient, ln.Addr().(*net.TCPAddr).Port) + fmt.Sprintf(callLoop, opt.Calls)
	cmd := exec.CommandContext(ctx, python, "-c", script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("baseline client: %w", err)
	}
	base, err := parseLatencies(string(out))
	if err != nil {
		return err
	}
	// The same call to the Python plugin: sandbox -> nekro -> the plugin's
	// process and back.
	res, err = rt.Exec(ctx, runtime.ExecRequest{ChatKey: "bench",
		Code: strings.Replace(fmt.Sprintf(callLoop, opt.Calls), "CALL(", "bench_py_add(", 1)})
	if err != nil {
		return err
	}
	if res.StopType != sandbox.Normal {
		return fmt.Errorf("python plugin call benchmark ended %s: %s", res.StopType, res.Output)
	}
	pyCalls, err := parseLatencies(res.Output)
	if err != nil {
		return err
	}

	so, sr, sp := stats.Summarize(ours), stats.Summarize(base), stats.Summarize(pyCalls)
	fmt.Fprintf(w, "== %d TOOL calls from Python\n", opt.Calls)
	fmt.Fprintf(w, "sandboxed, run socket (NDJSON)   %8.0f calls/s  p50 %9s  p99 %9s\n", so.PerSecond(), stats.Micros(so.P50), stats.Micros(so.P99))
	fmt.Fprintf(w, "  to a Python plugin method      %8.0f calls/s  p50 %9s  p99 %9s  (%s the Go method; goal: p50 <= 250 µs)\n",
		sp.PerSecond(), stats.Micros(sp.P50), stats.Micros(sp.P99), stats.Ratio(sp.P50, so.P50))
	for key, rss := range coldApp.Python.Memory() {
		fmt.Fprintf(w, "  the Python plugin's process (%s) holds %.1f MiB resident when idle\n", key, float64(rss)/(1<<20))
	}
	fmt.Fprintf(w, "reference style, new TCP+HTTP    %8.0f calls/s  p50 %9s  p99 %9s\n", sr.PerSecond(), stats.Micros(sr.P50), stats.Micros(sr.P99))
	fmt.Fprintf(w, "speed-up at p50 (goal >= 10x)    %s   (goal: p50 <= 100 µs)\n", stats.Ratio(sr.P50, so.P50))
	return concurrentCalls(ctx, w, rt, opt.Calls/2)
}

// parallelLoop makes TOOL calls from the moment %[1]f (Unix time, so
// that runs started one after the other begin together) and prints how
// many it made and when it ended.
const parallelLoop = `
import time, sys
while time.time() < %[1]f:
    time.sleep(0.001)
for i in range(%[2]d):
    r = bench_add(i, 1)
    assert r == i + 1, r
sys.stdout.write("%%d %%.6f\n" %% (%[2]d, time.time()))
`

// concurrentCalls prints the TOOL-call throughput of 1, 2, 4 and 8 runs
// calling at once (each in a chat of its own, from one moment on)
// against one run's, measured in the same report: on a machine of N
// cores it should grow toward N times one run's (a call keeps the run's
// interpreter and nekro busy in turn, so one run uses part of two cores).
func concurrentCalls(ctx context.Context, w io.Writer, rt *host.Host, calls int) error {
	fmt.Fprintf(w, "== TOOL-call throughput of runs calling at once (%d calls each, %d cores)\n", calls, goruntime.NumCPU())
	var one float64
	for _, n := range []int{1, 2, 4, 8} {
		start := float64(time.Now().Add(2*time.Second).UnixMicro()) / 1e6
		code := fmt.Sprintf(parallelLoop, start, calls)
		type result struct {
			end float64
			err error
		}
		results := make(chan result, n)
		for i := range n {
			go func() {
				res, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: fmt.Sprintf("bench-par-%d", i), Code: code})
				if err == nil && res.StopType != sandbox.Normal {
					err = fmt.Errorf("ended %s: %s", res.StopType, res.Output)
				}
				var made int
				var end float64
				if err == nil {
					if _, serr := fmt.Sscanf(res.Output, "%d %f", &made, &end); serr != nil || made != calls {
						err = fmt.Errorf("unexpected output %q", res.Output)
					}
				}
				results <- result{end, err}
			}()
		}
		last := 0.0
		for range n {
			r := <-results
			if r.err != nil {
				return fmt.Errorf("%d runs calling at once: %w", n, r.err)
			}
			last = max(last, r.end)
		}
		perSecond := float64(n*calls) / (last - start)
		if n == 1 {
			one = perSecond
		}
		fmt.Fprintf(w, "%d run(s) at once                  %8.0f calls/s  (%.2fx one run's)\n", n, perSecond, perSecond/one)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func parseLatencies(out string) ([]time.Duration, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	ds := make([]time.Duration, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse latencies: %v in %.200q", err, out)
		}
		ds = append(ds, time.Duration(n))
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("no latencies in %.200q", out)
	}
	return ds, nil
}

// plotCode is the small chart the AI's code draws most often.
const plotCode = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]); plt.savefig('/app/shared/p.png')"

// plotFloor draws plotCode's chart, unsandboxed, in a Python that has
// imported pyplot and drawn once: %d times in that process itself, then %d
// times in a child forked from it for each chart (what a zygote's run
// pays: the draw plus the copy-on-write faults of a fresh fork), 50 ms
// apart. It prints two lines of nanosecond latencies.
const plotFloor = `
import os, sys, tempfile, time
os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp())
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out = os.path.join(tempfile.mkdtemp(), "p.png")
def draw():
    plt.plot([1, 2, 3]); plt.savefig(out); plt.close("all")
draw()
lat = []
for i in range(%d):
    time.sleep(0.05)
    t = time.perf_counter_ns(); draw(); lat.append(time.perf_counter_ns() - t)
print(" ".join(map(str, lat)))
import gc; gc.collect(); gc.freeze()
lat = []
for i in range(%d):
    time.sleep(0.05)
    r, w = os.pipe()
    t = time.perf_counter_ns()
    pid = os.fork()
    if pid == 0:
        draw(); os.write(w, b"x"); os._exit(0)
    os.read(r, 1); lat.append(time.perf_counter_ns() - t)
    os.waitpid(pid, 0); os.close(r); os.close(w)
print(" ".join(map(str, lat)))
os.remove(out); os.rmdir(os.path.dirname(out))
`

// plotFloors measures plotFloor with python: the in-process and the
// fork-per-chart latencies.
func plotFloors(ctx context.Context, python string, runs int) (inProcess, forked []time.Duration, err error) {
	cmd := exec.CommandContext(ctx, python, "-c", fmt.Sprintf(plotFloor, runs, runs))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("the unsandboxed chart baseline: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return nil, nil, fmt.Errorf("the unsandboxed chart baseline printed %q", out)
	}
	if inProcess, err = parseLatencies(lines[0]); err != nil {
		return nil, nil, err
	}
	forked, err = parseLatencies(lines[1])
	return inProcess, forked, err
}

// activeChatRows measures what a chat that is being talked to pays, as
// `nekro serve` runs it (warm sandboxes): `pass` and a small matplotlib
// PNG through the runtime (configured as nekro serve configures it), and
// `pass` through POST /api/chats/{chat}/exec of an in-process server, each
// run 50 ms after the previous one ended.
func activeChatRows(ctx context.Context, w io.Writer, dataDir, python string, p *plugin.Plugin, runs, zygotes int, template bool, bare time.Duration) error {
	srv, err := app.Serve(ctx, app.Config{DataDir: dataDir + "-serve", Sandbox: app.SandboxConfig{Python: python, Template: template, Zygotes: zygotes},
		Host: host.Config{Plugins: []*plugin.Plugin{p}}, Runtime: runtime.Config{WarmSpares: true}},
		server.Options{Listen: "127.0.0.1:0", Token: "bench", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("start the server: %w", err)
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	activeApp, err := app.Open(ctx, app.Config{DataDir: dataDir + "-active", Sandbox: app.SandboxConfig{Python: python, Template: template, Zygotes: zygotes},
		Host: host.Config{Plugins: []*plugin.Plugin{p}}, Runtime: runtime.Config{WarmSpares: true}})
	if err != nil {
		return err
	}
	defer activeApp.Close(ctx)
	rt := activeApp.Host
	run := func(code string) (time.Duration, time.Duration, error) {
		t := time.Now()
		res, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: "active", Code: code})
		if err == nil && res.StopType != sandbox.Normal {
			err = fmt.Errorf("%q ended %s: %s", code, res.StopType, res.Output)
		}
		if err != nil {
			return 0, 0, err
		}
		return time.Since(t), res.Duration, nil
	}
	client := &http.Client{}
	body, _ := json.Marshal(map[string]string{"code": "pass"})
	api := func() (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+srv.Addr+"/api/chats/active-api/exec", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+srv.Token)
		req.Header.Set("Content-Type", "application/json")
		t := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t)
		var res struct {
			StopType string `json:"stop_type"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &res) != nil || res.StopType != "NORMAL" {
			return 0, fmt.Errorf("POST exec: %d %.300s", resp.StatusCode, b)
		}
		return d, nil
	}
	var first, pass, passIn, plot, numpy, viaAPI []time.Duration
	// What the server does once at its start (matplotlib's font cache,
	// the sandbox template) is done before its chats come.
	if w, ok := activeApp.Runtime.Runner().(sandbox.Warmer); ok {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := w.Warmed(wctx)
		cancel()
		if err != nil {
			return err
		}
	}
	// So is what its first run of all makes once (the empty volume image
	// chats' volumes are copied from, the stubs' byte code): another
	// chat's run pays for it here.
	if res, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: "warm-up", Code: "pass"}); err != nil || res.StopType != sandbox.Normal {
		return fmt.Errorf("warm-up run: %v %v", res, err)
	}
	// A chat's first run: nothing is warm for it yet.
	d, _, err := run("pass")
	if err != nil {
		return err
	}
	first = append(first, d)
	// Until the chat's zygote is up (about a second of imports), runs
	// come from fresh sandboxes: wait for it, as a chat in a conversation
	// has by its third run. The code names numpy and matplotlib, as a
	// chat that draws does: its zygote preloads them (bwrap's policy.go).
	for deadline := time.Now().Add(20 * time.Second); zygotes > 0 && time.Now().Before(deadline); {
		res, err := rt.Exec(ctx, runtime.ExecRequest{ChatKey: "active",
			Code: "import sys; print('numpy' in sys.modules and 'matplotlib.pyplot' in sys.modules)"})
		if err != nil {
			return err
		}
		if strings.TrimSpace(res.Output) == "True" {
			break
		}
		if _, err := api(); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Active chats: warm-up runs, then the measured ones, interleaved.
	for i := 0; i < runs+5; i++ {
		time.Sleep(50 * time.Millisecond)
		dp, dpIn, err := run("pass")
		if err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		dg, _, err := run(plotCode)
		if err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		dn, _, err := run("import numpy")
		if err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		da, err := api()
		if err != nil {
			return err
		}
		if i >= 5 {
			pass, passIn, plot, numpy, viaAPI = append(pass, dp), append(passIn, dpIn), append(plot, dg), append(numpy, dn), append(viaAPI, da)
		}
	}
	// Charts a model's reply apart (1 s): the chat's spares have had the
	// time to rehearse one (zygote.py: only in a chat that draws, after
	// 0.25 s without code).
	var plotIdle []time.Duration
	for i := 0; i < min(runs, 15)+2; i++ {
		time.Sleep(time.Second)
		d, _, err := run(plotCode)
		if err != nil {
			return err
		}
		if i >= 2 {
			plotIdle = append(plotIdle, d)
		}
	}
	sgi := stats.Summarize(plotIdle)
	sf, sp, sg, sn, sa := stats.Summarize(first), stats.Summarize(pass), stats.Summarize(plot), stats.Summarize(numpy), stats.Summarize(viaAPI)
	fmt.Fprintf(w, "== an active chat as nekro serve runs it (warm spares, --zygotes %d), %d runs each, 50 ms apart\n", zygotes, runs)
	fmt.Fprintf(w, "a chat's first run, `pass`           %6.1f ms          (%s bare; goal <= 1.5x)\n", ms(sf.P50), stats.Ratio(sf.P50, bare))
	fmt.Fprintf(w, "`pass`, request to result           p50 %6.1f ms  p99 %6.1f ms  (in the sandbox process %.1f ms; goal p50 <= 2 ms)\n",
		ms(sp.P50), ms(sp.P99), ms(stats.Summarize(passIn).P50))
	fmt.Fprintf(w, "`import numpy`                      p50 %6.1f ms  p99 %6.1f ms  (goal: no more than `pass`)\n", ms(sn.P50), ms(sn.P99))
	fmt.Fprintf(w, "matplotlib PNG (plt.plot; savefig)  p50 %6.1f ms  p99 %6.1f ms  (goal p50 <= 100 ms)\n", ms(sg.P50), ms(sg.P99))
	fmt.Fprintf(w, "matplotlib PNG, runs 1 s apart (a model's reply)  p50 %6.1f ms  p99 %6.1f ms  (%d runs; goal p50 <= 100 ms)\n",
		ms(sgi.P50), ms(sgi.P99), len(plotIdle))
	if inProc, forked, err := plotFloors(ctx, python, runs); err != nil {
		fmt.Fprintf(w, "  (no unsandboxed baseline: %v)\n", err)
	} else {
		si, sf := stats.Summarize(inProc), stats.Summarize(forked)
		fmt.Fprintf(w, "  the same chart unsandboxed, in a warm Python     p50 %6.1f ms  (the PNG rows are %s and %s)\n",
			ms(si.P50), stats.Ratio(sg.P50, si.P50), stats.Ratio(sgi.P50, si.P50))
		fmt.Fprintf(w, "  ... in a child forked from it for each chart     p50 %6.1f ms  (the PNG rows are %s and %s)\n",
			ms(sf.P50), stats.Ratio(sg.P50, sf.P50), stats.Ratio(sgi.P50, sf.P50))
	}
	fmt.Fprintf(w, "`pass` through POST /api/chats/{chat}/exec  p50 %6.1f ms  p99 %6.1f ms  (goal p50 <= 5 ms)\n", ms(sa.P50), ms(sa.P99))
	if b, ok := rt.Runtime().Runner().(*bwrap.Runner); ok {
		for _, z := range b.ZygoteStats() {
			fmt.Fprintf(w, "the chat's zygote (bwrap, zygote, armed spare) holds %.1f MiB PSS\n", float64(z.PSS)/(1<<20))
		}
	}
	return nil
}
