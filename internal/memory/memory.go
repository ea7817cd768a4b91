// Package memory is nekro's long-term memory: durable facts about a chat
// and about each of its users, extracted from the chat's messages after
// turns by a memory model and recalled into later turns' prompts.
//
// What it keeps, and where:
//
//   - each memory is a row of the table memories in nekro's database
//     (SQLite or PostgreSQL): the chat it was learned in, the user it is
//     about ("" for the chat itself), its text and times;
//   - its embedding is an item of internal/vector with the memory's id,
//     in the scope ChatScope(chat) or UserScope(chat, user) (or
//     UserScope("", user) when the operator lets user memories follow
//     users across chats);
//   - memory_chats holds, per chat, the last message extracted (so a
//     message is read once, and a deleted memory is never extracted again
//     from old messages), the extraction budget's window and a count of
//     deletions (so an extraction that overlapped a deletion adds
//     nothing).
//
// The Service is the agent's memory (agent.Memory): Recall before a turn,
// TurnEnded after it (extraction runs in a background worker, never in
// the turn's path), ForgetChat on a reset. The API and the CLI list and
// delete memories through the Store.
package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/vector"
)

// component names the memory tables' migrations in nekro_migrations.
const component = "memory"

// The schema, per database (ids are never reused: a deleted memory's id
// names nothing again). Released migrations are never edited.
var (
	sqliteMigrations = []db.Migration{{Version: 1, Name: "create memories, memory_chats", SQL: `
CREATE TABLE memories (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	chat_key   TEXT    NOT NULL,
	user_id    TEXT    NOT NULL,
	scope      TEXT    NOT NULL,
	text       TEXT    NOT NULL,
	created_at BIGINT  NOT NULL,
	updated_at BIGINT  NOT NULL
);
CREATE INDEX memories_chat ON memories (chat_key, user_id);
CREATE INDEX memories_user ON memories (user_id);
CREATE TABLE memory_chats (
	chat_key     TEXT   PRIMARY KEY,
	last_message BIGINT NOT NULL,
	window_start BIGINT NOT NULL,
	window_count BIGINT NOT NULL,
	deletions    BIGINT NOT NULL
);`}}

	postgresMigrations = []db.Migration{{Version: 1, Name: "create memories, memory_chats", SQL: `
CREATE TABLE memories (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	chat_key   TEXT    NOT NULL,
	user_id    TEXT    NOT NULL,
	scope      TEXT    NOT NULL,
	text       TEXT    NOT NULL,
	created_at BIGINT  NOT NULL,
	updated_at BIGINT  NOT NULL
);
CREATE INDEX memories_chat ON memories (chat_key, user_id);
CREATE INDEX memories_user ON memories (user_id);
CREATE TABLE memory_chats (
	chat_key     TEXT   PRIMARY KEY,
	last_message BIGINT NOT NULL,
	window_start BIGINT NOT NULL,
	window_count BIGINT NOT NULL,
	deletions    BIGINT NOT NULL
);`}}
)

// MaxTextBytes caps one memory's text.
const MaxTextBytes = 500

