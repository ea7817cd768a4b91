package chat

// The outbox. Every assistant message of a chat platform's chat is
// recorded in chat_outbox in the same transaction that stores it, so an
// answer written on any replica reaches the platform through whichever
// replica holds the platform's connection: that replica claims the
// outbox rows of its platform with a lease (as turns are leased), sends
// each, and deletes the row. A replica that dies mid-send leaves its
// rows leased; once the lease runs out another holder (or the same one,
// restarted) claims and sends them again. So delivery is at least once:
// a message is sent twice only when the sender dies (or loses the
// database for longer than the lease) between the platform's
// acknowledgement and the row's deletion, one statement later.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Delivery is an assistant message of a platform's chat, claimed from the
// outbox for sending.
type Delivery struct {
	Message  Message
	Platform string
	// Attempts counts the claims of this message, this one included: a
	// sender that died mid-send counts too.
	Attempts int
}

// SetOutbox makes every assistant message of a chat whose key platformOf
// accepts wait in the outbox for that platform's sender (ClaimDeliveries),
// recorded in the transaction that stores the message. Call it while the
// service is being assembled, before it is used; nil (the default)
// records nothing.
func (s *Service) SetOutbox(platformOf func(chatKey string) (platform string, ok bool)) {
	s.outboxOf = platformOf
}

// OnDelivery adds f to what is called when a message is recorded in the
// outbox: by this process, once it is committed, or, on PostgreSQL, by
// another replica, as soon as its announcement arrives. f gets the
// platform, must return at once and must not call the Service: wake the
// platform's sender and let it claim.
func (s *Service) OnDelivery(f func(platform string)) {
	s.wakeMu.Lock()
	s.outboxHooks = append(s.outboxHooks, f)
	s.wakeMu.Unlock()
}

// outboxPlatform returns the platform whose outbox records m, if any.
func (s *Service) outboxPlatform(m *Message) (string, bool) {
	if s.outboxOf == nil || m.Role != Assistant {
		return "", false
	}
	return s.outboxOf(m.ChatKey)
}

