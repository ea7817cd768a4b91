package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// instantModel is the load's model: an OpenAI-compatible chat completions
// endpoint on a loopback port that answers at once with one send_msg_text
// naming the messages the turn answers. It runs on the cores it measures,
// so it reads no more of a request than it must: the last instruction's
// marker, found in the raw body. llmtest's scripted model, which decodes
// every prompt twice to hand a script the whole request, was about 9% of
// nekro's process CPU under bench load; a model the operator runs is
// elsewhere.
type instantModel struct {
	URL string // the API root to give the client
	srv *http.Server
}

func startInstantModel() (*instantModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench model: %w", err)
	}
	m := &instantModel{URL: "http://" + ln.Addr().String() + "/v1"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.complete)
	m.srv = &http.Server{Handler: mux}
	go m.srv.Serve(ln)
	return m, nil
}

func (m *instantModel) Close() error { return m.srv.Close() }

// answerMarker starts the instruction that ends a turn's prompt.
var answerMarker = []byte("Answer the new message(s) ")

func (m *instantModel) complete(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	text := "answered: none"
	if i := bytes.LastIndex(body, answerMarker); i >= 0 {
		if ids := answering.FindSubmatch(body[i:]); ids != nil {
			text = "answered: " + string(ids[1])
		}
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type choice struct {
		Index        int     `json:"index"`
		FinishReason string  `json:"finish_reason"`
		Message      message `json:"message"`
	}
	out, _ := json.Marshal(struct {
		ID      string         `json:"id"`
		Object  string         `json:"object"`
		Created int64          `json:"created"`
		Model   string         `json:"model"`
		Choices []choice       `json:"choices"`
		Usage   map[string]int `json:"usage"`
	}{ID: "chatcmpl-bench", Object: "chat.completion", Created: time.Now().Unix(), Model: "instant",
		Choices: []choice{{FinishReason: "stop", Message: message{Role: "assistant",
			Content: "```python\nsend_msg_text(_ck, " + strconv.Quote(text) + ")\n```"}}},
		Usage: map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}
