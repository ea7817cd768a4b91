package agent

// Turn leases: this replica renews the leases of its running turns in the
// database (chat.RenewLeases) every quarter of the lease, stops a turn
// whose lease it could not renew in time (another replica may take the
// turn over once the lease runs out, and two turns must never answer one
// chat at once), and records every turn's end, retrying with backoff
// while the database or the disk fails.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
)

// Why a turn's context was cancelled, besides its timeout and Shutdown.
var (
	errReset     = errors.New("the chat was reset")
	errLeaseLost = errors.New("this replica could not renew the turn's lease in time (the database did not answer)")
)

// liveTurn is a turn this replica runs.
type liveTurn struct {
	cancel context.CancelCauseFunc
	// leaseFrom is when the request that last set the turn's lease was
	// sent: the lease lasts at least the TTL from then, by any clock.
	leaseFrom time.Time
}

// track notes a claimed turn, whose lease was set by a request sent at
// sent, for the heartbeat to renew.
func (a *Agent) track(id int64, cancel context.CancelCauseFunc, sent time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.live == nil {
		a.live = map[int64]*liveTurn{}
	}
	a.live[id] = &liveTurn{cancel: cancel, leaseFrom: sent}
	if !a.heartbeating {
		a.heartbeating = true
		a.hbWG.Add(1)
		go a.heartbeat()
	}
}

// untrack forgets a turn whose end was recorded (or given up).
func (a *Agent) untrack(id int64) {
	a.mu.Lock()
	delete(a.live, id)
	a.mu.Unlock()
}

// heartbeat renews the leases of this replica's turns until Shutdown
// has let every turn end.
func (a *Agent) heartbeat() {
	defer a.hbWG.Done()
	ttl := a.chats.LeaseTTL()
	every := ttl / 4
	// A turn stops this long before its lease can run out, so it has
	// ended before another replica may take its chat over.
	margin := ttl / 5
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-a.stopHB:
			return
		case <-t.C:
		}
		a.mu.Lock()
		ids := make([]int64, 0, len(a.live))
		for id := range a.live {
			ids = append(ids, id)
		}
		a.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), every)
		renewed, err := a.chats.RenewLeases(ctx, ids)
		cancel()
		switch {
		case err != nil && !failing:
			a.log.Warn("turn leases cannot be renewed; turns stop if this lasts", "err", err, "turns", len(ids))
			failing = true
		case err == nil && failing:
			a.log.Info("turn leases are renewed again")
			failing = false
		}
		a.mu.Lock()
		for _, id := range ids {
			lt := a.live[id]
			if lt == nil {
				continue // ended meanwhile
			}
			switch {
			case err == nil && slices.Contains(renewed, id):
				lt.leaseFrom = sent
			case err == nil:
				// Not renewed: ended here meanwhile, or its lease ran
				// out and it is (or will be) ended elsewhere.
				lt.cancel(errLeaseLost)
			case time.Since(lt.leaseFrom) > ttl-margin:
				lt.cancel(errLeaseLost)
			}
		}
		a.mu.Unlock()
	}
}

// Bounds of finish's retries.
const (
	finishTimeout    = 10 * time.Second
	maxFinishBackoff = 5 * time.Second
)

// finish records how turn ended (chat.EndTurn), retrying with backoff
// while the database or the disk fails, until it is recorded, the turn
// was ended elsewhere (its lease ran out), or the agent stops: then the
// turn's lease runs out and a replica (this one after a restart, or
// another) ends it and hands its messages back.
func (a *Agent) finish(turn *chat.Turn, end chat.TurnEnd) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		_, err := a.chats.EndTurn(ctx, turn, end)
		cancel()
		switch {
		case err == nil:
			if attempt > 1 {
				a.log.Info("the turn's end is recorded", "chat", turn.ChatKey, "turn", turn.ID, "attempts", attempt)
			}
			return nil
		case errors.Is(err, chat.ErrTurnLost):
			a.log.Warn("the turn was ended elsewhere once its lease ran out", "chat", turn.ChatKey, "turn", turn.ID)
			return nil
		case a.base.Err() != nil:
			return err // stopping: the lease runs out and the turn is ended after
		case !db.IsTransient(err) && attempt >= 5:
			return err
		case attempt == 1:
			a.log.Warn("the turn's end cannot be recorded; retrying with backoff", "chat", turn.ChatKey, "turn", turn.ID, "err", err)
		}
		select {
		case <-a.base.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, maxFinishBackoff)
	}
}

// storageProblem says, for the chat's users, what failed when err is a
// failure of the database or the disk, without its details (addresses,
// paths), which go to the log; "" for any other error.
func storageProblem(err error) string {
	switch {
	case db.IsDiskFull(err):
		return "the disk is full"
	case db.IsUnavailable(err):
		return "the database could not be reached"
	}
	return ""
}
