package app_test

// Tested the way it fails (issue 25): real `nekro serve` processes on one
// database, a scripted model, and faults injected for real: SIGKILL
// mid-turn, the database cut away under load, a full disk. Each test
// counts from the database: every message answered, none twice, no turn
// left running, no two turns of one chat at once.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nekro-go/nekro/internal/kv/kvtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

const faultToken = "tok-faults"

// Two replicas on one PostgreSQL schema. A is killed with SIGKILL while
// its turns wait for the model; B takes its chats over once their leases
// run out, without a restart, and answers what A had claimed and what
// queued behind it, each once. Then a third replica starts while B runs a
// turn, and leaves that turn alone.
func TestReplicaKilledMidTurnIsTakenOver(t *testing.T) {
	u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
	read := postgresAuditor(t, u)
	ma, mb := startModel(t), startModel(t)
	ma.holdAll = true
	a := testutil.Serve(t, testutil.DataDir(t), faultToken, append(ma.env(), "NEKRO_DATABASE_URL="+u)...)
	b := testutil.Serve(t, testutil.DataDir(t), faultToken, append(mb.env(), "NEKRO_DATABASE_URL="+u)...)

	for i := range 6 {
		if st, _ := post(a, fmt.Sprintf("a%d", i), "to A"); st != http.StatusAccepted {
			t.Fatalf("post to A: %d", st)
		}
		if st, _ := post(b, fmt.Sprintf("b%d", i), "to B"); st != http.StatusAccepted {
			t.Fatalf("post to B: %d", st)
		}
	}
	waitFor(t, 60*time.Second, "A's turns held mid-turn", func() (bool, string) {
		return ma.holding() >= 4, fmt.Sprintf("%d held", ma.holding())
	})
	// Behind A's turns: messages to the same chats, through B.
	for i := range 6 {
		if st, _ := post(b, fmt.Sprintf("a%d", i), "queued behind A's turn"); st != http.StatusAccepted {
			t.Fatalf("post to B: %d", st)
		}
	}
	a.Kill()
	killed := time.Now()
	got := waitSettled(t, 90*time.Second, read)
	took := time.Since(killed)
	t.Logf("B answered everything %s after A was killed: %s", took.Round(100*time.Millisecond), got)
	if took > 40*time.Second {
		t.Errorf("the takeover took %s, the lease is 10 s", took)
	}
	if got.notes == 0 {
		t.Errorf("no chat was told that its turn was cut off: %s", got)
	}

	// A replica starting beside a live one's turn leaves it running.
	mb.mu.Lock()
	mb.hold["slow"] = true
	mb.mu.Unlock()
	if st, _ := post(b, "slow", "take your time"); st != http.StatusAccepted {
		t.Fatalf("post: %d", st)
	}
	waitFor(t, 60*time.Second, "B's turn held", func() (bool, string) { return mb.holding() == 1, "" })
	c := testutil.Serve(t, testutil.DataDir(t), faultToken, append(mb.env(), "NEKRO_DATABASE_URL="+u)...)
	// Resume ran before C answered; its polls run every second. Watch a
	// few leases' renewals long.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		st, body := c.API("GET", "/api/chats/slow/turns", nil)
		if st != http.StatusOK || strings.Count(body, `"status"`) != 1 || !strings.Contains(body, `"status": "running"`) {
			t.Fatalf("B's live turn was touched by the starting replica: %d %s", st, body)
		}
	}
	mb.release()
	waitSettled(t, 60*time.Second, read)
}

// One process on SQLite, killed with SIGKILL mid-turn and started again:
// the messages its turns had claimed are answered after the restart.
func TestSQLiteKilledMidTurnAnswersAfterRestart(t *testing.T) {
	data := testutil.DataDir(t)
	m := startModel(t)
	m.holdAll = true
	s := testutil.Serve(t, data, faultToken, m.env()...)
	for i := range 5 {
		for j := range 2 {
			if st, _ := post(s, fmt.Sprintf("c%d", i), fmt.Sprint("message ", j)); st != http.StatusAccepted {
				t.Fatalf("post: %d", st)
			}
		}
	}
	waitFor(t, 60*time.Second, "turns held mid-turn", func() (bool, string) {
		return m.holding() >= 3, fmt.Sprintf("%d held", m.holding())
	})
	s.Kill()
	m2 := startModel(t)
	s2 := testutil.Serve(t, data, faultToken, m2.env()...)
	got := waitSettled(t, 90*time.Second, sqliteAuditor(t, filepath.Join(data, "nekro.db")))
	if got.users != 10 || got.notes == 0 {
		t.Fatalf("after the restart: %s", got)
	}
	if st, _ := post(s2, "c0", "and now?"); st != http.StatusAccepted {
		t.Fatalf("post after the restart: %d", st)
	}
	waitSettled(t, 60*time.Second, sqliteAuditor(t, filepath.Join(data, "nekro.db")))
}

