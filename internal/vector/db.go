package vector

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/nekro-go/nekro/internal/db"
)

// component names the store's migrations in nekro_migrations.
const component = "vector"

// The schema, per database. vector_items holds every vector (normalised,
// little-endian float32) with its text; vector_scopes counts each scope's
// writes, so a process notices another's (the CLI's while the server
// runs) and reloads that scope's index; vector_settings holds the store's
// dimension. Released migrations are never edited: a change is a new one.
var (
	sqliteMigrations = []db.Migration{{Version: 1, Name: "create vector_items, vector_scopes, vector_settings", SQL: `
CREATE TABLE vector_items (
	scope    TEXT NOT NULL,
	id       TEXT NOT NULL,
	document TEXT NOT NULL,
	vec      BLOB NOT NULL,
	text     TEXT NOT NULL,
	metadata TEXT NOT NULL,
	PRIMARY KEY (scope, id)
);
CREATE INDEX vector_items_document ON vector_items (scope, document);
CREATE TABLE vector_scopes (scope TEXT PRIMARY KEY, generation INTEGER NOT NULL);
CREATE TABLE vector_settings (name TEXT PRIMARY KEY, value INTEGER NOT NULL);`}}

	postgresMigrations = []db.Migration{{Version: 1, Name: "create vector_items, vector_scopes, vector_settings", SQL: `
CREATE TABLE vector_items (
	scope    TEXT NOT NULL,
	id       TEXT NOT NULL,
	document TEXT NOT NULL,
	vec      BYTEA NOT NULL,
	text     TEXT NOT NULL,
	metadata TEXT NOT NULL,
	PRIMARY KEY (scope, id)
);
CREATE INDEX vector_items_document ON vector_items (scope, document);
CREATE TABLE vector_scopes (scope TEXT PRIMARY KEY, generation BIGINT NOT NULL);
CREATE TABLE vector_settings (name TEXT PRIMARY KEY, value BIGINT NOT NULL);`}}
)

// DBStore is the Store in nekro's database: vectors in a table, searched
// exactly (brute force) in memory. Each scope's vectors are loaded on its
// first search and kept in step with this process's writes; a write by
// another process bumps the scope's generation, and the next search here
// reloads it.
type DBStore struct {
	write, read *sql.DB
	release     func() error

	mu     sync.RWMutex
	scopes map[string]*scopeIndex
}

// Open migrates the vector tables of h's database and returns the store
// in it.
func Open(ctx context.Context, h db.Handle) (*DBStore, error) {
	s := &DBStore{scopes: map[string]*scopeIndex{}}
	switch {
	case h.SQLite != nil:
		if err := db.MigrateSQLite(ctx, h.SQLite, component, sqliteMigrations); err != nil {
			return nil, fmt.Errorf("vector store: %w", err)
		}
		s.write, s.read, s.release = h.SQLite.Write, h.SQLite.Read, func() error { return nil }
	case h.Postgres != nil:
		if err := db.MigratePostgres(ctx, h.Postgres, component, postgresMigrations); err != nil {
			return nil, fmt.Errorf("vector store: %w", err)
		}
		w := stdlib.OpenDBFromPool(h.Postgres)
		s.write, s.read, s.release = w, w, w.Close
	default:
		return nil, errors.New("vector store: no database")
	}
	return s, nil
}

// Close releases the store's view of the database.
func (s *DBStore) Close() error { return s.release() }

func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// decodeVec decodes len(dst) little-endian float32s of b into dst.
func decodeVec(dst []float32, b []byte) {
	b = b[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// placeholders returns "$from, $from+1, ..." n times.
func placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(from+i))
	}
	return b.String()
}

// change is what a committed write did to one scope, to apply to its
// index.
type change struct {
	gen     int64
	upserts []Item // vectors normalised
	deleted []string
}

// bump increments a scope's generation inside tx and returns the new one.
func bump(ctx context.Context, tx *sql.Tx, scope string) (int64, error) {
	var gen int64
	err := tx.QueryRowContext(ctx, `INSERT INTO vector_scopes (scope, generation) VALUES ($1, 1)
		ON CONFLICT (scope) DO UPDATE SET generation = vector_scopes.generation + 1 RETURNING generation`, scope).Scan(&gen)
	if err != nil {
		return 0, fmt.Errorf("vector store: bump generation of %s: %w", scope, err)
	}
	return gen, nil
}

