// Package users keeps who may use the API besides the operator: users,
// their bearer tokens and the chats each belongs to, in the database
// (SQLite or PostgreSQL, one portable schema), so every nekro process on
// it agrees.
//
// A token is 256 random bits, shown once when it is made; the database
// keeps only its SHA-256, so a copy of the database lets nobody in. A
// chat's members are the users who may read and post in it: the operator
// adds and removes them, and a chat nobody belongs to becomes the chat of
// the first user who posts to it (Claim).
package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/keys"
)

const component = "users"

// One migration list serves both databases: the SQL is the same. At most
// one row of a chat is its claim (claimed = 1): the partial unique index
// makes two users posting first to an empty chat at once end with one
// owner, on either database.
var migrations = []db.Migration{
	{Version: 1, Name: "create users, user_tokens, chat_members", SQL: `CREATE TABLE users (
	user_id    TEXT   NOT NULL PRIMARY KEY,
	name       TEXT   NOT NULL,
	created_ms BIGINT NOT NULL
);
CREATE TABLE user_tokens (
	token_hash TEXT   NOT NULL PRIMARY KEY,
	user_id    TEXT   NOT NULL,
	created_ms BIGINT NOT NULL
);
CREATE INDEX user_tokens_user ON user_tokens (user_id);
CREATE TABLE chat_members (
	chat_key   TEXT    NOT NULL,
	user_id    TEXT    NOT NULL,
	claimed    INTEGER NOT NULL,
	added_ms   BIGINT  NOT NULL,
	PRIMARY KEY (chat_key, user_id)
);
CREATE INDEX chat_members_user ON chat_members (user_id);
CREATE UNIQUE INDEX chat_members_claim ON chat_members (chat_key) WHERE claimed = 1`},
}

// TokenPrefix starts every user token, so one found in a log or a
// config file is recognisable (the operator's token has none).
const TokenPrefix = "nku_"

// Errors the store returns; test with errors.Is.
var (
	ErrNotFound = errors.New("no such user")
	ErrExists   = errors.New("the user already exists")
)

// User is one user.
type User struct {
	ID      string    `json:"user_id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Tokens is how many tokens the user holds.
	Tokens int `json:"tokens"`
	// Chats are the chats the user belongs to.
	Chats []string `json:"chats"`
}

// Store reads and writes users, tokens and memberships.
type Store struct {
	w     *sql.DB // writes (SQLite: the one writer connection)
	r     *sql.DB // reads (SQLite: the read pool, so token checks never queue behind writes)
	close func() error
}

// Open migrates the tables on h.
func Open(ctx context.Context, h db.Handle) (*Store, error) {
	w, closeFn, err := db.Writer(ctx, h, component, migrations)
	if err != nil {
		return nil, fmt.Errorf("users: %w", err)
	}
	r := w
	if h.SQLite != nil {
		r = h.SQLite.Read
	}
	return &Store{w: w, r: r, close: closeFn}, nil
}

// Close releases the store's own handle; the database stays open.
func (s *Store) Close() error { return s.close() }

// HashToken is what the database keeps of a token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func nowMS() int64 { return time.Now().UnixMilli() }

// Add creates the user id (name defaults to id) and returns its first
// token, which is never shown again. An existing id is ErrExists.
func (s *Store) Add(ctx context.Context, id, name string) (User, string, error) {
	if err := keys.Scope("user", id); err != nil {
		return User{}, "", err
	}
	if name == "" {
		name = id
	}
	if err := keys.Check("user name", name, keys.MaxScopeLen, false); err != nil {
		return User{}, "", err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return User{}, "", fmt.Errorf("add user %s: %w", id, err)
	}
	defer tx.Rollback()
	now := nowMS()
	res, err := tx.ExecContext(ctx, `INSERT INTO users (user_id, name, created_ms) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, id, name, now)
	if err != nil {
		return User{}, "", fmt.Errorf("add user %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return User{}, "", fmt.Errorf("user %s: %w (remove it first, or give it another token with `nekro users token %s`)", id, ErrExists, id)
	}
	tok := newToken()
	if _, err := tx.ExecContext(ctx, `INSERT INTO user_tokens (token_hash, user_id, created_ms) VALUES ($1, $2, $3)`, HashToken(tok), id, now); err != nil {
		return User{}, "", fmt.Errorf("add user %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return User{}, "", fmt.Errorf("add user %s: %w", id, err)
	}
	return User{ID: id, Name: name, Created: time.UnixMilli(now).UTC(), Tokens: 1, Chats: []string{}}, tok, nil
}

// NewToken gives the user another token (the others keep working) and
// returns it, shown once.
func (s *Store) NewToken(ctx context.Context, id string) (string, error) {
	tok := newToken()
	res, err := s.w.ExecContext(ctx, `INSERT INTO user_tokens (token_hash, user_id, created_ms)
		SELECT $1, user_id, $3 FROM users WHERE user_id = $2`, HashToken(tok), id, nowMS())
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", fmt.Errorf("user %s: %w (add it with `nekro users add %s`)", id, ErrNotFound, id)
	}
	return tok, nil
}

