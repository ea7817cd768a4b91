package chat

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/keys"
)

// Database is where the chat tables live: set exactly one field, the same
// database the KV store uses.
type Database = db.Handle

// Service stores chats and broadcasts their events. It is safe for
// concurrent use.
type Service struct {
	w, r   *sql.DB // writer and reader; the same pool on PostgreSQL
	ownsDB bool    // r/w were opened here (PostgreSQL) and Close closes them
	layout files.Layout
	log    *slog.Logger
	hub    *hub

	// Turn leases (lease.go): the replica id this process's turns are
	// owned by, how long a lease lasts unless renewed, and the SQL
	// expression of the database's clock in Unix microseconds, which
	// every lease is read against (replicas' clocks never compare).
	replica  string
	leaseTTL time.Duration
	// recoveryNotice words what users read when RecoverExpired ends a
	// turn of their chat for good (SetRecoveryNotice); nil: nothing.
	recoveryNotice func(ctx context.Context, chatKey string) string
	dbNow          string

	// Events across replicas (notify.go), on PostgreSQL only.
	notices    chan notice
	stopNotify context.CancelFunc
	notifyWG   sync.WaitGroup

	wakeMu sync.Mutex
	wake   func(chatKey string) // called after a waking system message is stored

	// The outbox (outbox.go): which chats' assistant messages wait for a
	// platform's sender, and the hooks told when one is recorded.
	outboxOf    func(chatKey string) (platform string, ok bool)
	outboxHooks []func(platform string)
}

// OnWake sets what is called after a run stores a system message that
// wakes the agent (RunSender.AddSystem with wake): the agent schedules a
// turn for the chat.
func (s *Service) OnWake(f func(chatKey string)) {
	s.wakeMu.Lock()
	s.wake = f
	s.wakeMu.Unlock()
}

func (s *Service) woke(chatKey string) {
	s.wakeMu.Lock()
	f := s.wake
	s.wakeMu.Unlock()
	if f != nil {
		f(chatKey)
	}
}

// Open migrates the chat tables of d and returns a service over them.
// Attachments go under layout's uploads directories.
func Open(ctx context.Context, d Database, layout files.Layout, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{layout: layout, log: log, hub: newHub(), replica: newReplicaID(), leaseTTL: DefaultLeaseTTL}
	switch {
	case d.SQLite != nil && d.Postgres == nil:
		s.dbNow = sqliteNow
		if err := db.MigrateSQLite(ctx, d.SQLite, component, sqliteMigrations); err != nil {
			return nil, fmt.Errorf("chat: %w", err)
		}
		s.w, s.r = d.SQLite.Write, d.SQLite.Read
	case d.Postgres != nil && d.SQLite == nil:
		if err := db.MigratePostgres(ctx, d.Postgres, component, postgresMigrations); err != nil {
			return nil, fmt.Errorf("chat: %w", err)
		}
		s.dbNow = postgresNow
		pg := stdlib.OpenDBFromPool(d.Postgres)
		s.w, s.r, s.ownsDB = pg, pg, true
		s.startNotify(d.Postgres)
	default:
		return nil, errors.New("chat: give exactly one database, SQLite or PostgreSQL")
	}
	return s, nil
}

// UseLayout makes attachments (files users and runs send) go through l,
// the runtime's layout, which mounts each chat's uploads volume before it
// is written: a file written to the bare directory would be over no
// quota and hidden once the volume is mounted over it. Call it while the
// service is being assembled, before it is used.
func (s *Service) UseLayout(l files.Layout) { s.layout = l }

