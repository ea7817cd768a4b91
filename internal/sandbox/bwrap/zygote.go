package bwrap

// Warm per-chat zygotes (Runner.Zygotes).
//
// A chat that runs code often enough (policy.go) gets a zygote: a bwrap
// sandbox exactly like a run's (the chat's uid, its /app/shared and
// /app/uploads, no network, the run's stubs in /app/.nekro) running
// zygote.py, which has imported the stubs and the heavy libraries its
// chat's code used (of Runner.Preload) once and forks a spare whenever
// one is asked for (the runtime's warm spare is the one ahead of need). A spare already sits in fresh mount, IPC, PID and
// network namespaces with its own /tmp, /dev/shm and /proc, without any
// capability and under the full seccomp filter; the host sends it the code,
// the output pipe and the run's RPC connection directly (SCM_RIGHTS), so a
// run starts in about a millisecond instead of ~30 ms for a new sandbox plus
// the imports.
//
// Privilege and the filter. A run's own sandbox gets no capabilities and
// seccomp.Filter from bwrap. The zygote needs to create namespaces and
// mount, so bwrap starts it with CAP_SYS_ADMIN, CAP_SETPCAP and
// CAP_NET_ADMIN (inside bwrap's user namespace only: they reach nothing of
// the host's), --disable-userns, and seccomp.ZygoteFilter, which is the full
// filter with unshare (never of a user namespace) and mount allowed. Each
// spare, once its namespaces and mounts are made, drops every capability
// (bounding, ambient, permitted, effective) and loads seccomp.Filter on
// top (filters stack), before it reads any code: the run holds no
// capability and has exactly a fresh run's filter.
//
// What a run cannot reach: the zygote is not in its PID namespace (the run
// is pid 1 of its own, with its own /proc: no other process is visible, so
// none can be signalled or traced, and /proc/1/root is the run itself); it
// is non-dumpable; its control socket is closed in every spare; each run's
// network namespace is empty (no socket of an earlier run or another chat is
// reachable); a run's leftovers (processes, files in /tmp and /dev/shm, its
// memory) die with its namespaces. A zygote holds only its own chat's
// directories and stubs, never another chat's or a host secret.
//
// The exit status comes on the spare's status pipe: from the run itself
// as soon as its code is done (before its teardown), or from the zygote
// (its parent, outside the run's PID namespace) when the run died without
// saying so. The run could forge its own status, and gains nothing by it:
// its code could exit with any status anyway. Timeouts and Kill signal
// the run's pid 1 through a pidfd, which ends its whole namespace.
// Per-run cgroups work as for fresh runs: the host moves the spare's run
// process into the run's group while it waits.
//
// Zygotes are bounded: at most Runner.Zygotes, their PSS together at most
// Runner.ZygoteMemory (a new one replaces only one left unused a while,
// see policy.go), each stopped after Runner.ZygoteIdle unused. A zygote
// serves only specs identical to the one it started with (same chat, uid,
// limits and stub files) and its chat's preloads: when the stubs change
// (a plugin enabled or disabled) or the chat's code names another heavy
// module, the next start makes a new one. Whenever no spare is ready, the zygote failed or a spare dies before
// its code is handed over, the run starts a fresh sandbox as before: a
// zygote never fails a run.

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/cgroup"
	"github.com/nekro-go/nekro/internal/sandbox/seccomp"
)

//go:embed zygote.py
var zygotePy []byte

// DefaultPreload is what a zygote may import for its runs when the
// runner names nothing: numpy and matplotlib's pyplot (about 0.5 s of
// imports a run would otherwise pay, and most of a chart's time), each
// only for a chat whose code named it (policy.go).
var DefaultPreload = []string{"numpy", "matplotlib.pyplot"}

const (
	defaultZygoteMemory = 1 << 30
	defaultZygoteIdle   = 5 * time.Minute
	// zygoteEstimate is what a new zygote is assumed to take before it
	// is measured (numpy and pyplot loaded: ~60 MB).
	zygoteEstimate = 64 << 20
)

