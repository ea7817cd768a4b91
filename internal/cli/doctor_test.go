package cli_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// nekro doctor sends every model group a one-token request: a working
// endpoint is ok; one refusing the key (401) is reported, without the
// key, and doctor fails; with no model it skips the check and passes.
func TestDoctorTestsTheModelGroups(t *testing.T) {
	const key = "sk-doctor-secret-4242"
	good, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "OK"} })
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	refusing, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusUnauthorized, Text: "Incorrect API key provided: " + key}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer refusing.Close()
	data := testutil.DataDir(t)

	r := run(t, []string{"NEKRO_LLM_BASE_URL=" + good.URL, "NEKRO_LLM_MODEL=scripted", "NEKRO_LLM_API_KEY=" + key}, nil, "doctor", "--data", data)
	if r.Code != 0 || !strings.Contains(r.Stdout, "ok   model group chat: scripted at "+good.URL+` answered "OK"`) {
		t.Errorf("doctor with a working model: %+v", r)
	}
	if reqs := good.Requests(); len(reqs) != 1 || reqs[0].Auth != "Bearer "+key {
		t.Errorf("want one request with the key, got %+v", reqs)
	}

	// The chat model works; a group (from the config file) refuses its key.
	cfg := writeConfig(t, "llm:\n  groups:\n    vision:\n      model: eyes\n      base-url: "+refusing.URL+"\n      api-key: "+key+"\n")
	r = run(t, []string{"NEKRO_LLM_BASE_URL=" + good.URL, "NEKRO_LLM_MODEL=scripted"}, nil, "--config", cfg, "doctor", "--data", data)
	out := r.Stdout + r.Stderr
	if r.Code == 0 || !strings.Contains(out, "ok   model group chat") || !strings.Contains(out, "fail model group vision: ") ||
		!strings.Contains(out, "401 Unauthorized") || !strings.Contains(out, "model groups that did not answer: vision") {
		t.Errorf("doctor with a refusing group: %+v", r)
	}
	if strings.Contains(out, key) {
		t.Errorf("doctor shows the key:\n%s", out)
	}
	if n := len(refusing.Requests()); n != 1 {
		t.Errorf("the refusing endpoint got %d requests, want 1 (no retries)", n)
	}

	// The embedding group is probed with an embeddings request, not a
	// chat one its model could not answer.
	r = run(t, []string{"NEKRO_LLM_BASE_URL=" + good.URL, "NEKRO_LLM_MODEL=scripted", "NEKRO_LLM_EMBEDDING_MODEL=embedder"}, nil, "doctor", "--data", data)
	if r.Code != 0 || !strings.Contains(r.Stdout, "ok   model group embedding: embedder at "+good.URL+" embeds in 256 dimensions") {
		t.Errorf("doctor with an embedding group: %+v", r)
	}
	if reqs := good.EmbeddingRequests(); len(reqs) != 1 || reqs[0].Model != "embedder" {
		t.Errorf("want one embeddings request, got %+v", reqs)
	}

	r = run(t, nil, nil, "doctor", "--data", data)
	if r.Code != 0 || !strings.Contains(r.Stdout, "skip models: none configured") {
		t.Errorf("doctor without a model: %+v", r)
	}
}

// Once the operator edited the model groups (web UI, API), they live in
// the database, with their keys, and doctor tests those: the ones turns
// use, not the environment's.
func TestDoctorTestsTheStoredModelGroups(t *testing.T) {
	const key = "sk-stored-secret-7777"
	good, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "OK"} })
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	refusing, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusUnauthorized, Text: "Incorrect API key provided: " + key}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer refusing.Close()
	data := testutil.DataDir(t)
	srv := testutil.Serve(t, data, "tok")
	set := map[string]any{"default": "main", "groups": []map[string]any{
		{"name": "main", "base_url": good.URL, "model": "stored-model", "api_key": key},
		{"name": "vision", "base_url": refusing.URL, "model": "eyes", "api_key": key},
	}}
	if st, body := srv.API("PUT", "/api/models", set); st != http.StatusOK {
		t.Fatalf("PUT /api/models: %d %s", st, body)
	}
	srv.Stop()

	// The environment names another model: the stored groups win.
	r := run(t, []string{"NEKRO_LLM_BASE_URL=" + refusing.URL, "NEKRO_LLM_MODEL=from-env"}, nil, "doctor", "--data", data)
	out := r.Stdout + r.Stderr
	if r.Code == 0 || !strings.Contains(out, "ok   model group main (database): stored-model at "+good.URL+` answered "OK"`) ||
		!strings.Contains(out, "fail model group vision (database): ") || !strings.Contains(out, "model groups that did not answer: vision") {
		t.Errorf("doctor with stored groups: %+v", r)
	}
	if strings.Contains(out, key) {
		t.Errorf("doctor shows the stored key:\n%s", out)
	}
	if reqs := good.Requests(); len(reqs) != 1 || reqs[0].Auth != "Bearer "+key {
		t.Errorf("want one request with the stored key, got %+v", reqs)
	}
	for _, req := range refusing.Requests() {
		if req.Model == "from-env" {
			t.Errorf("the environment's model was tested instead of the stored groups")
		}
	}
}
