package bwrap

// Fresh sandboxes forked from one shared template (Runner.Template).
//
// A fresh bwrap sandbox costs about 37 ms of CPU inside `nekro bench
// load` (bwrap, a new interpreter, boot.py): the cost of every new chat's
// first runs. With Runner.Template set, a fresh start asks one template
// process per runner (template.py) for a child instead: a fork of an
// interpreter that has loaded the standard library and boot.py's
// functions and nothing of any chat, which builds the same isolation bwrap
// builds (the same read-only system, /etc list, environment, limits and
// seccomp filter as systemArgs and args) and then runs boot.py's _run, so
// the host's side of the run (ready, release, output, exit status, kill,
// timeout, the RPC connection) behaves as with bwrap. Measured by the
// prototype of issue 26: 3.5-4.7 ms of CPU for the template's child.
//
// The template runs as root of a user namespace nekro makes for it (nekro
// is root): its uid and gid maps give the namespace's root the last uid of
// the chats' range (TemplateUIDs.Last, which app keeps from every chat)
// and the rest of the range 1:1, so a run's files on the host belong to
// its chat's uid as with bwrap. Its capabilities reach only what that
// namespace owns; the host's files owned by uids outside the map (root's)
// it may read only where any user may. It is pid 1 of a PID namespace of
// its own: when it dies, every run forked from it dies too, and the next
// fresh start starts a new one. docs/security.md says what a run can and
// cannot reach.
//
// Chats' directories are chat-controlled: the child opens them beneath
// nekro's data directory (DataDir) with openat2(RESOLVE_NO_SYMLINKS |
// RESOLVE_BENEATH) and binds them by descriptor, and opens the package
// layer over /app/shared the same way: a symlink a chat left is refused
// (the run fails) instead of being followed by a process that may reach
// other chats' files.
//
// Whenever the template cannot serve a spec (no root, a uid outside its
// map, a run directory instead of descriptors) the start goes to bwrap as
// before; when the template cannot start at all (no user namespaces, a
// kernel without openat2) the runner warns once (TemplateErr) and uses
// bwrap from then on.

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/sandbox/cgroup"
)

//go:embed template.py
var templatePy []byte

// UIDRange is the inclusive range of host uids chats' sandboxes run as
// (--sandbox-uids); its last uid is the template's own, never a chat's.
type UIDRange struct{ First, Last int }

// templateStartTimeout bounds the template's start (an interpreter and
// its imports: ~50 ms here).
const templateStartTimeout = 10 * time.Second

// template is the runner's running template process.
type template struct {
	cmd    *exec.Cmd
	ctl    *os.File // the host's end of the control socket (SEQPACKET)
	boot   []byte   // the boot.py it loaded
	stderr limitedBuffer
	done   chan struct{} // closed when it has exited

	// ctlMu keeps ctl open while a request is sent: its number must not
	// be reused by another file meanwhile.
	ctlMu  sync.RWMutex
	closed bool
}

func (t *template) alive() bool {
	select {
	case <-t.done:
		return false
	default:
		return true
	}
}

// templateRetry is how long after a failed start fresh sandboxes use
// bwrap before the template is tried again: a start that failed for a
// passing reason (memory, processes) does not leave the server on bwrap
// until it restarts.
var templateRetry = time.Minute

// templateFor returns the running template for runs whose boot.py is
// boot, starting one when none runs; nil (and the caller uses bwrap) when
// the template is off or could not start within templateRetry.
func (r *Runner) templateFor(boot []byte) *template {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	if r.tclosed || (r.tmplOff != nil && time.Since(r.tmplAt) < templateRetry) {
		return nil
	}
	if t := r.tmpl; t != nil && t.alive() {
		if !bytes.Equal(t.boot, boot) {
			return nil
		}
		return t
	}
	t, err := r.startTemplate(boot)
	if err != nil {
		if r.tmplOff == nil && r.TemplateErr != nil { // once, not at every retry
			r.TemplateErr(err)
		}
		r.tmplOff, r.tmplAt = err, time.Now()
		return nil
	}
	r.tmpl, r.tmplOff = t, nil
	return t
}

