package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nekro-go/nekro/internal/testutil"
)

// stdioSession starts `nekro mcp` with args and connects the SDK's client
// to it, as a desktop MCP client would.
func stdioSession(t *testing.T, args ...string) (*mcp.ClientSession, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.Command(testutil.Nekro(t), append([]string{"mcp"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to nekro mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { sess.Close() })
	return sess, &stderr
}

func tools(t *testing.T, sess *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range sess.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		out[tool.Name] = tool
	}
	return out
}

func call(t *testing.T, sess *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return res, strings.Join(texts, "\n")
}

// The stdio server lists the enabled plugins' methods with their docs and
// schemas, and every call is the chat and user of the command line: a
// note set without chat_key lands in c1's scope of the KV store, another
// chat is refused, a wrong argument type is a TypeError, and a plugin the
// operator disables is neither listed nor callable.
func TestStdioServerCallsAsTheBoundChat(t *testing.T) {
	data := testutil.DataDir(t)
	sess, stderr := stdioSession(t, "--data", data, "--chat", "c1", "--user", "u1")

	ts := tools(t, sess)
	set, ok := ts["set_note"]
	if !ok {
		t.Fatalf("set_note not listed; tools: %v\n%s", keysOf(ts), stderr)
	}
	if !strings.Contains(set.Description, "set_note(chat_key: str, title: str, description: str, duration: int = 0) -> str") ||
		!strings.Contains(set.Description, "SCROLLING WINDOW") {
		t.Errorf("set_note's description lacks its signature or doc:\n%s", set.Description)
	}
	var schema struct {
		Type       string
		Required   []string
		Properties map[string]struct {
			Type        string
			Description string
			Default     any
		}
	}
	b, _ := json.Marshal(set.InputSchema)
	json.Unmarshal(b, &schema)
	if title := schema.Properties["title"]; schema.Type != "object" || title.Type != "string" ||
		!strings.HasPrefix(title.Description, "Note Title") || schema.Properties["duration"].Type != "integer" ||
		schema.Properties["duration"].Default != 0.0 || strings.Join(schema.Required, ",") != "chat_key,title,description" {
		t.Errorf("set_note's input schema: %s", b)
	}
	if set.Meta["nekro/method_type"] != "BEHAVIOR" {
		t.Errorf("set_note's _meta: %v", set.Meta)
	}

	res, text := call(t, sess, "set_note", map[string]any{"title": "mood", "description": "[effect] happy"})
	if res.IsError || res.Meta["nekro/method_type"] != "BEHAVIOR" {
		t.Fatalf("set_note failed: %s %v", text, res.Meta)
	}
	res, text = call(t, sess, "set_note", map[string]any{"chat_key": "c2", "title": "x", "description": "y"})
	if !res.IsError || !strings.Contains(text, "not this chat") {
		t.Errorf("set_note in another chat: isError=%v %q", res.IsError, text)
	}
	res, text = call(t, sess, "get_note", map[string]any{"title": 5})
	if !res.IsError || !strings.HasPrefix(text, "TypeError: get_note(): argument 'title' must be str") {
		t.Errorf("a wrong argument type: isError=%v %q", res.IsError, text)
	}
	res, text = call(t, sess, "get_note", map[string]any{"title": "mood"})
	if res.IsError || text != "[effect] happy" {
		t.Errorf("get_note: isError=%v %q", res.IsError, text)
	}
	sess.Close()

	if r := testutil.RunNekro(t, nil, "--data", data, "kv", "--plugin", "nekro.note", "--chat", "c1", "get", "note"); r.Code != 0 ||
		!strings.Contains(r.Stdout, `"mood"`) {
		t.Errorf("c1's notes as nekro kv reads them: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := testutil.RunNekro(t, nil, "--data", data, "kv", "--plugin", "nekro.note", "--chat", "c2", "get", "note"); r.Code != 1 {
		t.Errorf("c2 has notes: %d %q", r.Code, r.Stdout)
	}

	if r := testutil.RunNekro(t, nil, "--data", data, "plugins", "disable", "nekro.note"); r.Code != 0 {
		t.Fatalf("disable: %+v", r)
	}
	sess, _ = stdioSession(t, "--data", data, "--chat", "c1")
	if _, listed := tools(t, sess)["set_note"]; listed {
		t.Error("a disabled plugin's method is listed")
	}
	if _, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_note",
		Arguments: map[string]any{"chat_key": "c1", "title": "mood"}}); err == nil {
		t.Error("a disabled plugin's method answered")
	}
}

