package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// GroupEmbedding is the model group whose model turns text into vectors
// (NEKRO_LLM_EMBEDDING_MODEL, _BASE_URL, _API_KEY): the knowledge base and
// the long-term memory embed with it.
const GroupEmbedding = "embedding"

// ErrNoEmbeddingModel is returned when something needs embeddings and no
// embedding group is configured. Its text says how to configure one.
var ErrNoEmbeddingModel = errors.New("no embedding model is configured: set NEKRO_LLM_EMBEDDING_MODEL" +
	" (e.g. text-embedding-3-small) and, when it is not served by " + EnvBaseURL + "'s endpoint," +
	" NEKRO_LLM_EMBEDDING_BASE_URL and NEKRO_LLM_EMBEDDING_API_KEY")

// DefaultEmbeddingBatch is how many texts one embeddings request carries
// unless EmbeddingOptions.BatchSize says otherwise.
const DefaultEmbeddingBatch = 64

// Embedder turns texts into vectors, one per text, in order. Embeddings
// is the real one.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbeddingOptions tunes an embeddings client beyond its group's Config.
type EmbeddingOptions struct {
	// BatchSize is the most texts one request carries; default
	// DefaultEmbeddingBatch. Longer lists are sent as several requests,
	// one after the other.
	BatchSize int
	// Dimensions, when not 0, is sent as the request's "dimensions" (the
	// models that can shorten their vectors honour it).
	Dimensions int
}

// Embeddings is the client of an OpenAI-compatible embeddings endpoint
// (POST {BaseURL}/embeddings), configured as the model group "embedding".
// It batches, and retries each batch like Client retries a completion
// (429, 5xx and network errors, with backoff; Config.MaxRetries,
// RetryBase, Timeout).
type Embeddings struct {
	cfg      Config
	opts     EmbeddingOptions
	endpoint string
	http     *http.Client
}

// NewEmbeddings checks cfg, the embedding group's settings (from
// GroupsFrom or the models page, never read here), and returns a client.
func NewEmbeddings(cfg Config, opts EmbeddingOptions) (*Embeddings, error) {
	if cfg.Model == "" {
		return nil, ErrNoEmbeddingModel
	}
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("the embedding group's base URL %q is not an http(s) URL: %w", cfg.BaseURL, ErrNoEmbeddingModel)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 500 * time.Millisecond
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultEmbeddingBatch
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	endpoint := strings.TrimRight(cfg.BaseURL, "/")
	if !strings.HasSuffix(endpoint, "/embeddings") {
		endpoint += "/embeddings"
	}
	return &Embeddings{cfg: cfg, opts: opts, endpoint: endpoint, http: hc}, nil
}

// Model returns the configured model name.
func (e *Embeddings) Model() string { return e.cfg.Model }

// Endpoint returns the URL requests go to.
func (e *Embeddings) Endpoint() string { return e.endpoint }

type embeddingRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

type embeddingResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// Embed returns one vector per text, in the order of texts, sending
// BatchSize texts per request. Every vector has the same length, or Embed
// fails: a store of vectors of mixed models would compare nonsense.
func (e *Embeddings) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.opts.BatchSize {
		batch := texts[start:min(start+e.opts.BatchSize, len(texts))]
		vecs, err := e.embedBatch(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embed texts %d-%d of %d: %w", start+1, start+len(batch), len(texts), err)
		}
		out = append(out, vecs...)
	}
	for i, v := range out {
		if len(v) != len(out[0]) {
			return nil, fmt.Errorf("embeddings of %s have mixed lengths: text 1 has %d dimensions, text %d has %d", e.cfg.Model, len(out[0]), i+1, len(v))
		}
	}
	return out, nil
}

func (e *Embeddings) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingRequest{Model: e.cfg.Model, Input: batch, EncodingFormat: "float", Dimensions: e.opts.Dimensions})
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	var vecs [][]float32
	_, err = post(ctx, e.cfg, e.http, e.endpoint, body, "embeddings request", func(raw []byte) error {
		var er embeddingResponse
		if err := json.Unmarshal(raw, &er); err != nil {
			return fmt.Errorf("answer is not an embeddings list: %w", err)
		}
		if len(er.Data) != len(batch) {
			return fmt.Errorf("answer has %d embeddings for %d texts (is %s an embeddings endpoint?)", len(er.Data), len(batch), e.endpoint)
		}
		vecs = make([][]float32, len(batch))
		for _, d := range er.Data {
			if d.Index < 0 || d.Index >= len(batch) || vecs[d.Index] != nil {
				return fmt.Errorf("answer has a bad or repeated index %d", d.Index)
			}
			if len(d.Embedding) == 0 {
				return fmt.Errorf("answer has an empty embedding at index %d", d.Index)
			}
			vecs[d.Index] = d.Embedding
		}
		return nil
	})
	return vecs, err
}

// Probe embeds one short text, once, without retries, and returns the
// vector's length: a check that the embedding group's URL, model and key
// work, for `nekro doctor` (a chat request would fail on an embeddings
// model).
func (e *Embeddings) Probe(ctx context.Context) (dims int, took time.Duration, err error) {
	body, err := json.Marshal(embeddingRequest{Model: e.cfg.Model, Input: []string{"OK"}, EncodingFormat: "float", Dimensions: e.opts.Dimensions})
	if err != nil {
		return 0, 0, fmt.Errorf("encode request: %w", err)
	}
	once := e.cfg
	once.MaxRetries = 0
	start := time.Now()
	_, err = post(ctx, once, e.http, e.endpoint, body, "embeddings request", func(raw []byte) error {
		var er embeddingResponse
		if err := json.Unmarshal(raw, &er); err != nil {
			return fmt.Errorf("answer is not an embeddings list: %w", err)
		}
		if len(er.Data) != 1 || len(er.Data[0].Embedding) == 0 {
			return fmt.Errorf("answer has no embedding (is %s an embeddings endpoint?)", e.endpoint)
		}
		dims = len(er.Data[0].Embedding)
		return nil
	})
	return dims, time.Since(start), err
}
