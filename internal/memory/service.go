package memory

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/llm"
)

// Group is the model group the memory model is asked through; when the
// operator configured none of that name, the turns' group answers.
const Group = "memory"

// Defaults of Options.
const (
	DefaultPerHour       = 6
	DefaultMinMessages   = 3
	DefaultMaxMessages   = 50
	DefaultQueueSize     = 256
	DefaultMaxRecall     = 8
	DefaultMaxBlockBytes = 2000
	// extractTimeout bounds one extraction, model and embeddings included.
	extractTimeout = 2 * time.Minute
	// recallTimeout bounds the recall a turn waits for.
	recallTimeout = 10 * time.Second
)

// Options tune a Service. The zero value keeps memories but neither
// extracts nor recalls any: Enabled turns both on.
type Options struct {
	// Enabled extracts memories after turns and recalls them into
	// prompts (--memory). Listing, deleting and erasing work either way.
	Enabled bool
	// UsersAcrossChats keeps new memories about a user in one scope of
	// that user's, recalled in every chat the user writes in
	// (--memory-users-across-chats); default: per user within each chat.
	UsersAcrossChats bool
	// PerHour bounds the extractions of one chat in any hour (a window
	// starting at its first extraction); default DefaultPerHour.
	PerHour int
	// MinMessages is how many new user messages an extraction waits for;
	// default DefaultMinMessages.
	MinMessages int
	// MaxMessages caps the newest messages one extraction reads; older
	// unread ones are skipped. Default DefaultMaxMessages.
	MaxMessages int
	// QueueSize bounds the chats waiting for an extraction; past it a
	// turn's end is not queued (the chat's next turn queues it again).
	QueueSize int
	// MaxRecall caps the memories recalled into one prompt, and
	// MaxBlockBytes the block they make.
	MaxRecall     int
	MaxBlockBytes int
	Log           *slog.Logger
}

