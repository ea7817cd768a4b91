package cli_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

var tokenRE = regexp.MustCompile(`nku_[A-Za-z0-9_-]{43}`)

// The operator manages users from the shell next to a running nekro
// serve: a token printed by `nekro users add` signs in at once, `nekro
// chats members` opens and closes a chat to it, a second token from
// `nekro users token` works too, and `nekro users remove` shuts both out
// on the server's next request.
func TestUsersCommandsNextToNekroServe(t *testing.T) {
	data := testutil.DataDir(t)
	run := func(args ...string) string {
		t.Helper()
		r := testutil.RunNekro(t, nil, append(args, "--data", data)...)
		if r.Code != 0 {
			t.Fatalf("nekro %s: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	out := run("users", "add", "alice", "--name", "Alice Liddell")
	tok := tokenRE.FindString(out)
	if tok == "" || !strings.Contains(out, "shown once") {
		t.Fatalf("users add printed no token:\n%s", out)
	}
	if r := testutil.RunNekro(t, nil, "users", "add", "alice", "--data", data); r.Code == 0 || !strings.Contains(r.Stderr, "already exists") {
		t.Errorf("adding alice twice: %+v", r)
	}
	srv := testutil.Serve(t, data, "operator-token-cli")
	if st, body := srv.Call("GET", "/api/me", tok, nil); st != http.StatusOK || !strings.Contains(body, "Alice Liddell") {
		t.Fatalf("/api/me with the printed token: %d %s", st, body)
	}
	if st, _ := srv.Call("GET", "/api/chats/team/messages", tok, nil); st != http.StatusNotFound {
		t.Errorf("a chat alice is not in: %d", st)
	}
	if out := run("chats", "members", "team", "--add", "alice"); !strings.Contains(out, "team: alice") {
		t.Errorf("members --add: %s", out)
	}
	if st, body := srv.Call("GET", "/api/chats/team/messages", tok, nil); st != http.StatusOK {
		t.Errorf("after --add: %d %s", st, body)
	}
	if out := run("chats", "members", "team", "--remove", "alice"); !strings.Contains(out, "no members") {
		t.Errorf("members --remove: %s", out)
	}
	if st, _ := srv.Call("GET", "/api/chats/team/messages", tok, nil); st != http.StatusNotFound {
		t.Errorf("after --remove: %d", st)
	}
	tok2 := tokenRE.FindString(run("users", "token", "alice"))
	if st, _ := srv.Call("GET", "/api/me", tok2, nil); tok2 == "" || tok2 == tok || st != http.StatusOK {
		t.Errorf("second token %q: %d", tok2, st)
	}
	if out := run("users", "list"); !regexp.MustCompile(`alice\s+Alice Liddell\s+2\s`).MatchString(out) {
		t.Errorf("users list:\n%s", out)
	}
	run("users", "remove", "alice")
	for _, tk := range []string{tok, tok2} {
		if st, _ := srv.Call("GET", "/api/me", tk, nil); st != http.StatusUnauthorized {
			t.Errorf("a removed user's token: %d, want 401", st)
		}
	}
	if out := run("users", "list"); !strings.Contains(out, "no users") {
		t.Errorf("users list after remove:\n%s", out)
	}
}
