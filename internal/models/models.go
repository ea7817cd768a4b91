// Package models keeps the operator's model groups in the database and
// routes model requests through them: each group is an OpenAI-compatible
// endpoint (base URL, model, key, sampling settings, extra request
// fields) that may fall back to another group when it fails after its
// retries. The default group answers turns; plugins ask others by name
// (Ctx.AskModel). Edits (GET/PUT /api/models, the web UI's Models page)
// apply to the next request of every nekro process on the database,
// without a restart.
//
// The environment (NEKRO_LLM_*) seeds the groups: while the operator has
// not edited them, every start writes what the environment names, so a
// deployment configured by environment behaves as before; once edited,
// the database wins and the environment is ignored (the log says so).
package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/llm"
)

const component = "models"

// One migration list serves both databases: the SQL is the same. The
// whole configuration is one JSON document in one row (id 1).
var migrations = []db.Migration{{
	Version: 1, Name: "create model_settings",
	SQL: `CREATE TABLE model_settings (
	id         INTEGER NOT NULL PRIMARY KEY,
	config     TEXT    NOT NULL,
	updated_at BIGINT  NOT NULL
)`,
}}

// Group is one model group.
type Group struct {
	// Name is how turns and plugins ask for it: lower-case letters,
	// digits and underscores ("chat", "vision", "backup").
	Name    string `json:"name"`
	BaseURL string `json:"base_url"`
	Model   string `json:"model"`
	// APIKey is write-only: answers leave it out and say HasKey. A PUT
	// with an empty key keeps the group's stored key; ClearKey removes it.
	APIKey   string `json:"api_key,omitempty"`
	HasKey   bool   `json:"has_key"`
	ClearKey bool   `json:"clear_key,omitempty"`
	// Sampling settings; unset ones are not sent.
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	// Extra holds further request fields sent as they are.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
	// Fallback names the group tried when this one fails after its
	// retries; "" for none.
	Fallback string `json:"fallback,omitempty"`
	// ContextWindow is how many tokens the model reads in one request,
	// its answer included (0: llm.DefaultContextWindow). Turns' prompts
	// are built within it, MaxTokens (or llm.DefaultAnswerReserve) kept
	// free for the answer; older history is replaced by a summary.
	ContextWindow int `json:"context_window,omitempty"`
}

// Window returns g's context window and answer reserve.
func (g Group) Window() llm.Window { return llm.WindowOf(g.Name, g.ContextWindow, g.MaxTokens) }

// MinPromptTokens is the least room a group's window may leave the
// prompt: the runtime contract and a few messages.
const MinPromptTokens = 1024

// Settings are every group and which one answers turns.
type Settings struct {
	// Default is the group of turns (llm.DefaultGroup when empty).
	Default string  `json:"default"`
	Groups  []Group `json:"groups"`
	// Source is "env" while the groups are the environment's seed,
	// "api" once the operator edited them.
	Source string `json:"source,omitempty"`
}

// Sources of Settings.
const (
	SourceEnv = "env"
	SourceAPI = "api"
)

var groupName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// Check reports the first problem of s, naming the group.
func (s Settings) Check() error {
	names := map[string]bool{}
	for _, g := range s.Groups {
		if !groupName.MatchString(g.Name) {
			return fmt.Errorf("model group name %q: use 1 to 32 lower-case letters, digits or underscores", g.Name)
		}
		if names[g.Name] {
			return fmt.Errorf("model group %s is listed twice", g.Name)
		}
		names[g.Name] = true
		if g.Model == "" {
			return fmt.Errorf("model group %s: model is empty", g.Name)
		}
		if !strings.HasPrefix(g.BaseURL, "http://") && !strings.HasPrefix(g.BaseURL, "https://") {
			return fmt.Errorf("model group %s: base_url %q is not an http(s) URL", g.Name, g.BaseURL)
		}
		if g.Temperature != nil && (*g.Temperature < 0 || *g.Temperature > 2) {
			return fmt.Errorf("model group %s: temperature %v is not between 0 and 2", g.Name, *g.Temperature)
		}
		if g.TopP != nil && (*g.TopP < 0 || *g.TopP > 1) {
			return fmt.Errorf("model group %s: top_p %v is not between 0 and 1", g.Name, *g.TopP)
		}
		if g.MaxTokens < 0 {
			return fmt.Errorf("model group %s: max_tokens %d is not a whole number of tokens", g.Name, g.MaxTokens)
		}
		if g.ContextWindow < 0 {
			return fmt.Errorf("model group %s: context_window %d is not a whole number of tokens", g.Name, g.ContextWindow)
		}
		if w := g.Window(); g.ContextWindow > 0 && w.Prompt() < MinPromptTokens {
			return fmt.Errorf("model group %s: a context window of %d tokens less max_tokens %d leaves %d for the prompt: give it at least %d",
				g.Name, w.Tokens, w.Reserve, w.Prompt(), MinPromptTokens)
		}
		for k := range g.Extra {
			switch k {
			case "model", "messages":
				return fmt.Errorf("model group %s: extra field %q cannot be set", g.Name, k)
			}
		}
	}
	for _, g := range s.Groups {
		if g.Fallback != "" && (g.Fallback == g.Name || !names[g.Fallback]) {
			return fmt.Errorf("model group %s: fallback %q is not another group", g.Name, g.Fallback)
		}
	}
	return nil
}

