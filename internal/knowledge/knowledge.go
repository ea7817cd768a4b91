// Package knowledge is the knowledge base: documents the operator adds
// (plain text, Markdown, HTML, CSV, PDF, DOCX, and zips of those), read
// into text, cut into overlapping chunks, embedded through the
// `embedding` model group and kept in the vector store with their
// document, so they are found by meaning, and in a keyword index (BM25
// over the chunks' words, CJK as character pairs) so they are found by
// the words they use. A search fuses both rankings (reciprocal rank
// fusion).
//
// Every document belongs to one scope: "global", seen from every chat, or
// "chat:<chat key>", seen from that chat only. A search names the scopes
// it may see (SearchChat: the chat's own and global), and never returns
// another's.
//
// Documents and chunks are in nekro's database (knowledge_documents,
// knowledge_chunks, knowledge_scopes), their vectors in the vector store
// (package vector) under the same scope, with the document's id.
package knowledge

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/llm"
	"github.com/nekro-go/nekro/internal/vector"
)

// component names the migrations in nekro_migrations.
const component = "knowledge"

// The schema: the same on both databases but for the integers' width.
// knowledge_scopes counts each scope's changes of what is searchable, so
// a process rebuilds its keyword index of a scope another process
// changed. Released migrations are never edited: a change is a new one.
func migrations(bigint string) []db.Migration {
	return []db.Migration{{Version: 1, Name: "create knowledge_documents, knowledge_chunks, knowledge_scopes", SQL: `
CREATE TABLE knowledge_documents (
	id         TEXT PRIMARY KEY,
	scope      TEXT NOT NULL,
	name       TEXT NOT NULL,
	size       ` + bigint + ` NOT NULL,
	status     TEXT NOT NULL,
	chunks     ` + bigint + ` NOT NULL,
	done       ` + bigint + ` NOT NULL,
	error      TEXT NOT NULL,
	created_at ` + bigint + ` NOT NULL,
	updated_at ` + bigint + ` NOT NULL
);
CREATE INDEX knowledge_documents_scope ON knowledge_documents (scope);
CREATE TABLE knowledge_chunks (
	document TEXT NOT NULL,
	seq      ` + bigint + ` NOT NULL,
	scope    TEXT NOT NULL,
	source   TEXT NOT NULL,
	text     TEXT NOT NULL,
	PRIMARY KEY (document, seq)
);
CREATE INDEX knowledge_chunks_scope ON knowledge_chunks (scope);
CREATE TABLE knowledge_scopes (scope TEXT PRIMARY KEY, generation ` + bigint + ` NOT NULL);`}}
}

// Document statuses.
const (
	StatusQueued    = "queued"    // recorded, not started
	StatusParsing   = "parsing"   // reading the file into text
	StatusEmbedding = "embedding" // Done of Chunks embedded and stored
	StatusReady     = "ready"     // searchable
	StatusFailed    = "failed"    // Error says why; nothing of it is searchable
)

// staleAfter is how long an import may go without progress before the
// list calls it failed (its process ended while it ran).
const staleAfter = 10 * time.Minute

// embedBatch is how many chunks are embedded and stored at a time.
const embedBatch = 32

// Background imports (Add): at most importWorkers run at once, the others
// wait as StatusQueued; at most maxPending are held (their files in
// memory) before Add refuses with ErrBusy.
const (
	importWorkers = 2
	maxPending    = 16
)

// ErrBusy is returned by Add while maxPending imports wait or run here.
var ErrBusy = errors.New("too many imports in progress: try again when some are done")

