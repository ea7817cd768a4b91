package llmtest

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// EmbeddingDimensions is the length of the vectors the server returns when
// a request does not ask for "dimensions".
const EmbeddingDimensions = 256

// EmbeddingRequest is one embeddings request the server received.
type EmbeddingRequest struct {
	Model      string    `json:"model"`
	Input      []string  `json:"input"`
	Dimensions int       `json:"dimensions"`
	Auth       string    `json:"-"`
	Time       time.Time `json:"-"`
}

// Embed is the server's embedding of text: a bag of words hashed into dim
// buckets (each lower-cased word adds ±1 to the bucket its hash picks),
// normalised to length 1. It is deterministic, and texts that share words
// are closer (higher cosine) than texts that do not, so tests can assert
// the order of a similarity search. A text with no words is the zero
// vector.
func Embed(text string, dim int) []float32 {
	v := make([]float32, dim)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		h := fnv.New64a()
		h.Write([]byte(w))
		x := h.Sum64()
		sign := float32(1)
		if x>>63 == 1 {
			sign = -1
		}
		v[x%uint64(dim)] += sign
	}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n > 0 {
		inv := float32(1 / math.Sqrt(n))
		for i := range v {
			v[i] *= inv
		}
	}
	return v
}

// EmbeddingRequests returns every embeddings request received so far, in
// order (the ones FailEmbeddings failed included).
func (s *Server) EmbeddingRequests() []EmbeddingRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbeddingRequest(nil), s.embeddings...)
}

// FailEmbeddings makes the next n embeddings requests fail with status
// (e.g. 429 or 503), to test retries.
func (s *Server) FailEmbeddings(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedFails, s.embedStatus = n, status
}

func (s *Server) embed(w http.ResponseWriter, hr *http.Request) {
	var raw struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions"`
	}
	if err := json.NewDecoder(hr.Body).Decode(&raw); err != nil {
		writeError(w, http.StatusBadRequest, "request is not JSON: "+err.Error(), 0)
		return
	}
	req := EmbeddingRequest{Model: raw.Model, Dimensions: raw.Dimensions, Auth: hr.Header.Get("Authorization"), Time: time.Now()}
	var one string
	if json.Unmarshal(raw.Input, &one) == nil {
		req.Input = []string{one}
	} else if err := json.Unmarshal(raw.Input, &req.Input); err != nil {
		writeError(w, http.StatusBadRequest, "input is neither a string nor a list of strings", 0)
		return
	}
	s.mu.Lock()
	s.embeddings = append(s.embeddings, req)
	fail := s.embedFails > 0
	status := s.embedStatus
	if fail {
		s.embedFails--
	}
	s.mu.Unlock()
	if fail {
		writeError(w, status, "scripted failure", 0)
		return
	}
	dim := EmbeddingDimensions
	if req.Dimensions > 0 {
		dim = req.Dimensions
	}
	data := make([]map[string]any, len(req.Input))
	for i, text := range req.Input {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": Embed(text, dim)}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": 0, "total_tokens": 0},
	})
}