// zygote is one chat's warm interpreter.
type zygote struct {
	r    *Runner
	key  string // what specs it serves (zygoteKey)
	chat string // the spec's shared directory
	cmd  *exec.Cmd
	ctl  *net.UnixConn

	preload []string // what it imports for its runs

	mu      sync.Mutex
	ready   bool
	dead    bool
	spare   *zspare
	used    time.Time
	served  int  // spares handed out
	inUse   int  // spares handed out whose run has not ended
	retired bool // stop once inUse is 0 (replaced or evicted)
	idle    *time.Timer
	stopped chan struct{}
	arrived chan struct{} // closed when a spare arrives, then replaced: wakes every waiter
	asked   bool          // a spare was asked for and has not arrived
	upCh    chan struct{} // closed once ready or dead
	upOnce  sync.Once
	pssVal  int64     // the last measured PSS
	pssAt   time.Time // when
}

// zspare is a forked spare the host has been told about.
type zspare struct {
	nsPid  int      // the spare's pid in the zygote's namespace
	sock   *os.File // stream socket to the run process
	status *os.File // read end of the spare's status pipe
}

func (s *zspare) close() {
	s.sock.Close()
	s.status.Close()
}

// zygoteKey identifies what a zygote serves: everything of the spec but
// the RPC connection and the time limit, and what it preloads.
func zygoteKey(spec sandbox.Spec, preload []string) string {
	l := spec.Limits.WithDefaults()
	l.Timeout = 0
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d:%d\x00%+v\x00%q\x00", spec.SharedDir, spec.UploadsDir, spec.UID, spec.GID, l, preload)
	names := fileNames(spec)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(spec.Files[n]))
		h.Write(spec.Files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fromZygote returns a process on the chat's zygote's ready spare, or nil
// (the caller starts a fresh sandbox). It starts the chat's zygote once
// the chat has earned one (policy.go) and there is room; a start ahead of
// its run (Spec.Ahead: the runtime's warm spare) then waits for the new
// zygote's first spare rather than paying for a fresh sandbox too, a run
// does not wait.
func (r *Runner) fromZygote(ctx context.Context, spec sandbox.Spec) sandbox.Process {
	if r.Zygotes <= 0 || spec.Conn == nil || spec.RunDir != "" {
		return nil
	}
	earned, preload := r.chatWants(spec.SharedDir)
	key := zygoteKey(spec, preload)
	r.zmu.Lock()
	if r.zclosed {
		r.zmu.Unlock()
		return nil
	}
	if r.zygotes == nil {
		r.zygotes = map[string]*zygote{}
	}
	z := r.zygotes[spec.SharedDir]
	if z != nil && (z.key != key || z.isDead()) {
		delete(r.zygotes, spec.SharedDir)
		go z.retire()
		z = nil
	}
	if z == nil {
		if !earned || !r.makeRoomLocked() {
			r.zmu.Unlock()
			return nil
		}
		z = r.startZygoteLocked(spec, key, preload)
		if !spec.Ahead {
			r.zmu.Unlock()
			return nil
		}
	}
	r.zmu.Unlock()
	sp := z.take(ctx, spec.Ahead)
	if sp == nil {
		return nil
	}
	conn, err := dupFile(spec.Conn)
	if err != nil {
		sp.close()
		z.finished()
		return nil
	}
	spec.Conn = conn
	return &zproc{r: r, z: z, sp: sp, spec: spec, l: spec.Limits.WithDefaults()}
}

func (r *Runner) zygoteIdle() time.Duration {
	if r.ZygoteIdle > 0 {
		return r.ZygoteIdle
	}
	return defaultZygoteIdle
}

// startZygoteLocked starts a zygote for spec in the background (the
// caller made room).
func (r *Runner) startZygoteLocked(spec sandbox.Spec, key string, preload []string) *zygote {
	files := make(map[string][]byte, len(spec.Files)+1)
	for n, b := range spec.Files {
		files[n] = b
	}
	files["zygote.py"] = zygotePy
	spec.Files, spec.Conn = r.withPyc(files), nil
	z := &zygote{r: r, key: key, chat: spec.SharedDir, preload: preload, used: time.Now(),
		stopped: make(chan struct{}), arrived: make(chan struct{}), upCh: make(chan struct{})}
	r.zygotes[spec.SharedDir] = z
	go z.run(spec)
	return z
}

// stopZygotes stops every zygote; later starts make none.
func (r *Runner) stopZygotes() {
	r.zmu.Lock()
	r.zclosed = true
	zs := r.zygotes
	r.zygotes = nil
	r.zmu.Unlock()
	for _, z := range zs {
		z.stop()
	}
}

// ZygoteStat is one running zygote, for `nekro doctor` and the bench.
type ZygoteStat struct {
	Chat string // its chat's shared directory
	PSS  int64  // proportional set size of its whole process tree
}

// ZygoteStats lists the running zygotes with their memory.
func (r *Runner) ZygoteStats() []ZygoteStat {
	r.zmu.Lock()
	zs := make([]*zygote, 0, len(r.zygotes))
	for _, z := range r.zygotes {
		zs = append(zs, z)
	}
	r.zmu.Unlock()
	var out []ZygoteStat
	for _, z := range zs {
		if z.isReady() {
			out = append(out, ZygoteStat{Chat: z.chat, PSS: z.pss()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Chat < out[j].Chat })
	return out
}

func (z *zygote) isDead() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.dead
}

func (z *zygote) isReady() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.ready && !z.dead
}

// evictable reports when the zygote last served and whether another
// chat's may replace it: it is ready, has served, and has been unused for
// zygoteEvictIdle.
func (z *zygote) evictable() (time.Time, bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.used, z.dead || z.ready && z.served > 0 && time.Since(z.used) >= zygoteEvictIdle
}

// retire stops the zygote once no spare it handed out is in use: a zygote
// replaced (its chat's stubs or preloads changed) or evicted must not
// take the runs going on in its spares with it. The caller removed it
// from the runner's zygotes.
func (z *zygote) retire() {
	z.mu.Lock()
	z.retired = true
	idle := z.inUse == 0
	z.mu.Unlock()
	if idle {
		z.stop()
	}
}

// finished says a spare handed out is no longer in use (its run ended or
// it was discarded); a retired zygote stops with its last one.
func (z *zygote) finished() {
	z.mu.Lock()
	z.inUse--
	stop := z.retired && z.inUse == 0
	z.mu.Unlock()
	if stop {
		z.stop()
	}
}

// up marks the zygote ready or dead: starts waiting for it go on.
func (z *zygote) up() { z.upOnce.Do(func() { close(z.upCh) }) }

// spareWait bounds how long a start waits for a running zygote's next
// spare (it forks in 3-20 ms; a fresh sandbox would take longer).
const spareWait = 2 * time.Second

// take hands out the zygote's spare, asking for one and waiting while it
// is forked (3-20 ms) when there is none; nil when the zygote is not
// running. With starting, it first
// waits (bounded by ctx) for a zygote still importing to be ready.
func (z *zygote) take(ctx context.Context, starting bool) *zspare {
	if starting {
		select {
		case <-z.upCh:
		case <-ctx.Done():
			return nil
		}
	}
	timer := time.NewTimer(spareWait)
	defer timer.Stop()
	for {
		z.mu.Lock()
		if z.spare != nil || z.dead || !z.ready {
			break
		}
		// Every waiter wakes when a spare arrives; those that find it
		// taken ask for another.
		ask := !z.asked
		z.asked = true
		arrived := z.arrived
		z.mu.Unlock()
		if ask {
			if _, err := z.ctl.Write([]byte("f")); err != nil {
				z.stop()
				return nil
			}
		}
		select {
		case <-arrived:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
	sp := z.spare
	z.spare = nil
	z.used = time.Now()
	if sp != nil {
		z.served++
		z.inUse++
	}
	if z.idle != nil {
		z.idle.Reset(z.r.zygoteIdle())
	}
	dead := z.dead
	z.mu.Unlock()
	if sp == nil || dead {
		if sp != nil {
			sp.close()
			z.finished()
		}
		return nil
	}
	return sp
}

// pssEvery is how often a zygote's PSS is measured again: reading every
// zygote's smaps_rollup at each start cost nekro 3 ms per turn at 50
// chats (issue 26).
const pssEvery = 5 * time.Second

// pss is the proportional set size of the zygote's process tree (bwrap,
// the zygote and its waiting spares) as last measured, zygoteEstimate
// until it is ready.
func (z *zygote) pss() int64 {
	if !z.isReady() || z.cmd == nil || z.cmd.Process == nil {
		return zygoteEstimate
	}
	z.mu.Lock()
	v, at := z.pssVal, z.pssAt
	z.mu.Unlock()
	if !at.IsZero() && time.Since(at) < pssEvery {
		return v
	}
	root := z.cmd.Process.Pid
	var total int64
	for _, p := range append([]int{root}, cgroup.Descendants(root)...) {
		total += smapsPss(p)
	}
	z.mu.Lock()
	z.pssVal, z.pssAt = total, time.Now()
	z.mu.Unlock()
	return total
}

func smapsPss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stop ends the zygote and every spare it forked (they live in its PID
// namespace).
func (z *zygote) stop() {
	defer z.up()
	z.mu.Lock()
	z.dead = true
	sp := z.spare
	z.spare = nil
	if z.idle != nil {
		z.idle.Stop()
	}
	z.mu.Unlock()
	if sp != nil {
		sp.close()
	}
	if z.cmd != nil && z.cmd.Process != nil {
		syscall.Kill(-z.cmd.Process.Pid, syscall.SIGKILL)
	}
	if z.ctl != nil {
		z.ctl.Close()
	}
}

// run starts the zygote's sandbox and serves its messages until it ends.
func (z *zygote) run(spec sandbox.Spec) {
	defer close(z.stopped)
	err := z.serve(spec)
	z.stop()
	z.r.zmu.Lock()
	if z.r.zygotes[z.chat] == z {
		delete(z.r.zygotes, z.chat)
	}
	z.r.zmu.Unlock()
	if err != nil && z.r.ZygoteErr != nil {
		z.r.ZygoteErr(err)
	}
}

func (z *zygote) serve(spec sandbox.Spec) error {
	bw, err := z.r.bwrapPath()
	if err != nil {
		return err
	}
	l := spec.Limits.WithDefaults()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("zygote control socket: %w", err)
	}
	hostEnd, childEnd := os.NewFile(uintptr(fds[0]), "zygote-ctl"), os.NewFile(uintptr(fds[1]), "zygote-ctl")
	defer childEnd.Close()
	c, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		return fmt.Errorf("zygote control socket: %w", err)
	}
	z.ctl = c.(*net.UnixConn)
	var closeAfter []*os.File
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	// Descriptors: 3 control socket, 4 the runs' filter (zygote.py reads
	// it), 5 the zygote's own filter (bwrap reads it), 6... the files.
	strict, err := memFile("nekro-seccomp-run", z.r.Seccomp)
	if err != nil {
		return err
	}
	closeAfter = append(closeAfter, strict)
	extra := []*os.File{childEnd, strict, nil}
	a := systemArgs(l)
	if err := z.r.ensureLayer(spec); err != nil {
		return fmt.Errorf("start zygote: %w", err)
	}
	a = append(a, "--setenv", "OPENBLAS_NUM_THREADS", "1", "--dir", "/app")
	// The chat's package layer is read-only here as in a fresh run: a
	// spare's mount namespace is a copy of this one, and it drops every
	// capability before it reads code, so no run can remount it.
	a = append(a, sharedArgs(spec.SharedDir)...)
	a = append(a, "--ro-bind", spec.UploadsDir, "/app/uploads")
	if len(z.r.Seccomp) > 0 {
		zf, err := seccomp.ZygoteFilter()
		if err != nil {
			return err
		}
		f, err := memFile("nekro-seccomp-zygote", zf)
		if err != nil {
			return err
		}
		closeAfter = append(closeAfter, f)
		extra[2] = f
		a = append(a, "--seccomp", "5")
	}
	for i, name := range fileNames(spec) {
		f, err := memFile("nekro-"+name, spec.Files[name])
		if err != nil {
			return err
		}
		closeAfter = append(closeAfter, f)
		extra = append(extra, f)
		a = append(a, fileArgs(6+i, name)...)
	}
	if fc := z.r.fonts.Load(); fc != nil {
		f, err := memFile("nekro-fontlist", fc.data)
		if err != nil {
			return err
		}
		closeAfter = append(closeAfter, f)
		a = append(a, fontArgs(fc, 3+len(extra))...)
		extra = append(extra, f)
	}
	a = append(a, runEnvArgs()...)
	a = append(a, "--chdir", "/app", "--cap-drop", "ALL",
		"--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_NET_ADMIN", "--remount-ro", "/")
	if l.Network {
		a = shareNet(a)
	}
	preload := z.preload
	if preload == nil {
		preload = []string{}
	}
	cfg, _ := json.Marshal(map[string]any{
		"memory": l.MemoryBytes, "file": l.FileBytes, "processes": l.Processes, "tmp": l.TmpBytes,
		"network": l.Network, "preload": preload, "zygote_env": []string{"OPENBLAS_NUM_THREADS"},
	})
	a = append(a, z.r.Python, "-I", "-B", "-u", scriptPath(spec.Files, "zygote.py"), string(cfg))
	cmd := exec.Command(bw, a...)
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = z.r.sysProcAttr(spec.UID, spec.GID)
	cmd.Env = bwrapEnv
	cmd.Dir = "/"
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	z.mu.Lock()
	if z.dead {
		z.mu.Unlock()
		return nil
	}
	z.cmd = cmd
	err = cmd.Start()
	z.mu.Unlock()
	if err != nil {
		return fmt.Errorf("start zygote: %w", err)
	}
	for _, f := range closeAfter {
		f.Close()
	}
	closeAfter = nil
	childEnd.Close()
	defer cmd.Wait()
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(2*4))
	for {
		n, oobn, _, _, err := z.ctl.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			if z.isDead() {
				return nil
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			return fmt.Errorf("zygote ended: %s", strings.TrimSpace(stderr.String()))
		}
		var files []*os.File
		if oobn > 0 {
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				for _, fd := range fds {
					unix.CloseOnExec(fd)
					files = append(files, os.NewFile(uintptr(fd), "zygote-spare"))
				}
			}
		}
		var msg struct {
			Ready bool `json:"ready"`
			Spare int  `json:"spare"`
		}
		if json.Unmarshal(buf[:n], &msg) != nil || (msg.Spare > 0 && len(files) != 2) {
			for _, f := range files {
				f.Close()
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			return fmt.Errorf("zygote: unexpected message %q", buf[:n])
		}
		z.mu.Lock()
		if msg.Ready {
			z.ready = true
			z.idle = time.AfterFunc(z.r.zygoteIdle(), func() {
				z.r.zmu.Lock()
				if z.r.zygotes[z.chat] == z {
					delete(z.r.zygotes, z.chat)
				}
				z.r.zmu.Unlock()
				z.stop()
			})
		}
		var old *zspare
		if msg.Spare > 0 {
			old, z.spare = z.spare, &zspare{nsPid: msg.Spare, sock: files[0], status: files[1]}
			z.asked = false
			close(z.arrived)
			z.arrived = make(chan struct{})
		}
		dead := z.dead
		z.mu.Unlock()
		if msg.Ready {
			z.up()
		}
		if old != nil {
			old.close()
		}
		if dead {
			return nil
		}
	}
}

// limitedBuffer keeps the first 4 KiB written to it (a zygote's stderr).
type limitedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// nsPids returns the NSpid line of pid: its pid in each namespace, the
// host's first.
func nsPids(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			var out []int
			for _, f := range strings.Fields(v) {
				n, _ := strconv.Atoi(f)
				out = append(out, n)
			}
			return out
		}
	}
	return nil
}

