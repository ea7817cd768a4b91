package chat

// Events across replicas. On PostgreSQL every event this process
// publishes is also announced on the channel nekro_chat_events (NOTIFY,
// with the ids only: a payload is capped at 8000 bytes and a message may
// be 64 KiB), and every replica listens: an event another replica
// announced is read back from its row and given to this process's
// subscribers of that chat (the API's event streams), so a stream on any
// replica carries every event of its chat. OnEvent hooks get only this
// process's own events: what they do (a platform delivery) is done once,
// by the replica that wrote the message.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// notifyChannel is the PostgreSQL channel events are announced on.
const notifyChannel = "nekro_chat_events"

// notice is what NOTIFY carries: who announced it, and the ids to read
// the event back with.
type notice struct {
	Replica string `json:"r"`
	Type    string `json:"t"`
	ChatKey string `json:"c"`
	ID      int64  `json:"i,omitempty"` // message or turn id
	RunID   string `json:"x,omitempty"`
}

// notifyQueue bounds the announcements waiting to be sent: events are
// for live streams, and a stream that misses one reads the history again.
const notifyQueue = 4096

// publish gives e to this process's hooks and subscribers and, on
// PostgreSQL, announces it to the other replicas.
func (s *Service) publish(e Event) {
	s.hub.publish(e)
	if s.notices == nil {
		return
	}
	n := notice{Replica: s.replica, Type: e.Type, ChatKey: e.ChatKey}
	switch {
	case e.Message != nil:
		n.ID = e.Message.ID
	case e.Turn != nil:
		n.ID = e.Turn.ID
	case e.Run != nil:
		n.RunID = e.Run.RunID
	}
	select {
	case s.notices <- n:
	default: // the database is slow or gone: live streams elsewhere miss it
	}
}

// startNotify starts announcing and listening for events on pool, until
// Close.
func (s *Service) startNotify(pool *pgxpool.Pool) {
	ctx, cancel := context.WithCancel(context.Background())
	s.notices = make(chan notice, notifyQueue)
	s.stopNotify = cancel
	s.notifyWG.Add(2)
	go s.announce(ctx)
	go s.listen(ctx, pool)
}

// announce sends the queued announcements, in order.
func (s *Service) announce(ctx context.Context) {
	defer s.notifyWG.Done()
	for {
		var n notice
		select {
		case <-ctx.Done():
			return
		case n = <-s.notices:
		}
		payload, _ := json.Marshal(n)
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := s.w.ExecContext(c, `SELECT pg_notify($1, $2)`, notifyChannel, string(payload)); err != nil && ctx.Err() == nil {
			s.log.Debug("announce a chat event to the other replicas", "err", err)
		}
		cancel()
	}
}

// listen holds one connection that LISTENs, reconnecting with backoff,
// and hands what other replicas announce to this process's subscribers.
func (s *Service) listen(ctx context.Context, pool *pgxpool.Pool) {
	defer s.notifyWG.Done()
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, pool, func() { wait = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		s.log.Debug("listen for other replicas' chat events; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func (s *Service) listenOnce(ctx context.Context, pool *pgxpool.Pool, listening func()) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection keeps its LISTEN: it never goes back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	listening()
	for {
		nt, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var n notice
		if json.Unmarshal([]byte(nt.Payload), &n) != nil || n.Replica == s.replica {
			continue
		}
		if n.Type == EventMessage && s.outboxOf != nil {
			// Maybe an answer another replica queued for a platform this
			// one holds: its sender looks.
			if platform, ok := s.outboxOf(n.ChatKey); ok {
				s.wakeSenders(platform)
			}
		}
		if !s.hub.watched(n.ChatKey) {
			continue
		}
		if e, ok := s.readBack(ctx, n); ok {
			s.hub.deliver(e)
		}
	}
}

// readBack rebuilds the event n announces from its row.
func (s *Service) readBack(ctx context.Context, n notice) (Event, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e := Event{Type: n.Type, ChatKey: n.ChatKey}
	switch n.Type {
	case EventReset:
		return e, true
	case EventMessage:
		rows, err := s.r.QueryContext(ctx, `SELECT `+messageColumns+` FROM chat_messages WHERE id = $1 AND chat_key = $2`, n.ID, n.ChatKey)
		if err != nil {
			return e, false
		}
		ms, err := scanMessages(rows)
		if err != nil || len(ms) != 1 {
			return e, false
		}
		e.Message = &ms[0]
	case EventTurn:
		rows, err := s.r.QueryContext(ctx, `SELECT `+turnColumns+`
			FROM chat_turns WHERE id = $1 AND chat_key = $2`, n.ID, n.ChatKey)
		if err != nil {
			return e, false
		}
		ts, err := scanTurns(rows, n.ChatKey)
		if err != nil || len(ts) != 1 {
			return e, false
		}
		e.Turn = &ts[0]
	case EventRun:
		rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM chat_runs WHERE run_id = $1 AND chat_key = $2`, n.RunID, n.ChatKey)
		if err != nil {
			return e, false
		}
		rs, err := scanRuns(rows, n.ChatKey)
		if err != nil || len(rs) != 1 {
			return e, false
		}
		e.Run = &rs[0]
	default:
		return e, false
	}
	return e, true
}