func (o *Options) defaults() {
	if o.PerHour <= 0 {
		o.PerHour = DefaultPerHour
	}
	if o.MinMessages <= 0 {
		o.MinMessages = DefaultMinMessages
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.MaxRecall <= 0 {
		o.MaxRecall = DefaultMaxRecall
	}
	if o.MaxBlockBytes <= 0 {
		o.MaxBlockBytes = DefaultMaxBlockBytes
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Models is what the memory asks models through: the router of model
// groups (the memory model) and the embedding group (internal/models).
type Models interface {
	llm.Router
	Embeddings(ctx context.Context, opts llm.EmbeddingOptions) (*llm.Embeddings, error)
}

// History reads a chat's latest messages (chat.Service).
type History interface {
	History(ctx context.Context, chatKey string, last int) ([]chat.Message, error)
}

// Service extracts memories after turns in one background worker and
// recalls them into prompts: the agent's memory.
type Service struct {
	store  *Store
	models Models
	chats  History
	opts   Options
	log    *slog.Logger

	queue  chan string
	mu     sync.Mutex
	queued map[string]bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewService returns the memory of the store's chats and starts its
// worker when opts.Enabled; Close stops it.
func NewService(store *Store, models Models, chats History, opts Options) *Service {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{store: store, models: models, chats: chats, opts: opts, log: opts.Log,
		queue: make(chan string, opts.QueueSize), queued: map[string]bool{}, ctx: ctx, cancel: cancel}
	if opts.Enabled {
		s.wg.Add(1)
		go s.work()
	}
	return s
}

// Store returns the memories' store.
func (s *Service) Store() *Store { return s.store }

// Enabled reports whether memories are extracted and recalled.
func (s *Service) Enabled() bool { return s.opts.Enabled }

// Close stops the worker: an extraction in progress is cancelled and the
// chats still queued are dropped (their messages are read by the next
// extraction after their next turn).
func (s *Service) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// TurnEnded queues an extraction for chatKey, unless one is queued
// already or the queue is full. It never blocks.
func (s *Service) TurnEnded(chatKey string) {
	if !s.opts.Enabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queued[chatKey] || s.ctx.Err() != nil {
		return
	}
	select {
	case s.queue <- chatKey:
		s.queued[chatKey] = true
	default:
		s.log.Warn("memory: the extraction queue is full; this turn's messages wait for the chat's next turn", "chat", chatKey)
	}
}

// work runs the queued extractions one after the other.
func (s *Service) work() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case chatKey := <-s.queue:
			s.mu.Lock()
			delete(s.queued, chatKey)
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(s.ctx, extractTimeout)
			res, err := s.Extract(ctx, chatKey)
			cancel()
			switch {
			case err != nil:
				s.log.Warn("memory: extraction failed", "chat", chatKey, "err", err)
			case res.Skipped != "":
				s.log.Debug("memory: no extraction", "chat", chatKey, "why", res.Skipped)
			default:
				s.log.Debug("memory: extracted", "chat", chatKey, "messages", res.Messages,
					"added", res.Added, "updated", res.Updated, "deleted", res.Deleted)
			}
		}
	}
}

// ForgetChat erases the chat's memories (a reset).
func (s *Service) ForgetChat(ctx context.Context, chatKey string) error {
	_, err := s.store.ForgetChat(ctx, chatKey)
	return err
}

// embedder returns a client of the embedding group, nil when none is
// configured.
func (s *Service) embedder(ctx context.Context) (*llm.Embeddings, error) {
	e, err := s.models.Embeddings(ctx, llm.EmbeddingOptions{})
	if errors.Is(err, llm.ErrNoEmbeddingModel) {
		return nil, nil
	}
	return e, err
}

// userScopes are the scopes of userID's memories recalled in chatKey,
// and the scope a new one goes to (the first).
func (s *Service) userScopes(chatKey, userID string) []string {
	if s.opts.UsersAcrossChats {
		return []string{UserScope("", userID), UserScope(chatKey, userID)}
	}
	return []string{UserScope(chatKey, userID)}
}

// Search returns up to n memories learned in chatKey, the most similar to
// text first (with no embedding model, those sharing the most words with
// text, else the newest): the chat's own and those about its users, never
// a memory learned in another chat (a user's memories that follow them
// across chats are searched only for those learned here).
func (s *Service) Search(ctx context.Context, chatKey, text string, n int) ([]Memory, error) {
	if n <= 0 {
		n = s.opts.MaxRecall
	}
	all, err := s.store.List(ctx, chatKey, Filter{})
	if err != nil || len(all) == 0 {
		return []Memory{}, err
	}
	seen := map[string]bool{}
	var scopes []string
	for _, m := range all {
		if !seen[m.Scope] {
			seen[m.Scope] = true
			scopes = append(scopes, m.Scope)
		}
	}
	emb, err := s.embedder(ctx)
	if err != nil {
		return nil, err
	}
	var found []Memory
	if emb != nil && strings.TrimSpace(text) != "" {
		// Scopes shared across chats may hold other chats' memories:
		// asked for more, those are dropped below.
		if found, err = s.relevant(ctx, emb, scopes, text, 4*n); err != nil {
			return nil, err
		}
	} else {
		found = byWords(all, text)
	}
	out := make([]Memory, 0, n)
	for _, m := range found {
		if m.ChatKey == chatKey && len(out) < n {
			out = append(out, m)
		}
	}
	return out, nil
}

// byWords orders ms by how many of text's words each contains (case
// folded), those sharing none left out; with no word shared by any, the
// newest first.
func byWords(ms []Memory, text string) []Memory {
	words := strings.Fields(strings.ToLower(text))
	type hit struct {
		m Memory
		n int
	}
	var hits []hit
	for _, m := range ms {
		low, k := strings.ToLower(m.Text), 0
		for _, w := range words {
			if strings.Contains(low, w) {
				k++
			}
		}
		if k > 0 {
			hits = append(hits, hit{m, k})
		}
	}
	if len(hits) == 0 {
		out := slices.Clone(ms)
		slices.SortStableFunc(out, func(a, b Memory) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
		return out
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.n - a.n })
	out := make([]Memory, len(hits))
	for i, h := range hits {
		out[i] = h.m
	}
	return out
}

// Get returns one memory learned in chatKey.
func (s *Service) Get(ctx context.Context, chatKey string, id int64) (Memory, error) {
	return s.store.Get(ctx, chatKey, id)
}
