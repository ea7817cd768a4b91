package kv

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/nekro-go/nekro/plugin"
)

// An UpdateFunc runs while its key is locked: on SQLite the Update holds
// the database's only writer connection, on PostgreSQL the key's advisory
// lock, a pooled connection and (under a quota) the plugin's usage row. A
// store call made from inside it would wait for what its own Update holds,
// forever with context.Background(), and every write behind it with it.
//
// Two guards, the same for every engine:
//
//   - the front runs each UpdateFunc on a goroutine of its own, started at
//     runUpdateFunc. A store call whose goroutine's stack has that frame is
//     made from inside an UpdateFunc, and fails at once with
//     plugin.ErrNestedCall. Go has no goroutine ids; the stack is how a
//     call knows where it runs. It is walked only while some UpdateFunc is
//     running (fnsRunning), so a store without Updates in flight pays
//     nothing.
//   - the Update waits for its UpdateFunc at most Options.UpdateTimeout.
//     Past it the Update fails with plugin.ErrUpdateTimeout, writes nothing
//     and releases the key (and the writer); the UpdateFunc is left to
//     finish on its own goroutine and what it returns is dropped. This
//     bounds what no stack can show: an UpdateFunc that blocks on
//     something else, or hands a store call to another goroutine and
//     waits for it.

// fnsRunning counts the UpdateFuncs running in the process, abandoned ones
// included.
var fnsRunning atomic.Int64

// runnerEntry is the entry PC of runUpdateFunc.
var runnerEntry = runtime.FuncForPC(reflect.ValueOf(runUpdateFunc).Pointer()).Entry()

type fnResult struct {
	next     string
	err      error
	panicked bool
	v        any
}

// runUpdateFunc runs fn on the goroutine that marks it as an UpdateFunc
// and sends what it returns (or its panic) to out, which must be buffered.
//
//go:noinline
func runUpdateFunc(fn UpdateFunc, cur string, found bool, out chan<- fnResult) {
	defer fnsRunning.Add(-1)
	var r fnResult
	defer func() {
		if v := recover(); v != nil {
			r = fnResult{panicked: true, v: v}
		}
		out <- r
	}()
	r.next, r.err = fn(cur, found)
}

// updateFuncError marks an error returned by the plugin's own UpdateFunc.
type updateFuncError struct{ err error }

func (e *updateFuncError) Error() string { return e.err.Error() }
func (e *updateFuncError) Unwrap() error { return e.err }

// updateFuncPanic carries an UpdateFunc's panic out of the engine, to be
// raised again on the caller's goroutine.
type updateFuncPanic struct{ v any }

func (e *updateFuncPanic) Error() string { return fmt.Sprintf("update function panicked: %v", e.v) }

// callUpdateFunc runs fn for an Update and waits for it at most the
// store's UpdateTimeout, or until ctx ends.
func (s *Store) callUpdateFunc(ctx context.Context, fn UpdateFunc, cur string, found bool) (string, error) {
	out := make(chan fnResult, 1)
	fnsRunning.Add(1)
	go runUpdateFunc(fn, cur, found, out)
	t := time.NewTimer(s.upd)
	defer t.Stop()
	select {
	case r := <-out:
		switch {
		case r.panicked:
			return "", &updateFuncPanic{r.v}
		case r.err != nil:
			return "", &updateFuncError{r.err}
		}
		return r.next, nil
	case <-t.C:
		return "", fmt.Errorf("update function still running after %s, nothing written: %w", s.upd, plugin.ErrUpdateTimeout)
	case <-ctx.Done():
		return "", fmt.Errorf("update function: %w", ctx.Err())
	}
}

// nested refuses a store call made from inside an UpdateFunc.
func nested() error {
	if fnsRunning.Load() == 0 {
		return nil
	}
	var pcs [32]uintptr
	for skip := 2; ; skip += len(pcs) {
		n := runtime.Callers(skip, pcs[:])
		for _, pc := range pcs[:n] {
			if f := runtime.FuncForPC(pc - 1); f != nil && f.Entry() == runnerEntry {
				return plugin.ErrNestedCall
			}
		}
		if n < len(pcs) {
			return nil
		}
	}
}
