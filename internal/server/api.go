package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/agent"
	"github.com/nekro-go/nekro/internal/keys"
	nekromcp "github.com/nekro-go/nekro/internal/mcp"
	"github.com/nekro-go/nekro/internal/sandbox"
)

// Request body caps.
const (
	maxMessageBody = 1 << 20
	maxExecBody    = 4 << 20
)

// Handler returns the API:
//
//	POST /api/chats/{chat}/messages  {"user_id","user_name","text"} -> 202, starts a turn; or multipart/form-data
//	                                 with those fields and "file" parts (upload.go): 413 over a limit, 507 uploads full
//	GET  /api/chats/{chat}/messages  the history: ?limit=N (default 100, max 1000) &before=ID, oldest first, next_before
//	GET  /api/chats/{chat}/events    server-sent events: messages, turns, runs, resets
//	POST /api/chats/{chat}/reset     clears the history, fires on-channel-reset
//	POST /api/chats/{chat}/exec      {"code","user_id"} -> the run, as `nekro exec --json`
//	GET  /api/chats/{chat}/runs      execution records, paged as messages (before=RUN_ID)
//	GET  /api/chats/{chat}/turns     turns and how they ended, paged as messages
//	GET  /api/chats/{chat}/uploads/{name}  one of the chat's uploads (attachments)
//	GET  /api/runs?q=&chat=&stop_type=&method=&since=&until=&limit=&before=
//	                                 the run log across chats (runlog.go): words of code, output, errors; newest first
//	GET  /api/runs/{run}             one run's record
//	GET  /api/stats?since=&bucket=hour|day  the dashboard's numbers: turns, runs, errors, model requests, latency, rankings
//	GET  /api/status                 model, plugins
//	GET  /api/plugins                every plugin: enabled (or why not), methods (Python signatures, docs), commands, settings;
//	                                 "failed": the Python plugins that did not load (path, file, line, exception)
//	GET  /api/tasks                  plugins' background tasks: status, progress, message
//	GET  /api/chats?limit=&before=   the chats, most recently active first: last message, turn state
//	GET  /api/plugins/{key}/config   a plugin's settings (secrets masked) and their JSON Schema
//	PUT  /api/plugins/{key}/config   {"FIELD": value, ...} -> checked, kept; 400 names a bad field
//	POST /api/plugins/{key}/enable   turns a plugin on (kept in the database; other processes follow)
//	POST /api/plugins/{key}/disable  turns it off: its methods leave prompts, stubs and calls at once
//	POST /api/plugins/{key}/reload   loads a Python plugin again from its files; calls in flight finish on the old code
//	GET  /api/me                     who the token is: {"admin": true} or the user, name and chats
//	POST /api/users                  {"user_id","name"} -> 201 {"user_id","name","token"} (the token shown once)
//	GET  /api/users                  the users: name, created, token count, chats
//	DELETE /api/users/{id}           removes the user: its tokens stop working at once
//	POST /api/users/{id}/tokens      -> 201 {"user_id","token"}: another token for the user
//	GET  /api/chats/{chat}/members   the chat's members
//	PUT|DELETE /api/chats/{chat}/members/{user}  adds or removes a member
//	POST /api/knowledge              multipart "file" and "scope" (global | chat:<key>) -> 202 the document, imported in
//	                                 the background (knowledge.go); 413 too large, 415 an unknown format
//	GET  /api/knowledge?scope=       the documents: scope, name, size, status, chunks, done (progress), error
//	GET  /api/knowledge/{id}         one document (poll it for an import's progress)
//	DELETE /api/knowledge/{id}       removes a document, its chunks and vectors
//	GET  /api/knowledge/search?q=&chat=&top_k=  passages as search_knowledge finds them in chat (or global only)
//	GET  /healthz                    no token: 200 {"status":"ok"} or 503 {"status":"unavailable","reason"}
//	GET  /metrics                    Prometheus text format (the operator's token)
//	POST /api/webhook/{endpoint}     the enabled plugins' webhook handlers (Plugin.MountWebhook)
//	     /plugins/{key}/...          a plugin's own routes (Plugin.MountRoutes); 404 while it is disabled
//	     /mcp?chat=CHAT[&user=U]     MCP (streamable HTTP): the chat's plugin methods as tools, calls as that chat;
//	                                 a user's token calls as its user, in chats it belongs to (else 404)
//	GET  /onebot/v11/ws              OneBot v11 reverse WebSocket (adapters/onebot) with --onebot-token: its own token, 401/403 at the upgrade
//
// Every /api/ call needs "Authorization: Bearer <token>": the operator's
// token (every call) or a user's (package users). A user's token reaches
// only the chats the user belongs to (any other is 404 "no such chat",
// whether it exists or not), posts as that user only (another user_id is
// 403; a new chat, never used (no messages, turns, runs or files) and with
// no members, becomes the poster's, unless its key is in a chat
// platform's namespace (adapter.Owner); any other chat is 403 until the
// operator adds the user), resets a chat only when its one member and
// not a platform's, has its event streams ended as soon as it loses
// access (removed, deleted), sees the
// model but not the plugins in /api/status, finds only its chats' runs in
// /api/runs, and gets 403 from the
// operator's calls: exec (the playground), plugins, tasks, stats, users,
// members, the knowledge base. Webhooks and plugin routes take the operator's token only. A
// webhook also accepts instead an HMAC-SHA256 signature of its raw body under a
// handler's secret (X-Hub-Signature-256: sha256=<hex>), and a plugin
// route marked public needs neither. The browser UI (/ and /ui/) holds
// no data and needs none: it asks for the token.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chats/{chat}/messages", s.postMessage)
	mux.HandleFunc("GET /api/chats/{chat}/messages", s.memberOnly(forAudience(
		chatPage("messages", s.messagesPage), chatPage("messages", s.humanMessagesPage))))
	mux.HandleFunc("GET /api/chats/{chat}/events", s.memberOnly(s.events))
	mux.HandleFunc("POST /api/chats/{chat}/reset", s.memberOnly(s.reset))
	mux.HandleFunc("POST /api/chats/{chat}/exec", adminOnly(s.exec))
	mux.HandleFunc("GET /api/chats/{chat}/runs", s.memberOnly(chatPage("runs", s.runsPage)))
	mux.HandleFunc("GET /api/chats/{chat}/turns", s.memberOnly(forAudience(
		chatPage("turns", s.turnsPage), chatPage("turns", s.humanTurnsPage))))
	mux.HandleFunc("GET /api/chats/{chat}/uploads/{name}", s.memberOnly(s.upload))
	mux.HandleFunc("GET /api/runs", s.searchRuns)
	mux.HandleFunc("GET /api/runs/{run}", s.oneRun)
	mux.HandleFunc("GET /api/stats", adminOnly(s.stats))
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("GET /api/plugins", adminOnly(s.plugins))
	mux.HandleFunc("GET /api/tasks", adminOnly(s.tasks))
	mux.HandleFunc("GET /api/chats", s.chatsFor)
	mux.HandleFunc("GET /api/plugins/{key}/config", adminOnly(s.getPluginConfig))
	mux.HandleFunc("PUT /api/plugins/{key}/config", adminOnly(s.putPluginConfig))
	mux.HandleFunc("POST /api/plugins/{key}/enable", adminOnly(s.setPluginEnabled(true)))
	mux.HandleFunc("POST /api/plugins/{key}/disable", adminOnly(s.setPluginEnabled(false)))
	mux.HandleFunc("POST /api/plugins/{key}/reload", adminOnly(s.reloadPlugin))
	mux.HandleFunc("GET /api/me", s.me)
	mux.HandleFunc("POST /api/users", adminOnly(s.addUser))
	mux.HandleFunc("GET /api/users", adminOnly(s.listUsers))
	mux.HandleFunc("DELETE /api/users/{id}", adminOnly(s.removeUser))
	mux.HandleFunc("POST /api/users/{id}/tokens", adminOnly(s.newUserToken))
	mux.HandleFunc("GET /api/chats/{chat}/members", s.memberOnly(s.members))
	mux.HandleFunc("PUT /api/chats/{chat}/members/{user}", adminOnly(s.setMember(true)))
	mux.HandleFunc("DELETE /api/chats/{chat}/members/{user}", adminOnly(s.setMember(false)))
	mux.HandleFunc("GET /api/models", adminOnly(s.getModels))
	mux.HandleFunc("PUT /api/models", adminOnly(s.putModels))
	mux.HandleFunc("POST /api/models/test", adminOnly(s.testModel))
	mux.HandleFunc("GET /api/presets", adminOnly(s.listPresets))
	mux.HandleFunc("POST /api/presets", adminOnly(s.createPreset))
	mux.HandleFunc("POST /api/presets/import", adminOnly(s.importPresets))
	mux.HandleFunc("GET /api/presets/{id}", adminOnly(s.getPreset))
	mux.HandleFunc("PUT /api/presets/{id}", adminOnly(s.updatePreset))
	mux.HandleFunc("DELETE /api/presets/{id}", adminOnly(s.deletePreset))
	mux.HandleFunc("GET /api/presets/{id}/export", adminOnly(s.exportPreset))
	mux.HandleFunc("GET /api/chats/{chat}/preset", s.memberOnly(s.chatPreset))
	mux.HandleFunc("PUT /api/chats/{chat}/preset", adminOnly(s.choosePreset))
	mux.HandleFunc("GET /api/chats/{chat}/prompt", adminOnly(s.chatPrompt))
	mux.HandleFunc("POST /api/knowledge", adminOnly(s.addKnowledge))
	mux.HandleFunc("GET /api/knowledge", adminOnly(s.listKnowledge))
	mux.HandleFunc("GET /api/knowledge/search", adminOnly(s.searchKnowledge))
	mux.HandleFunc("GET /api/knowledge/{id}", adminOnly(s.getKnowledge))
	mux.HandleFunc("DELETE /api/knowledge/{id}", adminOnly(s.deleteKnowledge))
	mux.HandleFunc("GET /api/chats/{chat}/memories", s.memberOnly(s.listMemories))
	mux.HandleFunc("DELETE /api/chats/{chat}/memories/{id}", s.memberOnly(s.deleteMemory))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	})
	top := http.NewServeMux()
	top.Handle("/api/", s.auth(mux))
	top.HandleFunc("GET /healthz", s.healthz)
	top.Handle("GET /metrics", s.auth(adminOnly(s.metrics)))
	// Webhooks authenticate each call themselves (a signature or the
	// token); plugin routes ask for the token except on public paths.
	top.HandleFunc("POST /api/webhook/{endpoint}", s.webhook)
	top.HandleFunc("/plugins/{key}/", s.pluginRoutes)
	// MCP (package mcp): the enabled plugins' methods as tools, every call
	// as the chat of ?chat= and the token's user.
	top.Handle("/mcp", s.auth(s.mcpHandler()))
	// Chat platforms' endpoints (OneBot's reverse WebSocket) check their
	// own token.
	for pattern, h := range s.parts.Adapters.Routes() {
		top.Handle(pattern, h)
	}
	top.Handle("/", ui())
	return top
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// chatKey returns the path's chat key, or writes a 400.
func chatKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	k := r.PathValue("chat")
	if err := keys.Scope("chat", k); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return "", false
	}
	return k, true
}

