// Package adapter is the contract between nekro and a chat platform
// (QQ through OneBot v11, Discord, Telegram, ...): an adapter turns the
// platform's messages into chat messages and delivers the assistant's
// messages back. Platforms are separate packages that register a Driver
// in init(), the way plugins register, and a binary gets them with a
// blank import (adapters/all holds the built-in ones):
//
//	func init() {
//		adapter.Register(adapter.Driver{Platform: "myplatform", Configure: configure})
//	}
//
// What nekro does once, in front of every adapter (internal/adapterhost):
// it mounts the adapter's HTTP routes on `nekro serve`, downloads the
// files users send through the SSRF guard (Info.FileHosts are the only
// private addresses it may reach), stores them in the chat's uploads,
// hands the message to the agent (Message.Trigger false keeps it as
// context only), and delivers every assistant message of the platform's
// chats by calling Send on a queue of its own, retrying a bounded number
// of times, so a slow platform never holds up a turn.
//
// What an adapter does: it connects (Run), maps the platform's events to
// Messages with chat keys ChatKey(platform, channel) and user ids
// UserID(platform, id), decides with ReplyRule whether a message asks for
// an answer, and sends Outgoing messages in the platform's terms.
//
// The lifecycle: Configure declares the settings while the command line
// is built; after parsing, its returned function builds the Adapter (nil
// when the settings leave the platform off); `nekro serve` calls Run
// once, in its own goroutine, and Send from its delivery queue while Run
// runs; `nekro doctor` calls only Info and, when implemented, Check.
package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Driver makes the adapter of one platform.
type Driver struct {
	// Platform names the platform and starts its chat keys
	// ("onebot_v11" makes "onebot_v11-group_123"): letters, digits, _.
	Platform string
	// Configure declares the platform's settings on fs, each flag
	// defaulting to an environment variable NEKRO_..., and returns the
	// function that builds the adapter from them once the flags are
	// parsed. That function returns a nil Adapter when the settings leave
	// the platform off (nothing configured).
	Configure func(fs *flag.FlagSet) func() (Adapter, error)
}

// Adapter is one platform's connection(s). Its methods may be called
// from several goroutines at once.
type Adapter interface {
	// Info describes the adapter as configured.
	Info() Info
	// Run connects to the platform, or waits for it to connect, and hands
	// every message received to h until ctx ends; it reconnects by
	// itself and returns only when ctx ends (nil) or the settings cannot
	// work (an error saying what to change).
	Run(ctx context.Context, h Host) error
	// Send delivers one message to the platform. An error means it was
	// not delivered (nekro retries it a few times, then logs it).
	Send(ctx context.Context, m Outgoing) error
	// Status describes each connection, for the status API.
	Status() []Status
}

// Router is implemented by an adapter that platforms connect to: its
// routes are mounted on `nekro serve`'s HTTP server, outside the API's
// token check. Each handler authenticates its callers itself.
type Router interface {
	Routes() map[string]http.Handler // pattern (net/http.ServeMux syntax) -> handler
}

// Checker is implemented by an adapter that can say, without `nekro
// serve` running, whether its settings can work (`nekro doctor`).
type Checker interface {
	Check(ctx context.Context) []Check
}

// Querier is implemented by an adapter that answers plugins' read-only
// questions about a chat (the bot's own account, the group, its members),
// in the platform's own terms: OneBot v11's get_group_info and the like.
// A query acts for one chat only, Query.ChatKey, the chat of the run that
// asks: the adapter refuses an action that is not on its read-only allow
// list (anything that sends, changes or administers) and parameters that
// reach beyond that chat (another group, a user outside it), with an
// error wrapping ErrQueryRefused.
type Querier interface {
	Query(ctx context.Context, q Query) (json.RawMessage, error)
}

// Query is one read-only question of a plugin.
type Query struct {
	// ChatKey is the chat the question is asked for (the run's own):
	// never taken from the plugin.
	ChatKey string
	// Action is the platform's name of the question ("get_group_info").
	Action string
	// Params are the action's parameters, a JSON object (nil for none).
	Params json.RawMessage
}

// ErrQueryRefused is wrapped by a Querier's refusal: an action not on its
// read-only allow list, or parameters outside the query's chat.
var ErrQueryRefused = errors.New("query refused")

// Check is one line of `nekro doctor`.
type Check struct {
	OK     bool
	Detail string
}

// Info describes a configured adapter.
type Info struct {
	Platform string
	// Settings says what is configured in one line, secrets left out.
	Settings string
	// FileHosts are the host:port pairs of the platform's own file
	// server: downloads of users' files may reach them even on a private
	// address (nothing else private).
	FileHosts []string
}

