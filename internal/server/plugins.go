package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/nekro-go/nekro/internal/pluginconfig"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pyplugin"
	"github.com/nekro-go/nekro/internal/pysig"
	"github.com/nekro-go/nekro/plugin"
)

// maxConfigBody caps a settings change.
const maxConfigBody = 1 << 20

// methodView is a sandbox method as the API shows it.
type methodView struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Signature   string `json:"signature"`
	Description string `json:"description"`
	Doc         string `json:"doc"`
}

// configView is a plugin's settings as the API shows them: secrets masked.
type configView struct {
	File   string         `json:"file"`
	Values map[string]any `json:"values"`
	Schema map[string]any `json:"schema"`
	Error  string         `json:"error,omitempty"` // why the file's content is not in force
}

func viewConfig(f *pluginconfig.File) *configView {
	values, _ := f.Values()
	v := &configView{File: f.Path(), Values: f.Schema().Mask(values), Schema: f.Schema().JSONSchema()}
	if err := f.Err(); err != nil {
		v.Error = err.Error()
	}
	return v
}

// commandView is a chat command as the API shows it.
type commandView struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Usage       string   `json:"usage"`
	Description string   `json:"description"`
	Permission  string   `json:"permission"` // public, user, admin or super
}

// failedView is a Python plugin that did not load, as the reference's
// failed-plugin registry shows it: where its import raised and what.
type failedView struct {
	Path      string `json:"path"`                // its .py file or package directory
	File      string `json:"file,omitempty"`      // where the exception was raised
	Line      int    `json:"line,omitempty"`      // and its line
	Exception string `json:"exception,omitempty"` // the exception's class
	Message   string `json:"message"`             // "Type: text", or nekro's reason
	Traceback string `json:"traceback,omitempty"`
}

// failedPlugins lists the Python plugins that did not load, by path.
func (s *Server) failedPlugins() []failedView {
	out := []failedView{}
	if s.parts.FailedPlugins == nil {
		return out
	}
	for path, err := range s.parts.FailedPlugins() {
		fv := failedView{Path: path, Message: err.Error()}
		var le *pyplugin.LoadError
		if errors.As(err, &le) {
			fv.File, fv.Line, fv.Exception, fv.Message, fv.Traceback = le.File, le.Line, le.Type, le.Message, le.Traceback
		}
		out = append(out, fv)
	}
	slices.SortFunc(out, func(a, b failedView) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// plugins answers GET /api/plugins: every plugin of this server, whether
// it is enabled (and why not: turned off, its init failed, or an
// installed plugin replaces it), its methods with their Python
// signatures and docs, its chat commands and its settings; and, as
// "failed", the Python plugins that did not load, with where and why.
func (s *Server) plugins(w http.ResponseWriter, r *http.Request) {
	type pluginView struct {
		Key         string        `json:"key"`
		Name        string        `json:"name"`
		Version     string        `json:"version"`
		Description string        `json:"description"`
		URL         string        `json:"url,omitempty"`
		Enabled     bool          `json:"enabled"`
		Disabled    string        `json:"disabled_reason,omitempty"`
		Methods     []methodView  `json:"methods"`
		Commands    []commandView `json:"commands"`
		Config      *configView   `json:"config"`
		// Reloadable: POST /api/plugins/{key}/reload loads it again
		// from its files (a Python plugin).
		Reloadable bool `json:"reloadable,omitempty"`
	}
	reg := s.host.Registry()
	disabled := reg.Disabled()
	out := []pluginView{}
	for _, p := range reg.All() {
		m := p.Meta()
		reason, off := disabled[p.Key()]
		pv := pluginView{Key: p.Key(), Name: m.Name, Version: m.Version, Description: m.Description, URL: m.URL,
			Enabled: !off, Disabled: reason, Methods: []methodView{}, Commands: []commandView{}, Reloadable: s.host.Reloadable(p.Key())}
		for _, mi := range pluginhost.Methods(p) {
			pv.Methods = append(pv.Methods, methodView{Name: mi.Name, Type: mi.Type.String(), Signature: pysig.Signature(mi),
				Description: mi.Description, Doc: pysig.Doc(mi)})
		}
		for _, c := range pluginhost.Commands(p) {
			if !c.Hidden {
				pv.Commands = append(pv.Commands, commandView{Name: c.Name, Aliases: c.Aliases, Usage: c.Usage,
					Description: c.Description, Permission: c.Permission})
			}
		}
		if f := s.host.PluginConfig(p.Key()); f != nil {
			pv.Config = viewConfig(f)
		}
		out = append(out, pv)
	}
	writeJSON(w, http.StatusOK, map[string]any{"plugins": out, "failed": s.failedPlugins()})
}

// pluginConfig finds the settings of the path's plugin, or writes a 404.
func (s *Server) pluginConfig(w http.ResponseWriter, r *http.Request) (*pluginconfig.File, bool) {
	key := r.PathValue("key")
	var p *plugin.Plugin
	for _, q := range s.host.Registry().All() {
		if q.Key() == key {
			p = q
		}
	}
	if p == nil {
		writeError(w, http.StatusNotFound, "no plugin %s", key)
		return nil, false
	}
	f := s.host.PluginConfig(key)
	if f == nil {
		writeError(w, http.StatusNotFound, "plugin %s has no settings", key)
		return nil, false
	}
	return f, true
}

// getPluginConfig answers GET /api/plugins/{key}/config.
func (s *Server) getPluginConfig(w http.ResponseWriter, r *http.Request) {
	if f, ok := s.pluginConfig(w, r); ok {
		writeJSON(w, http.StatusOK, viewConfig(f))
	}
}

// putPluginConfig answers PUT /api/plugins/{key}/config: the body is a
// JSON object of settings to change (all of them, or some; a secret sent
// back masked keeps its value). All are checked before any is kept; a
// bad one is a 400 naming the field.
func (s *Server) putPluginConfig(w http.ResponseWriter, r *http.Request) {
	f, ok := s.pluginConfig(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxConfigBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "settings larger than %d bytes", maxConfigBody)
		return
	}
	var changes map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&changes); err != nil || changes == nil {
		writeError(w, http.StatusBadRequest, "the body must be a JSON object of settings: %v", err)
		return
	}
	for k, v := range changes {
		changes[k] = numbers(v)
	}
	if _, err := f.Set(changes); err != nil {
		var fe *pluginconfig.FieldError
		if errors.As(err, &fe) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "field": fe.Field})
			return
		}
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, viewConfig(f))
}