// `nekro mcp` refuses to start without a chat: calls need one.
func TestStdioServerNeedsAChat(t *testing.T) {
	r := testutil.RunNekro(t, nil, "--data", testutil.DataDir(t), "mcp")
	if r.Code == 0 || !strings.Contains(r.Stderr, "chat") {
		t.Errorf("nekro mcp without --chat: %+v", r)
	}
}

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// /mcp on nekro serve: no token is 401, the operator's token without a
// chat is 400 saying so, and with ?chat= a streamable HTTP client lists
// and calls the methods as that chat.
func TestHTTPServerNeedsTheTokenAndAChat(t *testing.T) {
	data := testutil.DataDir(t)
	srv := testutil.Serve(t, data, "op-token")
	if st, body := srv.Call("POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}); st != http.StatusUnauthorized {
		t.Errorf("/mcp without a token: %d %s", st, body)
	}
	if st, body := srv.Call("POST", "/mcp", "wrong", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}); st != http.StatusUnauthorized {
		t.Errorf("/mcp with a wrong token: %d %s", st, body)
	}
	if st, body := srv.API("POST", "/mcp", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}); st != http.StatusBadRequest ||
		!strings.Contains(body, "chat=") {
		t.Errorf("/mcp without a chat: %d %s", st, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + srv.Addr + "/mcp?chat=web1&user=u9",
		HTTPClient: &http.Client{Transport: bearer{"op-token"}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, srv.Logs)
	}
	defer sess.Close()
	if _, ok := tools(t, sess)["set_note"]; !ok {
		t.Fatal("set_note not listed over HTTP")
	}
	if res, text := call(t, sess, "set_note", map[string]any{"title": "t", "description": "d"}); res.IsError {
		t.Fatalf("set_note over HTTP: %s", text)
	}
	if st, body := srv.API("GET", "/api/chats/web1/messages", nil); st != http.StatusOK || !strings.Contains(body, "t") {
		t.Errorf("web1's history: %d %s", st, body)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// /mcp with a user's token (nekro serve, the users of POST /api/users):
// the session sees the chats the user is a member of, every call is that
// user's (a user-scoped value lands in the user's scope), a chat the user
// is not in is 404 as for the rest of the API, ?user= cannot make the
// calls another user's, and the token stops working when the user is
// removed. (The kvstore example's methods keep values in the caller's
// user scope.)
func TestHTTPServerWithAUsersToken(t *testing.T) {
	data := testutil.DataDir(t)
	srv := testutil.ServeExamples(t, data, "op-token", "NEKRO_PLUGINS=nekro_examples.kvstore")
	st, body := srv.API("POST", "/api/users", map[string]any{"user_id": "u1", "name": "User One"})
	var u struct {
		Token string `json:"token"`
	}
	if json.Unmarshal([]byte(body), &u); st != http.StatusCreated || u.Token == "" {
		t.Fatalf("POST /api/users: %d %s", st, body)
	}
	if st, body := srv.API("PUT", "/api/chats/c1/members/u1", nil); st != http.StatusOK {
		t.Fatalf("add u1 to c1: %d %s", st, body)
	}

	initialize := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "test", "version": "1"}}}
	if st, body := srv.Call("POST", "/mcp?chat=c2", u.Token, initialize); st != http.StatusNotFound || !strings.Contains(body, "c2") {
		t.Errorf("/mcp in a chat u1 is not a member of: %d %s", st, body)
	}
	if st, body := srv.Call("POST", "/mcp?chat=c1&user=u2", u.Token, initialize); st != http.StatusForbidden || !strings.Contains(body, "u1") {
		t.Errorf("/mcp with a user token naming another user: %d %s", st, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + srv.Addr + "/mcp?chat=c1&user=u1", // its own id may be named
		HTTPClient: &http.Client{Transport: bearer{u.Token}}}, nil)
	if err != nil {
		t.Fatalf("connect with u1's token: %v\n%s", err, srv.Logs)
	}
	defer sess.Close()
	ts := tools(t, sess)
	for _, name := range []string{"save_preference", "add_note"} {
		if _, ok := ts[name]; !ok {
			t.Errorf("%s not listed for u1 in c1: %v", name, keysOf(ts))
		}
	}
	if res, text := call(t, sess, "save_preference", map[string]any{"key": "color", "value": "teal"}); res.IsError {
		t.Fatalf("save_preference as u1: %s", text)
	}
	if res, text := call(t, sess, "add_note", map[string]any{"note_id": "n1", "title": "from-mcp", "content": "noted by u1"}); res.IsError {
		t.Fatalf("add_note as u1: %s", text)
	}
	// A BEHAVIOR result is recorded in c1, as a system message: a note
	// for the model and the operator, which the user's token does not
	// list (issue 24: notes for the model are not chat messages for
	// people).
	if st, body := srv.API("GET", "/api/chats/c1/messages", nil); st != http.StatusOK || !strings.Contains(body, "from-mcp") {
		t.Errorf("c1's history: %d %s", st, body)
	}
	if st, body := srv.Call("GET", "/api/chats/c1/messages", u.Token, nil); st != http.StatusOK || strings.Contains(body, "from-mcp") {
		t.Errorf("c1's history as u1 lists a system message: %d %s", st, body)
	}

	if st, body := srv.API("DELETE", "/api/users/u1", nil); st != http.StatusOK {
		t.Fatalf("remove u1: %d %s", st, body)
	}
	if _, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_preference", Arguments: map[string]any{"key": "color"}}); err == nil {
		t.Error("a removed user's MCP session still calls")
	}
	srv.Stop()

	kv := func(user, key string) testutil.Result {
		return testutil.RunNekroExamples(t, nil, "--data", data, "kv", "--plugin", "nekro_examples.kvstore", "--user", user, "get", key)
	}
	if r := kv("u1", "color"); r.Code != 0 || !strings.Contains(r.Stdout, "teal") {
		t.Errorf("u1's preference: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := kv("u1", "all_notes"); r.Code != 0 || !strings.Contains(r.Stdout, "from-mcp") {
		t.Errorf("u1's notes: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	for _, key := range []string{"color", "all_notes"} {
		if r := kv("u2", key); r.Code != 1 || r.Stdout != "" {
			t.Errorf("u2 has u1's %s: %d %q", key, r.Code, r.Stdout)
		}
	}
}