// Memory is one remembered fact.
type Memory struct {
	ID int64 `json:"id"`
	// ChatKey is the chat it was learned in.
	ChatKey string `json:"chat_key"`
	// UserID is the user it is about; "" for a memory of the chat.
	UserID string `json:"user_id,omitempty"`
	// Scope is its vector scope (ChatScope or UserScope).
	Scope     string    `json:"scope"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ChatScope is the vector scope of a chat's own memories.
func ChatScope(chatKey string) string { return "memory:chat:" + chatKey }

// UserScope is the vector scope of a user's memories within a chat, or,
// with chatKey "", of the user's memories that follow them across chats.
func UserScope(chatKey, userID string) string {
	if chatKey == "" {
		return "memory:user:" + userID
	}
	return "memory:user:" + chatKey + ":" + userID
}

// ErrNotFound is returned for a memory id the chat does not hold.
var ErrNotFound = errors.New("no such memory")

// Store keeps the memories in nekro's database and their vectors in a
// vector.Store. It is safe for concurrent use.
type Store struct {
	write, read *sql.DB
	release     func() error
	vectors     vector.Store
	now         func() time.Time
}

// Open migrates the memory tables of h's database and returns the store,
// its vectors kept in vectors (which the caller closes).
func Open(ctx context.Context, h db.Handle, vectors vector.Store) (*Store, error) {
	s := &Store{vectors: vectors, now: time.Now}
	switch {
	case h.SQLite != nil:
		if err := db.MigrateSQLite(ctx, h.SQLite, component, sqliteMigrations); err != nil {
			return nil, fmt.Errorf("memory store: %w", err)
		}
		s.write, s.read, s.release = h.SQLite.Write, h.SQLite.Read, func() error { return nil }
	case h.Postgres != nil:
		if err := db.MigratePostgres(ctx, h.Postgres, component, postgresMigrations); err != nil {
			return nil, fmt.Errorf("memory store: %w", err)
		}
		w := stdlib.OpenDBFromPool(h.Postgres)
		s.write, s.read, s.release = w, w, w.Close
	default:
		return nil, errors.New("memory store: no database")
	}
	return s, nil
}

// Close releases the store's view of the database (not the database, nor
// the vector store).
func (s *Store) Close() error { return s.release() }

const memoryColumns = `id, chat_key, user_id, scope, text, created_at, updated_at`

func scanMemories(rows *sql.Rows) ([]Memory, error) {
	defer rows.Close()
	var out []Memory
	for rows.Next() {
		var m Memory
		var created, updated int64
		if err := rows.Scan(&m.ID, &m.ChatKey, &m.UserID, &m.Scope, &m.Text, &created, &updated); err != nil {
			return nil, fmt.Errorf("memory store: %w", err)
		}
		m.CreatedAt, m.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	return out, nil
}

func (s *Store) query(ctx context.Context, where string, args ...any) ([]Memory, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+memoryColumns+` FROM memories WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("memory store: %w", err)
	}
	return scanMemories(rows)
}

// Filter chooses the memories List returns.
type Filter struct {
	// Users, when not nil, keeps only memories about these users; ""
	// among them keeps the chat's own memories.
	Users []string
}

// List returns the memories learned in chatKey, oldest first: the chat's
// own and every user's, or those f keeps.
func (s *Store) List(ctx context.Context, chatKey string, f Filter) ([]Memory, error) {
	all, err := s.query(ctx, `chat_key = $1 ORDER BY id`, chatKey)
	if err != nil || f.Users == nil {
		return all, err
	}
	var out []Memory
	for _, m := range all {
		for _, u := range f.Users {
			if m.UserID == u {
				out = append(out, m)
				break
			}
		}
	}
	return out, nil
}

// Get returns one memory of chatKey.
func (s *Store) Get(ctx context.Context, chatKey string, id int64) (Memory, error) {
	ms, err := s.query(ctx, `chat_key = $1 AND id = $2`, chatKey, id)
	if err != nil {
		return Memory{}, err
	}
	if len(ms) == 0 {
		return Memory{}, fmt.Errorf("memory %d of chat %s: %w", id, chatKey, ErrNotFound)
	}
	return ms[0], nil
}

// byIDs returns the memories with these ids that still exist, in the
// order of ids.
func (s *Store) byIDs(ctx context.Context, ids []int64) ([]Memory, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	ph := make([]string, len(ids))
	for i, id := range ids {
		args[i], ph[i] = id, fmt.Sprintf("$%d", i+1)
	}
	ms, err := s.query(ctx, `id IN (`+strings.Join(ph, ", ")+`)`, args...)
	if err != nil {
		return nil, err
	}
	pos := map[int64]Memory{}
	for _, m := range ms {
		pos[m.ID] = m
	}
	out := make([]Memory, 0, len(ms))
	for _, id := range ids {
		if m, ok := pos[id]; ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// newest returns the newest memories of the scopes, at most n, newest
// first: what is recalled when no embedding model is configured.
func (s *Store) newest(ctx context.Context, scopes []string, n int) ([]Memory, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	args := make([]any, len(scopes))
	ph := make([]string, len(scopes))
	for i, sc := range scopes {
		args[i], ph[i] = sc, fmt.Sprintf("$%d", i+1)
	}
	return s.query(ctx, fmt.Sprintf(`scope IN (%s) ORDER BY updated_at DESC, id DESC LIMIT %d`, strings.Join(ph, ", "), n), args...)
}

// countScopes returns how many memories the scopes hold.
func (s *Store) countScopes(ctx context.Context, scopes []string) (int, error) {
	args := make([]any, len(scopes))
	ph := make([]string, len(scopes))
	for i, sc := range scopes {
		args[i], ph[i] = sc, fmt.Sprintf("$%d", i+1)
	}
	var n int
	err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM memories WHERE scope IN (`+strings.Join(ph, ", ")+`)`, args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("memory store: %w", err)
	}
	return n, nil
}

// Delete removes one memory of chatKey and its vector, and counts the
// deletion in the chat's state, so an extraction running meanwhile adds
// nothing (it could otherwise re-add the fact from the same messages).
// Messages already extracted are never read again, so the memory does not
// come back from them.
func (s *Store) Delete(ctx context.Context, chatKey string, id int64) error {
	m, err := s.Get(ctx, chatKey, id)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE id = $1`, id); err != nil {
			return err
		}
		return countDeletion(ctx, tx, chatKey)
	})
	if err != nil {
		return fmt.Errorf("memory store: delete %d: %w", id, err)
	}
	if _, err := s.vectors.Delete(ctx, m.Scope, vectorID(id)); err != nil {
		return fmt.Errorf("memory %d deleted, its vector not: %w", id, err)
	}
	return nil
}

