package chat

// Turns and their leases. A turn is claimed by one process, its replica,
// and owned by it for as long as the replica renews the turn's lease in
// the database (RenewLeases, every few seconds). A turn whose lease ran
// out belongs to a replica that died or lost the database: any replica
// ends it (RecoverExpired) and hands the messages it had not answered
// back, so a later turn answers them. A unique index allows one running
// turn per chat, whichever replica runs it.

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// DefaultLeaseTTL is how long a turn's lease lasts unless its replica
// renews it: how long the chats of a replica that died wait, at most,
// before another replica takes them over.
const DefaultLeaseTTL = 10 * time.Second

// MaxClaims is how many turns may claim a message: a message whose turns
// were cut off this often (a message that crashes its host, say) is not
// handed back again, and the chat is told so.
const MaxClaims = 3

// ErrTurnLost is EndTurn's answer for a turn this replica no longer owns:
// its lease ran out and another replica (or this one's recovery) ended it.
var ErrTurnLost = errors.New("the turn's lease ran out and it was ended elsewhere")

// The database's clock in Unix microseconds. Leases are set and read
// against it, never against a replica's clock, so replicas whose clocks
// disagree still agree on which leases ran out.
const (
	sqliteNow   = `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`
	postgresNow = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint`
)

// newReplicaID names this process in the turns it owns: host, pid and a
// random part, so a restarted process on the same host is another
// replica.
func newReplicaID() string {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), b)
}

// Replica returns the id of this process's replica, the owner of the
// turns it claims.
func (s *Service) Replica() string { return s.replica }

// LeaseTTL returns how long a turn's lease lasts unless renewed.
func (s *Service) LeaseTTL() time.Duration { return s.leaseTTL }

// SetLeaseTTL sets how long a turn's lease lasts unless renewed (tests
// shorten it). Call it while the service is being assembled.
func (s *Service) SetLeaseTTL(d time.Duration) {
	if d > 0 {
		s.leaseTTL = d
	}
}

// ClaimTurn starts a turn that answers every user message of the chat
// that no turn has claimed yet (and the system messages that wake the
// agent), owned by this replica with a fresh lease. It returns nil when
// nothing waits, or when a turn of the chat is running, here or on
// another replica: one turn runs per chat, and what waits goes to the
// next. Concurrent claims never hand a message to two turns.
func (s *Service) ClaimTurn(ctx context.Context, chatKey string) (*Turn, []Message, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim turn: %w", err)
	}
	defer tx.Rollback()
	t := &Turn{ChatKey: chatKey, Status: TurnRunning, StartedAt: time.Now().UTC().Truncate(time.Microsecond)}
	err = tx.QueryRowContext(ctx, `INSERT INTO chat_turns
		(chat_key, status, error, iterations, requests, model_us, started_at, finished_at, owner, lease_until)
		VALUES ($1, $2, '', 0, 0, 0, $3, 0, $4, `+s.dbNow+` + $5) ON CONFLICT DO NOTHING RETURNING id`,
		chatKey, t.Status, micros(t.StartedAt), s.replica, s.leaseTTL.Microseconds()).Scan(&t.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, nil // the chat's running turn answers what waits, or its successor does
	}
	if err != nil {
		return nil, nil, fmt.Errorf("claim turn: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `UPDATE chat_messages SET turn_id = $1, claims = claims + 1
		WHERE chat_key = $2 AND role IN ('user', 'system') AND turn_id IS NULL RETURNING `+messageColumns, t.ID, chatKey)
	if err != nil {
		return nil, nil, fmt.Errorf("claim turn: %w", err)
	}
	claimed, err := scanMessages(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("claim turn: %w", err)
	}
	if len(claimed) == 0 {
		return nil, nil, nil // the rollback drops the turn
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("claim turn: %w", err)
	}
	slices.SortFunc(claimed, func(a, b Message) int { return cmp.Compare(a.ID, b.ID) })
	s.publish(Event{Type: EventTurn, ChatKey: chatKey, Turn: t})
	return t, claimed, nil
}

// TurnEnd is what EndTurn does besides recording how the turn ended.
type TurnEnd struct {
	// Note, when not empty, is stored as a system message of the turn:
	// why the turn failed, what happens now, for the model's later turns
	// and the operator (it may name the host's internals; the API shows
	// system messages to operators only).
	Note string
	// Notice, when not empty, is what the chat's users read (an
	// assistant message, which chat platforms deliver) when the turn
	// stored no answer and hands no message back to the next turn: one
	// short sentence saying the assistant could not answer, with no
	// internals. A turn whose messages the next turn answers says
	// nothing to the users: the answer is on its way.
	Notice string
	// Retry hands the messages the turn claimed back to the chat, to be
	// claimed by the next turn, unless the turn stored an answer (an
	// assistant message) or the messages were claimed MaxClaims times:
	// for a turn that the host, not the model, cut short (the database
	// or disk failed, the replica lost its lease or stopped).
	Retry bool
}

// FinishTurn records how t ended and broadcasts it: EndTurn with nothing
// else to do.
func (s *Service) FinishTurn(ctx context.Context, t *Turn) error {
	_, err := s.EndTurn(ctx, t, TurnEnd{})
	return err
}

// EndTurn records how t ended, stores end's note and hands its messages
// back when end says Retry, in one transaction, and broadcasts it all.
// It returns how many messages were handed back. A turn this replica no
// longer owns (another ended it when its lease ran out) is left as it is:
// ErrTurnLost.
func (s *Service) EndTurn(ctx context.Context, t *Turn, end TurnEnd) (released int, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("finish turn %d: %w", t.ID, err)
	}
	defer tx.Rollback()
	finished := time.Now().UTC().Truncate(time.Microsecond)
	res, err := tx.ExecContext(ctx, `UPDATE chat_turns SET status = $1, error = $2, iterations = $3, requests = $4,
		model_us = $5, finished_at = $6, model_group = $10, prompt_context = $11 WHERE id = $7 AND status = $8 AND owner = $9`,
		t.Status, t.Error, t.Iterations, t.Requests, t.ModelUS, micros(finished), t.ID, TurnRunning, s.replica, t.ModelGroup,
		contextColumn(t.Context))
	if err != nil {
		return 0, fmt.Errorf("finish turn %d: %w", t.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("finish turn %d: %w", t.ID, err)
	} else if n == 0 {
		return 0, fmt.Errorf("finish turn %d: %w", t.ID, ErrTurnLost)
	}
	note, released, err := s.settle(ctx, tx, t.ID, t.ChatKey, end, false)
	if err != nil {
		return 0, fmt.Errorf("finish turn %d: %w", t.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("finish turn %d: %w", t.ID, err)
	}
	t.FinishedAt = finished
	for _, m := range note {
		s.publish(Event{Type: EventMessage, ChatKey: m.ChatKey, Message: m})
		if platform, ok := s.outboxPlatform(m); ok {
			s.wakeSenders(platform)
		}
	}
	cp := *t
	s.publish(Event{Type: EventTurn, ChatKey: t.ChatKey, Turn: &cp})
	return released, nil
}

// settle does, in tx, what end asks of the end of turn id in chatKey:
// hand its messages back and store the note, which then also says what
// became of them. It returns the stored note, if any. A turn that died
// with its replica (counted) counts towards its messages' MaxClaims; one
// its live owner hands back (the database failed, the replica stops)
// does not.
func (s *Service) settle(ctx context.Context, tx *sql.Tx, id int64, chatKey string, end TurnEnd, counted bool) ([]*Message, int, error) {
	text := end.Note
	add := func(more string) {
		if text != "" {
			text += " "
		}
		text += more
	}
	released := 0
	var answered bool
	if end.Retry || end.Notice != "" {
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM chat_messages
			WHERE chat_key = $1 AND turn_id = $2 AND role = 'assistant')`, chatKey, id).Scan(&answered); err != nil {
			return nil, 0, err
		}
	}
	if end.Retry {
		if answered {
			add("It was cut off after it had begun answering, so it is not answered again: ask again if the answer is incomplete.")
		} else {
			uncount := 1
			if counted {
				uncount = 0
			}
			res, err := tx.ExecContext(ctx, `UPDATE chat_messages SET turn_id = NULL, claims = claims - $4
				WHERE chat_key = $1 AND turn_id = $2 AND claims > 0 AND claims - $4 < $3`, chatKey, id, MaxClaims, uncount)
			if err != nil {
				return nil, 0, err
			}
			n, _ := res.RowsAffected()
			released = int(n)
			var spent int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM chat_messages
				WHERE chat_key = $1 AND turn_id = $2 AND claims >= $3`, chatKey, id, MaxClaims).Scan(&spent); err != nil {
				return nil, 0, err
			}
			if released > 0 {
				add(fmt.Sprintf("The %d message(s) it was answering are answered by the next turn.", released))
			}
			if spent > 0 {
				add(fmt.Sprintf("%d message(s) are not tried again: the %d turns that took them up were all cut off.", spent, MaxClaims))
			}
		}
	}
	var notes []*Message
	if text != "" {
		m := &Message{ChatKey: chatKey, Role: System, SenderID: SystemID, SenderName: "SYSTEM", Text: TruncateText(text)}
		notes = append(notes, m)
	}
	if end.Notice != "" && !answered && released == 0 {
		notes = append(notes, &Message{ChatKey: chatKey, Role: Assistant, SenderID: AssistantID, SenderName: "assistant",
			Text: TruncateText(end.Notice)})
	}
	for _, m := range notes {
		m.Attachments, m.TurnID, m.Time = []Attachment{}, id, time.Now().UTC().Truncate(time.Microsecond)
		if err := tx.QueryRowContext(ctx, `INSERT INTO chat_messages
			(chat_key, role, sender_id, sender_name, text, attachments, turn_id, created_at)
			VALUES ($1, $2, $3, $4, $5, '[]', $6, $7) RETURNING id`,
			m.ChatKey, string(m.Role), m.SenderID, m.SenderName, m.Text, id, micros(m.Time)).Scan(&m.ID); err != nil {
			return nil, 0, err
		}
		if platform, ok := s.outboxPlatform(m); ok {
			if err := s.queueDelivery(ctx, tx, m, platform); err != nil {
				return nil, 0, err
			}
		}
	}
	return notes, released, nil
}

// RenewLeases extends the leases of this replica's running turns among
// ids by the lease TTL and returns the ids it extended. A lease that has
// already run out is not extended: another replica may be ending that
// turn, and its owner must stop it.
func (s *Service) RenewLeases(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := []any{s.replica, s.leaseTTL.Microseconds(), TurnRunning}
	marks := make([]string, len(ids))
	for i, id := range ids {
		args = append(args, id)
		marks[i] = fmt.Sprintf("$%d", len(args))
	}
	rows, err := s.w.QueryContext(ctx, `UPDATE chat_turns SET lease_until = `+s.dbNow+` + $2
		WHERE owner = $1 AND status = $3 AND lease_until >= `+s.dbNow+` AND id IN (`+strings.Join(marks, ", ")+`)
		RETURNING id`, args...)
	if err != nil {
		return nil, fmt.Errorf("renew turn leases: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("renew turn leases: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("renew turn leases: %w", err)
	}
	return out, nil
}

// Recovered is a turn RecoverExpired ended.
type Recovered struct {
	Turn     Turn
	Owner    string // the replica that owned it
	Released int    // messages handed back to the chat
}

// RecoverExpired ends the running turns whose lease ran out, whichever
// replica owned them (one that died, or lost the database for longer
// than the lease): each is marked interrupted, the messages it had not
// answered are handed back to its chat for the next turn, and a note in
// the chat says so. Live replicas' turns are never touched. Replicas may
// call it at once: each turn is ended by one.
func (s *Service) RecoverExpired(ctx context.Context) ([]Recovered, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, chat_key FROM chat_turns WHERE status = $1 AND lease_until < `+s.dbNow, TurnRunning)
	if err != nil {
		return nil, fmt.Errorf("expired turns: %w", err)
	}
	var (
		ids      []int64
		chatKeys []string
	)
	for rows.Next() {
		var (
			id  int64
			key string
		)
		if err := rows.Scan(&id, &key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("expired turns: %w", err)
		}
		ids, chatKeys = append(ids, id), append(chatKeys, key)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expired turns: %w", err)
	}
	var out []Recovered
	for i, id := range ids {
		// The notice is worded before the transaction: wording it may
		// read the database (the chat's persona), which must not wait
		// on the transaction's own connection (SQLite has one writer).
		notice := ""
		if f := s.recoveryNotice; f != nil {
			notice = f(ctx, chatKeys[i])
		}
		r, ok, err := s.recover(ctx, id, notice)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// SetRecoveryNotice sets what the users of a chat read when one of its
// turns ended by RecoverExpired cannot be tried again (TurnEnd.Notice):
// the agent's words, in the chat's language. Call it before serving.
func (s *Service) SetRecoveryNotice(f func(ctx context.Context, chatKey string) string) {
	s.recoveryNotice = f
}

// interruptedNote is what a chat reads when a turn of it was cut off
// with its replica.
const interruptedNote = "nekro: the turn answering this was cut off: the nekro process running it stopped, or lost its database, mid-turn."

// recover ends turn id if it is still running with its lease run out,
// leaving notice for the chat's users if it cannot be tried again.
func (s *Service) recover(ctx context.Context, id int64, notice string) (Recovered, bool, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Recovered{}, false, fmt.Errorf("recover turn %d: %w", id, err)
	}
	defer tx.Rollback()
	var owner string
	var t Turn
	var st, ft int64
	err = tx.QueryRowContext(ctx, `UPDATE chat_turns SET status = $1, error = $2, finished_at = $3
		WHERE id = $4 AND status = $5 AND lease_until < `+s.dbNow+`
		RETURNING id, chat_key, status, error, iterations, requests, model_us, started_at, finished_at, model_group, owner`,
		TurnInterrupted, "its replica stopped renewing the turn's lease (it died or lost the database)",
		micros(time.Now()), id, TurnRunning).Scan(&t.ID, &t.ChatKey, &t.Status, &t.Error, &t.Iterations, &t.Requests,
		&t.ModelUS, &st, &ft, &t.ModelGroup, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return Recovered{}, false, nil // renewed, finished or recovered meanwhile
	}
	if err != nil {
		return Recovered{}, false, fmt.Errorf("recover turn %d: %w", id, err)
	}
	t.StartedAt, t.FinishedAt = fromMicros(st), fromMicros(ft)
	end := TurnEnd{Note: interruptedNote, Retry: true, Notice: notice}
	note, released, err := s.settle(ctx, tx, t.ID, t.ChatKey, end, true)
	if err != nil {
		return Recovered{}, false, fmt.Errorf("recover turn %d: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return Recovered{}, false, fmt.Errorf("recover turn %d: %w", id, err)
	}
	for _, m := range note {
		s.publish(Event{Type: EventMessage, ChatKey: m.ChatKey, Message: m})
		if platform, ok := s.outboxPlatform(m); ok {
			s.wakeSenders(platform)
		}
	}
	cp := t
	s.publish(Event{Type: EventTurn, ChatKey: t.ChatKey, Turn: &cp})
	return Recovered{Turn: t, Owner: owner, Released: released}, true, nil
}
