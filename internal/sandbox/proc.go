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
	o := &Outcome{}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	select {
	case waitErr = <-p.exited:
	case <-timer.C:
		o.TimedOut = true
		kill()
		waitErr = <-p.exited
	case <-ctx.Done():
		o.Cancelled = true
		kill()
		waitErr = <-p.exited
	}
	o.Duration = time.Since(p.released)
	// The pipe closes when the last process holding it exits; a backend's
	// kill takes every process of the run, so this wait is short.
	select {
	case <-p.copied:
	case <-time.After(5 * time.Second):
		kill()
		p.pr.Close()
		<-p.copied
	}
	p.pr.Close()
	o.Output = p.out.String()
	o.Cut = p.out.Cut()
	o.ExitCode = p.cmd.ProcessState.ExitCode()
	if o.TimedOut || o.Cancelled {
		o.ExitCode = -1
	}
	if o.TimedOut {
		o.Output += fmt.Sprintf("\n[nekro: the run was killed after exceeding its %s time limit]\n", timeout)
	}
	if waitErr != nil && o.ExitCode == -1 && !o.TimedOut && !o.Cancelled {
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) {
			return o, fmt.Errorf("wait for sandbox: %w", waitErr)
		}
	}
	return o, nil
}
