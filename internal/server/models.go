package server

// The operator's model groups (internal/models) and personas
// (internal/presets): GET/PUT /api/models, POST /api/models/test, the
// presets' CRUD, import and export, and each chat's choice. All but
// reading a chat's choice are the operator's: a persona is operator text
// that goes into the system prompt, and a model group holds a key.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/nekro-go/nekro/internal/models"
	"github.com/nekro-go/nekro/internal/presets"
)

// Body limits of these endpoints.
const (
	maxModelsBody  = 1 << 20
	maxPresetBody  = presets.MaxAvatarBytes + presets.MaxContentBytes + 64<<10
	maxImportBody  = 16 << 20
	modelTestLimit = 60 * time.Second
)

func (s *Server) modelsReady(w http.ResponseWriter) bool {
	if s.parts.Models == nil {
		writeError(w, http.StatusServiceUnavailable, "model groups are not kept by this server")
		return false
	}
	return true
}

// getModels answers the groups, keys left out (has_key says which have
// one).
func (s *Server) getModels(w http.ResponseWriter, r *http.Request) {
	if !s.modelsReady(w) {
		return
	}
	set, err := s.parts.Models.Get(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, set)
}

// putModels replaces the groups; the next model request uses them.
func (s *Server) putModels(w http.ResponseWriter, r *http.Request) {
	if !s.modelsReady(w) {
		return
	}
	var set models.Settings
	if !decode(w, r, maxModelsBody, &set) {
		return
	}
	if err := s.parts.Models.Put(r.Context(), set); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.log.Info("model groups edited through the API", "groups", len(set.Groups), "default", set.Default)
	s.getModels(w, r)
}

type modelTestRequest struct {
	models.Group
}

// testModel sends one short request to a group as given (saved or not)
// and answers {"ok", "answer"} or {"ok": false, "error"}.
func (s *Server) testModel(w http.ResponseWriter, r *http.Request) {
	if !s.modelsReady(w) {
		return
	}
	var g models.Group
	if !decode(w, r, maxModelsBody, &g) {
		return
	}
	if g.BaseURL == "" && g.Model == "" && g.Name != "" { // a saved group, by name
		set, err := s.parts.Models.Get(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, "%v", err)
			return
		}
		found := false
		for _, sg := range set.Groups {
			if sg.Name == g.Name {
				g, found = sg, true
			}
		}
		if !found {
			writeError(w, http.StatusNotFound, "no model group %q", g.Name)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), modelTestLimit)
	defer cancel()
	start := time.Now()
	answer, err := s.parts.Models.Test(ctx, g)
	ms := time.Since(start).Milliseconds()
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": err.Error(), "ms": ms})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "answer": answer, "ms": ms})
}

func (s *Server) presetsReady(w http.ResponseWriter) bool {
	if s.parts.Presets == nil {
		writeError(w, http.StatusServiceUnavailable, "personas are not kept by this server")
		return false
	}
	return true
}

func presetID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "preset id %q is not a positive number", r.PathValue("id"))
		return 0, false
	}
	return id, true
}

func writePresetError(w http.ResponseWriter, err error) {
	if errors.Is(err, presets.ErrNotFound) {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	writeError(w, http.StatusBadRequest, "%v", err)
}

func (s *Server) listPresets(w http.ResponseWriter, r *http.Request) {
	if !s.presetsReady(w) {
		return
	}
	ps, err := s.parts.Presets.List(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"presets": ps})
}