// zproc is a run on a zygote's spare. Until its code is handed over, any
// failure falls back to a fresh sandbox (fresh), which then serves the run.
type zproc struct {
	r    *Runner
	z    *zygote
	sp   *zspare
	spec sandbox.Spec // its Conn is this process's own copy
	l    sandbox.Limits

	prepareOnce sync.Once
	prepareErr  error
	run         *os.File // pidfd of the spare: the run's pid 1
	group       *cgroup.Group

	fresh    sandbox.Process
	doneOnce sync.Once // the zygote hears once that this spare is no longer in use
	released time.Time
	out      *sandbox.CappedBuffer
	outR     *os.File
	copied   chan struct{}
	status   chan int
	killOnce sync.Once
}

// Prepare waits until the spare's run process waits for its code, then
// moves it into the run's cgroup. A spare that cannot get there (its
// zygote died) is replaced by a fresh sandbox.
func (p *zproc) Prepare(ctx context.Context) error {
	p.prepareOnce.Do(func() {
		if err := p.prepare(ctx); err != nil {
			p.prepareErr = p.fallBack(ctx, err)
		}
	})
	return p.prepareErr
}

// fallBack ends the spare and starts a fresh sandbox for the run instead.
func (p *zproc) fallBack(ctx context.Context, why error) error {
	p.killSpare()
	fresh, err := p.r.startFresh(ctx, p.spec)
	p.spec.Conn.Close()
	if err != nil {
		return fmt.Errorf("start sandbox: %w (zygote spare: %v)", err, why)
	}
	p.fresh = fresh
	if pr, ok := fresh.(sandbox.Preparer); ok {
		return pr.Prepare(ctx)
	}
	return nil
}