// Two replicas reach PostgreSQL through a proxy that the test cuts for
// seven seconds under load: posts answer 503 meanwhile (never 400), the
// health check says the database is unavailable, and once it is back
// every message stored is answered once, with no restart.
func TestPostgresOutageUnderLoad(t *testing.T) {
	base := kvtest.PostgresURL(t)
	direct := kvtest.FreshSchema(t, base)
	pu, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, pu.Host)
	pu.Host = px.addr()
	viaProxy := pu.String()
	read := postgresAuditor(t, direct)
	ma, mb := startModel(t), startModel(t)
	ma.delay, mb.delay = 300*time.Millisecond, 300*time.Millisecond
	a := testutil.Serve(t, testutil.DataDir(t), faultToken, append(ma.env(), "NEKRO_DATABASE_URL="+viaProxy)...)
	b := testutil.Serve(t, testutil.DataDir(t), faultToken, append(mb.env(), "NEKRO_DATABASE_URL="+viaProxy)...)

	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	stopPosting := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopPosting:
				return
			case <-time.After(100 * time.Millisecond):
			}
			s := a
			if i%2 == 1 {
				s = b
			}
			st, _ := post(s, fmt.Sprintf("p%d", i%8), fmt.Sprint("load ", i))
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}
	})
	waitFor(t, 60*time.Second, "messages answered before the outage", func() (bool, string) {
		got, err := read()
		return err == nil && got.users-len(got.unanswered) >= 10, fmt.Sprint(got, err)
	})
	px.setCut(true)
	cutAt := time.Now()
	waitFor(t, 30*time.Second, "a post refused with 503 during the outage", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return statuses[http.StatusServiceUnavailable] > 0, fmt.Sprint(statuses)
	})
	if st, body := a.Call("GET", "/healthz", "", nil); st != http.StatusServiceUnavailable || !strings.Contains(body, "database") {
		t.Errorf("healthz during the outage: %d %s", st, body)
	}
	time.Sleep(time.Until(cutAt.Add(7 * time.Second))) // the outage lasts 7 s
	px.setCut(false)
	waitFor(t, 60*time.Second, "posts accepted again", func() (bool, string) {
		st, _ := post(b, "after", "the database is back")
		return st == http.StatusAccepted, fmt.Sprint(st)
	})
	close(stopPosting)
	wg.Wait()
	got := waitSettled(t, 120*time.Second, read)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("posts by status %v; %s", statuses, got)
	for st, n := range statuses {
		if st != http.StatusAccepted && st != http.StatusServiceUnavailable {
			t.Errorf("%d posts answered %d during the outage (want 202 or 503)", n, st)
		}
	}
	for _, s := range []*testutil.Served{a, b} {
		if st, body := s.Call("GET", "/healthz", "", nil); st != http.StatusOK {
			t.Errorf("healthz after the outage: %d %s", st, body)
		}
	}
}

// A data directory on a small tmpfs filled up mid-run: posts answer 507,
// /healthz says the disk is full, turns that could not store their answer
// say so, and once space is freed every message is answered and no turn
// is left running.
func TestDiskFullAnswers507AndRecovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	data := testutil.DataDir(t)
	if err := os.MkdirAll(data, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("nekro-test-full", data, "tmpfs", 0, "size=128m,mode=0711"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(data, unix.MNT_DETACH) })
	m := startModel(t)
	m.holdAll = true
	s := testutil.Serve(t, data, faultToken, m.env()...)
	read := sqliteAuditor(t, filepath.Join(data, "nekro.db"))
	for i := range 3 {
		if st, _ := post(s, fmt.Sprintf("f%d", i), "before the disk fills"); st != http.StatusAccepted {
			t.Fatalf("post: %d", st)
		}
	}
	waitFor(t, 60*time.Second, "turns held mid-turn", func() (bool, string) { return m.holding() == 3, fmt.Sprint(m.holding()) })

	filler := filepath.Join(data, "filler")
	fill(t, filler)
	// SQLite reuses the space its WAL already has: long messages soon
	// need more, and the post fails.
	long := strings.Repeat("full? ", 10000)
	full := false
	for i := 0; i < 200 && !full; i++ {
		st, body := s.API("POST", "/api/chats/f0/messages", map[string]string{"user_id": "u1", "text": long})
		switch st {
		case http.StatusAccepted:
		case http.StatusInsufficientStorage:
			full = true
		default:
			t.Fatalf("post on a full disk: %d %s", st, body)
		}
	}
	if !full {
		t.Fatal("no post was refused with 507 on a full disk")
	}
	if st, body := s.Call("GET", "/healthz", "", nil); st != http.StatusServiceUnavailable || !strings.Contains(body, "disk is full") ||
		strings.Contains(body, data) {
		t.Errorf("healthz on a full disk: %d %s", st, body)
	}
	m.release() // the held turns now try to store their answers
	waitFor(t, 60*time.Second, "the held turns asked for their answers", func() (bool, string) { return m.holding() == 0, "" })
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	got := waitSettled(t, 90*time.Second, read)
	t.Logf("after space was freed: %s", got)
	if st, body := s.Call("GET", "/healthz", "", nil); st != http.StatusOK {
		t.Errorf("healthz once space is freed: %d %s", st, body)
	}
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{1 << 20, 4 << 10, 512} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
	}
}