// Document is one added file and how its import goes.
type Document struct {
	ID      string    `json:"id"`
	Scope   string    `json:"scope"`
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	Status  string    `json:"status"`
	Chunks  int       `json:"chunks"` // 0 until the file is read
	Done    int       `json:"done"`   // chunks embedded and stored
	Error   string    `json:"error,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Passage is one chunk a search found.
type Passage struct {
	Document string `json:"document"` // the document's id
	Scope    string `json:"scope"`
	// Source is the file's name, or "archive.zip/entry" for a zip's entry.
	Source string `json:"source"`
	Seq    int    `json:"seq"` // the chunk's place in its document
	Text   string `json:"text"`
	// Score is the fused rank, 1 for the first of both rankings, lower
	// the further down either it is.
	Score float64 `json:"score"`
	// Similarity is the cosine similarity of its vector to the query's, 0
	// when only the keyword search found it.
	Similarity float64 `json:"similarity"`
}

// Embedder turns texts into vectors (llm.Embeddings does).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Options are a Store's parts.
type Options struct {
	// Vectors is where the chunks' vectors go; required.
	Vectors vector.Store
	// Embedder returns the embedding model to use now (the embedding
	// group, read anew for every import and search: models.Store.Embeddings).
	// An error wrapping llm.ErrNoEmbeddingModel makes searches keyword-only
	// and imports fail with it.
	Embedder func(ctx context.Context) (Embedder, error)
	// ChunkRunes and OverlapRunes size the chunks; 0: the defaults.
	ChunkRunes, OverlapRunes int
	Log                      *slog.Logger
}

// Store is the knowledge base in nekro's database. Safe for concurrent
// use.
type Store struct {
	opts        Options
	write, read *sql.DB
	release     func() error

	bg     context.Context // imports started by Add run until Close
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	cancel map[string]context.CancelFunc // imports running here, by document
	slots  chan struct{}                 // importWorkers
	index  map[string]*scopeIndex        // keyword indexes by scope
}

// Open migrates the knowledge tables of h's database and returns the
// store on it.
func Open(ctx context.Context, h db.Handle, opts Options) (*Store, error) {
	if opts.Vectors == nil {
		return nil, errors.New("knowledge: no vector store")
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.OverlapRunes == 0 { // Chunk takes 0 as no overlap
		opts.OverlapRunes = DefaultOverlapRunes
	}
	s := &Store{opts: opts, cancel: map[string]context.CancelFunc{}, index: map[string]*scopeIndex{},
		slots: make(chan struct{}, importWorkers)}
	switch {
	case h.SQLite != nil:
		if err := db.MigrateSQLite(ctx, h.SQLite, component, migrations("INTEGER")); err != nil {
			return nil, fmt.Errorf("knowledge: %w", err)
		}
		s.write, s.read, s.release = h.SQLite.Write, h.SQLite.Read, func() error { return nil }
	case h.Postgres != nil:
		if err := db.MigratePostgres(ctx, h.Postgres, component, migrations("BIGINT")); err != nil {
			return nil, fmt.Errorf("knowledge: %w", err)
		}
		w := stdlib.OpenDBFromPool(h.Postgres)
		s.write, s.read, s.release = w, w, w.Close
	default:
		return nil, errors.New("knowledge: no database")
	}
	s.bg, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// Close stops the imports running here (their documents stay failed,
// "interrupted") and waits for them.
func (s *Store) Close() error {
	s.stop()
	s.wg.Wait()
	return s.release()
}

// CheckScope reports whether scope names a knowledge scope: "global" or
// "chat:<chat key>".
func CheckScope(scope string) error {
	if scope == "global" {
		return nil
	}
	key, ok := strings.CutPrefix(scope, "chat:")
	if !ok {
		return fmt.Errorf("knowledge scope %q: want global or chat:<chat key>", scope)
	}
	if err := keys.Scope("chat", key); err != nil {
		return fmt.Errorf("knowledge scope %q: %w", scope, err)
	}
	return nil
}

// vectorScope is a knowledge scope's scope in the vector store, apart
// from the long-term memory's vectors of the same chat.
func vectorScope(scope string) string { return "knowledge:" + scope }

// ChatScope is the scope of one chat's documents.
func ChatScope(chatKey string) string { return "chat:" + chatKey }

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "kb_" + hex.EncodeToString(b[:])
}

func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" || len(name) > 255 {
		return "", fmt.Errorf("knowledge: a file name of 1 to 255 bytes is needed, got %q", name)
	}
	return name, nil
}

// Add records a document and imports it in the background: List shows
// its progress, and it is searchable once StatusReady. Its format is
// checked here (by the name's extension), its content in the import.
func (s *Store) Add(ctx context.Context, scope, name string, data []byte) (Document, error) {
	s.mu.Lock()
	busy := len(s.cancel) >= maxPending
	s.mu.Unlock()
	if busy {
		return Document{}, ErrBusy
	}
	d, err := s.record(ctx, scope, name, data)
	if err != nil {
		return Document{}, err
	}
	ictx, cancel := context.WithCancel(s.bg)
	s.mu.Lock()
	s.cancel[d.ID] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		// Wait, queued, for a worker's slot, saying now and then that
		// the wait is alive (the list calls a silent import failed).
		tick := time.NewTicker(staleAfter / 4)
		defer tick.Stop()
		for {
			select {
			case s.slots <- struct{}{}:
				s.importDoc(ictx, d, data)
				<-s.slots
			case <-ictx.Done():
				s.importDoc(ictx, d, nil) // records it interrupted
			case <-tick.C:
				s.write.ExecContext(ictx, `UPDATE knowledge_documents SET updated_at = $1 WHERE id = $2`, time.Now().UnixMilli(), d.ID)
				continue
			}
			break
		}
		s.mu.Lock()
		delete(s.cancel, d.ID)
		s.mu.Unlock()
	}()
	return d, nil
}

// Import adds a document and imports it before returning (the CLI):
// progress, when not nil, is told each batch stored. The document is
// returned as it ended, failed with its error or ready.
func (s *Store) Import(ctx context.Context, scope, name string, data []byte, progress func(Document)) (Document, error) {
	d, err := s.record(ctx, scope, name, data)
	if err != nil {
		return Document{}, err
	}
	s.importDocProgress(ctx, d, data, progress)
	got, err := s.Get(context.WithoutCancel(ctx), d.ID)
	if err != nil {
		return d, err
	}
	if got.Status == StatusFailed {
		return got, fmt.Errorf("knowledge: %s: %s", got.Name, got.Error)
	}
	return got, nil
}

func (s *Store) record(ctx context.Context, scope, name string, data []byte) (Document, error) {
	if err := CheckScope(scope); err != nil {
		return Document{}, err
	}
	name, err := checkName(name)
	if err != nil {
		return Document{}, err
	}
	if !supported(strings.ToLower(pathExt(name))) {
		return Document{}, fmt.Errorf("knowledge: %s: %w (known: %s)", name, ErrUnsupported, strings.Join(Formats, " "))
	}
	if len(data) > MaxFileBytes {
		return Document{}, fmt.Errorf("knowledge: %s: %d bytes, more than the %d accepted: %w", name, len(data), MaxFileBytes, ErrTooLarge)
	}
	now := time.Now()
	d := Document{ID: newID(), Scope: scope, Name: name, Size: int64(len(data)), Status: StatusQueued, Created: now, Updated: now}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO knowledge_documents
		(id, scope, name, size, status, chunks, done, error, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, 0, 0, '', $6, $6)`, d.ID, d.Scope, d.Name, d.Size, d.Status, now.UnixMilli()); err != nil {
		return Document{}, fmt.Errorf("knowledge: record %s: %w", name, err)
	}
	return d, nil
}