// TemplateError reports why the runner does not use its template (nil when
// it does or has not tried yet), for `nekro doctor` and tests.
func (r *Runner) TemplateError() error {
	r.tmu.Lock()
	defer r.tmu.Unlock()
	return r.tmplOff
}

// stopTemplate ends the template (and every run forked from it); later
// starts use bwrap.
func (r *Runner) stopTemplate() {
	r.tmu.Lock()
	t := r.tmpl
	r.tmpl, r.tclosed = nil, true
	r.tmu.Unlock()
	if t != nil {
		t.cmd.Process.Kill()
		<-t.done
	}
}

// templateConfig is what every child of the template shares: systemArgs'
// read-only paths (the network's too, for runs that keep the host's) and
// the run's environment, taken from the bwrap policy so the two backends
// cannot drift apart.
func templateConfig() ([]byte, error) {
	var ro, netRO []string
	env := map[string]string{}
	walk := func(a []string, into *[]string) {
		for i := 0; i < len(a); i++ {
			switch a[i] {
			case "--ro-bind", "--ro-bind-try":
				if a[i+1] == a[i+2] && into != nil {
					*into = append(*into, a[i+1])
				}
				i += 2
			case "--setenv":
				env[a[i+1]] = a[i+2]
				i += 2
			case "--symlink", "--size", "--bind", "--perms", "--chdir", "--seccomp", "--tmpfs", "--proc", "--dev",
				"--remount-ro", "--dir":
				i++
			}
		}
	}
	walk(systemArgs(sandbox.DefaultLimits), &ro)
	walk(shareNet([]string{"--unshare-all"}), &netRO)
	walk(runEnvArgs(), nil)
	return json.Marshal(map[string]any{"ro": ro, "net_ro": netRO, "env": env})
}

// startTemplate starts the template process. r.tmu is held.
func (r *Runner) startTemplate(boot []byte) (*template, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("sandbox template: nekro is not root")
	}
	u := r.TemplateUIDs
	if u.Last <= u.First || u.First < 100000 {
		return nil, fmt.Errorf("sandbox template: no uid range (have %d-%d)", u.First, u.Last)
	}
	cfg, err := templateConfig()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox template: control socket: %w", err)
	}
	t := &template{ctl: os.NewFile(uintptr(fds[0]), "template-ctl"), boot: boot, done: make(chan struct{})}
	childEnd := os.NewFile(uintptr(fds[1]), "template-ctl")
	defer childEnd.Close()
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, b := range []struct {
		name string
		data []byte
	}{{"nekro-seccomp-run", r.Seccomp}, {"nekro-template.py", templatePy}, {"nekro-boot.py", boot}} {
		f, err := memFile(b.name, b.data)
		if err != nil {
			t.ctl.Close()
			return nil, err
		}
		files = append(files, f)
	}
	own := u.Last // the template's root: never a chat's uid
	maps := []syscall.SysProcIDMap{{ContainerID: 0, HostID: own, Size: 1}, {ContainerID: u.First, HostID: u.First, Size: own - u.First}}
	// Descriptors: 3 control socket, 4 the runs' filter, 5 template.py, 6 boot.py.
	t.cmd = exec.Command(r.Python, "-I", "-S", "-B", "-u", "/proc/self/fd/5", string(cfg))
	t.cmd.ExtraFiles = append([]*os.File{childEnd}, files...)
	t.cmd.Env = []string{}
	t.cmd.Dir = "/"
	t.cmd.Stdout, t.cmd.Stderr = &t.stderr, &t.stderr
	t.cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		UidMappings:                maps,
		GidMappings:                maps,
		GidMappingsEnableSetgroups: true,
		Credential:                 &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
		Setpgid:                    true,
		Pdeathsig:                  syscall.SIGKILL,
	}
	if err := t.cmd.Start(); err != nil {
		t.ctl.Close()
		return nil, fmt.Errorf("sandbox template: start: %w (user namespaces disabled?)", err)
	}
	go func() {
		t.cmd.Wait()
		close(t.done)
		t.ctlMu.Lock()
		t.closed = true
		t.ctl.Close()
		t.ctlMu.Unlock()
	}()
	childEnd.Close()
	// The template says it is ready once it has loaded what every run
	// uses.
	ready := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := unix.Read(int(t.ctl.Fd()), buf)
		switch {
		case err != nil:
			ready <- err
		case n == 0 || !strings.Contains(string(buf[:n]), "ready"):
			ready <- errors.New("it ended")
		default:
			ready <- nil
		}
	}()
	select {
	case err = <-ready:
	case <-time.After(templateStartTimeout):
		err = errors.New("it did not become ready in time")
	}
	if err != nil {
		t.cmd.Process.Kill()
		<-t.done
		return nil, fmt.Errorf("sandbox template: %v: %s", err, strings.TrimSpace(t.stderr.String()))
	}
	return t, nil
}

