package knowledge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nekro-go/nekro/internal/knowledge/knowledgetest"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// The knowledge base through the real binary, with the scripted model's
// embeddings: documents added over the API and the CLI are found by
// search_knowledge from their chat's code and never from another chat's;
// a delete and a chat reset take them out of search.

const token = "kb-operator-token"

type doc struct {
	ID     string `json:"id"`
	Scope  string `json:"scope"`
	Name   string `json:"name"`
	Status string `json:"status"`
	Chunks int    `json:"chunks"`
	Error  string `json:"error"`
}

type passage struct {
	Source string  `json:"source"`
	Scope  string  `json:"scope"`
	Text   string  `json:"text"`
	Score  float64 `json:"score"`
}

func upload(t *testing.T, s *testutil.Served, tok, scope, name string, data []byte) (int, doc, string) {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	w.WriteField("scope", scope)
	f, _ := w.CreateFormFile("file", name)
	f.Write(data)
	w.Close()
	req, _ := http.NewRequest("POST", "http://"+s.Addr+"/api/knowledge", &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	raw.ReadFrom(resp.Body)
	var d doc
	json.Unmarshal(raw.Bytes(), &d)
	return resp.StatusCode, d, raw.String()
}

func ready(t *testing.T, s *testutil.Served, id string) doc {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, body := s.API("GET", "/api/knowledge/"+id, nil)
		var d doc
		json.Unmarshal([]byte(body), &d)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", id, st, body)
		}
		if d.Status == "ready" || d.Status == "failed" {
			if d.Status != "ready" {
				t.Fatalf("import of %s: %+v", d.Name, d)
			}
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("import of %s did not end: %+v", id, d)
		}
	}
}

// searchFrom runs search_knowledge in chat's sandbox and returns what it
// found.
func searchFrom(t *testing.T, s *testutil.Served, chat, query string) []passage {
	t.Helper()
	code := fmt.Sprintf("import json\nprint(json.dumps(search_knowledge(%q, top_k=5)))", query)
	st, body := s.API("POST", "/api/chats/"+chat+"/exec", map[string]string{"code": code})
	var res struct {
		StopType string `json:"stop_type"`
		Output   string `json:"output"`
	}
	if err := json.Unmarshal([]byte(body), &res); st != http.StatusOK || err != nil || res.StopType != "NORMAL" {
		t.Fatalf("exec in %s: %d %s", chat, st, body)
	}
	var ps []passage
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Output)), &ps); err != nil {
		t.Fatalf("search_knowledge's result in %s: %v\n%s", chat, err, res.Output)
	}
	for _, p := range ps {
		if p.Scope != "global" && p.Scope != "chat:"+chat {
			t.Fatalf("chat %s found a passage of %s: %+v", chat, p.Scope, p)
		}
	}
	return ps
}

func texts(ps []passage) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[%s %.2f] %s\n", p.Source, p.Score, p.Text)
	}
	return b.String()
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSearch calls search_knowledge through /mcp as chat and returns the
// result's text.
func mcpSearch(t *testing.T, s *testutil.Served, chat, query string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + s.Addr + "/mcp?chat=" + chat,
		HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	defer sess.Close()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "search_knowledge", Arguments: map[string]any{"query": query}})
	if err != nil {
		t.Fatalf("mcp search_knowledge: %v", err)
	}
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("mcp search_knowledge as %s failed: %s", chat, strings.Join(out, "\n"))
	}
	return strings.Join(out, "\n")
}