// Remove deletes the user, its tokens (at once: the next call with one
// is refused) and its memberships. The chats stay, with their history.
func (s *Store) Remove(ctx context.Context, id string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("remove user %s: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM users WHERE user_id = $1`, id)
	if err != nil {
		return fmt.Errorf("remove user %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("user %s: %w", id, ErrNotFound)
	}
	for _, q := range []string{`DELETE FROM user_tokens WHERE user_id = $1`, `DELETE FROM chat_members WHERE user_id = $1`} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("remove user %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("remove user %s: %w", id, err)
	}
	return nil
}

// Resolve returns the user a token belongs to, or ErrNotFound. It asks
// the database every time, so a removed user's token stops working at
// once, in every process.
func (s *Store) Resolve(ctx context.Context, token string) (string, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return "", ErrNotFound
	}
	var id string
	err := s.r.QueryRowContext(ctx, `SELECT user_id FROM user_tokens WHERE token_hash = $1`, HashToken(token)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("check token: %w", err)
	}
	return id, nil
}

// Get returns one user with its chats.
func (s *Store) Get(ctx context.Context, id string) (User, error) {
	list, err := s.list(ctx, id)
	if err != nil {
		return User{}, err
	}
	if len(list) == 0 {
		return User{}, fmt.Errorf("user %s: %w", id, ErrNotFound)
	}
	return list[0], nil
}

// List returns every user, by id, with their chats.
func (s *Store) List(ctx context.Context) ([]User, error) { return s.list(ctx, "") }

func (s *Store) list(ctx context.Context, only string) ([]User, error) {
	q := `SELECT u.user_id, u.name, u.created_ms, (SELECT COUNT(*) FROM user_tokens t WHERE t.user_id = u.user_id) FROM users u`
	args := []any{}
	if only != "" {
		q += ` WHERE u.user_id = $1`
		args = append(args, only)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY u.user_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	out := []User{}
	for rows.Next() {
		var u User
		var created int64
		if err := rows.Scan(&u.ID, &u.Name, &created, &u.Tokens); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		u.Created = time.UnixMilli(created).UTC()
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	for i := range out {
		if out[i].Chats, err = s.Chats(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Chats returns the chats the user belongs to, sorted.
func (s *Store) Chats(ctx context.Context, userID string) ([]string, error) {
	return s.strings(ctx, `SELECT chat_key FROM chat_members WHERE user_id = $1 ORDER BY chat_key`, userID)
}

// Members returns the chat's members, sorted.
func (s *Store) Members(ctx context.Context, chatKey string) ([]string, error) {
	return s.strings(ctx, `SELECT user_id FROM chat_members WHERE chat_key = $1 ORDER BY user_id`, chatKey)
}

func (s *Store) strings(ctx context.Context, q, arg string) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, q, arg)
	if err != nil {
		return nil, fmt.Errorf("chat members: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("chat members: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// IsMember reports whether the user belongs to the chat.
func (s *Store) IsMember(ctx context.Context, chatKey, userID string) (bool, error) {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM chat_members WHERE chat_key = $1 AND user_id = $2`, chatKey, userID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("chat members: %w", err)
	}
	return true, nil
}

// Authorizes reports whether token still opens chatKey: it belongs to a
// user (not deleted, the token not revoked) who is still a member of the
// chat. One query, for checks repeated while a stream is open.
func (s *Store) Authorizes(ctx context.Context, token, chatKey string) (bool, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return false, nil
	}
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM user_tokens t JOIN chat_members m ON m.user_id = t.user_id
		WHERE t.token_hash = $1 AND m.chat_key = $2`, HashToken(token), chatKey).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check token and membership: %w", err)
	}
	return true, nil
}

// Claim makes the user the chat's member when the chat has no members
// (a user's own new chat is theirs), and reports whether the user is a
// member afterwards. Of users claiming an empty chat at once, one wins.
// Whether a chat may be claimed at all (the server: only one without
// history) is the caller's decision.
func (s *Store) Claim(ctx context.Context, chatKey, userID string) (bool, error) {
	if err := keys.Scope("chat", chatKey); err != nil {
		return false, err
	}
	// The reads go to the writer: on SQLite a just-committed claim by
	// another request must be seen.
	_, err := s.w.ExecContext(ctx, `INSERT INTO chat_members (chat_key, user_id, claimed, added_ms)
		SELECT $1, $2, 1, $3 WHERE NOT EXISTS (SELECT 1 FROM chat_members WHERE chat_key = $1)
		ON CONFLICT DO NOTHING`, chatKey, userID, nowMS())
	if err != nil {
		return false, fmt.Errorf("claim chat %s: %w", chatKey, err)
	}
	var one int
	err = s.w.QueryRowContext(ctx, `SELECT 1 FROM chat_members WHERE chat_key = $1 AND user_id = $2`, chatKey, userID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim chat %s: %w", chatKey, err)
	}
	return true, nil
}

// AddMember makes the user a member of the chat (the operator's call);
// adding a member twice is not an error. The user must exist.
func (s *Store) AddMember(ctx context.Context, chatKey, userID string) error {
	if err := keys.Scope("chat", chatKey); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO chat_members (chat_key, user_id, claimed, added_ms)
		SELECT $1, user_id, 0, $3 FROM users WHERE user_id = $2
		ON CONFLICT DO NOTHING`, chatKey, userID, nowMS())
	if err != nil {
		return fmt.Errorf("add %s to chat %s: %w", userID, chatKey, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := s.Get(ctx, userID); err != nil {
			return fmt.Errorf("add %s to chat %s: %w", userID, chatKey, err)
		}
	}
	return nil
}

// RemoveMember takes the user out of the chat; it reports whether the
// user was a member. A chat left with no members can be claimed again
// (the server claims only chats without history).
func (s *Store) RemoveMember(ctx context.Context, chatKey, userID string) (bool, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM chat_members WHERE chat_key = $1 AND user_id = $2`, chatKey, userID)
	if err != nil {
		return false, fmt.Errorf("remove %s from chat %s: %w", userID, chatKey, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Ping checks that the database answers (the health check).
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&one); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}