// chatDirAt splits a chat's directory into the directory it is opened
// beneath (the data directory, or its parent) and the rest.
func (r *Runner) chatDirAt(dir string) [2]string {
	dir, _ = filepath.Abs(dir) // the template's working directory is /
	if r.DataDir != "" {
		data, _ := filepath.Abs(r.DataDir)
		if rel, err := filepath.Rel(data, dir); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return [2]string{data, rel}
		}
	}
	return [2]string{filepath.Dir(dir), filepath.Base(dir)}
}

// templateServes reports whether a fresh start of spec may come from the
// template: descriptors rather than a run directory, and a chat's uid the
// template's user namespace maps.
func (r *Runner) templateServes(spec sandbox.Spec) bool {
	u := r.TemplateUIDs
	return r.Template && spec.Conn != nil && spec.RunDir == "" && spec.Files["boot.py"] != nil &&
		spec.UID >= u.First && spec.UID < u.Last && spec.GID == spec.UID
}

// fromTemplate starts spec's sandbox as a child of the template; ok is
// false when the template does not serve it (the caller starts bwrap).
func (r *Runner) fromTemplate(ctx context.Context, spec sandbox.Spec) (p sandbox.Process, ok bool, err error) {
	if !r.templateServes(spec) {
		return nil, false, nil
	}
	if err := r.ensureLayer(spec); err != nil {
		return nil, true, fmt.Errorf("start sandbox: %w", err)
	}
	// The stubs' byte code, as a fresh sandbox gets it: without it every
	// run compiles api_caller.py (3-5 ms of CPU). Not boot.py's: the
	// template has boot.py's functions loaded.
	spec.Files = r.withPycOf(spec.Files, templatePycFiles)
	for try := 0; ; try++ {
		t := r.templateFor(spec.Files["boot.py"])
		if t == nil {
			return nil, false, nil
		}
		p, err := r.forkRun(ctx, t, spec)
		if errors.Is(err, errTemplateGone) && try == 0 {
			// It died (or was killed) since it was last used: the
			// next one serves.
			t.cmd.Process.Kill()
			select {
			case <-t.done:
			case <-time.After(5 * time.Second):
				return nil, true, err
			}
			continue
		}
		return p, true, err
	}
}

// templatePycFiles are the run files whose byte code a template's run
// gets (see pycFiles).
var templatePycFiles = map[string]bool{"api_caller.py": false}

// errTemplateGone says the template could not be asked for a run: it has
// ended.
var errTemplateGone = errors.New("the sandbox template has ended")