func pathExt(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}

func (s *Store) importDoc(ctx context.Context, d Document, data []byte) {
	s.importDocProgress(ctx, d, data, nil)
}

// importDocProgress reads, chunks, embeds and stores one document,
// recording its progress; on failure the document is failed with why,
// and what was stored of it removed.
func (s *Store) importDocProgress(ctx context.Context, d Document, data []byte, progress func(Document)) {
	err := s.runImport(ctx, &d, data, progress)
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	bg := context.WithoutCancel(ctx)
	s.opts.Log.Warn("knowledge import failed", "document", d.ID, "name", d.Name, "scope", d.Scope, "err", err)
	if _, derr := s.opts.Vectors.DeleteDocument(bg, vectorScope(d.Scope), d.ID); derr != nil {
		s.opts.Log.Error("knowledge: remove a failed import's vectors", "document", d.ID, "err", derr)
	}
	s.write.ExecContext(bg, `DELETE FROM knowledge_chunks WHERE document = $1`, d.ID)
	s.write.ExecContext(bg, `UPDATE knowledge_documents SET status = $1, error = $2, updated_at = $3 WHERE id = $4`,
		StatusFailed, err.Error(), time.Now().UnixMilli(), d.ID)
	if progress != nil {
		d.Status, d.Error = StatusFailed, err.Error()
		progress(d)
	}
}

// errDeleted ends an import whose document was deleted meanwhile.
var errDeleted = errors.New("the document was deleted while it was imported")

