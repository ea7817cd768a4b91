package agent

// Held chats. A turn cut short by the storage (the disk full, the
// database unreachable: failStorage) hands its messages back, and the
// next turn would ask the model again at once, and again, for as long as
// the storage fails: on a long outage every chat costs a model request
// every few seconds and answers nothing. So the chat's worker holds the
// chat after such a turn: it waits a backoff (holdFirst, doubling up to
// holdMax) and, when Config.Storage is set, until the data directory can
// take writes again, checked every holdCheck, before it claims again.
// A full disk then costs no model request until space is freed, and any
// other storage failure one per chat per backoff.

import (
	"time"
)

// Bounds of a held chat's wait.
const (
	holdFirst = time.Second
	holdMax   = 30 * time.Second
	holdCheck = time.Second
)

// storageHold is a chat's backoff after turns the storage cut short.
type storageHold struct {
	cuts  int       // turns cut short in a row
	until time.Time // no claim before
}

// after notes how the chat's last turn went: cut short by the storage
// (the hold grows) or not (it ends).
func (h *storageHold) after(cut bool) {
	if !cut {
		h.cuts, h.until = 0, time.Time{}
		return
	}
	h.cuts++
	wait := holdFirst << min(h.cuts-1, 10)
	h.until = time.Now().Add(min(wait, holdMax))
}

// waitStorage waits while the chat is held: its backoff, then until the
// storage can take writes. It returns false when the agent stops
// meanwhile.
func (a *Agent) waitStorage(chatKey string, st *chatState) bool {
	h := &st.hold
	if h.cuts == 0 {
		return true
	}
	logged := false
	for {
		wait := time.Until(h.until)
		if wait <= 0 {
			err := error(nil)
			if a.cfg.Storage != nil {
				err = a.cfg.Storage()
			}
			if err == nil {
				if logged {
					a.log.Info("storage can take writes again; the chat's messages are answered", "chat", chatKey)
				}
				return true
			}
			if !logged {
				a.log.Warn("the chat's messages wait until the storage can take writes", "chat", chatKey, "err", err)
				logged = true
			}
			wait = holdCheck
		}
		select {
		case <-a.base.Done():
			return false
		case <-a.stopPoll:
			return false
		case <-time.After(wait):
		}
	}
}