// checkDefault reports a default group that is not among the groups: an
// edit must name one (the environment may seed groups for plugins only,
// leaving turns without a model).
func (s Settings) checkDefault() error {
	for _, g := range s.Groups {
		if g.Name == s.defaultGroup() {
			return nil
		}
	}
	if len(s.Groups) == 0 {
		return nil
	}
	return fmt.Errorf("the default model group %q is not among the groups", s.defaultGroup())
}

func (s Settings) defaultGroup() string {
	if s.Default == "" {
		return llm.DefaultGroup
	}
	return s.Default
}

// Options tune a Store.
type Options struct {
	// Client holds what every group's client shares besides its
	// endpoint: Timeout, MaxRetries, RetryBase, HTTPClient.
	Client llm.Config
	// Wrap, when set, wraps every group's client (nekro's metrics).
	Wrap func(llm.Model) llm.Model
	// Refresh is how long a read of the settings is trusted before the
	// database is asked again (edits by other processes); default 1 s.
	// Edits through this Store apply at once.
	Refresh time.Duration
	Log     *slog.Logger
	// Key, 32 bytes (LoadKey), seals the groups' API keys in the
	// database with AES-256-GCM; nil stores them as given. Keys stored
	// before are sealed when the Store opens.
	Key []byte
}

// Store keeps the groups and routes requests through them. It is an
// llm.Router.
type Store struct {
	db    *sql.DB
	close func() error
	opts  Options
	seal  *sealer

	mu     sync.Mutex
	seed   *Settings // this process's environment (Seed), routed by until the groups are edited
	raw    string    // the settings the routes were built from
	read   time.Time
	routes *routes
}

// Open migrates the table on h.
func Open(ctx context.Context, h db.Handle, opts Options) (*Store, error) {
	w, closeFn, err := db.Writer(ctx, h, component, migrations)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	seal, err := newSealer(opts.Key)
	if err != nil {
		closeFn()
		return nil, err
	}
	s := &Store{db: w, close: closeFn, opts: opts, seal: seal}
	if err := s.sealStored(ctx); err != nil {
		closeFn()
		return nil, err
	}
	return s, nil
}

// sealStored seals the keys stored before keys were sealed (or by a
// process without a key file), unless another process rewrote the
// settings meanwhile (it sealed them then).
func (s *Store) sealStored(ctx context.Context) error {
	if s.seal == nil {
		return nil
	}
	set, raw, ok, err := s.loadSealed(ctx)
	if err != nil || !ok {
		return err
	}
	plain := 0
	for i, g := range set.Groups {
		if g.APIKey != "" && !sealed(g.APIKey) {
			set.Groups[i].APIKey = s.seal.seal(g.APIKey)
			plain++
		}
	}
	if plain == 0 {
		return nil
	}
	b, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("model groups: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE model_settings SET config = $1 WHERE id = 1 AND config = $2`, string(b), raw); err != nil {
		return fmt.Errorf("model groups: seal the stored keys: %w", err)
	}
	s.opts.Log.Info("model group keys stored in the clear are now sealed with "+KeyFile, "keys", plain)
	return nil
}

// Close releases the store's own handle; the database stays open.
func (s *Store) Close() error { return s.close() }