// Status is one connection of an adapter.
type Status struct {
	Name      string    `json:"name"`               // the platform
	Mode      string    `json:"mode"`               // e.g. "reverse" (it connects to nekro), "forward" (nekro dials)
	Connected bool      `json:"connected"`          // the connection is up
	SelfID    string    `json:"self_id"`            // the bot's own id on the platform, "" until known
	Since     time.Time `json:"since,omitzero"`     // when it last connected or dropped
	LastError string    `json:"last_error"`         // why it last dropped or failed, "" if never
	Remote    string    `json:"remote,omitempty"`   // the peer's address or URL
	Received  int64     `json:"received,omitempty"` // messages handed to nekro
	Sent      int64     `json:"sent,omitempty"`     // messages delivered
}

// Host is what nekro offers an adapter while it runs.
type Host interface {
	// Receive stores a message from the platform and, when m.Trigger,
	// lets a turn answer it. Its files are fetched first; a file that
	// cannot be fetched is left out and named in the text.
	Receive(ctx context.Context, m Message) error
	// Log is nekro's log.
	Log() *slog.Logger
}

// Message is what a user wrote on the platform.
type Message struct {
	ChatKey  string // ChatKey(platform, channel)
	UserID   string // UserID(platform, the platform's user id)
	UserName string
	// Text is the message as words: mentions written as @name, a reply
	// as a note of which message it answers. Files go in Files.
	Text  string
	Files []File
	// Admin says the sender administers the chat (group owner or admin).
	Admin bool
	// Trigger says a turn should answer (ReplyRule); false keeps the
	// message as context for later turns.
	Trigger bool
}

// File is a file a user sent: its bytes in Data, or a URL nekro
// downloads (http or https, guarded).
type File struct {
	Name string // as the platform names it; sanitized when stored
	Kind string // "image" or "file"
	URL  string
	// Secret is a credential written inside URL (Telegram's file URLs
	// carry the bot token in their path), "" for none: wherever nekro
	// shows the URL, in the log and in the note of a file that could not
	// be fetched, it writes "xxxxx" in its place, as url.URL.Redacted
	// writes a password.
	Secret string
	Data   []byte
}

// Outgoing is an assistant message to deliver.
type Outgoing struct {
	ChatKey string
	Text    string // may be empty when Files are not
	Files   []OutFile
}

// OutFile is a file the assistant sent.
type OutFile struct {
	Name string
	Kind string // "image" (send it as a picture) or "file"
	MIME string
	Size int64
	// Open reads its content.
	Open func() (io.ReadCloser, error)
}

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
	platRE    = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
)

// Register makes a platform available. Call it from init(). It panics on
// a bad platform name, a missing Configure, or a platform registered twice.
func Register(d Driver) {
	if !platRE.MatchString(d.Platform) {
		panic(fmt.Sprintf("adapter: Register: platform %q must be 1-64 letters, digits or _", d.Platform))
	}
	if d.Configure == nil {
		panic(fmt.Sprintf("adapter: Register: platform %s has no Configure", d.Platform))
	}
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, dup := drivers[d.Platform]; dup {
		panic(fmt.Sprintf("adapter: Register called twice for platform %s", d.Platform))
	}
	drivers[d.Platform] = d
}

// Drivers returns the registered platforms, sorted by name.
func Drivers() []Driver {
	driversMu.RLock()
	defer driversMu.RUnlock()
	out := make([]Driver, 0, len(drivers))
	for _, d := range drivers {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Platform < out[j].Platform })
	return out
}

// ChatKey is the chat key of a platform's channel, as the reference
// writes it: ChatKey("onebot_v11", "group_123") is "onebot_v11-group_123".
func ChatKey(platform, channel string) string { return platform + "-" + channel }

// SplitChatKey returns the platform and channel of a chat key, ok false
// when it has no platform prefix.
func SplitChatKey(chatKey string) (platform, channel string, ok bool) {
	platform, channel, ok = strings.Cut(chatKey, "-")
	return platform, channel, ok && platRE.MatchString(platform) && channel != ""
}

// Owner returns the registered platform whose namespace holds chatKey
// (its chat keys start with the platform's name and "-"), ok false for a
// key of no registered platform. Chat keys in a platform's namespace
// belong to its adapter: only the adapter's messages create such a chat,
// and an API user can neither create nor claim one; only the operator
// adds a member to it, explicitly. This holds for every registered
// platform, configured or not, so a platform chat cannot be squatted
// before its adapter is turned on.
func Owner(chatKey string) (platform string, ok bool) {
	platform, _, ok = SplitChatKey(chatKey)
	if !ok {
		return "", false
	}
	driversMu.RLock()
	defer driversMu.RUnlock()
	if _, ok := drivers[platform]; !ok {
		return "", false
	}
	return platform, true
}

// UserID is nekro's user id of a platform's user: the platform, a colon
// and its id ("onebot_v11:10001"), so a platform user never passes for an
// API user or one of another platform. --super-users names users so.
func UserID(platform, id string) string { return platform + ":" + id }
