package server

// The knowledge base (internal/knowledge): documents added, listed and
// deleted by the operator. Chat members may not add to their chat's
// scope: a document is text every turn of the chat may read back to
// everyone in it, and the operator answers for what it holds.

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/nekro-go/nekro/internal/knowledge"
)

// maxKnowledgeBody bounds a POST /api/knowledge: the file and the form.
const maxKnowledgeBody = knowledge.MaxFileBytes + 1<<20

func (s *Server) knowledgeReady(w http.ResponseWriter) bool {
	if s.parts.Knowledge == nil {
		writeError(w, http.StatusServiceUnavailable, "the knowledge base is not kept by this server")
		return false
	}
	return true
}

// addKnowledge takes multipart "file" and "scope" (global or
// chat:<key>) and answers 202 with the document, whose import goes on in
// the background (GET /api/knowledge/{id} shows its progress).
func (s *Server) addKnowledge(w http.ResponseWriter, r *http.Request) {
	if !s.knowledgeReady(w) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxKnowledgeBody)
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "the file is larger than %d bytes", knowledge.MaxFileBytes)
			return
		}
		writeError(w, http.StatusBadRequest, "want multipart/form-data with a file and a scope: %v", err)
		return
	}
	defer r.MultipartForm.RemoveAll()
	scope := r.FormValue("scope")
	if scope == "" {
		scope = "global"
	}
	if err := knowledge.CheckScope(scope); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		writeError(w, http.StatusBadRequest, "no file part: %v", err)
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, knowledge.MaxFileBytes+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "read the file: %v", err)
		return
	}
	d, err := s.parts.Knowledge.Add(r.Context(), scope, hdr.Filename, data)
	switch {
	case errors.Is(err, knowledge.ErrUnsupported):
		writeError(w, http.StatusUnsupportedMediaType, "%v", err)
		return
	case errors.Is(err, knowledge.ErrBusy):
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "%v", err)
		return
	case errors.Is(err, knowledge.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "%v", err)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.log.Info("knowledge document added through the API", "document", d.ID, "name", d.Name, "scope", d.Scope, "bytes", d.Size)
	writeJSON(w, http.StatusAccepted, d)
}

// listKnowledge answers {"documents": [...]}, of ?scope= or all, newest
// first, with each import's status and progress.
func (s *Server) listKnowledge(w http.ResponseWriter, r *http.Request) {
	if !s.knowledgeReady(w) {
		return
	}
	scope := r.URL.Query().Get("scope")
	if scope != "" {
		if err := knowledge.CheckScope(scope); err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
	}
	docs, err := s.parts.Knowledge.List(r.Context(), scope)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"documents": docs})
}

func (s *Server) getKnowledge(w http.ResponseWriter, r *http.Request) {
	if !s.knowledgeReady(w) {
		return
	}
	d, err := s.parts.Knowledge.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, knowledge.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such document")
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// deleteKnowledge removes a document, its chunks and its vectors.
func (s *Server) deleteKnowledge(w http.ResponseWriter, r *http.Request) {
	if !s.knowledgeReady(w) {
		return
	}
	d, err := s.parts.Knowledge.Delete(r.Context(), r.PathValue("id"))
	if errors.Is(err, knowledge.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such document")
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	s.log.Info("knowledge document deleted through the API", "document", d.ID, "name", d.Name, "scope", d.Scope)
	writeJSON(w, http.StatusOK, d)
}

// searchKnowledge answers {"passages": [...]} for ?q= as ?chat= sees the
// knowledge base (its documents and the global ones), or the global
// scope alone without chat: what search_knowledge would return there.
func (s *Server) searchKnowledge(w http.ResponseWriter, r *http.Request) {
	if !s.knowledgeReady(w) {
		return
	}
	q := r.URL.Query()
	topK := knowledge.DefaultTopK
	if v := q.Get("top_k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "top_k: %v", err)
			return
		}
		topK = n
	}
	scopes := []string{"global"}
	if c := q.Get("chat"); c != "" {
		scopes = append(scopes, knowledge.ChatScope(c))
	}
	ps, err := s.parts.Knowledge.Search(r.Context(), knowledge.Query{Scopes: scopes, Text: q.Get("q"), TopK: topK})
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"passages": ps})
}