func TestKnowledgeThroughTheBinary(t *testing.T) {
	m, err := llmtest.Start(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "OK"} })
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data := testutil.DataDir(t)
	env := []string{"NEKRO_LLM_BASE_URL=" + m.URL, "NEKRO_LLM_MODEL=scripted", "NEKRO_LLM_API_KEY=k",
		"NEKRO_LLM_EMBEDDING_MODEL=embedder"}
	s := testutil.Serve(t, data, token, env...)

	pdf := knowledgetest.PDF("Project Zephyr is our rocket programme.", "The Zephyr launch code is 4711.")
	docx := knowledgetest.DOCX("Expense policy:", "Travel receipts go to the accounts desk within thirty days.")
	st, p, body := upload(t, s, token, "chat:group_a", "zephyr.pdf", pdf)
	if st != http.StatusAccepted || p.ID == "" {
		t.Fatalf("POST pdf: %d %s", st, body)
	}
	st, d, body := upload(t, s, token, "chat:group_a", "expenses.docx", docx)
	if st != http.StatusAccepted {
		t.Fatalf("POST docx: %d %s", st, body)
	}
	zip := knowledgetest.Zip(map[string][]byte{"faq/hours.md": []byte("The office opens at nine and closes at five."),
		"faq/menu.html": []byte("<p>The canteen serves noodles on Fridays.</p>")})
	st, z, body := upload(t, s, token, "global", "faq.zip", zip)
	if st != http.StatusAccepted {
		t.Fatalf("POST zip: %d %s", st, body)
	}
	for _, id := range []string{p.ID, d.ID, z.ID} {
		ready(t, s, id)
	}

	// Chat A's code finds its PDF and DOCX; chat B's finds neither, but
	// both find the global zip's entries.
	if ps := searchFrom(t, s, "group_a", "Zephyr launch code"); len(ps) == 0 || ps[0].Source != "zephyr.pdf" || !strings.Contains(ps[0].Text, "4711") {
		t.Fatalf("chat A, the PDF:\n%s", texts(ps))
	}
	if ps := searchFrom(t, s, "group_a", "travel receipts accounts desk"); len(ps) == 0 || ps[0].Source != "expenses.docx" {
		t.Fatalf("chat A, the DOCX:\n%s", texts(ps))
	}
	for _, q := range []string{"Zephyr launch code", "travel receipts accounts desk"} {
		ps := searchFrom(t, s, "group_b", q)
		if strings.Contains(texts(ps), "4711") || strings.Contains(texts(ps), "receipts") {
			t.Fatalf("chat B found chat A's documents for %q:\n%s", q, texts(ps))
		}
	}
	if ps := searchFrom(t, s, "group_b", "when does the office open"); len(ps) == 0 || ps[0].Source != "faq.zip/faq/hours.md" {
		t.Fatalf("chat B, the zip:\n%s", texts(ps))
	}

	// As an MCP tool, search_knowledge searches the session's chat.
	if got := mcpSearch(t, s, "group_a", "Zephyr launch code"); !strings.Contains(got, "4711") {
		t.Fatalf("MCP as chat A: %s", got)
	}
	if got := mcpSearch(t, s, "group_b", "Zephyr launch code"); strings.Contains(got, "4711") {
		t.Fatalf("MCP as chat B found chat A's PDF: %s", got)
	}

	// A user's token may not add, list or delete.
	st, body = s.API("POST", "/api/users", map[string]string{"user_id": "alice", "name": "Alice"})
	var u struct{ Token string }
	if json.Unmarshal([]byte(body), &u); st != http.StatusCreated || u.Token == "" {
		t.Fatalf("add user: %d %s", st, body)
	}
	if st, _, body := upload(t, s, u.Token, "chat:group_a", "x.txt", []byte("x")); st != http.StatusForbidden {
		t.Fatalf("a user's upload: %d %s", st, body)
	}
	if st, body := s.Call("GET", "/api/knowledge", u.Token, nil); st != http.StatusForbidden {
		t.Fatalf("a user's list: %d %s", st, body)
	}
	if st, body := s.Call("DELETE", "/api/knowledge/"+p.ID, u.Token, nil); st != http.StatusForbidden {
		t.Fatalf("a user's delete: %d %s", st, body)
	}
	if st, _, body := upload(t, s, token, "chat:group_a", "x.exe", []byte("MZ")); st != http.StatusUnsupportedMediaType {
		t.Fatalf("an exe: %d %s", st, body)
	}
	if st, _, body := upload(t, s, token, "user:alice", "x.txt", []byte("x")); st != http.StatusBadRequest {
		t.Fatalf("a bad scope: %d %s", st, body)
	}

	// The list.
	st, body = s.API("GET", "/api/knowledge?scope=chat:group_a", nil)
	var list struct{ Documents []doc }
	if json.Unmarshal([]byte(body), &list); st != http.StatusOK || len(list.Documents) != 2 {
		t.Fatalf("list: %d %s", st, body)
	}

	// Deleted, the PDF is no longer found.
	if st, body := s.API("DELETE", "/api/knowledge/"+p.ID, nil); st != http.StatusOK {
		t.Fatalf("delete: %d %s", st, body)
	}
	if ps := searchFrom(t, s, "group_a", "Zephyr launch code"); strings.Contains(texts(ps), "4711") {
		t.Fatalf("found after its delete:\n%s", texts(ps))
	}

	// The CLI, while the server runs: its document is searchable in the
	// server at once; list and rm.
	file := filepath.Join(t.TempDir(), "notes.md")
	os.WriteFile(file, []byte("# Wifi\n\nThe guest wifi password is purple-otter-42."), 0o644)
	r := testutil.RunNekro(t, nil, "--data", data, "knowledge", "add", file, "--scope", "chat:group_c", "--json")
	var added doc
	if json.Unmarshal([]byte(r.Stdout), &added); r.Code != 0 || added.Status != "ready" {
		t.Fatalf("knowledge add: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if ps := searchFrom(t, s, "group_c", "guest wifi password"); len(ps) == 0 || !strings.Contains(ps[0].Text, "purple-otter-42") {
		t.Fatalf("the CLI's document from chat C:\n%s", texts(ps))
	}
	if ps := searchFrom(t, s, "group_a", "guest wifi password"); strings.Contains(texts(ps), "purple") {
		t.Fatalf("chat A found chat C's document:\n%s", texts(ps))
	}
	if r := testutil.RunNekro(t, nil, "--data", data, "knowledge", "list"); r.Code != 0 || !strings.Contains(r.Stdout, "notes.md") || !strings.Contains(r.Stdout, "faq.zip") {
		t.Fatalf("knowledge list: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r := testutil.RunNekro(t, nil, "--data", data, "knowledge", "rm", added.ID); r.Code != 0 {
		t.Fatalf("knowledge rm: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if ps := searchFrom(t, s, "group_c", "guest wifi password"); strings.Contains(texts(ps), "purple") {
		t.Fatalf("found after knowledge rm:\n%s", texts(ps))
	}

	// Resetting chat A erases its documents; the global ones stay.
	if st, body := s.API("POST", "/api/chats/group_a/reset", nil); st != http.StatusOK {
		t.Fatalf("reset: %d %s", st, body)
	}
	st, body = s.API("GET", "/api/knowledge", nil)
	if json.Unmarshal([]byte(body), &list); st != http.StatusOK || len(list.Documents) != 1 || list.Documents[0].Name != "faq.zip" {
		t.Fatalf("after the reset: %d %s", st, body)
	}
	if ps := searchFrom(t, s, "group_a", "travel receipts accounts desk"); strings.Contains(texts(ps), "receipts") {
		t.Fatalf("found after the chat's reset:\n%s", texts(ps))
	}
}
