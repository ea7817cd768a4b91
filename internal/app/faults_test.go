package app_test

// Helpers of the fault tests (replicas_test.go): a scripted model that
// holds turns mid-flight until told, an audit of the database that counts
// what was answered, a TCP proxy that cuts the database away.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver the audit reads PostgreSQL with

	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/llm/llmtest"
	"github.com/nekro-go/nekro/internal/testutil"
)

// gatedModel is a scripted model that answers every turn with the ids of
// the messages it was asked to answer ("I answer #3 #4."), and holds the
// requests of the chats it is told to hold until released: a turn held
// there is mid-turn, deterministically.
type gatedModel struct {
	*llmtest.Server
	mu      sync.Mutex
	holdAll bool
	hold    map[string]bool
	open    chan struct{} // closed by release
	held    int           // requests waiting now
	delay   time.Duration
}

var answerRE = regexp.MustCompile(`Answer the new message\(s\) ([^.]*)\.`)

func startModel(t *testing.T) *gatedModel {
	t.Helper()
	m := &gatedModel{hold: map[string]bool{}, open: make(chan struct{})}
	srv, err := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		m.wait(r.ChatKey())
		ids := "nothing"
		if s := answerRE.FindStringSubmatch(r.Last()); s != nil {
			ids = strings.ReplaceAll(s[1], ",", "")
		}
		// Not Python (two names in a row), so it is the assistant's words.
		return llmtest.Reply{Text: "I answer " + ids + ".", Delay: m.delay}
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Server = srv
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(m.release) // runs first: no handler stays blocked
	return m
}

func (m *gatedModel) wait(chatKey string) {
	m.mu.Lock()
	if !m.holdAll && !m.hold[chatKey] {
		m.mu.Unlock()
		return
	}
	m.held++
	open := m.open
	m.mu.Unlock()
	<-open
	m.mu.Lock()
	m.held--
	m.mu.Unlock()
}

// holding returns how many requests wait now.
func (m *gatedModel) holding() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

// release lets every held request go and holds nothing from now on.
func (m *gatedModel) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holdAll, m.hold = false, map[string]bool{}
	select {
	case <-m.open:
	default:
		close(m.open)
	}
}

func (m *gatedModel) env() []string {
	return []string{"NEKRO_LLM_BASE_URL=" + m.URL, "NEKRO_LLM_MODEL=scripted"}
}

// waitFor polls cond until it holds, failing the test with cond's last
// word after timeout. Deadlines are generous: the machine may be slow.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// post posts text to chatKey as u1 and returns the status and the stored
// message's id (0 unless 202).
func post(s *testutil.Served, chatKey, text string) (int, int64) {
	st, body := s.API("POST", "/api/chats/"+chatKey+"/messages", map[string]string{"user_id": "u1", "text": text})
	var out struct {
		Message struct {
			ID int64 `json:"id"`
		} `json:"message"`
	}
	json.Unmarshal([]byte(body), &out)
	return st, out.Message.ID
}

// audit is what the database says of every message and turn.
type audit struct {
	users      int
	answers    map[int64]int // user message id -> assistant messages naming it
	unanswered []int64       // user messages no assistant message names
	twice      []int64       // user messages named by two or more
	running    []int64       // turns still running
	overlaps   []string      // turns of one chat that ran at the same time
	notes      int           // system notes that a turn was cut off or could not finish
}

func (a audit) String() string {
	return fmt.Sprintf("%d user messages, unanswered %v, answered twice %v, running turns %v, overlapping %v, notes %d",
		a.users, a.unanswered, a.twice, a.running, a.overlaps, a.notes)
}

// settled: every message answered, and no turn running.
func (a audit) settled() bool { return len(a.unanswered) == 0 && len(a.running) == 0 }

var idRE = regexp.MustCompile(`#(\d+)`)

// auditDB reads what sdb holds (placeholders $n, as both drivers take).
func auditDB(ctx context.Context, sdb *sql.DB) (audit, error) {
	a := audit{answers: map[int64]int{}}
	rows, err := sdb.QueryContext(ctx, `SELECT id, role, text FROM chat_messages ORDER BY id`)
	if err != nil {
		return a, err
	}
	var users []int64
	for rows.Next() {
		var id int64
		var role, text string
		if err := rows.Scan(&id, &role, &text); err != nil {
			rows.Close()
			return a, err
		}
		switch role {
		case "user":
			users = append(users, id)
		case "assistant":
			for _, m := range idRE.FindAllStringSubmatch(text, -1) {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				a.answers[n]++
			}
		case "system":
			if strings.Contains(text, "cut off") || strings.Contains(text, "could not finish") {
				a.notes++
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return a, err
	}
	a.users = len(users)
	for _, id := range users {
		switch n := a.answers[id]; {
		case n == 0:
			a.unanswered = append(a.unanswered, id)
		case n > 1:
			a.twice = append(a.twice, id)
		}
	}
	type span struct {
		id         int64
		start, end int64
	}
	byChat := map[string][]span{}
	rows, err = sdb.QueryContext(ctx, `SELECT id, chat_key, status, started_at, finished_at FROM chat_turns ORDER BY id`)
	if err != nil {
		return a, err
	}
	for rows.Next() {
		var s span
		var chatKey, status string
		if err := rows.Scan(&s.id, &chatKey, &status, &s.start, &s.end); err != nil {
			rows.Close()
			return a, err
		}
		if status == "running" {
			a.running = append(a.running, s.id)
			s.end = 1 << 62
		}
		byChat[chatKey] = append(byChat[chatKey], s)
	}
	rows.Close()
	for chatKey, spans := range byChat {
		slices.SortFunc(spans, func(x, y span) int { return int(x.start - y.start) })
		for i := 1; i < len(spans); i++ {
			if spans[i].start < spans[i-1].end {
				a.overlaps = append(a.overlaps, fmt.Sprintf("%s: turns %d and %d", chatKey, spans[i-1].id, spans[i].id))
			}
		}
	}
	return a, rows.Err()
}

// auditor opens the database once for the test's audits.
type auditor func() (audit, error)

func postgresAuditor(t *testing.T, url string) auditor {
	t.Helper()
	sdb, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	return func() (audit, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return auditDB(ctx, sdb)
	}
}

func sqliteAuditor(t *testing.T, path string) auditor {
	t.Helper()
	return func() (audit, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := db.OpenSQLite(ctx, path, db.SQLiteOptions{Readers: 1})
		if err != nil {
			return audit{}, err
		}
		defer d.Close()
		return auditDB(ctx, d.Read)
	}
}

// waitSettled waits until every message is answered and no turn runs,
// then fails on anything answered twice or turns that overlapped.
func waitSettled(t *testing.T, timeout time.Duration, read auditor) audit {
	t.Helper()
	var last audit
	waitFor(t, timeout, "every message answered, no turn running", func() (bool, string) {
		a, err := read()
		if err != nil {
			return false, err.Error()
		}
		last = a
		return a.settled(), a.String()
	})
	if len(last.twice) > 0 || len(last.overlaps) > 0 {
		t.Fatalf("after the fault: %s", last)
	}
	return last
}

// proxy is a TCP proxy to a database that the test can cut (every
// connection closed, new ones closed at once, as a network partition or
// a stopped server looks to a client) and restore.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *proxy) pipe(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// setCut cuts (true) or restores (false) the way to the database.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}