func (p *zproc) prepare(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.sp.sock.SetReadDeadline(time.Now()) })
	b := make([]byte, 1)
	_, err := p.sp.sock.Read(b)
	stop()
	if err != nil || b[0] != 'r' {
		return fmt.Errorf("zygote spare never became ready: %v", err)
	}
	p.sp.sock.SetReadDeadline(time.Time{})
	// The spare is a child of the zygote, pid 1 of its own namespace:
	// find its host pid by its pid in the zygote's. Namespaces below
	// bwrap (the root): bwrap's, the zygote's own, the spare's.
	root := p.z.cmd.Process.Pid
	depth := len(nsPids(root)) + 3
	run := 0
	for _, pid := range cgroup.Descendants(root) {
		if ns := nsPids(pid); len(ns) == depth && ns[depth-2] == p.sp.nsPid && ns[depth-1] == 1 {
			run = pid
			break
		}
	}
	if run == 0 {
		return errors.New("zygote spare not found")
	}
	fd, err := unix.PidfdOpen(run, 0)
	if err != nil {
		return fmt.Errorf("zygote spare: %w", err)
	}
	p.run = os.NewFile(uintptr(fd), "pidfd")
	// It could have died and its pid been reused since it said it was
	// ready: the pidfd is the spare's only if it still has that NSpid.
	if ns := nsPids(run); len(ns) != depth || ns[depth-2] != p.sp.nsPid {
		return errors.New("zygote spare died")
	}
	if p.r.Cgroups != nil {
		var rb [8]byte
		rand.Read(rb[:])
		name := fmt.Sprintf("run-%d-%s", os.Getpid(), hex.EncodeToString(rb[:]))
		if p.group, err = p.r.Cgroups.New(name, p.l.MemoryBytes, p.l.Processes); err != nil {
			return err
		}
		if err := p.group.AddTree(run); err != nil {
			return err
		}
	}
	return nil
}