// numbers turns json.Numbers into int64 where whole, else float64.
func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	}
	return v
}

// setPluginEnabled answers POST /api/plugins/{key}/enable and /disable.
func (s *Server) setPluginEnabled(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		if err := s.host.SetPluginEnabled(r.Context(), key, on); err != nil {
			status := http.StatusInternalServerError
			if strings.HasPrefix(err.Error(), "no plugin ") {
				status = http.StatusNotFound
			} else if on {
				status = http.StatusConflict // its init failed, or an installed plugin replaces it
			}
			writeError(w, status, "%v", err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"key": key, "enabled": on})
	}
}

// tasks answers GET /api/tasks: the plugins' background tasks, running
// first (plugin, chat, id, status, progress, message, error, times).
func (s *Server) tasks(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"tasks": s.host.Tasks()})
}

// Chat list paging.
const (
	defaultChatListLimit = 50
	maxChatListLimit     = 500
)

// chatList answers GET /api/chats?limit=N&before=ID: the chats with
// messages, most recently active first, each with its last message and
// the state of its latest turn. before is the last listed chat's
// last_message.id, for the next page.
func (s *Server) chatList(w http.ResponseWriter, r *http.Request) {
	limit, before, ok := chatListQuery(w, r)
	if !ok {
		return
	}
	chats, err := s.chats.Chats(r.Context(), limit, before)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chats": chats})
}

// chatListQuery reads GET /api/chats' limit and before, or writes a 400.
func chatListQuery(w http.ResponseWriter, r *http.Request) (limit int, before int64, ok bool) {
	limit = defaultChatListLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxChatListLimit {
			writeError(w, http.StatusBadRequest, "limit must be 1 to %d", maxChatListLimit)
			return 0, 0, false
		}
		limit = n
	}
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "before must be a message id")
			return 0, 0, false
		}
		before = n
	}
	return limit, before, true
}
