// Package sandboxtest is a scripted sandbox.Runner for tests of what sits
// above the sandbox (the runtime's stop decision, the agent's turn loop):
// the "code" of a run is a small script, not Python, executed in the test
// process. Each run talks to the host's real RPC server over the
// descriptor the runtime hands it (Spec.Conn), so method calls, their
// results and errors, BEHAVIOR records and AGENT endings are the real
// ones; only the interpreter and its isolation are left out. Tests of the
// sandbox itself use the real backends.
//
// A script has one command per line (blank lines and lines starting with
// # are skipped):
//
//	print TEXT          TEXT and a newline go to the run's output
//	call METHOD ARGS    calls METHOD with ARGS (a JSON object) and prints
//	                    "METHOD -> RESULT" or "METHOD !! TYPE: MESSAGE"
//	exit N              the run ends with exit status N (8: after an
//	                    AGENT call, as the real stubs do)
//	sleep DURATION      waits (time.ParseDuration)
//	hang                waits until the run is killed (its timeout, or
//	                    the caller's context)
//
// A script that ends without exit ends with status 0; an unknown command
// ends it with status 1 and says why in the output, as a Python error
// would.
package sandboxtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/sandbox"
)

// Runner runs scripts. The zero value is ready; it is safe for
// concurrent use.
type Runner struct {
	mu   sync.Mutex
	runs []string // the scripts released, in order
}

// Scripts returns the code of every run released so far, in order.
func (r *Runner) Scripts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.runs...)
}

// PassesConn says that runs get their RPC connection as Spec.Conn.
func (r *Runner) PassesConn() bool { return true }

// Check always succeeds: nothing is needed.
func (r *Runner) Check(context.Context) error { return nil }

// Start makes a run that waits for its script.
func (r *Runner) Start(_ context.Context, spec sandbox.Spec) (sandbox.Process, error) {
	if spec.Conn == nil {
		return nil, fmt.Errorf("sandboxtest: the run has no RPC connection (Spec.Conn)")
	}
	ctl, err := dup(spec.Conn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &process{runner: r, ctl: ctl, ctx: ctx, cancel: cancel, done: make(chan struct{})}, nil
}

// dup keeps the run's own copy of the control socket: the caller closes
// its copy once Start returns.
func dup(f *os.File) (*net.UnixConn, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("sandboxtest: control socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("sandboxtest: control socket is a %T", c)
	}
	return uc, nil
}

type process struct {
	runner *Runner
	ctl    *net.UnixConn
	ctx    context.Context
	cancel context.CancelFunc

	once     sync.Once
	released time.Time
	done     chan struct{}
	out      strings.Builder
	exit     int
}

func (p *process) Release(_ context.Context, code []byte) error {
	started := false
	p.once.Do(func() {
		started = true
		p.released = time.Now()
		p.runner.mu.Lock()
		p.runner.runs = append(p.runner.runs, string(code))
		p.runner.mu.Unlock()
		go p.run(string(code))
	})
	if !started {
		return fmt.Errorf("sandboxtest: released twice")
	}
	return nil
}

func (p *process) Wait(ctx context.Context, timeout time.Duration) (*sandbox.Outcome, error) {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	o := &sandbox.Outcome{}
	select {
	case <-p.done:
	case <-timer:
		o.TimedOut = true
	case <-ctx.Done():
		o.Cancelled = true
	}
	p.cancel()
	<-p.done
	o.ExitCode, o.Output, o.Duration = p.exit, p.out.String(), time.Since(p.released)
	if o.TimedOut || o.Cancelled {
		o.ExitCode = -1
	}
	return o, nil
}

func (p *process) Kill() {
	p.cancel()
	p.once.Do(func() { go p.run("") }) // never released: end at once
}

// run executes the script, then closes the control socket: the host's
// server sees the run's last process gone.
func (p *process) run(script string) {
	defer close(p.done)
	defer p.ctl.Close()
	p.exit = p.execute(script)
}

func (p *process) execute(script string) int {
	var conn *rpcConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for _, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if p.ctx.Err() != nil {
			return -1
		}
		cmd, rest, _ := strings.Cut(line, " ")
		switch cmd {
		case "print":
			fmt.Fprintln(&p.out, rest)
		case "exit":
			n, err := strconv.Atoi(rest)
			if err != nil {
				fmt.Fprintf(&p.out, "sandboxtest: exit %q: not a number\n", rest)
				return 1
			}
			return n
		case "sleep":
			d, err := time.ParseDuration(rest)
			if err != nil {
				fmt.Fprintf(&p.out, "sandboxtest: sleep %q: %v\n", rest, err)
				return 1
			}
			select {
			case <-time.After(d):
			case <-p.ctx.Done():
				return -1
			}
		case "hang":
			<-p.ctx.Done()
			return -1
		case "call":
			method, args, _ := strings.Cut(rest, " ")
			if args == "" {
				args = "{}"
			}
			if conn == nil {
				c, err := connect(p.ctl)
				if err != nil {
					fmt.Fprintf(&p.out, "sandboxtest: connect: %v\n", err)
					return 1
				}
				conn = c
			}
			result, rpcErr, err := conn.call(p.ctx, method, json.RawMessage(args))
			switch {
			case err != nil:
				fmt.Fprintf(&p.out, "sandboxtest: call %s: %v\n", method, err)
				return 1
			case rpcErr != nil:
				fmt.Fprintf(&p.out, "%s !! %s: %s\n", method, rpcErr.Type, rpcErr.Message)
			default:
				fmt.Fprintf(&p.out, "%s -> %s\n", method, result)
			}
		default:
			fmt.Fprintf(&p.out, "sandboxtest: unknown command %q\n", cmd)
			return 1
		}
	}
	return 0
}

// rpcConn is one connection to the run's RPC server, asked for on the
// control socket as the real stubs ask (rpc.ListenPassed).
type rpcConn struct {
	net.Conn
	r  *bufio.Reader
	id int
}

type rpcError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func connect(ctl *net.UnixConn) (*rpcConn, error) {
	if _, err := ctl.Write([]byte{'c'}); err != nil {
		return nil, err
	}
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := ctl.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("no connection passed (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("no connection passed (%v)", err)
	}
	f := os.NewFile(uintptr(fds[0]), "rpc-conn")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	return &rpcConn{Conn: c, r: bufio.NewReader(c)}, nil
}

func (c *rpcConn) call(ctx context.Context, method string, args json.RawMessage) (json.RawMessage, *rpcError, error) {
	c.id++
	req, err := json.Marshal(map[string]any{"id": c.id, "method": method, "args": args})
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(append(req, '\n')); err != nil {
		return nil, nil, err
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, nil, err
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, nil, fmt.Errorf("response %q: %w", line, err)
	}
	return resp.Result, resp.Error, nil
}