// ForgetChat erases every memory learned in chatKey (a reset chat), with
// their vectors, and returns how many there were. Messages extracted
// before stay extracted: a reset deletes them too.
func (s *Store) ForgetChat(ctx context.Context, chatKey string) (int, error) {
	ms, err := s.query(ctx, `chat_key = $1`, chatKey)
	if err != nil {
		return 0, err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE chat_key = $1`, chatKey); err != nil {
			return err
		}
		return countDeletion(ctx, tx, chatKey)
	})
	if err != nil {
		return 0, fmt.Errorf("memory store: forget chat %s: %w", chatKey, err)
	}
	if err := s.dropVectors(ctx, ms); err != nil {
		return len(ms), err
	}
	if _, err := s.vectors.DeleteScope(ctx, ChatScope(chatKey)); err != nil {
		return len(ms), fmt.Errorf("memories of chat %s deleted, their vectors not: %w", chatKey, err)
	}
	return len(ms), nil
}

// EraseUser erases every memory about userID, in every chat, with their
// vectors, and returns how many there were.
func (s *Store) EraseUser(ctx context.Context, userID string) (int, error) {
	if userID == "" {
		return 0, errors.New("memory store: erase which user? the user id is empty")
	}
	ms, err := s.query(ctx, `user_id = $1`, userID)
	if err != nil {
		return 0, err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE user_id = $1`, userID); err != nil {
			return err
		}
		chats := map[string]bool{}
		for _, m := range ms {
			if !chats[m.ChatKey] {
				chats[m.ChatKey] = true
				if err := countDeletion(ctx, tx, m.ChatKey); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("memory store: erase user %s: %w", userID, err)
	}
	scopes := map[string]bool{UserScope("", userID): true}
	for _, m := range ms {
		scopes[m.Scope] = true
	}
	for sc := range scopes {
		if _, err := s.vectors.DeleteScope(ctx, sc); err != nil {
			return len(ms), fmt.Errorf("memories of user %s deleted, their vectors not: %w", userID, err)
		}
	}
	return len(ms), nil
}

// dropVectors deletes the vectors of ms.
func (s *Store) dropVectors(ctx context.Context, ms []Memory) error {
	byScope := map[string][]string{}
	for _, m := range ms {
		byScope[m.Scope] = append(byScope[m.Scope], vectorID(m.ID))
	}
	for sc, ids := range byScope {
		if _, err := s.vectors.Delete(ctx, sc, ids...); err != nil {
			return fmt.Errorf("memory store: delete vectors of %s: %w", sc, err)
		}
	}
	return nil
}

// vectorID is a memory's item id in the vector store.
func vectorID(id int64) string { return strconv.FormatInt(id, 10) }

// countDeletion bumps chatKey's deletion count inside tx.
func countDeletion(ctx context.Context, tx *sql.Tx, chatKey string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO memory_chats (chat_key, last_message, window_start, window_count, deletions)
		VALUES ($1, 0, 0, 0, 1) ON CONFLICT (chat_key) DO UPDATE SET deletions = memory_chats.deletions + 1`, chatKey)
	return err
}

func (s *Store) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