// decode reads a JSON body of at most limit bytes into v, or writes a 400.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body over %d bytes", limit)
		} else {
			writeError(w, http.StatusBadRequest, "request body: %v", err)
		}
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "request body: one JSON object expected")
		return false
	}
	return true
}

type postMessageRequest struct {
	UserID   string `json:"user_id"`
	UserName string `json:"user_name"`
	Text     string `json:"text"`
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok {
		return
	}
	if isMultipart(r) { // a message with files: upload.go
		s.postMultipart(w, r, key)
		return
	}
	var req postMessageRequest
	if !decode(w, r, maxMessageBody, &req) {
		return
	}
	uid, ok := s.poster(w, r, key, req.UserID)
	if !ok {
		return
	}
	m, err := s.agent.Post(r.Context(), agent.Incoming{ChatKey: key, UserID: uid, UserName: req.UserName, Text: req.Text})
	s.answerPost(w, m, err)
}

// poster returns the user id a message posted to chatKey is from: the
// one the request names (named) for the operator's token, the token's
// own user for a user's token (see postingUser). On refusal it has
// written the answer and returns false. Every way of posting takes the
// user id from here.
func (s *Server) poster(w http.ResponseWriter, r *http.Request, chatKey, named string) (string, bool) {
	return s.postingUser(w, r, chatKey, named)
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok || !s.resetAllowed(w, r, key) {
		return
	}
	if err := s.agent.Reset(r.Context(), key); err != nil {
		s.writeFailure(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chat_key": key, "reset": true})
}

type execRequest struct {
	Code   string `json:"code"`
	UserID string `json:"user_id"`
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok {
		return
	}
	var req execRequest
	if !decode(w, r, maxExecBody, &req) {
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		writeError(w, http.StatusBadRequest, "code is empty")
		return
	}
	res, err := s.agent.Exec(r.Context(), key, req.UserID, req.Code, sandbox.Limits{})
	if err != nil {
		s.writeFailure(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if !identity(r).Admin {
		s.userStatus(w, r)
		return
	}
	type pluginInfo struct {
		Key     string   `json:"key"`
		Name    string   `json:"name"`
		Methods []string `json:"methods"`
	}
	var plugins []pluginInfo
	for _, p := range s.host.Registry().Plugins() {
		pi := pluginInfo{Key: p.Key(), Name: p.Meta().Name, Methods: []string{}}
		for _, m := range pluginhost.Methods(p) {
			pi.Methods = append(pi.Methods, m.Name)
		}
		plugins = append(plugins, pi)
	}
	st := map[string]any{"model": s.modelName(r.Context()), "plugins": plugins, "disabled_plugins": s.host.Registry().Disabled()}
	st["adapters"] = s.parts.Adapters.Status() // chat platform connections
	st["build"] = s.opts.Build
	if err := s.agent.ModelError(); err != nil {
		st["model_error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, st)
}

// events streams the chat's events as server-sent events until the client
// leaves or the server shuts down. Each event's name is its type; its data
// is the JSON of chat.Event.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok {
		return
	}
	granted := s.streamGrant(r, key)
	operator := identity(r).Admin
	ch, stop := s.chats.Subscribe(key)
	defer stop()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": subscribed to %s\n\n", key)
	if err := rc.Flush(); err != nil {
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	recheck := time.NewTicker(streamRecheck)
	defer recheck.Stop()
	// revoked ends the stream with a last event saying why, when what
	// authorised it is gone.
	revoked := func() bool {
		err := granted(r.Context())
		if err == nil {
			return false
		}
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		fmt.Fprintf(w, "event: revoked\ndata: %s\n\n", b)
		rc.Flush()
		return true
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.streamsDone:
			return
		case <-recheck.C:
			if revoked() {
				return
			}
			continue
		case <-ping.C:
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return
			}
		case e, ok := <-ch:
			if !ok {
				return // fell behind, or the service closed
			}
			if revoked() {
				return
			}
			if !operator {
				var keep bool
				if e, keep = forHumans(e); !keep {
					continue
				}
			}
			b, err := json.Marshal(e)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Type, b); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// streamRecheck is how often an idle event stream checks that what
// authorised it still holds (every event is checked before it is sent).
const streamRecheck = 2 * time.Second

// streamGrant returns the check an event stream of chatKey makes before
// every event and every streamRecheck: nil while the request's token
// still opens the chat, else why not. The operator's token always does;
// a user's stops when the user is removed from the chat, the user is
// deleted or the token revoked, in this process or another sharing the
// database. A database that does not answer ends the stream too (the
// client reconnects, and is answered as any request is).
func (s *Server) streamGrant(r *http.Request, chatKey string) func(context.Context) error {
	if identity(r).Admin {
		return func(context.Context) error { return nil }
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return func(ctx context.Context) error {
		ok, err := s.users.Authorizes(ctx, token, chatKey)
		switch {
		case err != nil:
			s.log.Warn("event stream: cannot check its access; ending it", "chat", chatKey, "err", err)
			return errors.New("cannot check this stream's access now (the database did not answer): reconnect")
		case !ok:
			return fmt.Errorf("access to chat %s was revoked (the user was removed from it or deleted, or the token revoked)", chatKey)
		}
		return nil
	}
}

// mcpHandler serves /mcp: streamable HTTP MCP, the calls as the chat the
// request names and the user its token belongs to (mcp.HTTPIdentity).
func (s *Server) mcpHandler() http.Handler {
	var isMember func(ctx context.Context, chatKey, userID string) (bool, error)
	if s.users != nil {
		isMember = s.users.IsMember
	}
	return nekromcp.NewServer(nekromcp.ServerConfig{Host: s.host, Store: s.parts.Store, Chats: s.chats,
		Files: s.parts.Files, CallTimeout: s.parts.CallTimeout, Log: s.log}).Handler(nekromcp.HTTPIdentity(isMember))
}