// Two replicas on one PostgreSQL: a file posted through A is downloadable
// through B and read by a run B makes; a file a run on B sends is
// downloadable through A; B's event stream carries what A does.
func TestFilesAndEventsAcrossReplicas(t *testing.T) {
	u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
	ma, mb := startModel(t), startModel(t)
	a := testutil.Serve(t, testutil.DataDir(t), faultToken, append(ma.env(), "NEKRO_DATABASE_URL="+u)...)
	b := testutil.Serve(t, testutil.DataDir(t), faultToken, append(mb.env(), "NEKRO_DATABASE_URL="+u)...)

	// B's event stream of the chat.
	req, _ := http.NewRequest("GET", "http://"+b.Addr+"/api/chats/share/events", nil)
	req.Header.Set("Authorization", "Bearer "+faultToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events on B: %v %v", resp, err)
	}
	defer resp.Body.Close()
	var streamMu sync.Mutex
	var stream strings.Builder
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			streamMu.Lock()
			stream.Write(buf[:n])
			streamMu.Unlock()
			if err != nil {
				return
			}
		}
	}()

	// A file posted through A.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("user_id", "u1")
	mw.WriteField("text", "a file through A")
	fw, _ := mw.CreateFormFile("file", "notes.txt")
	fw.Write([]byte("written on A"))
	mw.Close()
	preq, _ := http.NewRequest("POST", "http://"+a.Addr+"/api/chats/share/messages", &body)
	preq.Header.Set("Authorization", "Bearer "+faultToken)
	preq.Header.Set("Content-Type", mw.FormDataContentType())
	presp, err := http.DefaultClient.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	var posted struct {
		Message struct {
			Attachments []struct {
				Name string `json:"name"`
			} `json:"attachments"`
		} `json:"message"`
	}
	json.NewDecoder(presp.Body).Decode(&posted)
	presp.Body.Close()
	if presp.StatusCode != http.StatusAccepted || len(posted.Message.Attachments) != 1 {
		t.Fatalf("post with a file through A: %d %+v", presp.StatusCode, posted)
	}
	name := posted.Message.Attachments[0].Name
	if st, got := b.API("GET", "/api/chats/share/uploads/"+name, nil); st != http.StatusOK || got != "written on A" {
		t.Fatalf("download through B: %d %q", st, got)
	}
	st, res := b.API("POST", "/api/chats/share/exec", map[string]string{"code": `
print(open("/app/uploads/` + name + `").read())
open("/app/shared/from_b.txt", "w").write("written on B")
send_msg_file(_ck, "/app/shared/from_b.txt")`})
	if st != http.StatusOK || !strings.Contains(res, "written on A") {
		t.Fatalf("a run on B reading A's file: %d %s", st, res)
	}
	if st, got := a.API("GET", "/api/chats/share/uploads/from_b.txt", nil); st != http.StatusOK || got != "written on B" {
		t.Fatalf("download through A of the file a run on B sent: %d %q", st, got)
	}
	waitFor(t, 30*time.Second, "A's message and turn on B's event stream", func() (bool, string) {
		streamMu.Lock()
		defer streamMu.Unlock()
		s := stream.String()
		return strings.Contains(s, "a file through A") && strings.Contains(s, "event: turn"), s
	})
	waitSettled(t, 60*time.Second, postgresAuditor(t, u))
}
