// Package presets keeps the operator's personas (人设, "presets" as the
// reference calls them) in the database: named texts that say who the
// assistant is, a default one, and each chat's choice. The chosen
// persona's text joins the system prompt of the chat's turns, and its
// language sets the language of the prompt's fixed parts and of the
// notices the chat's users read (internal/agent).
//
// Presets are operator text, trusted as the operator's: only the
// operator's token creates, edits, deletes or chooses them. Import and
// export speak the reference's preset format (Reference).
package presets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/db"
)

const component = "presets"

// One migration list serves both databases: the SQL is the same. Ids are
// given by the store (MAX + 1), so no dialect's identity column is
// needed. The default preset is the choice of the chat key "".
var migrations = []db.Migration{{
	Version: 1, Name: "create presets and preset_choices",
	SQL: `CREATE TABLE presets (
	id          BIGINT NOT NULL PRIMARY KEY,
	name        TEXT   NOT NULL,
	title       TEXT   NOT NULL,
	description TEXT   NOT NULL,
	avatar      TEXT   NOT NULL,
	content     TEXT   NOT NULL,
	tags        TEXT   NOT NULL,
	author      TEXT   NOT NULL,
	lang        TEXT   NOT NULL,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE TABLE preset_choices (
	chat_key   TEXT   NOT NULL PRIMARY KEY,
	preset_id  BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
)`,
}}

// Bounds of a preset's fields.
const (
	MaxNameBytes    = 256
	MaxContentBytes = 32 << 10
	MaxTextBytes    = 8 << 10 // description, title, author
	MaxAvatarBytes  = 1 << 20 // a data: URL or a link
	MaxTags         = 32
	MaxTagBytes     = 64
)

// Langs are the languages a preset may set; "" is English.
var Langs = []string{"en", "zh"}