// load reads the stored settings with their keys opened; ok is false
// when none were ever stored. A group whose key cannot be opened (another
// key file sealed it) has its error in bad, and no key.
func (s *Store) load(ctx context.Context) (set Settings, raw string, ok bool, bad map[string]error, err error) {
	set, raw, ok, err = s.loadSealed(ctx)
	if err != nil {
		return set, raw, ok, nil, err
	}
	for i, g := range set.Groups {
		k, err := s.seal.open(g.APIKey)
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[g.Name] = fmt.Errorf("model group %s: %w", g.Name, err)
		}
		set.Groups[i].APIKey = k
	}
	return set, raw, ok, bad, nil
}

// loadSealed reads the stored settings, keys as stored (sealed, or in
// the clear from before); ok is false when none were ever stored.
func (s *Store) loadSealed(ctx context.Context) (set Settings, raw string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT config FROM model_settings WHERE id = 1`).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return Settings{}, "", false, nil
	}
	if err != nil {
		return Settings{}, "", false, fmt.Errorf("model groups: %w", err)
	}
	if err := json.Unmarshal([]byte(raw), &set); err != nil {
		return Settings{}, "", false, fmt.Errorf("model groups: stored settings do not decode: %w", err)
	}
	return set, raw, true, nil
}

func (s *Store) save(ctx context.Context, set Settings) error {
	set.Groups = slices.Clone(set.Groups)
	for i := range set.Groups {
		set.Groups[i].HasKey, set.Groups[i].ClearKey = false, false
		set.Groups[i].APIKey = s.seal.seal(set.Groups[i].APIKey)
	}
	raw, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("model groups: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO model_settings (id, config, updated_at) VALUES (1, $1, $2)
		ON CONFLICT (id) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at`,
		string(raw), time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("model groups: %w", err)
	}
	s.mu.Lock()
	s.read = time.Time{} // the next request reads what was written
	s.mu.Unlock()
	return nil
}

// Seed writes set, the environment's groups, unless the operator edited
// the stored ones: then it only logs that the environment is ignored.
// Until they are edited, this Store routes by set, whatever another
// process seeded. An
// empty set changes nothing (a command run without the environment must
// not wipe what `nekro serve` was given).
func (s *Store) Seed(ctx context.Context, set Settings) error {
	if len(set.Groups) == 0 {
		return nil
	}
	set.Source = SourceEnv
	if err := set.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	seed := set
	seed.Groups = slices.Clone(set.Groups)
	s.seed, s.read = &seed, time.Time{}
	s.mu.Unlock()
	cur, _, ok, err := s.loadSealed(ctx)
	if err != nil {
		return err
	}
	if ok && cur.Source != SourceEnv {
		s.opts.Log.Info("model groups were edited in the web UI or API: NEKRO_LLM_* is ignored")
		return nil
	}
	return s.save(ctx, set)
}

// Get returns the settings, keys left out (HasKey says which have one).
func (s *Store) Get(ctx context.Context) (Settings, error) {
	set, _, _, err := s.loadSealed(ctx)
	if err != nil {
		return Settings{}, err
	}
	if set.Default == "" {
		set.Default = llm.DefaultGroup
	}
	if set.Groups == nil {
		set.Groups = []Group{}
	}
	for i := range set.Groups {
		set.Groups[i].HasKey = set.Groups[i].APIKey != ""
		set.Groups[i].APIKey = ""
	}
	return set, nil
}

// Put replaces the settings with set. A group given with no key keeps
// the key stored under its name, unless it says ClearKey.
func (s *Store) Put(ctx context.Context, set Settings) error {
	if set.Default == "" {
		set.Default = llm.DefaultGroup
	}
	if err := set.Check(); err != nil {
		return err
	}
	if err := set.checkDefault(); err != nil {
		return err
	}
	cur, _, _, err := s.loadSealed(ctx)
	if err != nil {
		return err
	}
	keys := map[string]string{} // as stored: kept sealed
	for _, g := range cur.Groups {
		keys[g.Name] = g.APIKey
	}
	for i, g := range set.Groups {
		if g.APIKey == "" && !g.ClearKey {
			set.Groups[i].APIKey = keys[g.Name]
		}
	}
	set.Source = SourceAPI
	return s.save(ctx, set)
}

// routes are the clients of one version of the settings.
type routes struct {
	def    string
	groups map[string]*route
}

type route struct {
	model    llm.Model
	fallback string
	window   llm.Window
}

