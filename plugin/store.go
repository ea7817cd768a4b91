package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store is a plugin's KV namespace: string values under string keys, each
// key living in one Scope. A plugin sees only its own namespace (its key,
// author.module); two plugins may use the same key without meeting.
//
// Every call is durable when it returns without error: a process crash
// (even SIGKILL) right after a Set cannot lose it. Every refusal (a key or
// value too long, a quota exceeded, a user-scoped call in a run without a
// user) is an error naming the limit and the size; nothing fails silently.
//
// Reach it with Ctx.Store inside a sandbox method and with Plugin.Store in
// init, cleanup and channel-reset hooks.
type Store interface {
	// Get returns the value of key in scope, and whether it exists. An
	// expired value does not exist.
	Get(ctx context.Context, scope Scope, key string) (value string, found bool, err error)

	// Set stores value under key in scope and reports whether it created the
	// key or replaced a value (the reference's 0 and 1). Without WithTTL or
	// WithExpiry the value never expires, even if the one it replaces did.
	Set(ctx context.Context, scope Scope, key, value string, opts ...SetOption) (SetResult, error)

	// Delete removes key from scope and reports whether a value was there
	// (the reference's 0 = deleted, 1 = none).
	Delete(ctx context.Context, scope Scope, key string) (DeleteResult, error)

	// Update reads key, passes its value to fn and stores what fn returns,
	// atomically: no other write to the key happens in between, so two
	// concurrent updates never lose each other's change. fn gets ("", false)
	// when the key does not exist. If fn returns an error nothing is
	// written and Update returns that error. fn runs once, while the key is
	// locked (on SQLite, while the database's only writer is held, so every
	// other write waits for it), so:
	//
	//   - fn must not call the store: any store call made from inside fn
	//     fails at once with ErrNestedCall (it would otherwise wait for
	//     the lock its own Update holds). Read what fn needs before
	//     Update, write the rest after it. This is detected on fn's own
	//     goroutine; a call fn hands to another goroutine is not, and
	//     waits until the timeout below releases the lock.
	//   - fn must return within the store's update timeout (5s unless the
	//     runtime sets another): past it Update fails with
	//     ErrUpdateTimeout, nothing is written and the lock is released;
	//     fn is left to finish on its own and what it returns is dropped.
	//     If ctx ends first, Update fails with ctx's error the same way.
	//
	// fn runs on a goroutine of its own; if it panics, Update panics with
	// the same value, having written nothing.
	//
	// Without WithTTL or WithExpiry the key keeps the expiry it had.
	// Update returns the value written.
	Update(ctx context.Context, scope Scope, key string, fn func(current string, found bool) (next string, err error), opts ...SetOption) (string, error)

	// Keys lists the keys of scope that start with q.Prefix, in byte order,
	// one page at a time: pass the page's Next as the next query's Cursor
	// until Next is "". Only the keys of exactly that scope are listed.
	Keys(ctx context.Context, scope Scope, q KeysQuery) (KeysPage, error)

	// DeleteScope deletes every value of a chat or of a user, and returns how
	// many it deleted. A chat scope deletes the chat's values and the
	// chat+user values of that chat; a user scope deletes the user's values
	// and the user's chat+user values in every chat; a chat+user scope
	// deletes exactly its own values. The global scope is refused: it
	// would erase the plugin's whole namespace.
	DeleteScope(ctx context.Context, scope Scope) (int, error)
}

// SetResult says what Set did. Its values are the reference's return codes.
type SetResult int

const (
	// Created means the key did not exist (or had expired) before the Set.
	Created SetResult = 0
	// Updated means the Set replaced an existing value.
	Updated SetResult = 1
)

func (r SetResult) String() string {
	switch r {
	case Created:
		return "created"
	case Updated:
		return "updated"
	}
	return fmt.Sprintf("SetResult(%d)", int(r))
}

// DeleteResult says what Delete did. Its values are the reference's return
// codes.
type DeleteResult int

const (
	// Deleted means a value existed and is gone.
	Deleted DeleteResult = 0
	// NotFound means there was no value (or it had expired).
	NotFound DeleteResult = 1
)

func (r DeleteResult) String() string {
	switch r {
	case Deleted:
		return "deleted"
	case NotFound:
		return "not found"
	}
	return fmt.Sprintf("DeleteResult(%d)", int(r))
}

