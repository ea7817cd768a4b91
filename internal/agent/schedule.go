package agent

// The scheduler: one worker per chat with messages waiting, turns bounded
// across chats, and turns a stopped host left behind picked up at start.

import (
	"context"
	"sync"
	"time"
)

// chatState serializes a chat's turns.
type chatState struct {
	busy    sync.Mutex // held while a turn (or a reset) runs
	running bool       // a worker goroutine exists (guarded by Agent.mu)
	pending bool       // a message arrived since the worker last looked (Agent.mu)
	waiting bool       // the worker waits for a turn slot (Agent.mu)
	cancel  context.CancelFunc
}

// Resume prepares the agent after a start: turns a stopped host left
// running are marked interrupted, and chats with unanswered messages get
// a turn. Without a model it only does the former.
func (a *Agent) Resume(ctx context.Context) error {
	n, err := a.chats.InterruptStale(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		a.log.Warn("turns interrupted by the last stop", "count", n)
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

// PollInterval is how often a serving agent looks in the database for
// messages waiting for a turn that it was not told of: those another
// process stored (`nekro chats send`, a replica sharing PostgreSQL whose
// worker is busy). One cheap indexed query per interval.
const PollInterval = time.Second

// pollWaiting schedules the chats with unclaimed messages and no turn
// running every PollInterval until Shutdown begins (a running turn's own
// worker, here or elsewhere, claims what waits behind it). A message is
// still claimed by one turn only (ClaimTurn).
func (a *Agent) pollWaiting() {
	defer a.wg.Done()
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stopPoll:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(a.base, PollInterval)
		keys, err := a.chats.IdleWaitingChats(ctx)
		cancel()
		if err != nil {
			a.log.Warn("look for waiting messages", "err", err)
			continue
		}
		for _, k := range keys {
			a.schedule(k)
		}
	}
}

func (a *Agent) stateOf(chatKey string) *chatState {
	st := a.state[chatKey]
	if st == nil {
		st = &chatState{}
		a.state[chatKey] = st
	}
	return st
}

// schedule makes sure a worker will claim the chat's waiting messages.
func (a *Agent) schedule(chatKey string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return // the messages wait in the database for the next start
	}
	st := a.stateOf(chatKey)
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
			a.mu.Unlock()
			return
		}
		st.pending, st.waiting = false, true
		a.mu.Unlock()

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
		err := a.claimAndRun(chatKey, st)
		st.busy.Unlock()
		<-a.turnSlots
		if err != nil {
			a.log.Error("turn failed", "chat", chatKey, "err", err)
		}
	}
}

// claimAndRun claims the waiting messages and answers them; messages that
// arrive during the turn set pending again, so the worker loops.
func (a *Agent) claimAndRun(chatKey string, st *chatState) error {
	ctx, cancel := context.WithTimeout(a.base, a.cfg.TurnTimeout)
	defer cancel()
	a.mu.Lock()
	st.cancel = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		st.cancel = nil
		a.mu.Unlock()
	}()
	start := time.Now()
	turn, claimed, err := a.chats.ClaimTurn(ctx, chatKey)
	if err != nil || turn == nil {
		return err
	}
	claimTime := time.Since(start)
	runs := a.runTurn(ctx, turn, claimed)
	// Record the end even when the turn's context is gone.
	err = a.chats.FinishTurn(context.WithoutCancel(ctx), turn)
	if a.cfg.Observer != nil {
		a.cfg.Observer.TurnFinished(turn.Status, time.Since(start))
	}
	a.log.Debug("turn finished", "chat", chatKey, "turn", turn.ID, "status", turn.Status, "runs", turn.Iterations,
		"total", time.Since(start), "claim", claimTime, "model", time.Duration(turn.ModelUS)*time.Microsecond, "sandbox", runs)
	return err
}