// Release hands the spare the code, the output pipe and the RPC
// connection; if the spare cannot take them, a fresh sandbox runs the code.
func (p *zproc) Release(ctx context.Context, code []byte) error {
	if err := p.Prepare(ctx); err != nil {
		return fmt.Errorf("release sandbox: %w", err)
	}
	if p.fresh != nil {
		return p.fresh.Release(ctx, code)
	}
	if err := p.handOver(code); err != nil {
		if err := p.fallBack(ctx, err); err != nil {
			return fmt.Errorf("release sandbox: %w", err)
		}
		return p.fresh.Release(ctx, code)
	}
	p.r.noteRun(p.spec.SharedDir, code)
	return nil
}

func (p *zproc) handOver(code []byte) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox output pipe: %w", err)
	}
	defer outW.Close()
	p.released = time.Now()
	first := code[:min(len(code), 32<<10)]
	if len(first) == 0 {
		first = []byte("\n")
	}
	rights := unix.UnixRights(int(outW.Fd()), int(p.spec.Conn.Fd()))
	if err := unix.Sendmsg(int(p.sp.sock.Fd()), first, rights, nil, 0); err != nil {
		outR.Close()
		return fmt.Errorf("hand the code to the zygote spare: %w", err)
	}
	// From here on the spare has the code's first bytes and the run's
	// connection: it is the run, whatever happens.
	p.spec.Conn.Close()
	p.out = sandbox.NewCappedBuffer(p.l.OutputBytes)
	p.outR = outR
	p.copied = make(chan struct{})
	p.status = make(chan int, 1)
	go func() {
		io.Copy(p.out, outR)
		close(p.copied)
	}()
	go func() {
		r := bufio.NewReader(p.sp.status)
		line, err := r.ReadString('\n')
		code, perr := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || perr != nil {
			code = -1 // no status: the zygote died with it
		}
		// The run says it is done before its teardown (zygote.py's done
		// pipe): whatever of it is left (its pid 1 waiting for this,
		// processes it started, or code that only claimed to be done) dies
		// reapDelay later, when the result has been handed on.
		p.reapLater()
		p.status <- code
	}()
	if rest := code[len(first):]; len(rest) > 0 {
		if _, err := p.sp.sock.Write(rest); err != nil {
			p.Kill()
			return nil // Wait reports the killed run
		}
	}
	unix.Shutdown(int(p.sp.sock.Fd()), unix.SHUT_WR)
	return nil
}