// queueDelivery records m, just inserted in tx, in the outbox of
// platform.
func (s *Service) queueDelivery(ctx context.Context, tx *sql.Tx, m *Message, platform string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO chat_outbox
		(message_id, chat_key, platform, attempts, next_at, owner, lease_until, created_at, last_error)
		VALUES ($1, $2, $3, 0, `+s.dbNow+`, '', 0, `+s.dbNow+`, '')`, m.ID, m.ChatKey, platform)
	if err != nil {
		return fmt.Errorf("queue delivery of message %d: %w", m.ID, err)
	}
	return nil
}

// wakeSenders tells the OnDelivery hooks that platform has a delivery.
func (s *Service) wakeSenders(platform string) {
	s.wakeMu.Lock()
	hooks := s.outboxHooks
	s.wakeMu.Unlock()
	for _, f := range hooks {
		f(platform)
	}
}

// claimable is the condition on an outbox row o that this replica may
// claim it: due, and not leased to a live sender.
func (s *Service) claimable(o string) string {
	return o + `next_at <= ` + s.dbNow + ` AND (` + o + `owner = '' OR ` + o + `lease_until < ` + s.dbNow + `)`
}

// ClaimDeliveries claims up to limit deliveries of platform, leased to
// this replica for the lease TTL: the oldest waiting message of each chat
// whose earlier messages are all sent, so a chat's messages go out in
// order. Renew the lease while sending (RenewDelivery), then say how it
// went (Delivered, RetryDelivery, DropDelivery). Replicas may claim at
// once: each delivery is claimed by one until its lease runs out.
func (s *Service) ClaimDeliveries(ctx context.Context, platform string, limit int) ([]Delivery, error) {
	// The claimable test is repeated outside the subquery: a concurrent
	// claim on PostgreSQL makes the UPDATE re-read the row it waited
	// for, and only the outer condition is checked again.
	rows, err := s.w.QueryContext(ctx, `UPDATE chat_outbox SET owner = $1, lease_until = `+s.dbNow+` + $2, attempts = attempts + 1
		WHERE message_id IN (SELECT o.message_id FROM chat_outbox o
			WHERE o.platform = $3 AND `+s.claimable("o.")+`
			AND NOT EXISTS (SELECT 1 FROM chat_outbox p WHERE p.chat_key = o.chat_key AND p.message_id < o.message_id)
			ORDER BY o.message_id LIMIT $4)
		AND `+s.claimable("")+`
		RETURNING message_id, attempts`, s.replica, s.leaseTTL.Microseconds(), platform, limit)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries of %s: %w", platform, err)
	}
	attempts := map[int64]int{}
	var ids []any
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim deliveries of %s: %w", platform, err)
		}
		attempts[id] = n
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim deliveries of %s: %w", platform, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	marks := make([]string, len(ids))
	for i := range ids {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	mrows, err := s.r.QueryContext(ctx, `SELECT `+messageColumns+` FROM chat_messages WHERE id IN (`+strings.Join(marks, ", ")+`) ORDER BY id`, ids...)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries of %s: %w", platform, err)
	}
	ms, err := scanMessages(mrows)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries of %s: %w", platform, err)
	}
	out := make([]Delivery, 0, len(ms))
	for _, m := range ms {
		out = append(out, Delivery{Message: m, Platform: platform, Attempts: attempts[m.ID]})
		delete(attempts, m.ID)
	}
	for id := range attempts { // the message went with its chat (reset, deleted): nothing to send
		if err := s.DropDelivery(ctx, id); err != nil {
			return out, err
		}
	}
	return out, nil
}

// RenewDelivery extends the lease of a delivery this replica claimed by
// the lease TTL; false when the lease was lost (it ran out and another
// sender may have claimed it).
func (s *Service) RenewDelivery(ctx context.Context, id int64) (bool, error) {
	res, err := s.w.ExecContext(ctx, `UPDATE chat_outbox SET lease_until = `+s.dbNow+` + $1
		WHERE message_id = $2 AND owner = $3`, s.leaseTTL.Microseconds(), id, s.replica)
	if err != nil {
		return false, fmt.Errorf("renew delivery of message %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ErrDeliveryLost is the answer of Delivered and RetryDelivery for a
// delivery this replica no longer owns: its lease ran out and another
// sender claimed it (it may be sent twice).
var ErrDeliveryLost = errors.New("the delivery's lease ran out and another sender claimed it")

// Delivered removes a delivery this replica claimed and sent.
func (s *Service) Delivered(ctx context.Context, id int64) error {
	return s.settleDelivery(ctx, id, `DELETE FROM chat_outbox WHERE message_id = $1 AND owner = $2`)
}

// RetryDelivery hands a delivery this replica could not send back to the
// outbox, to be claimed again after the given time, and keeps why it
// failed.
func (s *Service) RetryDelivery(ctx context.Context, id int64, after time.Duration, why string) error {
	if len(why) > 1000 {
		why = why[:1000]
	}
	return s.settleDelivery(ctx, id, `UPDATE chat_outbox SET owner = '', lease_until = 0, next_at = `+s.dbNow+` + $3,
		last_error = $4 WHERE message_id = $1 AND owner = $2`, after.Microseconds(), why)
}

func (s *Service) settleDelivery(ctx context.Context, id int64, query string, args ...any) error {
	res, err := s.w.ExecContext(ctx, query, append([]any{id, s.replica}, args...)...)
	if err != nil {
		return fmt.Errorf("delivery of message %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delivery of message %d: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("delivery of message %d: %w", id, ErrDeliveryLost)
	}
	return nil
}

// DropDelivery removes a delivery from the outbox whoever holds it: it is
// given up.
func (s *Service) DropDelivery(ctx context.Context, id int64) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM chat_outbox WHERE message_id = $1`, id); err != nil {
		return fmt.Errorf("drop delivery of message %d: %w", id, err)
	}
	return nil
}

// DeliveriesWaiting reports whether a delivery of platform may be claimed
// now, reading only (a sender's idle poll).
func (s *Service) DeliveriesWaiting(ctx context.Context, platform string) (bool, error) {
	var ok bool
	err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM chat_outbox WHERE platform = $1 AND `+s.claimable("")+`)`,
		platform).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("deliveries of %s: %w", platform, err)
	}
	return ok, nil
}

// ExpireDeliveries drops the deliveries, of every platform, recorded
// longer than maxAge ago and not being sent: an answer that late is
// not sent at all (no replica held its platform meanwhile). It returns
// how many it dropped.
func (s *Service) ExpireDeliveries(ctx context.Context, maxAge time.Duration) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM chat_outbox WHERE created_at < `+s.dbNow+` - $1
		AND (owner = '' OR lease_until < `+s.dbNow+`)`, maxAge.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("expire deliveries: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// PendingDeliveries counts the deliveries waiting in the outbox, by
// platform (for monitoring).
func (s *Service) PendingDeliveries(ctx context.Context) (map[string]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT platform, count(*) FROM chat_outbox GROUP BY platform`)
	if err != nil {
		return nil, fmt.Errorf("pending deliveries: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, fmt.Errorf("pending deliveries: %w", err)
		}
		out[p] = n
	}
	return out, rows.Err()
}