func (s *Store) setStatus(ctx context.Context, d *Document) error {
	d.Updated = time.Now()
	res, err := s.write.ExecContext(ctx, `UPDATE knowledge_documents SET status = $1, chunks = $2, done = $3, updated_at = $4 WHERE id = $5`,
		d.Status, d.Chunks, d.Done, d.Updated.UnixMilli(), d.ID)
	if err != nil {
		return fmt.Errorf("record progress: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errDeleted
	}
	return nil
}

type pendingChunk struct {
	source, text string
}

func (s *Store) runImport(ctx context.Context, d *Document, data []byte, progress func(Document)) error {
	report := func() {
		if progress != nil {
			progress(*d)
		}
	}
	d.Status = StatusParsing
	if err := s.setStatus(ctx, d); err != nil {
		return err
	}
	report()
	srcs, err := Extract(d.Name, data)
	if err != nil {
		return err
	}
	var chunks []pendingChunk
	for _, src := range srcs {
		for _, c := range Chunk(src.Text, s.opts.ChunkRunes, s.opts.OverlapRunes) {
			chunks = append(chunks, pendingChunk{src.Name, c})
		}
	}
	if len(chunks) == 0 {
		return errors.New("no text found in it (a scanned PDF needs OCR first)")
	}
	if s.opts.Embedder == nil {
		return llm.ErrNoEmbeddingModel
	}
	emb, err := s.opts.Embedder(ctx)
	if err != nil {
		return err
	}
	d.Status, d.Chunks, d.Done = StatusEmbedding, len(chunks), 0
	if err := s.setStatus(ctx, d); err != nil {
		return err
	}
	report()
	for lo := 0; lo < len(chunks); lo += embedBatch {
		batch := chunks[lo:min(lo+embedBatch, len(chunks))]
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = c.text
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			return err
		}
		if len(vecs) != len(batch) {
			return fmt.Errorf("the embedding model returned %d vectors for %d texts", len(vecs), len(batch))
		}
		items := make([]vector.Item, len(batch))
		for i, c := range batch {
			seq := lo + i
			items[i] = vector.Item{ID: d.ID + "/" + strconv.Itoa(seq), Scope: vectorScope(d.Scope), Document: d.ID, Vector: vecs[i], Text: c.text,
				Metadata: map[string]string{"source": c.source, "seq": strconv.Itoa(seq)}}
		}
		if err := s.opts.Vectors.Upsert(ctx, items); err != nil {
			return err
		}
		if err := s.insertChunks(ctx, d, lo, batch); err != nil {
			return err
		}
		d.Done = lo + len(batch)
		if err := s.setStatus(ctx, d); err != nil {
			return err
		}
		report()
	}
	// Searchable from here on: the status and the scope's generation in
	// one transaction.
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		d.Status, d.Updated = StatusReady, time.Now()
		res, err := tx.ExecContext(ctx, `UPDATE knowledge_documents SET status = $1, updated_at = $2 WHERE id = $3`,
			d.Status, d.Updated.UnixMilli(), d.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errDeleted
		}
		return bump(ctx, tx, d.Scope)
	})
	if err != nil {
		return err
	}
	report()
	s.opts.Log.Info("knowledge document imported", "document", d.ID, "name", d.Name, "scope", d.Scope, "chunks", d.Chunks)
	return nil
}

func (s *Store) insertChunks(ctx context.Context, d *Document, lo int, batch []pendingChunk) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for i, c := range batch {
			if _, err := tx.ExecContext(ctx, `INSERT INTO knowledge_chunks (document, seq, scope, source, text) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (document, seq) DO UPDATE SET source = excluded.source, text = excluded.text`,
				d.ID, lo+i, d.Scope, c.source, c.text); err != nil {
				return fmt.Errorf("store chunk %d: %w", lo+i, err)
			}
		}
		return nil
	})
}

func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("knowledge: begin: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("knowledge: commit: %w", err)
	}
	return nil
}

// bump records, inside tx, that what scope's searches see changed.
func bump(ctx context.Context, tx *sql.Tx, scope string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO knowledge_scopes (scope, generation) VALUES ($1, 1)
		ON CONFLICT (scope) DO UPDATE SET generation = knowledge_scopes.generation + 1`, scope); err != nil {
		return fmt.Errorf("knowledge: bump %s: %w", scope, err)
	}
	return nil
}

const docColumns = `id, scope, name, size, status, chunks, done, error, created_at, updated_at`

func scanDoc(sc interface{ Scan(...any) error }) (Document, error) {
	var d Document
	var created, updated int64
	if err := sc.Scan(&d.ID, &d.Scope, &d.Name, &d.Size, &d.Status, &d.Chunks, &d.Done, &d.Error, &created, &updated); err != nil {
		return Document{}, err
	}
	d.Created, d.Updated = time.UnixMilli(created), time.UnixMilli(updated)
	if d.Status != StatusReady && d.Status != StatusFailed && time.Since(d.Updated) > staleAfter {
		d.Status = StatusFailed
		d.Error = "the import stopped (its process ended?): delete it and add the file again"
	}
	return d, nil
}

// ErrNotFound is returned (wrapped) for a document that does not exist.
var ErrNotFound = errors.New("no such document")

// Get returns one document.
func (s *Store) Get(ctx context.Context, id string) (Document, error) {
	d, err := scanDoc(s.read.QueryRowContext(ctx, `SELECT `+docColumns+` FROM knowledge_documents WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Document{}, fmt.Errorf("knowledge: %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Document{}, fmt.Errorf("knowledge: %w", err)
	}
	return d, nil
}