// reapDelay is how long a run that said it is done lives on before the
// host kills what is left of it. Its teardown (a 60 MB process: 10-25 ms
// of CPU on a 2-core VM) and the fork of the next spare, started at the
// same moment, made the result wait for a core: through the API, `pass`
// took 4.1-5.8 ms p50 against 2.4-2.5 ms with both 5 ms later (and 1.5-1.7
// ms against 1.6-1.9 ms inside nekro; runtime's spareDelay is the other
// half).
const reapDelay = 5 * time.Millisecond

// reapLater kills the run's pid 1, and so its whole namespace, after
// reapDelay.
func (p *zproc) reapLater() {
	if p.run == nil {
		return
	}
	fd, err := unix.FcntlInt(p.run.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil { // no descriptor to spare: now, then
		unix.PidfdSendSignal(int(p.run.Fd()), unix.SIGKILL, nil, 0)
		return
	}
	time.AfterFunc(reapDelay, func() {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		unix.Close(fd)
	})
}

// killSpare ends the spare before its run started.
func (p *zproc) killSpare() {
	p.sp.close()
	p.signal()
	p.removeGroup()
	p.done()
}

// done tells the zygote this spare is no longer in use.
func (p *zproc) done() { p.doneOnce.Do(p.z.finished) }

func (p *zproc) signal() {
	if p.run != nil {
		unix.PidfdSendSignal(int(p.run.Fd()), unix.SIGKILL, nil, 0)
	}
}

func (p *zproc) Kill() {
	if p.fresh != nil {
		p.fresh.Kill()
		return
	}
	p.killOnce.Do(func() {
		// The run is pid 1 of its namespace: every process of it dies.
		if p.run != nil {
			unix.PidfdSendSignal(int(p.run.Fd()), unix.SIGKILL, nil, 0)
		}
		if p.status == nil { // never released
			p.sp.close()
			p.spec.Conn.Close()
			p.closePidfds()
			p.removeGroup()
			p.done()
		}
	})
}

func (p *zproc) closePidfds() {
	if p.run != nil {
		p.run.Close()
	}
}

func (p *zproc) removeGroup() {
	if p.group == nil {
		return
	}
	g := p.group
	p.group = nil
	p.r.removing.Go(func() { g.RemoveWhenEmpty(groupRemoval) })
}

// Wait waits for the report of the run's exit, killing the run
// when timeout passes or ctx ends, then for the end of its output.
func (p *zproc) Wait(ctx context.Context, timeout time.Duration) (*sandbox.Outcome, error) {
	if p.fresh != nil {
		return p.fresh.Wait(ctx, timeout)
	}
	if p.status == nil {
		return nil, errors.New("wait for sandbox: it was never released")
	}
	o := sandbox.WaitStatus(ctx, timeout, p.released, p.Kill, p.status, p.copied, p.outR, p.out)
	p.sp.close()
	p.closePidfds()
	p.done()
	if p.group != nil {
		noteOutOfMemory(o, p.group, p.l.MemoryBytes)
		p.removeGroup()
	}
	return o, nil
}

var _ sandbox.Preparer = (*zproc)(nil)
