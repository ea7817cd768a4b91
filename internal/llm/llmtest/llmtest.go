// Package llmtest is a scripted OpenAI-compatible chat-completions (and
// embeddings) server for tests and benchmarks: real HTTP on a loopback port, with replies
// chosen by a script from what each request contains, and every request
// kept for assertions. It is the one stand-in nekro's tests use, at the
// boundary to the language model; everything behind it is real.
package llmtest

import (
	"encoding/json"
	"fmt"
	"github.com/nekro-go/nekro/internal/llm"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Request is one chat-completions request the server received.
type Request struct {
	Model    string            `json:"model"`
	Messages []llm.ChatMessage `json:"messages"`
	// Fields holds every field of the request body as sent (sampling
	// settings, extra fields).
	Fields map[string]json.RawMessage `json:"-"`
	Auth   string                     `json:"-"` // the Authorization header
	Time   time.Time                  `json:"-"`
}

var chatKeyRE = regexp.MustCompile(`<chat_history chat_key="([^"]*)">`)

// ChatKey returns the chat key the prompt's history names, or "".
func (r Request) ChatKey() string {
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		if s := chatKeyRE.FindStringSubmatch(m.Content.String()); s != nil {
			return s[1]
		}
	}
	return ""
}

// Last returns the text of the last message.
func (r Request) Last() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content.String()
}

// Contains reports whether any message's text contains s.
func (r Request) Contains(s string) bool {
	for _, m := range r.Messages {
		if strings.Contains(m.Content.String(), s) {
			return true
		}
	}
	return false
}

// ImageURLs returns the URLs of the image parts of every message.
func (r Request) ImageURLs() []string {
	var out []string
	for _, m := range r.Messages {
		for _, p := range m.Content.Parts {
			if p.Type == "image_url" && p.ImageURL != nil {
				out = append(out, p.ImageURL.URL)
			}
		}
	}
	return out
}

// Reply is the script's answer to a request.
type Reply struct {
	Text string
	// Status, when not 0 or 200, is sent with an OpenAI-style error body
	// holding Text; RetryAfter sets the Retry-After header in seconds.
	Status     int
	RetryAfter int
	// Delay is waited before answering (the model "thinking").
	Delay time.Duration
}

// Code wraps a Python script as a model would: in a fenced block.
func Code(script string) Reply {
	return Reply{Text: "```python\n" + strings.TrimSpace(script) + "\n```"}
}

// Script chooses the reply to a request.
type Script func(r Request) Reply

// Server is a running scripted model.
type Server struct {
	// URL is the API root to give the client, e.g. http://127.0.0.1:port/v1.
	URL string

	srv    *http.Server
	ln     net.Listener
	script Script

	mu          sync.Mutex
	forget      bool // keep no request (ForgetRequests)
	requests    []Request
	embeddings  []EmbeddingRequest
	embedFails  int
	embedStatus int
}

// Start serves script on a loopback port until Close.
func Start(script Script) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("llmtest: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/v1", ln: ln, script: script}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("POST /v1/embeddings", s.embed)
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// ForgetRequests makes the server keep no request from now on (Requests
// returns none): a benchmark's thousands of turns would otherwise stay in
// the process's heap and in its memory figures.
func (s *Server) ForgetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget, s.requests = true, nil
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestsFor returns the requests whose history names chatKey.
func (s *Server) RequestsFor(chatKey string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.ChatKey() == chatKey {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) complete(w http.ResponseWriter, hr *http.Request) {
	var req Request
	body, err := io.ReadAll(hr.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil {
		err = json.Unmarshal(body, &req.Fields)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "request is not JSON: "+err.Error(), 0)
		return
	}
	req.Auth, req.Time = hr.Header.Get("Authorization"), time.Now()
	s.mu.Lock()
	if !s.forget {
		s.requests = append(s.requests, req)
	}
	s.mu.Unlock()
	reply := s.script(req)
	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-hr.Context().Done():
			return
		}
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeError(w, reply.Status, reply.Text, reply.RetryAfter)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-llmtest", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": reply.Text},
		}},
		"usage": map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	})
}

func writeError(w http.ResponseWriter, status int, msg string, retryAfter int) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "llmtest"}})
}