// SetOption changes how Set and Update store a value: WithTTL or
// WithExpiry.
type SetOption func(*setOptions)

// setOptions is what a list of SetOption amounts to; the store reads it
// (pluginhost.ApplySetOptions, whose SetOptions has the same fields and
// is converted from it).
type setOptions struct {
	ExpiresAt time.Time
	TTL       time.Duration
	HasTTL    bool
	Expiry    bool
}

// WithTTL makes the value expire d after it is written. d must be positive.
func WithTTL(d time.Duration) SetOption {
	return func(o *setOptions) { o.TTL, o.HasTTL, o.ExpiresAt, o.Expiry = d, true, time.Time{}, true }
}

// WithExpiry makes the value expire at t. The zero time means never, which
// also clears an expiry that Update would otherwise keep.
func WithExpiry(t time.Time) SetOption {
	return func(o *setOptions) { o.ExpiresAt, o.TTL, o.HasTTL, o.Expiry = t, 0, false, true }
}

func applySetOptions(opts []SetOption) setOptions {
	var o setOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// KeysQuery selects a page of keys.
type KeysQuery struct {
	Prefix string // only keys starting with Prefix
	Cursor string // the previous page's Next; "" for the first page
	Limit  int    // at most this many keys; 0 means 100, at most 1000
}

// KeysPage is one page of keys.
type KeysPage struct {
	Keys []string
	Next string // cursor of the next page; "" when this page is the last
}

// scopeKind names the four scopes.
type scopeKind int

const (
	// globalKind values belong to the plugin alone.
	globalKind scopeKind = iota
	// chatKind values belong to one chat.
	chatKind
	// userKind values belong to one user, across chats.
	userKind
	// chatUserKind values belong to one user in one chat.
	chatUserKind
)

func (k scopeKind) String() string {
	switch k {
	case globalKind:
		return "global"
	case chatKind:
		return "chat"
	case userKind:
		return "user"
	case chatUserKind:
		return "chat+user"
	}
	return fmt.Sprintf("scopeKind(%d)", int(k))
}

// Scope selects whose value a key holds: a chat's, a user's (across chats),
// a user's in one chat, or the plugin's own. Build it with Global, Chat,
// User and ChatUser, or from a run with Ctx.ChatScope, Ctx.UserScope and
// Ctx.ChatUserScope. A scope built for a user but given an empty user key
// makes every store call fail with ErrNoUser instead of silently reading
// or writing another scope (the reference's S4 bug); likewise ErrNoChat.
type Scope struct {
	ChatKey string
	UserKey string
	// want is the kind the scope was built as; set, it is checked against
	// the keys. The zero Scope{} literal infers the kind from the keys.
	want scopeKind
	set  bool
}

// Global is the plugin's own scope, tied to no chat and no user.
func Global() Scope { return Scope{want: globalKind, set: true} }

// Chat is the scope of one chat.
func Chat(chatKey string) Scope { return Scope{ChatKey: chatKey, want: chatKind, set: true} }

// User is the scope of one user, shared by every chat the user writes from.
func User(userKey string) Scope { return Scope{UserKey: userKey, want: userKind, set: true} }

// ChatUser is the scope of one user within one chat.
func ChatUser(chatKey, userKey string) Scope {
	return Scope{ChatKey: chatKey, UserKey: userKey, want: chatUserKind, set: true}
}

// kind returns the scope's kind as built (or, for a literal, as its keys
// say).
func (s Scope) kind() scopeKind {
	if s.set {
		return s.want
	}
	switch {
	case s.ChatKey != "" && s.UserKey != "":
		return chatUserKind
	case s.ChatKey != "":
		return chatKind
	case s.UserKey != "":
		return userKind
	}
	return globalKind
}

// Check reports a scope whose keys do not fit its kind: ErrNoUser for a
// user scope without a user, ErrNoChat for a chat scope without a chat.
func (s Scope) Check() error {
	k := s.kind()
	if (k == userKind || k == chatUserKind) && s.UserKey == "" {
		return fmt.Errorf("%s scope: %w", k, ErrNoUser)
	}
	if (k == chatKind || k == chatUserKind) && s.ChatKey == "" {
		return fmt.Errorf("%s scope: %w", k, ErrNoChat)
	}
	if k == globalKind && (s.ChatKey != "" || s.UserKey != "") {
		return fmt.Errorf("global scope given chat %q and user %q", s.ChatKey, s.UserKey)
	}
	if k == chatKind && s.UserKey != "" || k == userKind && s.ChatKey != "" {
		return fmt.Errorf("%s scope given both chat %q and user %q (use ChatUser)", k, s.ChatKey, s.UserKey)
	}
	return nil
}

func (s Scope) String() string {
	switch s.kind() {
	case chatKind:
		return fmt.Sprintf("chat %q", s.ChatKey)
	case userKind:
		return fmt.Sprintf("user %q", s.UserKey)
	case chatUserKind:
		return fmt.Sprintf("chat %q user %q", s.ChatKey, s.UserKey)
	}
	return "global"
}

// Errors that plugins may test with errors.Is.
var (
	// ErrNoService is returned by services the runtime did not provide.
	ErrNoService = errors.New("service not available in this runtime")
	// ErrPathRefused is wrapped by every FS error that refuses a path: one
	// outside /app/shared and /app/uploads, one with "..", NUL or an
	// over-long name, or one whose symlinks lead out of its directory.
	ErrPathRefused = errors.New("path refused")
	// ErrNoUser is returned by a user-scoped store call when there is no
	// user: the run was started without one (a timer, or nekro exec without
	// --user).
	ErrNoUser = errors.New("user-scoped store call without a user (this run has no user)")
	// ErrNoChat is returned by a chat-scoped store call without a chat.
	ErrNoChat = errors.New("chat-scoped store call without a chat")
	// ErrLimit is wrapped by every refusal for size: a key, a value or the
	// plugin's quota. The error's text names the limit and the size.
	ErrLimit = errors.New("kv limit exceeded")
	// ErrNestedCall is returned by a store call made from inside an
	// update function, which runs while its key is locked (see Store.Update).
	ErrNestedCall = errors.New("store called from inside an Update function, which runs while the key is locked (read before Update, write after it)")
	// ErrUpdateTimeout is returned by an Update whose function did not
	// return in time; nothing was written.
	ErrUpdateTimeout = errors.New("update function took too long")
)

// Store returns this run's view of the plugin's KV namespace. In a runtime
// without a store, every call fails with ErrNoService.
func (c *Ctx) Store() Store {
	if c.env == nil {
		return noStore{}
	}
	if s := c.env.StoreOf(c.plugin); s != nil {
		return s
	}
	return noStore{}
}

// ChatScope is the scope of the run's chat.
func (c *Ctx) ChatScope() Scope { return Chat(c.ChatKey()) }

// UserScope is the scope of the run's user, across chats. When the run has
// no user, store calls with it fail with ErrNoUser.
func (c *Ctx) UserScope() Scope { return User(c.UserID()) }

// ChatUserScope is the scope of the run's user in the run's chat. When the
// run has no user, store calls with it fail with ErrNoUser.
func (c *Ctx) ChatUserScope() Scope { return ChatUser(c.ChatKey(), c.UserID()) }

// Store returns the plugin's KV namespace, for hooks that run outside any
// sandbox run (init, cleanup, channel reset). Before the host binds its
// services, every call fails with ErrNoService.
func (p *Plugin) Store() Store {
	if h := p.services(); h != nil {
		if s := h.Store(); s != nil {
			return s
		}
	}
	return noStore{}
}

// noStore is the store of a runtime that has none.
type noStore struct{}

func (noStore) Get(context.Context, Scope, string) (string, bool, error) {
	return "", false, fmt.Errorf("kv get: %w", ErrNoService)
}

func (noStore) Set(context.Context, Scope, string, string, ...SetOption) (SetResult, error) {
	return 0, fmt.Errorf("kv set: %w", ErrNoService)
}

func (noStore) Delete(context.Context, Scope, string) (DeleteResult, error) {
	return 0, fmt.Errorf("kv delete: %w", ErrNoService)
}

func (noStore) Update(context.Context, Scope, string, func(string, bool) (string, error), ...SetOption) (string, error) {
	return "", fmt.Errorf("kv update: %w", ErrNoService)
}

func (noStore) Keys(context.Context, Scope, KeysQuery) (KeysPage, error) {
	return KeysPage{}, fmt.Errorf("kv keys: %w", ErrNoService)
}

func (noStore) DeleteScope(context.Context, Scope) (int, error) {
	return 0, fmt.Errorf("kv delete scope: %w", ErrNoService)
}