// forkRun asks template t for spec's run.
func (r *Runner) forkRun(ctx context.Context, t *template, spec sandbox.Spec) (sandbox.Process, error) {
	l := spec.Limits.WithDefaults()
	var closeAfter []*os.File // the child's ends: the template has its own copies once sent
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	var mine []io.Closer // the host's ends, closed on failure
	fail := func(err error) (sandbox.Process, error) {
		for _, f := range mine {
			f.Close()
		}
		return nil, err
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	reply, replyChild := os.NewFile(uintptr(sp[0]), "template-run"), os.NewFile(uintptr(sp[1]), "template-run")
	mine, closeAfter = append(mine, reply), append(closeAfter, replyChild)
	// The files: the set of every run of this content, then the chat's
	// key in a memfd of this run's.
	var common []string
	for _, name := range fileNames(spec) {
		if name != chatKeyFile {
			common = append(common, name)
		}
	}
	set, err := r.runFiles.get(common, spec.Files)
	if err != nil {
		return fail(err)
	}
	defer r.runFiles.put(set) // once sent, the template holds copies
	names := append([]string(nil), set.names...)
	send := append([]*os.File{replyChild}, set.files...)
	if b, ok := spec.Files[chatKeyFile]; ok {
		f, err := memFile("nekro-"+chatKeyFile, b)
		if err != nil {
			return fail(err)
		}
		names = append(names, chatKeyFile)
		closeAfter, send = append(closeAfter, f), append(send, f)
	}
	font := ""
	if fc := r.fonts.Load(); fc != nil {
		f, err := memFile("nekro-fontlist", fc.data)
		if err != nil {
			return fail(err)
		}
		closeAfter, send, font = append(closeAfter, f), append(send, f), fc.name
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("sandbox output pipe: %w", err))
	}
	mine, closeAfter = append(mine, outR), append(closeAfter, outW)
	goR, goW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("sandbox release pipe: %w", err))
	}
	mine, closeAfter = append(mine, goW), append(closeAfter, goR)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("sandbox ready pipe: %w", err))
	}
	mine, closeAfter = append(mine, readyR), append(closeAfter, readyW)
	send = append(send, outW, goR, readyW, spec.Conn)
	var site any
	if dirs, ok := r.sitePaths(); ok {
		site = dirs
	}
	req, _ := json.Marshal(map[string]any{
		"uid": spec.UID, "network": l.Network, "tmp": l.TmpBytes,
		"memory": l.MemoryBytes, "file": l.FileBytes, "processes": l.Processes,
		"shared": r.chatDirAt(spec.SharedDir), "uploads": r.chatDirAt(spec.UploadsDir),
		"files": names, "files_key": set.key, "font": font, "site": site,
	})
	rights := make([]int, len(send))
	for i, f := range send {
		rights[i] = int(f.Fd())
	}
	t.ctlMu.RLock()
	err = errTemplateGone
	if !t.closed {
		err = unix.Sendmsg(int(t.ctl.Fd()), req, unix.UnixRights(rights...), nil, 0)
	}
	t.ctlMu.RUnlock()
	if err != nil {
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EBADF) {
			err = errTemplateGone
		}
		return fail(fmt.Errorf("start sandbox: %w", err))
	}
	for _, f := range closeAfter {
		f.Close()
	}
	closeAfter = nil
	// The template answers with the child's pidfd, or why it could not
	// fork.
	c, err := net.FileConn(reply)
	reply.Close()
	if err != nil {
		mine = mine[1:]
		return fail(fmt.Errorf("start sandbox: %w", err))
	}
	conn := c.(*net.UnixConn)
	mine[0] = conn
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	stop()
	conn.SetReadDeadline(time.Time{})
	var pidfd *os.File
	if oobn > 0 {
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, _ := unix.ParseUnixRights(&m)
			for _, fd := range fds {
				unix.CloseOnExec(fd)
				if pidfd == nil {
					pidfd = os.NewFile(uintptr(fd), "pidfd")
				} else {
					unix.Close(fd)
				}
			}
		}
	}
	if err != nil || string(buf[:n]) != "ok" || pidfd == nil {
		if pidfd != nil {
			unix.PidfdSendSignal(int(pidfd.Fd()), unix.SIGKILL, nil, 0)
			pidfd.Close()
		}
		if err == nil {
			err = fmt.Errorf("%s", bytes.TrimPrefix(buf[:n], []byte("error ")))
		}
		if n == 0 && err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("it ended: %s", strings.TrimSpace(t.stderr.String()))
		}
		return fail(fmt.Errorf("start sandbox: the template: %w", err))
	}
	pid := pidfdPid(pidfd)
	p0 := &tproc{r: r, pidfd: pidfd, pid: pid, reply: conn, release: goW, ready: readyR, outR: outR,
		out: sandbox.NewCappedBuffer(l.OutputBytes), copied: make(chan struct{}), status: make(chan int, 1),
		memory: l.MemoryBytes, chat: spec.SharedDir}
	go func() {
		io.Copy(p0.out, outR)
		close(p0.copied)
	}()
	go p0.readStatus()
	if r.Cgroups != nil && pid > 0 {
		var b [8]byte
		rand.Read(b[:])
		name := fmt.Sprintf("run-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
		if p0.group, err = r.Cgroups.New(name, l.MemoryBytes, l.Processes); err != nil {
			p0.Kill()
			return nil, err
		}
		// The move starts now, while the child isolates itself; Prepare
		// waits for it before the release. Unlike bwrap's, the child is
		// one process until then (boot.py forks nothing before its
		// code comes), and what it forks after the move starts in the
		// group: moving it alone is enough.
		p0.joined = make(chan struct{})
		go func() {
			defer close(p0.joined)
			p0.joinErr = p0.group.Add(pid)
		}()
	}
	return p0, nil
}