// dimension returns the store's dimension, 0 when none is set.
func dimension(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var d int
	err := q.QueryRowContext(ctx, `SELECT value FROM vector_settings WHERE name = 'dimension'`).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("vector store: read dimension: %w", err)
	}
	return d, nil
}

// Upsert adds or replaces items, all or none.
func (s *DBStore) Upsert(ctx context.Context, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	norm := make([]Item, len(items))
	for i, it := range items {
		if err := checkScope(it.Scope); err != nil {
			return err
		}
		if it.ID == "" || len(it.ID) > maxIDLen {
			return fmt.Errorf("vector: item ID must be 1 to %d bytes, got %d", maxIDLen, len(it.ID))
		}
		if len(it.Vector) != len(items[0].Vector) {
			return fmt.Errorf("vector: item %q has %d dimensions, item %q has %d: %w",
				it.ID, len(it.Vector), items[0].ID, len(items[0].Vector), ErrDimension)
		}
		v, err := normalized(it.Vector)
		if err != nil {
			return fmt.Errorf("item %q: %w", it.ID, err)
		}
		it.Vector = v
		norm[i] = it
	}
	dim := len(norm[0].Vector)
	changes := map[string]*change{}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		have, err := dimension(ctx, tx)
		if err != nil {
			return err
		}
		if have != dim {
			if have != 0 {
				var any int
				err := tx.QueryRowContext(ctx, `SELECT 1 FROM vector_items LIMIT 1`).Scan(&any)
				if err == nil {
					return fmt.Errorf("vector: the vectors have %d dimensions but the store holds %d-dimension vectors"+
						" (did the embedding model change? delete the old vectors and embed again): %w", dim, have, ErrDimension)
				}
				if !errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("vector store: %w", err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO vector_settings (name, value) VALUES ('dimension', $1)
				ON CONFLICT (name) DO UPDATE SET value = excluded.value`, dim); err != nil {
				return fmt.Errorf("vector store: set dimension: %w", err)
			}
		}
		for _, it := range norm {
			meta, err := json.Marshal(it.Metadata)
			if err != nil {
				return fmt.Errorf("vector: metadata of %q: %w", it.ID, err)
			}
			if it.Metadata == nil {
				meta = []byte("{}")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO vector_items (scope, id, document, vec, text, metadata)
				VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (scope, id) DO UPDATE SET document = excluded.document, vec = excluded.vec,
					text = excluded.text, metadata = excluded.metadata`,
				it.Scope, it.ID, it.Document, encodeVec(it.Vector), it.Text, string(meta)); err != nil {
				return fmt.Errorf("vector store: upsert %q: %w", it.ID, err)
			}
			c := changes[it.Scope]
			if c == nil {
				c = &change{}
				changes[it.Scope] = c
			}
			c.upserts = append(c.upserts, it)
		}
		return s.bumpAll(ctx, tx, changes)
	})
	if err != nil {
		return err
	}
	s.apply(changes)
	return nil
}

func (s *DBStore) bumpAll(ctx context.Context, tx *sql.Tx, changes map[string]*change) error {
	for scope, c := range changes {
		gen, err := bump(ctx, tx, scope)
		if err != nil {
			return err
		}
		c.gen = gen
	}
	return nil
}

func (s *DBStore) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("vector store: begin: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("vector store: commit: %w", err)
	}
	return nil
}

// apply brings the loaded indexes up to committed changes: in place when
// the index is at the generation before, else by forgetting it (the next
// search reloads it).
func (s *DBStore) apply(changes map[string]*change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for scope, c := range changes {
		idx := s.scopes[scope]
		if idx == nil {
			continue
		}
		if idx.gen != c.gen-1 {
			delete(s.scopes, scope)
			continue
		}
		for _, it := range c.upserts {
			if idx.dim == 0 && len(idx.ids) == 0 {
				idx.dim = len(it.Vector)
			}
			if len(it.Vector) != idx.dim {
				idx = nil
				break
			}
			if p, ok := idx.pos[it.ID]; ok {
				idx.set(p, it.Vector)
				continue
			}
			idx.add(it.ID, it.Vector)
		}
		if idx == nil {
			delete(s.scopes, scope)
			continue
		}
		for _, id := range c.deleted {
			idx.remove(id)
		}
		idx.gen = c.gen
	}
}