// Close releases the service's own handles; the database itself stays
// open for its other users.
func (s *Service) Close() error {
	if s.stopNotify != nil {
		s.stopNotify()
		s.notifyWG.Wait()
	}
	s.hub.closeAll()
	if s.ownsDB {
		return s.w.Close()
	}
	return nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// AddMessage stores m (its ID and Time are set here) and broadcasts it.
// A text over MaxTextBytes is refused (ErrTextTooLong), whoever wrote it:
// cut the host's own texts with TruncateText first.
func (s *Service) AddMessage(ctx context.Context, m Message) (Message, error) {
	if err := keys.Scope("chat", m.ChatKey); err != nil {
		return Message{}, err
	}
	if len(m.Text) > MaxTextBytes {
		return Message{}, textTooLong(len(m.Text))
	}
	switch m.Role {
	case User, Assistant, System:
	default:
		return Message{}, fmt.Errorf("message role %q is not user, assistant or system", m.Role)
	}
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	att, err := json.Marshal(m.Attachments)
	if err != nil {
		return Message{}, fmt.Errorf("add message: %w", err)
	}
	m.Time = time.Now().UTC().Truncate(time.Microsecond)
	var turn any
	switch {
	case m.TurnID != 0:
		turn = m.TurnID
	case m.Role == System && !m.Wake:
		turn = NoTurn // a system message waits for no turn unless it wakes one
	}
	if m.Wake && m.Role != System {
		return Message{}, fmt.Errorf("only a system message wakes the agent")
	}
	if m.Wake && m.TurnID != 0 {
		return Message{}, fmt.Errorf("a waking message belongs to no turn yet")
	}
	const insert = `INSERT INTO chat_messages
		(chat_key, role, sender_id, sender_name, text, attachments, turn_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`
	args := []any{m.ChatKey, string(m.Role), m.SenderID, m.SenderName, m.Text, string(att), turn, micros(m.Time)}
	platform, deliver := s.outboxPlatform(&m)
	if !deliver {
		if err := s.w.QueryRowContext(ctx, insert, args...).Scan(&m.ID); err != nil {
			return Message{}, fmt.Errorf("add message: %w", err)
		}
		s.publish(Event{Type: EventMessage, ChatKey: m.ChatKey, Message: &m})
		return m, nil
	}
	// A platform chat's answer: stored and queued for the platform's
	// sender at once, so it is sent whichever replica holds the platform.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Message{}, fmt.Errorf("add message: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, insert, args...).Scan(&m.ID); err != nil {
		return Message{}, fmt.Errorf("add message: %w", err)
	}
	if err := s.queueDelivery(ctx, tx, &m, platform); err != nil {
		return Message{}, fmt.Errorf("add message: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Message{}, fmt.Errorf("add message: %w", err)
	}
	s.publish(Event{Type: EventMessage, ChatKey: m.ChatKey, Message: &m})
	s.wakeSenders(platform)
	return m, nil
}

const messageColumns = `id, chat_key, role, sender_id, sender_name, text, attachments, turn_id, created_at`

func scanMessages(rows *sql.Rows) ([]Message, error) {
	defer rows.Close()
	out := []Message{}
	for rows.Next() {
		var (
			m    Message
			role string
			att  string
			turn sql.NullInt64
			at   int64
		)
		if err := rows.Scan(&m.ID, &m.ChatKey, &role, &m.SenderID, &m.SenderName, &m.Text, &att, &turn, &at); err != nil {
			return nil, err
		}
		m.Role, m.TurnID, m.Time = Role(role), turn.Int64, fromMicros(at)
		if err := json.Unmarshal([]byte(att), &m.Attachments); err != nil {
			return nil, fmt.Errorf("message %d: attachments: %w", m.ID, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// History returns the chat's messages, oldest first. With last > 0 only
// the last that many.
func (s *Service) History(ctx context.Context, chatKey string, last int) ([]Message, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if last > 0 {
		rows, err = s.r.QueryContext(ctx, `SELECT `+messageColumns+` FROM (
			SELECT `+messageColumns+` FROM chat_messages WHERE chat_key = $1 ORDER BY id DESC LIMIT $2
		) AS recent ORDER BY id`, chatKey, last)
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT `+messageColumns+` FROM chat_messages WHERE chat_key = $1 ORDER BY id`, chatKey)
	}
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", chatKey, err)
	}
	ms, err := scanMessages(rows)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", chatKey, err)
	}
	return ms, nil
}

// Page bounds: a page of a chat's messages, turns or runs holds at most
// MaxPageLimit items, DefaultPageLimit when the caller names no limit.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// pageLimit is limit within 1..MaxPageLimit, DefaultPageLimit for 0.
func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultPageLimit
	case limit > MaxPageLimit:
		return MaxPageLimit
	}
	return limit
}

// MessagesPage returns a page of the chat's history: the newest limit
// messages with an id below before (the newest of all when before is 0),
// oldest first. next is what to pass as before for the page of older
// messages, 0 when there are none. limit is held to 1..MaxPageLimit
// (DefaultPageLimit for 0).
func (s *Service) MessagesPage(ctx context.Context, chatKey string, limit int, before int64) (ms []Message, next int64, err error) {
	limit = pageLimit(limit)
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+messageColumns+` FROM chat_messages
		WHERE chat_key = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, chatKey, before, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("history of %s: %w", chatKey, err)
	}
	ms, err = scanMessages(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("history of %s: %w", chatKey, err)
	}
	if len(ms) > limit {
		ms = ms[:limit]
		next = ms[limit-1].ID
	}
	slices.Reverse(ms)
	return ms, next, nil
}

// Reset deletes the chat's messages and the summary of its history, and
// broadcasts a reset event. Turns and execution records are kept as the
// audit trail (their PromptContext holds counts, no text).
func (s *Service) Reset(ctx context.Context, chatKey string) (deleted int64, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("reset %s: %w", chatKey, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM chat_messages WHERE chat_key = $1`, chatKey)
	if err != nil {
		return 0, fmt.Errorf("reset %s: %w", chatKey, err)
	}
	n, _ := res.RowsAffected()
	if _, err := tx.ExecContext(ctx, `DELETE FROM chat_summaries WHERE chat_key = $1`, chatKey); err != nil {
		return 0, fmt.Errorf("reset %s: %w", chatKey, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("reset %s: %w", chatKey, err)
	}
	s.publish(Event{Type: EventReset, ChatKey: chatKey})
	return n, nil
}

// Used reports whether the chat has ever been used: it has a message, a
// turn or an execution record (a reset keeps the turns and records), or
// files in its uploads or shared directory or a volume image of them. A
// chat that is not used is new: with no members either, an API user may
// claim it by posting first.
func (s *Service) Used(ctx context.Context, chatKey string) (bool, error) {
	var used bool
	err := s.r.QueryRowContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM chat_messages WHERE chat_key = $1) OR
		EXISTS (SELECT 1 FROM chat_turns WHERE chat_key = $1) OR
		EXISTS (SELECT 1 FROM chat_runs WHERE chat_key = $1)`, chatKey).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("chat %s: is it used: %w", chatKey, err)
	}
	if used {
		return true, nil
	}
	ck := files.ContainerKey(chatKey)
	if _, err := os.Lstat(s.layout.ChatVolumeImage(ck)); err == nil {
		return true, nil
	}
	for _, dir := range []string{s.layout.UploadsDir(chatKey), s.layout.SharedDir(ck)} {
		if hasFiles(dir) {
			return true, nil
		}
		if img, ok := s.layout.VolumeImage(dir); ok {
			if _, err := os.Lstat(img); err == nil {
				return true, nil
			}
		}
	}
	return false, nil
}

// hasFiles reports whether dir exists and holds an entry; a directory
// that cannot be read counts as holding one (never claim what cannot be
// checked).
func hasFiles(dir string) bool {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) > 0 || (err != nil && !errors.Is(err, io.EOF))
}

// Turns returns the chat's turns, oldest first.
func (s *Service) Turns(ctx context.Context, chatKey string) ([]Turn, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+turnColumns+`
		FROM chat_turns WHERE chat_key = $1 ORDER BY id`, chatKey)
	if err != nil {
		return nil, fmt.Errorf("turns of %s: %w", chatKey, err)
	}
	return scanTurns(rows, chatKey)
}

// TurnsPage returns a page of the chat's turns as MessagesPage does
// messages: the newest limit turns with an id below before, oldest first,
// and the before of the older page (0 when none is left).
func (s *Service) TurnsPage(ctx context.Context, chatKey string, limit int, before int64) (ts []Turn, next int64, err error) {
	limit = pageLimit(limit)
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+turnColumns+`
		FROM chat_turns WHERE chat_key = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, chatKey, before, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("turns of %s: %w", chatKey, err)
	}
	ts, err = scanTurns(rows, chatKey)
	if err != nil {
		return nil, 0, err
	}
	if len(ts) > limit {
		ts = ts[:limit]
		next = ts[limit-1].ID
	}
	slices.Reverse(ts)
	return ts, next, nil
}

// turnColumns are the columns scanTurns reads, in its order.
const turnColumns = `id, chat_key, status, error, iterations, requests, model_us, started_at, finished_at, model_group, prompt_context`

func scanTurns(rows *sql.Rows, chatKey string) ([]Turn, error) {
	defer rows.Close()
	out := []Turn{}
	for rows.Next() {
		var (
			t      Turn
			st, ft int64
			pctx   string
		)
		if err := rows.Scan(&t.ID, &t.ChatKey, &t.Status, &t.Error, &t.Iterations, &t.Requests, &t.ModelUS, &st, &ft, &t.ModelGroup, &pctx); err != nil {
			return nil, fmt.Errorf("turns of %s: %w", chatKey, err)
		}
		t.Context = contextOf(pctx)
		t.StartedAt, t.FinishedAt = fromMicros(st), fromMicros(ft)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("turns of %s: %w", chatKey, err)
	}
	return out, nil
}

// WaitingChats returns the chats with messages waiting for a turn (user
// messages, and system messages that wake the agent) that no turn has
// claimed yet: posted just before the host stopped, or stored by another
// process on the same database (`nekro chats send`). Each half of the
// query reads one partial index, so it stays cheap enough to poll.
func (s *Service) WaitingChats(ctx context.Context) ([]string, error) {
	return s.chatKeys(ctx, waitingChats)
}

// waitingChats selects the chat_key of every chat with messages waiting
// for a turn; each half reads one partial index.
const waitingChats = `SELECT chat_key FROM chat_messages WHERE role = 'user' AND turn_id IS NULL
	UNION SELECT chat_key FROM chat_messages WHERE role = 'system' AND turn_id IS NULL`

// chatKeys runs a query selecting chat keys and returns them.
func (s *Service) chatKeys(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("waiting chats: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("waiting chats: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// IdleWaitingChats is WaitingChats without the chats that have a turn
// running (here or in another process): their waiting messages go to the
// next turn of whoever runs that one, so a poll does not start a second
// turn in the chat beside it.
func (s *Service) IdleWaitingChats(ctx context.Context) ([]string, error) {
	return s.chatKeys(ctx, `SELECT w.chat_key FROM (`+waitingChats+`) w
		WHERE NOT EXISTS (SELECT 1 FROM chat_turns t WHERE t.chat_key = w.chat_key AND t.status = $1)`, TurnRunning)
}

// RecordRun stores the execution record of a run and broadcasts it.
func (s *Service) RecordRun(ctx context.Context, r Run) error {
	if r.Time.IsZero() {
		r.Time = time.Now().UTC().Truncate(time.Microsecond)
	}
	calls := string(r.Calls)
	if calls == "" {
		calls = "[]"
	}
	// The record is for people reading runs; the next request got the
	// result itself. Results up to 16 MiB (images as data URLs) are not
	// worth keeping whole in every record.
	if len(r.AgentResult) > MaxRecordedAgentResult {
		note, _ := json.Marshal(fmt.Sprintf("[nekro: the %d-byte agent result is not kept in run records]", len(r.AgentResult)))
		r.AgentResult = note
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO chat_runs
		(run_id, chat_key, turn_id, iteration, code, output, stop_type, exit_code, duration_ms, calls, note,
		 agent_method, agent_result, created_at, model_group, prompt_context)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		r.RunID, r.ChatKey, r.TurnID, r.Iteration, r.Code, r.Output, r.StopType, r.ExitCode, r.DurationMS, calls, r.Note,
		r.AgentMethod, string(r.AgentResult), micros(r.Time), r.ModelGroup, contextColumn(r.Context))
	if err != nil {
		return fmt.Errorf("record run %s: %w", r.RunID, err)
	}
	s.publish(Event{Type: EventRun, ChatKey: r.ChatKey, Run: &r})
	return nil
}

// MaxRecordedAgentResult is the largest agent result a run record keeps.
const MaxRecordedAgentResult = 1 << 20

const runColumns = `run_id, chat_key, turn_id, iteration, code, output, stop_type, exit_code,
		duration_ms, calls, note, agent_method, agent_result, created_at, model_group, prompt_context`

// Runs returns the chat's execution records, oldest first.
func (s *Service) Runs(ctx context.Context, chatKey string) ([]Run, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+`
		FROM chat_runs WHERE chat_key = $1 ORDER BY created_at, run_id`, chatKey)
	if err != nil {
		return nil, fmt.Errorf("runs of %s: %w", chatKey, err)
	}
	return scanRuns(rows, chatKey)
}

// ErrNoSuchRun is RunsPage's answer to a before that names no run of the
// chat.
var ErrNoSuchRun = errors.New("no such run")

// RunsPage returns a page of the chat's execution records as MessagesPage
// does messages. Runs are ordered by time (then run id) and named by run
// id: before is the run id the page ends before ("" for the newest), and
// next the run id to pass for the older page ("" when none is left). A
// before naming no run of the chat fails with ErrNoSuchRun.
func (s *Service) RunsPage(ctx context.Context, chatKey string, limit int, before string) (rs []Run, next string, err error) {
	limit = pageLimit(limit)
	var rows *sql.Rows
	if before == "" {
		rows, err = s.r.QueryContext(ctx, `SELECT `+runColumns+`
			FROM chat_runs WHERE chat_key = $1 ORDER BY created_at DESC, run_id DESC LIMIT $2`, chatKey, limit+1)
	} else {
		var at int64
		err = s.r.QueryRowContext(ctx, `SELECT created_at FROM chat_runs WHERE chat_key = $1 AND run_id = $2`,
			chatKey, before).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, "", fmt.Errorf("%w %q in chat %s: pass a run_id from the chat's runs (or next_before)", ErrNoSuchRun, before, chatKey)
		}
		if err != nil {
			return nil, "", fmt.Errorf("runs of %s: %w", chatKey, err)
		}
		rows, err = s.r.QueryContext(ctx, `SELECT `+runColumns+`
			FROM chat_runs WHERE chat_key = $1 AND (created_at < $2 OR (created_at = $2 AND run_id < $3))
			ORDER BY created_at DESC, run_id DESC LIMIT $4`, chatKey, at, before, limit+1)
	}
	if err != nil {
		return nil, "", fmt.Errorf("runs of %s: %w", chatKey, err)
	}
	rs, err = scanRuns(rows, chatKey)
	if err != nil {
		return nil, "", err
	}
	if len(rs) > limit {
		rs = rs[:limit]
		next = rs[limit-1].RunID
	}
	slices.Reverse(rs)
	return rs, next, nil
}

func scanRuns(rows *sql.Rows, chatKey string) ([]Run, error) {
	defer rows.Close()
	out := []Run{}
	for rows.Next() {
		var (
			r             Run
			calls, result string
			at            int64
			pctx          string
		)
		if err := rows.Scan(&r.RunID, &r.ChatKey, &r.TurnID, &r.Iteration, &r.Code, &r.Output, &r.StopType, &r.ExitCode,
			&r.DurationMS, &calls, &r.Note, &r.AgentMethod, &result, &at, &r.ModelGroup, &pctx); err != nil {
			return nil, fmt.Errorf("runs of %s: %w", chatKey, err)
		}
		r.Context = contextOf(pctx)
		r.Calls, r.Time = json.RawMessage(calls), fromMicros(at)
		if strings.TrimSpace(result) != "" {
			r.AgentResult = json.RawMessage(result)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs of %s: %w", chatKey, err)
	}
	return out, nil
}

// Summary is one chat as the chat list shows it.
type Summary struct {
	ChatKey      string    `json:"chat_key"`
	LastMessage  Message   `json:"last_message"`
	LastActivity time.Time `json:"last_activity"`
	// TurnState is the status of the chat's latest turn ("running",
	// "done", ...), "" when it never had one.
	TurnState string `json:"turn_state"`
}

// Chats lists the chats that have messages, the most recently active
// first, each shown by its last message for people: the last that is not
// a system message (a note for the model), unless it has only those.
// At most limit, older than the message id before when it is not 0
// (pass the last listed chat's LastMessage.ID for the next page).
func (s *Service) Chats(ctx context.Context, limit int, before int64) ([]Summary, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+prefixed("m.", messageColumns)+`,
		COALESCE((SELECT t.status FROM chat_turns t WHERE t.chat_key = m.chat_key ORDER BY t.id DESC LIMIT 1), '')
		FROM chat_messages m
		JOIN (SELECT chat_key, COALESCE(MAX(CASE WHEN role <> 'system' THEN id END), MAX(id)) AS last
			FROM chat_messages GROUP BY chat_key) l ON m.id = l.last
		WHERE m.id < $1 ORDER BY m.id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("chat list: %w", err)
	}
	defer rows.Close()
	out := []Summary{}
	for rows.Next() {
		var (
			m         Message
			role, att string
			turn      sql.NullInt64
			created   int64
			state     string
		)
		if err := rows.Scan(&m.ID, &m.ChatKey, &role, &m.SenderID, &m.SenderName, &m.Text, &att, &turn, &created, &state); err != nil {
			return nil, fmt.Errorf("chat list: %w", err)
		}
		m.Role, m.TurnID, m.Time = Role(role), turn.Int64, fromMicros(created)
		json.Unmarshal([]byte(att), &m.Attachments)
		if m.Attachments == nil {
			m.Attachments = []Attachment{}
		}
		out = append(out, Summary{ChatKey: m.ChatKey, LastMessage: m, LastActivity: m.Time, TurnState: state})
	}
	return out, rows.Err()
}

// prefixed puts prefix before each of a comma-separated column list.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ", ")
	for i, p := range parts {
		parts[i] = prefix + p
	}
	return strings.Join(parts, ", ")
}
