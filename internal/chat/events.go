package chat

import "sync"

// Event types.
const (
	EventMessage = "message" // a message was stored
	EventTurn    = "turn"    // a turn started or finished
	EventRun     = "run"     // a sandbox run finished
	EventReset   = "reset"   // the chat's history was cleared
)

// Event is something that happened in a chat.
type Event struct {
	Type    string   `json:"type"`
	ChatKey string   `json:"chat_key"`
	Message *Message `json:"message,omitempty"`
	Turn    *Turn    `json:"turn,omitempty"`
	Run     *Run     `json:"run,omitempty"`
}

// subscriberBuffer is how many events a slow subscriber may fall behind
// before it is dropped (its channel closed), so that a stalled reader
// never holds up a chat.
const subscriberBuffer = 256

type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan Event]struct{}
	all  []func(Event) // Service.OnEvent hooks: every chat's events
}

func newHub() *hub { return &hub{subs: map[string]map[chan Event]struct{}{}} }

// Subscribe returns the chat's future events and a function that ends the
// subscription. The channel is closed when the subscription ends, when the
// subscriber falls too far behind, or when the service closes.
func (s *Service) Subscribe(chatKey string) (<-chan Event, func()) {
	return s.hub.subscribe(chatKey)
}

func (h *hub) subscribe(chatKey string) (<-chan Event, func()) {
	ch := make(chan Event, subscriberBuffer)
	h.mu.Lock()
	if h.subs[chatKey] == nil {
		h.subs[chatKey] = map[chan Event]struct{}{}
	}
	h.subs[chatKey][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.dropLocked(chatKey, ch)
	}
}

func (h *hub) dropLocked(chatKey string, ch chan Event) {
	set := h.subs[chatKey]
	if _, ok := set[ch]; !ok {
		return
	}
	delete(set, ch)
	close(ch)
	if len(set) == 0 {
		delete(h.subs, chatKey)
	}
}

func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.all {
		f(e)
	}
	for ch := range h.subs[e.ChatKey] {
		select {
		case ch <- e:
		default:
			h.dropLocked(e.ChatKey, ch)
		}
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, set := range h.subs {
		for ch := range set {
			h.dropLocked(key, ch)
		}
	}
}

// watched reports whether chatKey has subscribers in this process.
func (h *hub) watched(chatKey string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[chatKey]) > 0
}

// deliver gives e to the chat's subscribers only, not to the OnEvent
// hooks: an event another replica announced (notify.go).
func (h *hub) deliver(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[e.ChatKey] {
		select {
		case ch <- e:
		default:
			h.dropLocked(e.ChatKey, ch)
		}
	}
}
