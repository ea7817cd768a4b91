package agent

import "time"

// TurnObserver is told about every turn as it ends: its status (done,
// failed, interrupted) and how long it took from claiming its messages.
// It must return quickly; nekro's metrics implement it.
type TurnObserver interface {
	TurnFinished(status string, d time.Duration)
}

// QueueDepth returns how many chats have messages waiting for a turn:
// their worker waits for a free turn slot (Config.MaxConcurrentTurns),
// or their messages arrived while a turn of theirs runs.
func (a *Agent) QueueDepth() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, st := range a.state {
		if st.pending || st.waiting {
			n++
		}
	}
	return n
}