// deleteWhere deletes a scope's rows matching cond (with args from $2)
// and returns their IDs.
func (s *DBStore) deleteWhere(ctx context.Context, scope, cond string, args ...any) (int, error) {
	if err := checkScope(scope); err != nil {
		return 0, err
	}
	var ids []string
	changes := map[string]*change{}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `DELETE FROM vector_items WHERE scope = $1`+cond+` RETURNING id`, append([]any{scope}, args...)...)
		if err != nil {
			return fmt.Errorf("vector store: delete: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return fmt.Errorf("vector store: delete: %w", err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("vector store: delete: %w", err)
		}
		rows.Close()
		if len(ids) == 0 {
			return nil
		}
		changes[scope] = &change{deleted: ids}
		return s.bumpAll(ctx, tx, changes)
	})
	if err != nil {
		return 0, err
	}
	s.apply(changes)
	return len(ids), nil
}

// deleteBatch is the most IDs one DELETE names (SQLite takes at most
// 32766 parameters).
const deleteBatch = 500

// Delete removes the scope's items with these IDs, deleteBatch IDs per
// transaction.
func (s *DBStore) Delete(ctx context.Context, scope string, ids ...string) (int, error) {
	total := 0
	for lo := 0; lo < len(ids); lo += deleteBatch {
		batch := ids[lo:min(lo+deleteBatch, len(ids))]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		n, err := s.deleteWhere(ctx, scope, ` AND id IN (`+placeholders(2, len(batch))+`)`, args...)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// DeleteDocument removes the scope's items of one document.
func (s *DBStore) DeleteDocument(ctx context.Context, scope, document string) (int, error) {
	return s.deleteWhere(ctx, scope, ` AND document = $2`, document)
}

// DeleteScope removes every item of a scope.
func (s *DBStore) DeleteScope(ctx context.Context, scope string) (int, error) {
	return s.deleteWhere(ctx, scope, ``)
}

// Count returns how many items the scopes hold, or the store.
func (s *DBStore) Count(ctx context.Context, scopes ...string) (int, error) {
	q, args := `SELECT COUNT(*) FROM vector_items`, []any{}
	if len(scopes) > 0 {
		q += ` WHERE scope IN (` + placeholders(1, len(scopes)) + `)`
		for _, sc := range scopes {
			args = append(args, sc)
		}
	}
	var n int
	if err := s.read.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("vector store: count: %w", err)
	}
	return n, nil
}

// load reads a scope's vectors: the generation first, so a write landing
// in between makes the index look older than it is (reloaded once more),
// never newer. Each row's blob is decoded straight into the scope's slab
// (sized from a count first), with no allocation per row but its ID.
func (s *DBStore) load(ctx context.Context, scope string, gen int64) (*scopeIndex, error) {
	idx := &scopeIndex{gen: gen}
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM vector_items WHERE scope = $1`, scope).Scan(&n); err != nil {
		return nil, fmt.Errorf("vector store: load %s: %w", scope, err)
	}
	idx.pos = make(map[string]int, n)
	idx.ids = make([]string, 0, n)
	rows, err := s.read.QueryContext(ctx, `SELECT id, vec FROM vector_items WHERE scope = $1`, scope)
	if err != nil {
		return nil, fmt.Errorf("vector store: load %s: %w", scope, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var b sql.RawBytes // valid until the next Next: decoded before it
		if err := rows.Scan(&id, &b); err != nil {
			return nil, fmt.Errorf("vector store: load %s: %w", scope, err)
		}
		if idx.dim == 0 {
			idx.dim = len(b) / 4
			idx.vecs = make([]float32, 0, n*idx.dim)
			idx.codes = make([]int8, 0, n*idx.dim)
			idx.scale = make([]float32, 0, n)
			idx.l1 = make([]float32, 0, n)
			idx.resid = make([]float32, 0, n)
		}
		if len(b) != 4*idx.dim || idx.dim == 0 {
			// A mixed scope cannot happen through Upsert; skip rather
			// than compare nonsense.
			continue
		}
		idx.grow()
		decodeVec(idx.vecs[len(idx.vecs)-idx.dim:], b)
		idx.pos[id] = len(idx.ids)
		idx.ids = append(idx.ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("vector store: load %s: %w", scope, err)
	}
	idx.quantiseAll()
	return idx, nil
}

type candidate struct {
	scope string
	id    string
	score float32
}

// Search returns the items of q.Scopes nearest q.Vector.
func (s *DBStore) Search(ctx context.Context, q Query) ([]Hit, error) {
	if len(q.Scopes) == 0 {
		return nil, errors.New("vector: a search must name its scopes")
	}
	scopes := slices.Clone(q.Scopes)
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	for _, sc := range scopes {
		if err := checkScope(sc); err != nil {
			return nil, err
		}
	}
	if q.TopK == 0 {
		q.TopK = 5
	}
	if q.TopK < 0 || q.TopK > MaxTopK {
		return nil, fmt.Errorf("vector: top k %d is not within 1..%d", q.TopK, MaxTopK)
	}
	qv, err := normalized(q.Vector)
	if err != nil {
		return nil, err
	}
	dim, err := dimension(ctx, s.read)
	if err != nil {
		return nil, err
	}
	if dim == 0 {
		return nil, nil // nothing was ever stored
	}
	if dim != len(qv) {
		return nil, fmt.Errorf("vector: the query has %d dimensions but the store holds %d-dimension vectors"+
			" (is the embedding model the one the vectors were made with?): %w", len(qv), dim, ErrDimension)
	}
	gens, err := s.generations(ctx, scopes)
	if err != nil {
		return nil, err
	}
	best := &topK[candidate]{k: q.TopK, score: func(c candidate) float32 { return c.score }}
	for _, sc := range scopes {
		gen, ok := gens[sc]
		if !ok {
			continue // never written
		}
		idx, err := s.ensure(ctx, sc, gen)
		if err != nil {
			return nil, err
		}
		// Writes change an index in place under the lock, so reading it
		// under the read lock is safe even once it is replaced.
		s.mu.RLock()
		if idx.dim == len(qv) {
			idx.scan(sc, qv, best)
		}
		s.mu.RUnlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	cands := best.items
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.scope+"\x00"+a.id, b.scope+"\x00"+b.id)
	})
	hits := make([]Hit, 0, len(cands))
	for _, c := range cands {
		h := Hit{ID: c.id, Scope: c.scope, Score: c.score}
		var meta string
		err := s.read.QueryRowContext(ctx, `SELECT document, text, metadata FROM vector_items WHERE scope = $1 AND id = $2`,
			c.scope, c.id).Scan(&h.Document, &h.Text, &meta)
		if errors.Is(err, sql.ErrNoRows) {
			continue // deleted since the index was read
		}
		if err != nil {
			return nil, fmt.Errorf("vector store: read hit: %w", err)
		}
		if err := json.Unmarshal([]byte(meta), &h.Metadata); err != nil {
			return nil, fmt.Errorf("vector store: metadata of %q: %w", c.id, err)
		}
		hits = append(hits, h)
	}
	return hits, nil
}

// generations returns the current generation of each scope written to.
func (s *DBStore) generations(ctx context.Context, scopes []string) (map[string]int64, error) {
	args := make([]any, len(scopes))
	for i, sc := range scopes {
		args[i] = sc
	}
	rows, err := s.read.QueryContext(ctx, `SELECT scope, generation FROM vector_scopes WHERE scope IN (`+placeholders(1, len(scopes))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("vector store: read generations: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var sc string
		var g int64
		if err := rows.Scan(&sc, &g); err != nil {
			return nil, fmt.Errorf("vector store: read generations: %w", err)
		}
		out[sc] = g
	}
	return out, rows.Err()
}

// ensure returns scope's index, loading it unless the one in memory is
// at gen (or newer).
func (s *DBStore) ensure(ctx context.Context, scope string, gen int64) (*scopeIndex, error) {
	s.mu.RLock()
	idx := s.scopes[scope]
	fresh := idx != nil && idx.gen >= gen
	s.mu.RUnlock()
	if fresh {
		return idx, nil
	}
	idx, err := s.load(ctx, scope, gen)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.scopes[scope]; cur != nil && cur.gen >= gen {
		return cur, nil
	}
	s.scopes[scope] = idx
	return idx, nil
}

var _ Store = (*DBStore)(nil)
