package agent

// The scheduler: one worker per chat with messages waiting, turns bounded
// across chats, and turns a stopped host left behind picked up at start.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
)

// chatState serializes a chat's turns.
type chatState struct {
	busy    sync.Mutex // held while a turn (or a reset) runs
	running bool       // a worker goroutine exists (guarded by Agent.mu)
	pending bool       // a message arrived since the worker last looked (Agent.mu)
	waiting bool       // the worker waits for a turn slot (Agent.mu)
	cancel  context.CancelFunc
	// resets counts Resets holding this state (Agent.mu): a state in use
	// stays in Agent.state, so a reset and the chat's next worker share
	// one busy lock.
	resets int
	// hold is set while the chat's last turn was cut short by storage
	// (storage.go); only the chat's worker touches it.
	hold storageHold
}

// Resume prepares the agent after a start: turns whose replica died
// (their lease ran out) are ended and their unanswered messages handed
// back, and chats with messages waiting get a turn. A turn another live
// replica runs is never touched. Without a model it only does the former.
func (a *Agent) Resume(ctx context.Context) error {
	if err := a.recoverExpired(ctx); err != nil {
		return err
	}
	if a.ModelError() != nil {
		return nil // nobody could answer them; they wait for a model
	}
	keys, err := a.chats.WaitingChats(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		a.schedule(k)
	}
	a.wg.Add(1)
	go a.pollWaiting()
	return nil
}

// recoverExpired ends the turns whose lease ran out (chat.RecoverExpired)
// and says so in the log.
func (a *Agent) recoverExpired(ctx context.Context) error {
	rec, err := a.chats.RecoverExpired(ctx)
	for _, r := range rec {
		a.log.Warn("took over a turn whose replica stopped renewing its lease", "chat", r.Turn.ChatKey, "turn", r.Turn.ID,
			"owner", r.Owner, "handed_back", r.Released)
		if r.Owner == a.chats.Replica() { // ours, still going here: stop it
			a.mu.Lock()
			if lt := a.live[r.Turn.ID]; lt != nil {
				lt.cancel(errLeaseLost)
			}
			a.mu.Unlock()
		}
	}
	return err
}

// PollInterval is how often a serving agent looks in the database for
// messages waiting for a turn that it was not told of: those another
// process stored (`nekro chats send`, a replica sharing PostgreSQL whose
// worker is busy), and those handed back by turns whose replica died.
// Two cheap indexed queries per interval.
const PollInterval = time.Second

// maxPollBackoff bounds the wait between polls while the database fails:
// once it answers again, every chat is served within about this long.
const maxPollBackoff = 5 * time.Second

// pollWaiting, every PollInterval until Shutdown begins, ends the turns
// whose lease ran out and schedules the chats with unclaimed messages and
// no turn running (a running turn's own worker, here or elsewhere, claims
// what waits behind it). A message is still claimed by one turn at a
// time (ClaimTurn). While the database fails it backs off, up to
// maxPollBackoff.
func (a *Agent) pollWaiting() {
	defer a.wg.Done()
	wait, failing := PollInterval, false
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-a.stopPoll:
			return
		case <-t.C:
		}
		err := a.pollOnce()
		switch {
		case err != nil && !failing:
			a.log.Warn("the database cannot be polled for waiting messages; retrying with backoff", "err", err)
			failing = true
		case err == nil && failing:
			a.log.Info("the database answers again; polling for waiting messages as usual")
			failing = false
		}
		if err != nil {
			wait = min(wait*2, maxPollBackoff)
		} else {
			wait = PollInterval
		}
		t.Reset(wait)
	}
}

// pollOnce is one look of pollWaiting.
func (a *Agent) pollOnce() error {
	ctx, cancel := context.WithTimeout(a.base, maxPollBackoff)
	defer cancel()
	if err := a.recoverExpired(ctx); err != nil {
		return err
	}
	keys, err := a.chats.IdleWaitingChats(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		a.schedule(k)
	}
	return nil
}

func (a *Agent) stateOf(chatKey string) *chatState {
	st := a.state[chatKey]
	if st == nil {
		st = &chatState{}
		a.state[chatKey] = st
	}
	return st
}

// dropIdle forgets the chat's state (under a.mu) once nothing uses it: no
// worker, no message pending, no reset holding it, no storage hold to
// remember. A server that has seen a million chats keeps states only for
// the chats active now (issue 26: memory bounded by the chats in flight).
func (a *Agent) dropIdle(chatKey string, st *chatState) {
	if st.running || st.pending || st.waiting || st.resets > 0 || st.cancel != nil || st.hold.cuts > 0 {
		return
	}
	if a.state[chatKey] == st {
		delete(a.state, chatKey)
	}
}

