package onebot_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// Two replicas on one PostgreSQL, the OneBot implementation connected to
// A only: an answer written on B reaches QQ through A (the outbox). Then
// A is killed with SIGKILL while QQ has B's next answer in hand but has
// not acknowledged it; when A is started again and QQ reconnects, the
// answer is sent again once its lease has run out: at least once. An
// image a run on B made reaches QQ through A too.
func TestOutboxAcrossReplicas(t *testing.T) {
	u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
	m := model(t)
	env := []string{"NEKRO_DATABASE_URL=" + u, "NEKRO_LLM_BASE_URL=" + m.URL, "NEKRO_LLM_MODEL=scripted",
		"NEKRO_ONEBOT_TOKEN=ob-secret", "NEKRO_ONEBOT_ACTION_TIMEOUT=60s"}
	dataA := testutil.DataDir(t)
	a := testutil.Serve(t, dataA, "api-tok", env...)
	b := testutil.Serve(t, testutil.DataDir(t), "api-tok", env...)
	ws, _, err := dialReverse(a.Addr, reverseHeaders("ob-secret"))
	if err != nil {
		t.Fatalf("connect to A: %v\n%s", err, a.Logs)
	}
	s := newSim(t, ws)
	s.waitAction("get_login_info")

	// The operator posts to the group through B: B runs the turn.
	ask := func(text string) {
		t.Helper()
		if st, body := b.API("POST", "/api/chats/onebot_v11-group_100/messages",
			map[string]string{"user_id": "onebot_v11:42", "text": text}); st != http.StatusAccepted {
			t.Fatalf("post through B: %d %s", st, body)
		}
	}
	start := time.Now()
	ask("ping one")
	if p := parseSend(t, s.waitAction("send_group_msg")); p.GroupID != 100 || p.text() != "pong one" {
		t.Fatalf("B's answer through A: %+v", p)
	}
	t.Logf("B's answer reached QQ through A %s after the post", time.Since(start).Round(time.Millisecond))

	// QQ takes the next answer and hangs; A dies holding it.
	s.holdSends.Store(true)
	ask("ping two")
	if p := parseSend(t, s.waitAction("send_group_msg")); p.text() != "pong two" {
		t.Fatalf("the held answer: %+v", p)
	}
	a.Kill()
	ws.CloseNow()
	killed := time.Now()
	a2 := testutil.Serve(t, dataA, "api-tok", env...)
	ws2, _, err := dialReverse(a2.Addr, reverseHeaders("ob-secret"))
	if err != nil {
		t.Fatalf("connect to A again: %v\n%s", err, a2.Logs)
	}
	s2 := newSim(t, ws2)
	if p := parseSend(t, s2.waitAction("send_group_msg")); p.GroupID != 100 || p.text() != "pong two" {
		t.Fatalf("after A came back: %+v", p)
	}
	t.Logf("the answer A died sending was sent %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	// Nothing is left in the outbox, and later answers flow at once.
	ask("hello there")
	if p := parseSend(t, s2.waitAction("send_group_msg")); p.text() != "pong group" {
		t.Fatalf("after the takeover: %+v", p)
	}

	// An image a run on B made is sent by A, which copies it from the
	// database first (last: the scripted model draws whenever the
	// history asks for a dot).
	ask("draw me a dot")
	p := parseSend(t, s2.waitAction("send_group_msg"))
	if len(p.Message) != 1 || p.Message[0].Type != "image" || !strings.HasPrefix(p.Message[0].Data["file"], "base64://") {
		t.Fatalf("B's image through A: %+v\n%s", p, a2.Logs)
	}
	if png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(p.Message[0].Data["file"], "base64://")); err != nil ||
		!strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("B's image through A is not the PNG: %v", err)
	}
	ws2.CloseNow()
}