// current returns the routes of the stored settings, read again once
// Refresh has passed.
func (s *Store) current(ctx context.Context) (*routes, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routes != nil && time.Since(s.read) < s.opts.Refresh {
		return s.routes, nil
	}
	set, raw, ok, bad, err := s.load(ctx)
	if err != nil {
		if s.routes != nil {
			return s.routes, nil // the last good ones, while the database fails
		}
		return nil, err
	}
	// Until the operator edits them, a process seeded by its environment
	// routes by its own environment, as before the groups were kept:
	// replicas (or `nekro exec`) given different NEKRO_LLM_* each keep
	// theirs.
	if s.seed != nil && (!ok || set.Source == SourceEnv) {
		set = *s.seed
		b, _ := json.Marshal(set)
		raw = "seed:" + string(b)
		bad = nil
	}
	s.read = time.Now()
	if s.routes != nil && raw == s.raw {
		return s.routes, nil
	}
	rs := &routes{def: set.defaultGroup(), groups: map[string]*route{}}
	for _, g := range set.Groups {
		if err := bad[g.Name]; err != nil {
			s.opts.Log.Error("model group left out: its key cannot be read", "group", g.Name, "err", err)
			continue
		}
		c, err := s.client(g)
		if err != nil {
			s.opts.Log.Warn("model group left out", "group", g.Name, "err", err)
			continue
		}
		rs.groups[g.Name] = &route{model: c, fallback: g.Fallback, window: g.Window()}
	}
	s.routes, s.raw = rs, raw
	return rs, nil
}

// client builds g's client with the shared options.
func (s *Store) client(g Group) (llm.Model, error) {
	cfg := s.opts.Client
	cfg.BaseURL, cfg.APIKey, cfg.Model = g.BaseURL, g.APIKey, g.Model
	cfg.Temperature, cfg.TopP, cfg.MaxTokens, cfg.Extra = g.Temperature, g.TopP, g.MaxTokens, g.Extra
	c, err := llm.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	if s.opts.Wrap != nil {
		return s.opts.Wrap(c), nil
	}
	return c, nil
}

// Ready returns nil when the default group can answer.
func (s *Store) Ready(ctx context.Context) error {
	rs, err := s.current(ctx)
	if err != nil {
		return err
	}
	if rs.groups[rs.def] == nil {
		return llm.ErrNoModel
	}
	return nil
}

// Route sends msgs to group ("" is the default group) and, while the
// groups tried fail, to each one's fallback, each group once. The
// Completion says which group answered; Attempts and Duration count
// every group tried.
func (s *Store) Route(ctx context.Context, group string, msgs []llm.ChatMessage) (llm.Completion, error) {
	rs, err := s.current(ctx)
	if err != nil {
		return llm.Completion{}, err
	}
	// "chat" names the turns' group, whatever the operator called it.
	if group == "" || (group == llm.DefaultGroup && rs.groups[group] == nil) {
		group = rs.def
	}
	if rs.groups[group] == nil {
		if group == rs.def {
			return llm.Completion{}, llm.ErrNoModel
		}
		return llm.Completion{}, llm.UnknownGroup(group)
	}
	var (
		errs     []string
		last     error
		attempts int
		spent    time.Duration
		tried    = map[string]bool{}
	)
	for name := group; name != "" && !tried[name]; {
		r := rs.groups[name]
		if r == nil {
			break
		}
		tried[name] = true
		c, err := r.model.Complete(ctx, msgs)
		attempts += max(c.Attempts, 1)
		spent += c.Duration
		if err == nil {
			c.Group, c.Attempts, c.Duration = name, attempts, spent
			if len(errs) > 0 {
				s.opts.Log.Warn("a model group failed; its fallback answered", "failed", strings.Join(errs, "; "), "answered", name)
			}
			return c, nil
		}
		errs, last = append(errs, fmt.Sprintf("group %s: %v", name, err)), err
		if ctx.Err() != nil {
			break
		}
		name = r.fallback
	}
	failed := llm.Completion{Attempts: attempts, Duration: spent}
	if len(errs) == 1 {
		return failed, last // one group, no fallback: its own error
	}
	return failed, errors.New("model request failed: " + strings.Join(errs, "; then "))
}