// schedule makes sure a worker will claim the chat's waiting messages.
func (a *Agent) schedule(chatKey string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return // the messages wait in the database for the next start
	}
	st := a.stateOf(chatKey)
	if st.running && st.waiting {
		// Its worker has not claimed yet, and its claim takes every
		// message stored by now. Marking it pending would have the
		// worker claim once more after its turn, for nothing: the poll
		// finds every chat whose messages wait for a turn slot, each
		// second, and under load that was 190 empty claims (a write
		// transaction each) in 400 turns.
		return
	}
	st.pending = true
	if st.running {
		return
	}
	st.running = true
	a.wg.Add(1)
	go a.worker(chatKey, st)
}

// worker runs the chat's turns until no message waits.
func (a *Agent) worker(chatKey string, st *chatState) {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		if !st.pending || a.closing {
			st.running = false
			a.dropIdle(chatKey, st)
			a.mu.Unlock()
			return
		}
		st.pending, st.waiting = false, true
		a.mu.Unlock()

		if !a.waitStorage(chatKey, st) {
			a.mu.Lock()
			st.running, st.waiting = false, false
			a.mu.Unlock()
			return
		}
		select {
		case a.turnSlots <- struct{}{}:
			a.mu.Lock()
			st.waiting = false
			a.mu.Unlock()
		case <-a.base.Done():
			a.mu.Lock()
			st.running, st.waiting = false, false
			a.mu.Unlock()
			return
		}
		st.busy.Lock()
		cut, err := a.claimAndRun(chatKey, st)
		st.busy.Unlock()
		st.hold.after(cut)
		<-a.turnSlots
		if err != nil {
			a.log.Error("turn failed", "chat", chatKey, "err", err)
		}
	}
}

// claimAndRun claims the waiting messages and answers them; messages that
// arrive during the turn set pending again, so the worker loops. cut says
// the storage cut the turn short and its messages wait for the next.
func (a *Agent) claimAndRun(chatKey string, st *chatState) (cut bool, err error) {
	stop, cancel := context.WithCancelCause(a.base)
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeout(stop, a.cfg.TurnTimeout)
	defer cancelTimeout()
	a.mu.Lock()
	st.cancel = func() { cancel(errReset) }
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		st.cancel = nil
		a.mu.Unlock()
	}()
	start := time.Now()
	turn, claimed, err := a.chats.ClaimTurn(ctx, chatKey)
	if err != nil || turn == nil {
		return false, err
	}
	a.track(turn.ID, cancel, start)
	defer a.untrack(turn.ID)
	claimTime := time.Since(start)
	runs, end := a.runTurn(ctx, turn, claimed)
	cut = end.Retry && turn.Status == chat.TurnInterrupted // failStorage's mark; the cases below are not the storage's
	// A turn the host cut short, not the model (the replica is stopping,
	// or lost its lease), hands its messages back for the next turn, and
	// the chat is told why rather than what the cancelled call said.
	if turn.Status != chat.TurnDone {
		switch {
		case errors.Is(context.Cause(ctx), errLeaseLost):
			turn.Status, turn.Error = chat.TurnInterrupted, "stopped: "+errLeaseLost.Error()
			end.Note, end.Retry = "nekro: the turn was stopped: the database did not answer for too long.", true
		case a.base.Err() != nil:
			turn.Status, turn.Error = chat.TurnInterrupted, "stopped: nekro is shutting down"
			end.Note, end.Retry = "nekro: the turn was stopped: nekro is shutting down.", true
		}
	}
	// Record the end even when the turn's context is gone.
	err = a.finish(turn, end)
	a.turnEnded(chatKey)
	if a.cfg.Observer != nil {
		a.cfg.Observer.TurnFinished(turn.Status, time.Since(start))
	}
	a.log.Debug("turn finished", "chat", chatKey, "turn", turn.ID, "status", turn.Status, "runs", turn.Iterations,
		"total", time.Since(start), "claim", claimTime, "model", time.Duration(turn.ModelUS)*time.Microsecond, "sandbox", runs)
	// The answer is out: now is the time to summarize older history
	// for the next turn, when it nears the window (a reset cancels it).
	if stop.Err() == nil {
		a.afterTurn(stop, chatKey, turn.Context)
	}
	return cut, err
}
