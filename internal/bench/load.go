package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/app"
	"github.com/nekro-go/nekro/internal/bench/stats"
	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/server"
)

// LoadOptions size the load benchmark.
type LoadOptions struct {
	Chats    int // chats, each a client that posts, waits for the answer, posts again
	Messages int // messages each chat posts
	// Concurrency bounds the chats in flight; 0: all at once.
	Concurrency int
	// Again runs the same chats a second time once the first pass is
	// over: what warm chats cost against new ones.
	Again bool
	// Idle, when positive, waits this long (plus a margin) after the
	// load and counts what is still alive; the caller should give the
	// same value to the runtime's SpareIdle.
	Idle time.Duration
	// CPUProfile, when set, is where the first pass's CPU profile of this
	// process goes (the second pass's in CPUProfile+".again").
	CPUProfile string
	// MemProfile, when set, is where a heap profile of this process goes
	// once the load is over (after the idle wait, when asked for), taken
	// after a garbage collection; the report then also says how much of
	// nekro's memory the Go runtime held unused (returned by
	// debug.FreeOSMemory, measured again after it).
	MemProfile string
}

// LoadPass is the figures of one pass over the chats.
type LoadPass struct {
	Turns int
	Wall  time.Duration
	// CPU is the process tree's while the chats talked, less the bench's
	// sampler and baseline runs; Settled adds what it used after the last
	// answer until it went quiet (zygotes and spares still starting).
	CPU, Settled time.Duration
	// MachineCPU is the whole machine's busy CPU time during the pass
	// (/proc/stat): kernel threads (loop devices, ext4's journal, network
	// namespaces' cleanup) and every other process included.
	MachineCPU  time.Duration
	First, Rest stats.Stats // post-to-answer of each chat's first message, and of the others
	All         stats.Stats
	// The stages of post-to-answer, over all messages: the POST until it
	// answered; from the POST until a turn claimed the message (its event
	// "turn running" arrived: the wait for a turn slot); from then until
	// the answer (the turn itself, in its stages shared with the turns
	// running at the same time).
	Post, Claim, Turn stats.Stats
	Lost, Twice       int
	PeakProcs         int
	PeakPSS           int64
	EndProcs          int
	EndPSS            int64
	// Volumes mounted by nekro and the loop devices bound to them at the
	// end of the pass.
	EndVolumes, EndLoops int
}

// LoadResult holds the figures, for tests and callers that check goals.
type LoadResult struct {
	Passes []LoadPass
	// The baseline: `python -c pass` as a bare child process, its wall
	// time and CPU (user+system), timed before, during and after the load.
	BareWall, BareCPU stats.Stats
	// FirstRun is a new chat's first run of `pass` through POST
	// /api/chats/{chat}/exec (its uid, volumes and sandbox), wall time,
	// each timed alternately with a bare `python -c pass` (FirstBare)
	// once the load is over.
	FirstRun, FirstBare stats.Stats
	// Idle: after the idle wait (zero when not asked for).
	IdleProcs              int
	IdlePSS                int64
	IdleVolumes, IdleLoops int
	// Memory of nekro's own process at the end (MemProfile only): PSS,
	// the Go heap in use, and PSS once the runtime returned what it held
	// unused (debug.FreeOSMemory).
	SelfPSS, HeapInuse, FreedPSS int64
	// CPUFrom says how the tree's CPU was read.
	CPUFrom string
	// Before the load: the server with no chat.
	StartProcs int
	StartPSS   int64
}