func (s *Server) getPreset(w http.ResponseWriter, r *http.Request) {
	id, ok := presetID(w, r)
	if !ok || !s.presetsReady(w) {
		return
	}
	p, err := s.parts.Presets.Get(r.Context(), id)
	if err != nil {
		writePresetError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) createPreset(w http.ResponseWriter, r *http.Request) {
	if !s.presetsReady(w) {
		return
	}
	var p presets.Preset
	if !decode(w, r, maxPresetBody, &p) {
		return
	}
	p, err := s.parts.Presets.Create(r.Context(), p)
	if err != nil {
		writePresetError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

func (s *Server) updatePreset(w http.ResponseWriter, r *http.Request) {
	id, ok := presetID(w, r)
	if !ok || !s.presetsReady(w) {
		return
	}
	var p presets.Preset
	if !decode(w, r, maxPresetBody, &p) {
		return
	}
	p, err := s.parts.Presets.Update(r.Context(), id, p)
	if err != nil {
		writePresetError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) deletePreset(w http.ResponseWriter, r *http.Request) {
	id, ok := presetID(w, r)
	if !ok || !s.presetsReady(w) {
		return
	}
	if err := s.parts.Presets.Delete(r.Context(), id); err != nil {
		writePresetError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": id})
}

// exportPreset answers the preset in the reference's format.
func (s *Server) exportPreset(w http.ResponseWriter, r *http.Request) {
	id, ok := presetID(w, r)
	if !ok || !s.presetsReady(w) {
		return
	}
	p, err := s.parts.Presets.Get(r.Context(), id)
	if err != nil {
		writePresetError(w, err)
		return
	}
	w.Header().Set("Content-Disposition", `attachment; filename="preset-`+strconv.FormatInt(id, 10)+`.json"`)
	writeJSON(w, http.StatusOK, presets.Export(p))
}

// importPresets creates presets from the reference's format: one object
// or a list of them. It answers the created presets.
func (s *Server) importPresets(w http.ResponseWriter, r *http.Request) {
	if !s.presetsReady(w) {
		return
	}
	var raw json.RawMessage
	if !decode(w, r, maxImportBody, &raw) {
		return
	}
	var refs []presets.Reference
	if err := json.Unmarshal(raw, &refs); err != nil {
		var one presets.Reference
		if err := json.Unmarshal(raw, &one); err != nil {
			writeError(w, http.StatusBadRequest, "the body must be a preset in the reference's format, or a list of them: %v", err)
			return
		}
		refs = []presets.Reference{one}
	}
	out := []presets.Preset{}
	for i, ref := range refs {
		p, err := s.parts.Presets.Create(r.Context(), presets.Import(ref))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error(), "index": i, "created": out})
			return
		}
		out = append(out, p)
	}
	writeJSON(w, http.StatusCreated, map[string]any{"presets": out})
}

type choosePresetRequest struct {
	// Preset is the preset's id; 0 or null returns the chat to the
	// default.
	Preset int64 `json:"preset"`
}

// choosePreset sets the chat's persona (operator only: it changes the
// system prompt every member's turns run with).
func (s *Server) choosePreset(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok || !s.presetsReady(w) {
		return
	}
	var req choosePresetRequest
	if !decode(w, r, 4<<10, &req) {
		return
	}
	if err := s.parts.Presets.Choose(r.Context(), key, req.Preset); err != nil {
		writePresetError(w, err)
		return
	}
	s.chatPreset(w, r)
}

// chatPreset answers the chat's choice and the persona its turns use.
func (s *Server) chatPreset(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok || !s.presetsReady(w) {
		return
	}
	chosen, err := s.parts.Presets.Chosen(r.Context(), key)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	out := map[string]any{"chat_key": key, "preset": chosen, "effective": nil}
	if p, ok, err := s.parts.Presets.ForChat(r.Context(), key); err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	} else if ok {
		out["effective"] = map[string]any{"id": p.ID, "name": p.Name, "lang": p.Lang}
	}
	writeJSON(w, http.StatusOK, out)
}

// chatPrompt answers the first request a turn in the chat would send the
// model now (`nekro chats prompt`): the system prompt with the chat's
// persona, then the history. The operator's: it shows every plugin's
// injected context.
func (s *Server) chatPrompt(w http.ResponseWriter, r *http.Request) {
	key, ok := chatKey(w, r)
	if !ok {
		return
	}
	msgs, err := s.agent.Prompt(r.Context(), key, r.URL.Query().Get("user"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chat_key": key, "messages": msgs})
}

// modelName is the default group's model now, "" when none; the model
// nekro opened with when it keeps no groups.
func (s *Server) modelName(ctx context.Context) string {
	if s.parts.Models == nil {
		return s.Model
	}
	set, err := s.parts.Models.Get(ctx)
	if err != nil {
		return s.Model
	}
	for _, g := range set.Groups {
		if g.Name == set.Default {
			return g.Model
		}
	}
	return ""
}
