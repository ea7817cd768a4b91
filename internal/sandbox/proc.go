package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// Proc is the host side of a started sandbox process, shared by the
// backends: it captures stdout and stderr through one pipe (keeping their
// interleaving) into a CappedBuffer, and turns the process's end, a
// timeout or a cancelled context into an Outcome.
type Proc struct {
	cmd      *exec.Cmd
	out      *CappedBuffer
	pr       *os.File
	copied   chan struct{}
	exited   chan error
	released time.Time
}

// StartProc starts cmd with its stdout and stderr captured, keeping at most
// outputLimit bytes.
func StartProc(cmd *exec.Cmd, outputLimit int) (*Proc, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	pw.Close()
	p := &Proc{cmd: cmd, out: NewCappedBuffer(outputLimit), pr: pr, copied: make(chan struct{}), exited: make(chan error, 1)}
	go func() {
		io.Copy(p.out, pr)
		close(p.copied)
	}()
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// Pid returns the process id of the started command.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// MarkReleased starts the run's clock.
func (p *Proc) MarkReleased() { p.released = time.Now() }

// Wait waits for the process to end, calling kill when timeout (from
// MarkReleased) passes or ctx ends. ExitCode is the command's exit status,
// -1 when it was killed.
func (p *Proc) Wait(ctx context.Context, timeout time.Duration, kill func()) (*Outcome, error) {
	o, waitErr := awaitEnd(ctx, timeout, p.released, kill, p.exited, p.copied, p.pr, p.out)
	o.ExitCode = p.cmd.ProcessState.ExitCode()
	finishOutcome(o, timeout)
	if waitErr != nil && o.ExitCode == -1 && !o.TimedOut && !o.Cancelled {
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) {
			return o, fmt.Errorf("wait for sandbox: %w", waitErr)
		}
	}
	return o, nil
}

// WaitStatus is Proc.Wait for a run that is not a command of this
// process (a child of a zygote or of the sandbox template): its exit
// status (negative: killed by a signal, or lost) arrives on status, its
// output is copied from outR into out until copied is closed.
func WaitStatus(ctx context.Context, timeout time.Duration, released time.Time, kill func(),
	status <-chan int, copied <-chan struct{}, outR io.Closer, out *CappedBuffer) *Outcome {
	o, code := awaitEnd(ctx, timeout, released, kill, status, copied, outR, out)
	o.ExitCode = code
	if code < 0 {
		o.ExitCode = -1
	}
	finishOutcome(o, timeout)
	return o
}

// awaitEnd waits for a run's end (what arrives on ended), calling kill
// when timeout from released passes or ctx ends, then for its output to
// be copied: the pipe closes when the last process holding it exits, and
// a backend's kill takes every process of the run, so that wait is short.
func awaitEnd[T any](ctx context.Context, timeout time.Duration, released time.Time, kill func(),
	ended <-chan T, copied <-chan struct{}, outR io.Closer, out *CappedBuffer) (*Outcome, T) {
	o := &Outcome{}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var end T
	select {
	case end = <-ended:
	case <-timer.C:
		o.TimedOut = true
		kill()
		end = <-ended
	case <-ctx.Done():
		o.Cancelled = true
		kill()
		end = <-ended
	}
	o.Duration = time.Since(released)
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		kill()
		outR.Close()
		<-copied
	}
	outR.Close()
	o.Output, o.Cut = out.String(), out.Cut()
	return o, end
}

// finishOutcome makes a killed run's exit code -1 and says in its output
// that it ran out of time.
func finishOutcome(o *Outcome, timeout time.Duration) {
	if o.TimedOut || o.Cancelled {
		o.ExitCode = -1
	}
	if o.TimedOut {
		o.Output += fmt.Sprintf("\n[nekro: the run was killed after exceeding its %s time limit]\n", timeout)
	}
}