// Load starts nekro serve's assembly from cfg (the caller gives serve's
// defaults; Load adds a scripted model whose every reply is one
// send_msg_text naming the messages it answers, and a scratch data
// directory), drives opt.Chats chats through the HTTP API and the events
// stream like clients, and writes turns/s, post-to-answer latencies, CPU
// per turn and peak PSS of the process tree, and process counts, against a
// bare interpreter measured in the same run.
func Load(ctx context.Context, w io.Writer, cfg app.Config, opt LoadOptions) (*LoadResult, error) {
	if opt.Chats <= 0 {
		opt.Chats = 10
	}
	if opt.Messages <= 0 {
		opt.Messages = 2
	}
	if opt.Concurrency <= 0 || opt.Concurrency > opt.Chats {
		opt.Concurrency = opt.Chats
	}
	python := cfg.Sandbox.Python
	if python == "" {
		python = "/usr/bin/python3"
	}
	// Opened first and closed last: every process the server starts is
	// in the group.
	cg := openCPUGroup()
	if cg != nil {
		defer cg.close()
	}
	model, err := startInstantModel()
	if err != nil {
		return nil, err
	}
	defer model.Close()
	cfg.LLM = llm.Config{BaseURL: model.URL, Model: "instant"}
	cfg.ModelGroups = nil
	srv, err := app.Serve(ctx, cfg, server.Options{Listen: "127.0.0.1:0", Token: "bench", Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	defer srv.Shutdown(context.WithoutCancel(ctx))
	c := &loadClient{base: "http://" + srv.Addr, token: srv.Token,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: opt.Concurrency + 8}}}

	// What the server does once at its start (matplotlib's font cache)
	// is not the load's: a server is up long before its chats come.
	if w, ok := srv.App.Runtime.Runner().(sandbox.Warmer); ok {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := w.Warmed(wctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	res := &LoadResult{}
	smp := &sampler{python: python, cg: cg}
	for range 5 {
		if err := smp.bare(); err != nil {
			return nil, err
		}
	}
	s0 := sampleTree(cg, true)
	res.StartProcs, res.StartPSS = s0.Procs, s0.PSS
	startVolumes, _ := srv.App.Runtime.MountedVolumes() // the plugins' data directories

	passes := 1
	if opt.Again {
		passes = 2
	}
	for p := range passes {
		prof := opt.CPUProfile
		if prof != "" && p == 1 {
			prof += ".again"
		}
		pass, err := loadPass(ctx, c, smp, opt, prof)
		if err != nil {
			return nil, err
		}
		pass.EndVolumes, pass.EndLoops = srv.App.Runtime.MountedVolumes()
		res.Passes = append(res.Passes, pass)
	}
	if err := firstRuns(ctx, c, smp, res); err != nil {
		return nil, err
	}
	for range 5 {
		if err := smp.bare(); err != nil {
			return nil, err
		}
	}
	if opt.Idle > 0 {
		// Spares, zygotes and chats' volumes go after their idle time;
		// give it a margin, then count what stayed.
		deadline := time.Now().Add(opt.Idle + opt.Idle/4 + 15*time.Second) // volumes: swept every idle/4
		for time.Now().Before(deadline) {
			// Loop devices go a moment after their unmount (the kernel
			// clears them asynchronously).
			vols, loops := srv.App.Runtime.MountedVolumes()
			if s := sampleTree(cg, false); s.Procs <= res.StartProcs && vols <= startVolumes && loops <= vols {
				break
			}
			time.Sleep(time.Second)
		}
		s := sampleTree(cg, true)
		res.IdleProcs, res.IdlePSS = s.Procs, s.PSS
		res.IdleVolumes, res.IdleLoops = srv.App.Runtime.MountedVolumes()
	}
	if opt.MemProfile != "" {
		if err := memProfile(opt.MemProfile, res); err != nil {
			return nil, err
		}
	}
	res.BareWall, res.BareCPU = stats.Summarize(smp.bareWall), stats.Summarize(smp.bareCPU)
	res.CPUFrom = "/proc (processes killed unreaped are missed)"
	if cg != nil {
		res.CPUFrom = "a cpuacct cgroup of its own"
	}
	report(w, cfg, opt, res)
	return res, nil
}

// loadPass drives every chat once through its messages.
func loadPass(ctx context.Context, c *loadClient, smp *sampler, opt LoadOptions, profile string) (LoadPass, error) {
	var pass LoadPass
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return pass, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return pass, err
		}
		defer pprof.StopCPUProfile()
	}
	smp.start()
	before := sampleTree(smp.cg, false)
	machineBefore := machineBusy()
	start := time.Now()

	var mu sync.Mutex
	var first, rest, posts, claims, turns []time.Duration
	var wg sync.WaitGroup
	sem := make(chan struct{}, opt.Concurrency)
	errc := make(chan error, opt.Chats)
	for i := range opt.Chats {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			key := fmt.Sprintf("load-%04d", i)
			lat, err := c.drive(ctx, key, opt.Messages)
			if err != nil {
				errc <- fmt.Errorf("chat %s: %w", key, err)
				return
			}
			mu.Lock()
			for j, l := range lat {
				if j == 0 {
					first = append(first, l.answer)
				} else {
					rest = append(rest, l.answer)
				}
				posts, claims, turns = append(posts, l.post), append(claims, l.claim), append(turns, l.answer-l.claim)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	pass.Wall = time.Since(start)
	pass.MachineCPU = machineBusy() - machineBefore
	excluded := smp.pause() // first: no baseline run is then in flight
	after := sampleTree(smp.cg, true)
	close(errc)
	if err := errors.Join(drain(errc)...); err != nil {
		return pass, err
	}
	pass.Turns = opt.Chats * opt.Messages
	pass.CPU = after.CPU - before.CPU - excluded
	pass.First, pass.Rest = stats.Summarize(first), stats.Summarize(rest)
	pass.All = stats.Summarize(append(append([]time.Duration{}, first...), rest...))
	pass.Post, pass.Claim, pass.Turn = stats.Summarize(posts), stats.Summarize(claims), stats.Summarize(turns)
	pass.PeakProcs, pass.PeakPSS = max(smp.peakProcs, after.Procs), max(smp.peakPSS, after.PSS)
	pass.EndProcs, pass.EndPSS = after.Procs, after.PSS
	pass.Settled = pass.CPU + settle(smp.cg, after.CPU)
	for i := range opt.Chats {
		lost, twice, err := c.audit(ctx, fmt.Sprintf("load-%04d", i))
		if err != nil {
			return pass, err
		}
		pass.Lost += lost
		pass.Twice += twice
	}
	return pass, nil
}

// firstRunRounds is how many new chats' first runs firstRuns times.
const firstRunRounds = 9

// firstRuns times new chats' first runs through the API against bare
// interpreters, alternately, so that both meet the same machine.
func firstRuns(ctx context.Context, c *loadClient, smp *sampler, res *LoadResult) error {
	var run, bare []time.Duration
	for i := range firstRunRounds {
		cmd := exec.Command(smp.python, "-c", "pass")
		t := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("baseline %s -c pass: %w", smp.python, err)
		}
		bare = append(bare, time.Since(t))
		t = time.Now()
		resp, err := c.do(ctx, "POST", fmt.Sprintf("/api/chats/first-%02d/exec", i), map[string]string{"code": "pass", "user_id": "bench"})
		if err != nil {
			return fmt.Errorf("first run: %w", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		run = append(run, time.Since(t))
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"NORMAL"`)) {
			return fmt.Errorf("first run: %d %s", resp.StatusCode, body)
		}
	}
	res.FirstRun, res.FirstBare = stats.Summarize(run), stats.Summarize(bare)
	return nil
}

// settle waits until the process tree uses less than 20 ms of CPU in a
// second (at most 30 s) and returns what it used since the sample whose
// CPU was from.
func settle(g *cpuGroup, from time.Duration) time.Duration {
	last := from
	for range 30 {
		time.Sleep(time.Second)
		now := sampleTree(g, false).CPU
		if now-last < 20*time.Millisecond {
			return now - from
		}
		last = now
	}
	return last - from
}

func drain(c <-chan error) []error {
	var out []error
	for err := range c {
		out = append(out, err)
	}
	return out
}

func report(w io.Writer, cfg app.Config, opt LoadOptions, res *LoadResult) {
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	msf := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	fmt.Fprintf(w, "load: %d chats x %d messages, %d chats in flight; zygotes %d, warm spares %v (%d cores, load average %s)\n",
		opt.Chats, opt.Messages, opt.Concurrency, cfg.Sandbox.Zygotes, cfg.Runtime.WarmSpares, goruntime.NumCPU(), loadAvg())
	fmt.Fprintf(w, "  baseline: bare `%s -c pass` (%d runs, before, during and after the load): p50 %s wall, %s CPU\n",
		filepath.Base(orDefault(cfg.Sandbox.Python, "/usr/bin/python3")), res.BareWall.N, msf(res.BareWall.P50), msf(res.BareCPU.P50))
	fmt.Fprintf(w, "  server before the load: %d processes below nekro, PSS %s; CPU read from %s\n",
		res.StartProcs, mib(res.StartPSS), res.CPUFrom)
	for i, p := range res.Passes {
		name := "new chats"
		if i == 1 {
			name = "the same chats again"
		}
		perTurn := p.CPU / time.Duration(max(1, p.Turns))
		fmt.Fprintf(w, "  %s: %d turns in %s: %.1f turns/s\n", name, p.Turns, p.Wall.Round(time.Millisecond),
			float64(p.Turns)/p.Wall.Seconds())
		fmt.Fprintf(w, "    post-to-answer: p50 %s p99 %s (first message of a chat: p50 %s p99 %s; later: p50 %s p99 %s)\n",
			msf(p.All.P50), msf(p.All.P99), msf(p.First.P50), msf(p.First.P99), msf(p.Rest.P50), msf(p.Rest.P99))
		fmt.Fprintf(w, "      its stages: the POST p50 %s p99 %s; until a turn claimed the message p50 %s p99 %s; the turn p50 %s p99 %s\n",
			msf(p.Post.P50), msf(p.Post.P99), msf(p.Claim.P50), msf(p.Claim.P99), msf(p.Turn.P50), msf(p.Turn.P99))
		settled := p.Settled / time.Duration(max(1, p.Turns))
		fmt.Fprintf(w, "    CPU per turn (nekro and its children): %s, %s of a bare interpreter's start; %s once the tree went quiet (%s)\n",
			msf(perTurn), stats.Ratio(perTurn, res.BareCPU.P50), msf(settled), stats.Ratio(settled, res.BareCPU.P50))
		fmt.Fprintf(w, "    the whole machine's busy CPU per turn (kernel threads and other processes too): %s\n",
			msf(p.MachineCPU/time.Duration(max(1, p.Turns))))
		fmt.Fprintf(w, "    peak PSS of the tree %s, processes peak %d, at the end %d (PSS %s)\n",
			mib(p.PeakPSS), p.PeakProcs, p.EndProcs, mib(p.EndPSS))
		fmt.Fprintf(w, "    volumes mounted at the end %d, loop devices bound to them %d\n", p.EndVolumes, p.EndLoops)
		fmt.Fprintf(w, "    messages lost: %d, answered twice: %d\n", p.Lost, p.Twice)
	}
	fmt.Fprintf(w, "  a new chat's first run of pass through POST /api/chats/{chat}/exec (uid, volumes, sandbox): p50 %s max %s wall,"+
		" %s of a bare `python3 -c pass` timed alternately (p50 %s, %d each)\n",
		msf(res.FirstRun.P50), msf(res.FirstRun.Max), stats.Ratio(res.FirstRun.P50, res.FirstBare.P50), msf(res.FirstBare.P50), res.FirstRun.N)
	if opt.Idle > 0 {
		fmt.Fprintf(w, "  after the idle time (%s): %d processes, PSS %s; volumes mounted %d, loop devices %d\n",
			opt.Idle, res.IdleProcs, mib(res.IdlePSS), res.IdleVolumes, res.IdleLoops)
	}
	if opt.MemProfile != "" {
		fmt.Fprintf(w, "  nekro's process: PSS %s, Go heap in use %s after a GC, PSS %s once the Go runtime returned what it held unused; heap profile in %s\n",
			mib(res.SelfPSS), mib(res.HeapInuse), mib(res.FreedPSS), opt.MemProfile)
	}
}

// memProfile writes a heap profile of this process after a garbage
// collection and notes its memory before and after the Go runtime
// returns what it holds unused, which tells a heap that grew from pages
// not yet given back.
func memProfile(file string, res *LoadResult) error {
	self := strconv.Itoa(os.Getpid())
	res.SelfPSS = pss(self)
	goruntime.GC()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	res.HeapInuse = int64(ms.HeapInuse)
	debug.FreeOSMemory()
	res.FreedPSS = pss(self)
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// sampler watches the process tree during a pass (peak processes and
// PSS) and times the bare interpreter now and then, on one locked thread
// whose CPU time, and the baseline runs', are taken out of the tree's.
type sampler struct {
	python            string
	cg                *cpuGroup // nil: CPU from /proc
	mu                sync.Mutex
	bareWall, bareCPU []time.Duration
	excluded          time.Duration // CPU of the sampler thread and the baseline runs
	peakProcs         int
	peakPSS           int64
	quit              chan struct{}
	done              chan struct{}
}

// bare times one `python -c pass`, its wall time and its CPU.
func (s *sampler) bare() error {
	cmd := exec.Command(s.python, "-c", "pass")
	t := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("baseline %s -c pass: %w", s.python, err)
	}
	wall := time.Since(t)
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	s.mu.Lock()
	s.bareWall, s.bareCPU = append(s.bareWall, wall), append(s.bareCPU, cpu)
	s.excluded += cpu
	s.mu.Unlock()
	return nil
}

// start begins sampling for a pass.
func (s *sampler) start() {
	s.mu.Lock()
	s.excluded, s.peakProcs, s.peakPSS = 0, 0, 0
	s.mu.Unlock()
	s.quit, s.done = make(chan struct{}), make(chan struct{})
	go s.loop()
}

func (s *sampler) loop() {
	defer close(s.done)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	// Every 100 ms for the first 2 s, so a short load's processes are
	// seen (a pass of 6 turns can end in 300 ms), then every 500 ms.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	slow := false
	lastBare := time.Now()
	for {
		if !slow && time.Since(start) > 2*time.Second {
			tick.Reset(500 * time.Millisecond)
			slow = true
		}
		t0 := threadCPU()
		sm := sampleTree(s.cg, true)
		s.mu.Lock()
		s.peakProcs, s.peakPSS = max(s.peakProcs, sm.Procs), max(s.peakPSS, sm.PSS)
		s.excluded += threadCPU() - t0
		s.mu.Unlock()
		if time.Since(lastBare) >= 2*time.Second {
			s.bare() // a failure shows in the runs before and after
			lastBare = time.Now()
		}
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
	}
}

// pause stops sampling and returns the CPU to take out of the tree's.
func (s *sampler) pause() time.Duration {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.excluded
}

// answering finds the ids a turn answers in its history prompt.
var answering = regexp.MustCompile(`Answer the new message\(s\) ([#0-9, ]+)\.`)

// loadClient is a client of the chat API, as a web page or a bot would be.
type loadClient struct {
	base, token string
	http        *http.Client
}

func (c *loadClient) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return c.http.Do(req)
}

// messageTimes is one message's times from just before its POST: until
// the POST answered, until the turn that claimed it said it runs, and
// until the assistant's message naming it arrived.
type messageTimes struct {
	post, claim, answer time.Duration
}

// drive posts the chat's messages one at a time, each once the previous
// turn finished, and returns each one's times: post-to-answer is until
// the assistant's message naming it arrives on the chat's event stream.
func (c *loadClient) drive(ctx context.Context, key string, messages int) ([]messageTimes, error) {
	resp, err := c.do(ctx, "GET", "/api/chats/"+key+"/events", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("events: %d", resp.StatusCode)
	}
	evc := make(chan chat.Event, 64)
	errc := make(chan error, 1)
	done := make(chan struct{})
	defer close(done) // before the body closes: the reader stops sending
	sc := bufio.NewScanner(resp.Body)
	// Lines up to 1 MiB, from a small buffer: a megabyte per chat made
	// the bench's own garbage most of what nekro's process allocated
	// (pprof), and its heap then held that much more.
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	sc.Scan() // the subscription comment: the stream is live
	go func() {
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev chat.Event
			if json.Unmarshal([]byte(data), &ev) == nil {
				select {
				case evc <- ev:
				case <-done:
					return
				}
			}
		}
		errc <- fmt.Errorf("event stream ended: %v", sc.Err())
	}()
	var lat []messageTimes
	for j := range messages {
		start := time.Now()
		id, err := c.post(ctx, key, fmt.Sprintf("message %d", j))
		if err != nil {
			return nil, err
		}
		t := messageTimes{post: time.Since(start)}
		want := "#" + strconv.FormatInt(id, 10)
		answered, finished := false, false
		timeout := time.After(5 * time.Minute)
		for !answered || !finished {
			select {
			case ev := <-evc:
				switch {
				case ev.Type == chat.EventMessage && ev.Message != nil && ev.Message.Role == chat.Assistant:
					if !answered && slices.Contains(strings.Split(strings.TrimPrefix(ev.Message.Text, "answered: "), ", "), want) {
						answered = true
						t.answer = time.Since(start)
						if t.claim == 0 { // the turn began before the POST answered
							t.claim = t.post
						}
						lat = append(lat, t)
					}
				case ev.Type == chat.EventTurn && ev.Turn != nil && ev.Turn.Status == chat.TurnRunning:
					// The first turn that starts after the POST claims
					// the message: one turn runs per chat at a time, and
					// the previous one had finished.
					if t.claim == 0 {
						t.claim = time.Since(start)
					}
				case ev.Type == chat.EventTurn && ev.Turn != nil && ev.Turn.Status != chat.TurnRunning:
					if ev.Turn.Status != chat.TurnDone {
						return nil, fmt.Errorf("turn %d ended %s: %s", ev.Turn.ID, ev.Turn.Status, ev.Turn.Error)
					}
					finished = answered // a turn that did not answer it was an earlier one
				}
			case err := <-errc:
				return nil, err
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-timeout:
				return nil, fmt.Errorf("message %s: no answer within 5 minutes", want)
			}
		}
	}
	return lat, nil
}

// post stores a user message and returns its id.
func (c *loadClient) post(ctx context.Context, key, text string) (int64, error) {
	resp, err := c.do(ctx, "POST", "/api/chats/"+key+"/messages", map[string]string{"user_id": "u1", "text": text})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("post: %d %s", resp.StatusCode, b)
	}
	var m struct{ Message chat.Message }
	if err := json.Unmarshal(b, &m); err != nil || m.Message.ID == 0 {
		return 0, fmt.Errorf("post: no message id in %s", b)
	}
	return m.Message.ID, nil
}

// audit checks that every user message of the chat was answered exactly
// once: the assistant's answers name the ids they answer.
func (c *loadClient) audit(ctx context.Context, key string) (lost, twice int, err error) {
	resp, err := c.do(ctx, "GET", "/api/chats/"+key+"/messages", nil)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var h struct{ Messages []chat.Message }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, 0, fmt.Errorf("messages of %s: %w", key, err)
	}
	lost, twice = stats.AuditAnswers(h.Messages)
	return lost, twice, nil
}