// Preset is one persona.
type Preset struct {
	ID          int64    `json:"id"`
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description"`
	Avatar      string   `json:"avatar"` // a data: URL or an https link
	Content     string   `json:"content"`
	Tags        []string `json:"tags"`
	Author      string   `json:"author,omitempty"`
	// Lang is the language of the prompt's fixed parts and the users'
	// notices in chats speaking as this persona: "en" or "zh".
	Lang string `json:"lang"`
	// Default says it is the default persona (chats that chose none);
	// on create and update, true makes it the default.
	Default   bool      `json:"default"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ErrNotFound is the answer for an id no preset has.
var ErrNotFound = errors.New("no such preset")

// Check reports the first problem of p, naming the field.
func (p *Preset) Check() error {
	p.Name = strings.TrimSpace(p.Name)
	if p.Name == "" {
		return errors.New("preset name is empty")
	}
	if p.Lang == "" {
		p.Lang = "en"
	}
	okLang := false
	for _, l := range Langs {
		okLang = okLang || p.Lang == l
	}
	if !okLang {
		return fmt.Errorf("preset lang %q is not one of %s", p.Lang, strings.Join(Langs, ", "))
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"name", p.Name, MaxNameBytes}, {"title", p.Title, MaxTextBytes}, {"description", p.Description, MaxTextBytes},
		{"author", p.Author, MaxTextBytes}, {"content", p.Content, MaxContentBytes}, {"avatar", p.Avatar, MaxAvatarBytes}} {
		if len(f.v) > f.max {
			return fmt.Errorf("preset %s is %d bytes, over the limit of %d", f.name, len(f.v), f.max)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("preset %s is not UTF-8", f.name)
		}
	}
	if p.Avatar != "" && !strings.HasPrefix(p.Avatar, "data:image/") && !strings.HasPrefix(p.Avatar, "https://") {
		return errors.New("preset avatar must be a data:image/... URL or an https:// link")
	}
	tags := []string{}
	for _, t := range p.Tags {
		if t = strings.TrimSpace(t); t != "" {
			if len(t) > MaxTagBytes || strings.Contains(t, ",") {
				return fmt.Errorf("preset tag %q: at most %d bytes, no commas", t, MaxTagBytes)
			}
			tags = append(tags, t)
		}
	}
	if len(tags) > MaxTags {
		return fmt.Errorf("preset has %d tags, over the limit of %d", len(tags), MaxTags)
	}
	p.Tags = tags
	return nil
}

// Store reads and writes the presets and the chats' choices.
type Store struct {
	db    *sql.DB
	close func() error
}

// Open migrates the tables on h.
func Open(ctx context.Context, h db.Handle) (*Store, error) {
	w, closeFn, err := db.Writer(ctx, h, component, migrations)
	if err != nil {
		return nil, fmt.Errorf("presets: %w", err)
	}
	return &Store{db: w, close: closeFn}, nil
}

// Close releases the store's own handle; the database stays open.
func (s *Store) Close() error { return s.close() }

const columns = `p.id, p.name, p.title, p.description, p.avatar, p.content, p.tags, p.author, p.lang, p.created_at, p.updated_at,
	EXISTS (SELECT 1 FROM preset_choices c WHERE c.chat_key = '' AND c.preset_id = p.id)`

func scan(rows interface{ Scan(...any) error }) (Preset, error) {
	var (
		p      Preset
		tags   string
		cr, up int64
	)
	if err := rows.Scan(&p.ID, &p.Name, &p.Title, &p.Description, &p.Avatar, &p.Content, &tags, &p.Author, &p.Lang,
		&cr, &up, &p.Default); err != nil {
		return Preset{}, err
	}
	p.Tags = splitTags(tags)
	p.CreatedAt, p.UpdatedAt = time.UnixMilli(cr).UTC(), time.UnixMilli(up).UTC()
	return p, nil
}

func splitTags(s string) []string {
	out := []string{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// List returns every preset, by id.
func (s *Store) List(ctx context.Context) ([]Preset, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM presets p ORDER BY p.id`)
	if err != nil {
		return nil, fmt.Errorf("presets: %w", err)
	}
	defer rows.Close()
	out := []Preset{}
	for rows.Next() {
		p, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("presets: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Get returns the preset with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Preset, error) {
	p, err := scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM presets p WHERE p.id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Preset{}, fmt.Errorf("preset %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Preset{}, fmt.Errorf("preset %d: %w", id, err)
	}
	return p, nil
}

// Create stores p as a new preset and returns it with its id.
func (s *Store) Create(ctx context.Context, p Preset) (Preset, error) {
	if err := p.Check(); err != nil {
		return Preset{}, err
	}
	now := time.Now().UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Preset{}, fmt.Errorf("create preset: %w", err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO presets
		(id, name, title, description, avatar, content, tags, author, lang, created_at, updated_at)
		SELECT COALESCE(MAX(id), 0) + 1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 FROM presets RETURNING id`,
		p.Name, p.Title, p.Description, p.Avatar, p.Content, strings.Join(p.Tags, ","), p.Author, p.Lang, now).Scan(&id); err != nil {
		return Preset{}, fmt.Errorf("create preset: %w", err)
	}
	if p.Default {
		if err := choose(ctx, tx, "", id); err != nil {
			return Preset{}, fmt.Errorf("create preset: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Preset{}, fmt.Errorf("create preset: %w", err)
	}
	return s.Get(ctx, id)
}

// Update replaces the fields of preset id with p's. Default true makes
// it the default; false leaves the default as it is.
func (s *Store) Update(ctx context.Context, id int64, p Preset) (Preset, error) {
	if err := p.Check(); err != nil {
		return Preset{}, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Preset{}, fmt.Errorf("update preset %d: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE presets SET name = $1, title = $2, description = $3, avatar = $4, content = $5,
		tags = $6, author = $7, lang = $8, updated_at = $9 WHERE id = $10`,
		p.Name, p.Title, p.Description, p.Avatar, p.Content, strings.Join(p.Tags, ","), p.Author, p.Lang, time.Now().UnixMilli(), id)
	if err != nil {
		return Preset{}, fmt.Errorf("update preset %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Preset{}, fmt.Errorf("preset %d: %w", id, ErrNotFound)
	}
	if p.Default {
		if err := choose(ctx, tx, "", id); err != nil {
			return Preset{}, fmt.Errorf("update preset %d: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Preset{}, fmt.Errorf("update preset %d: %w", id, err)
	}
	return s.Get(ctx, id)
}

// Delete removes preset id; the chats that chose it (and the default,
// if it was) go back to the default (to none).
func (s *Store) Delete(ctx context.Context, id int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete preset %d: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM presets WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete preset %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("preset %d: %w", id, ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM preset_choices WHERE preset_id = $1`, id); err != nil {
		return fmt.Errorf("delete preset %d: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete preset %d: %w", id, err)
	}
	return nil
}

func choose(ctx context.Context, tx *sql.Tx, chatKey string, id int64) error {
	if id == 0 {
		_, err := tx.ExecContext(ctx, `DELETE FROM preset_choices WHERE chat_key = $1`, chatKey)
		return err
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM presets WHERE id = $1)`, id).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("preset %d: %w", id, ErrNotFound)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO preset_choices (chat_key, preset_id, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (chat_key) DO UPDATE SET preset_id = excluded.preset_id, updated_at = excluded.updated_at`,
		chatKey, id, time.Now().UnixMilli())
	return err
}

// Choose makes preset id chatKey's persona; id 0 returns the chat to
// the default. The chat key "" is the default itself (SetDefault).
func (s *Store) Choose(ctx context.Context, chatKey string, id int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("choose preset: %w", err)
	}
	defer tx.Rollback()
	if err := choose(ctx, tx, chatKey, id); err != nil {
		return fmt.Errorf("choose preset: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("choose preset: %w", err)
	}
	return nil
}

// SetDefault makes preset id the default; 0: no default.
func (s *Store) SetDefault(ctx context.Context, id int64) error { return s.Choose(ctx, "", id) }

// Chosen returns the id of the preset chatKey chose itself, 0 when it
// follows the default.
func (s *Store) Chosen(ctx context.Context, chatKey string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT preset_id FROM preset_choices WHERE chat_key = $1`, chatKey).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) || chatKey == "" {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("preset of %s: %w", chatKey, err)
	}
	return id, nil
}

// ForChat returns the persona of chatKey: its choice, else the default;
// ok is false when it has neither.
func (s *Store) ForChat(ctx context.Context, chatKey string) (p Preset, ok bool, err error) {
	p, err = scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM presets p WHERE p.id = COALESCE(
		(SELECT preset_id FROM preset_choices WHERE chat_key = $1),
		(SELECT preset_id FROM preset_choices WHERE chat_key = ''))`, chatKey))
	if errors.Is(err, sql.ErrNoRows) {
		return Preset{}, false, nil
	}
	if err != nil {
		return Preset{}, false, fmt.Errorf("preset of %s: %w", chatKey, err)
	}
	return p, true, nil
}