// List returns the documents of scope ("" for every scope), newest
// first.
func (s *Store) List(ctx context.Context, scope string) ([]Document, error) {
	q := `SELECT ` + docColumns + ` FROM knowledge_documents`
	var args []any
	if scope != "" {
		q += ` WHERE scope = $1`
		args = append(args, scope)
	}
	rows, err := s.read.QueryContext(ctx, q+` ORDER BY created_at DESC, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("knowledge: list: %w", err)
	}
	defer rows.Close()
	out := []Document{}
	for rows.Next() {
		d, err := scanDoc(rows)
		if err != nil {
			return nil, fmt.Errorf("knowledge: list: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Delete removes a document: its chunks, its vectors, and its import if
// one runs here.
func (s *Store) Delete(ctx context.Context, id string) (Document, error) {
	d, err := s.Get(ctx, id)
	if err != nil {
		return Document{}, err
	}
	s.mu.Lock()
	if cancel := s.cancel[id]; cancel != nil {
		cancel()
	}
	s.mu.Unlock()
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM knowledge_documents WHERE id = $1`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM knowledge_chunks WHERE document = $1`, id); err != nil {
			return err
		}
		return bump(ctx, tx, d.Scope)
	})
	if err != nil {
		return Document{}, fmt.Errorf("knowledge: delete %s: %w", id, err)
	}
	if _, err := s.opts.Vectors.DeleteDocument(ctx, vectorScope(d.Scope), id); err != nil {
		return d, fmt.Errorf("knowledge: delete the vectors of %s: %w", id, err)
	}
	return d, nil
}

// DeleteScope removes every document of a scope (a chat being erased)
// and their vectors, and returns how many documents there were.
func (s *Store) DeleteScope(ctx context.Context, scope string) (int, error) {
	docs, err := s.List(ctx, scope)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	for _, d := range docs {
		if cancel := s.cancel[d.ID]; cancel != nil {
			cancel()
		}
	}
	s.mu.Unlock()
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM knowledge_documents WHERE scope = $1`, scope); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM knowledge_chunks WHERE scope = $1`, scope); err != nil {
			return err
		}
		return bump(ctx, tx, scope)
	})
	if err != nil {
		return 0, fmt.Errorf("knowledge: delete scope %s: %w", scope, err)
	}
	if _, err := s.opts.Vectors.DeleteScope(ctx, vectorScope(scope)); err != nil {
		return len(docs), fmt.Errorf("knowledge: delete the vectors of %s: %w", scope, err)
	}
	return len(docs), nil
}

// sortScored orders best first, ties by document and place.
func sortScored(xs []scored) {
	sort.Slice(xs, func(i, j int) bool {
		if xs[i].score != xs[j].score {
			return xs[i].score > xs[j].score
		}
		if xs[i].chunk.doc != xs[j].chunk.doc {
			return xs[i].chunk.doc < xs[j].chunk.doc
		}
		return xs[i].chunk.seq < xs[j].chunk.seq
	})
}

// StoredChunk is one stored chunk of a document, as it was cut: each starts
// with the end of the one before (the overlap).
type StoredChunk struct {
	Seq    int    `json:"seq"`
	Source string `json:"source"`
	Text   string `json:"text"`
}

// Chunks returns a document's chunks in order (none until its import
// stored them).
func (s *Store) Chunks(ctx context.Context, id string) ([]StoredChunk, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT seq, source, text FROM knowledge_chunks WHERE document = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("knowledge: chunks of %s: %w", id, err)
	}
	defer rows.Close()
	out := []StoredChunk{}
	for rows.Next() {
		var c StoredChunk
		if err := rows.Scan(&c.Seq, &c.Source, &c.Text); err != nil {
			return nil, fmt.Errorf("knowledge: chunks of %s: %w", id, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("knowledge: chunks of %s: %w", id, err)
	}
	return out, nil
}