// pidfdPid is the pid, in nekro's PID namespace, of the process pidfd
// refers to (its fdinfo's Pid line); 0 when unknown.
func pidfdPid(pidfd *os.File) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd.Fd()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, _ := strconv.Atoi(strings.TrimSpace(v))
			if pid > 0 {
				return pid
			}
		}
	}
	return 0
}

// tproc is a run forked from the template: the host's side of it behaves
// as process (bwrap's) does.
type tproc struct {
	r       *Runner
	pidfd   *os.File // the run's pid 1: its whole PID namespace dies with it
	pid     int
	reply   *net.UnixConn // the template writes the exit status here
	release *os.File
	ready   *os.File
	outR    *os.File
	out     *sandbox.CappedBuffer
	copied  chan struct{}
	status  chan int
	memory  int64
	chat    string
	group   *cgroup.Group
	joined  chan struct{} // closed when the move into group is done
	joinErr error

	prepareOnce sync.Once
	prepareErr  error
	released    time.Time
	killOnce    sync.Once
	removeOnce  sync.Once
}

// readStatus waits for the template's report of the run's exit: its exit
// status, or -signal; -1 when the template died first (the run died with
// it).
func (p *tproc) readStatus() {
	buf := make([]byte, 32)
	n, err := p.reply.Read(buf)
	code := -1
	if err == nil {
		if v, perr := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); perr == nil {
			code = v
		}
	}
	p.reply.Close()
	p.status <- code
}

// Prepare waits until boot.py waits for the release, then for the run's
// move into its cgroup.
func (p *tproc) Prepare(ctx context.Context) error {
	p.prepareOnce.Do(func() {
		if p.prepareErr = awaitReady(ctx, p.ready); p.prepareErr != nil {
			return
		}
		if p.group != nil {
			<-p.joined
			p.prepareErr = p.joinErr
		}
	})
	return p.prepareErr
}

func (p *tproc) Release(ctx context.Context, code []byte) error {
	if err := p.Prepare(ctx); err != nil {
		return fmt.Errorf("release sandbox: %w", err)
	}
	p.released = time.Now()
	err := sandbox.WriteRelease(p.release, code)
	p.release.Close()
	if err != nil {
		return fmt.Errorf("release sandbox: %w (did it die while waiting?)", err)
	}
	p.r.noteRun(p.chat, code)
	return nil
}

func (p *tproc) Kill() {
	p.killOnce.Do(func() {
		unix.PidfdSendSignal(int(p.pidfd.Fd()), unix.SIGKILL, nil, 0)
	})
	p.release.Close()
	p.ready.Close()
	p.removeGroup()
}

func (p *tproc) removeGroup() {
	if p.group == nil {
		return
	}
	p.removeOnce.Do(func() {
		g := p.group
		p.r.removing.Go(func() { g.RemoveWhenEmpty(groupRemoval) })
	})
}

// Wait waits for the run's exit status, killing the run when timeout
// (from the release) passes or ctx ends, then for the end of its output.
func (p *tproc) Wait(ctx context.Context, timeout time.Duration) (*sandbox.Outcome, error) {
	o := sandbox.WaitStatus(ctx, timeout, p.released, p.Kill, p.status, p.copied, p.outR, p.out)
	p.killOnce.Do(func() {}) // the pidfd's number may be reused from here on
	p.pidfd.Close()
	if p.group != nil {
		noteOutOfMemory(o, p.group, p.memory)
		p.removeGroup()
	}
	return o, nil
}

var _ sandbox.Preparer = (*tproc)(nil)