// Window returns the window a request to group ("" is the default group)
// must fit: the smallest prompt room among the group and the groups it
// falls back to, so that a prompt built once fits whichever answers. A
// group nobody configured has the default window.
func (s *Store) Window(ctx context.Context, group string) (llm.Window, error) {
	rs, err := s.current(ctx)
	if err != nil {
		return llm.Window{}, err
	}
	if group == "" || (group == llm.DefaultGroup && rs.groups[group] == nil) {
		group = rs.def
	}
	var (
		w     llm.Window
		found bool
		tried = map[string]bool{}
	)
	for name := group; name != "" && !tried[name]; {
		r := rs.groups[name]
		if r == nil {
			break
		}
		tried[name] = true
		if !found || r.window.Prompt() < w.Prompt() {
			w, found = r.window, true
		}
		name = r.fallback
	}
	if !found {
		return llm.WindowOf(group, 0, 0), nil
	}
	return w, nil
}

// TestPrompt is what Test asks: one token is enough to answer.
const TestPrompt = "Reply with the single word OK."

// Test sends one short request (at most one token, no retries) to g as
// given, with the key stored under g's name when g has none, and returns
// the answer or the error, so the operator can check a group before (or
// after) saving it. The embedding group is sent one text to embed.
func (s *Store) Test(ctx context.Context, g Group) (string, error) {
	if g.APIKey == "" && !g.ClearKey {
		cur, _, _, bad, err := s.load(ctx)
		if err != nil {
			return "", err
		}
		if err := bad[g.Name]; err != nil {
			return "", err
		}
		for _, c := range cur.Groups {
			if c.Name == g.Name {
				g.APIKey = c.APIKey
			}
		}
	}
	if g.Name == llm.GroupEmbedding {
		// An embeddings model answers no chat request: embed one text.
		cfg := s.embeddingConfig(g)
		cfg.MaxRetries = -1
		e, err := llm.NewEmbeddings(cfg, llm.EmbeddingOptions{})
		if err != nil {
			return "", err
		}
		dims, _, err := e.Probe(ctx)
		if err != nil {
			return "", hideKey(err, g.APIKey)
		}
		return fmt.Sprintf("a vector of %d dimensions", dims), nil
	}
	cfg := s.opts.Client
	cfg.BaseURL, cfg.APIKey, cfg.Model = g.BaseURL, g.APIKey, g.Model
	cfg.Temperature, cfg.TopP, cfg.Extra = g.Temperature, g.TopP, g.Extra
	cfg.MaxTokens, cfg.MaxRetries = 1, -1
	c, err := llm.NewClient(cfg)
	if err != nil {
		return "", err
	}
	comp, err := c.Complete(ctx, []llm.ChatMessage{llm.TextMessage("user", TestPrompt)})
	if err != nil {
		return "", hideKey(err, g.APIKey)
	}
	return comp.Text, nil
}

// hideKey returns err with key replaced in its text (an endpoint may
// quote the key it refused); it still matches what it wraps.
func hideKey(err error, key string) error {
	if err == nil || len(key) < 4 || !strings.Contains(err.Error(), key) {
		return err
	}
	return &hiddenKeyError{msg: strings.ReplaceAll(err.Error(), key, "(the key)"), err: err}
}

type hiddenKeyError struct {
	msg string
	err error
}

func (e *hiddenKeyError) Error() string { return e.msg }
func (e *hiddenKeyError) Unwrap() error { return e.err }

// FromConfigs makes the environment's seed: chat is the default group
// ("chat"), others by name; incomplete ones are left out with a warning.
func FromConfigs(chat llm.Config, others map[string]llm.Config, log *slog.Logger) Settings {
	if log == nil {
		log = slog.Default()
	}
	set := Settings{Default: llm.DefaultGroup, Groups: []Group{}}
	add := func(name string, c llm.Config) {
		if err := c.Check(); err != nil {
			if !errors.Is(err, llm.ErrNoModel) || c.BaseURL != "" || c.Model != "" {
				log.Warn("model group left out: its configuration is incomplete", "group", name, "err", err)
			}
			return
		}
		set.Groups = append(set.Groups, Group{Name: name, BaseURL: c.BaseURL, Model: c.Model, APIKey: c.APIKey,
			Temperature: c.Temperature, TopP: c.TopP, MaxTokens: c.MaxTokens, Extra: c.Extra, ContextWindow: c.ContextWindow})
	}
	add(llm.DefaultGroup, chat)
	for _, name := range slices.Sorted(maps.Keys(others)) {
		if name != llm.DefaultGroup && groupName.MatchString(name) {
			add(name, others[name])
		}
	}
	return set
}

var (
	_ llm.Router  = (*Store)(nil)
	_ llm.Windows = (*Store)(nil)
)
