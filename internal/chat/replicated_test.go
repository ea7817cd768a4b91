package chat_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
	"github.com/nekro-go/nekro/internal/db"
	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/kv/kvtest"
)

// replicasOnPostgres opens two services on one PostgreSQL schema, each
// with its own data directory, as two hosts would.
func replicasOnPostgres(t *testing.T) (a, b *chat.Service, la, lb files.Layout) {
	t.Helper()
	u := kvtest.FreshSchema(t, kvtest.PostgresURL(t))
	mk := func() (*chat.Service, files.Layout) {
		ctx := context.Background()
		layout, err := files.NewLayout(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		pool, err := db.OpenPostgres(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		s, err := chat.Open(ctx, chat.Database{Postgres: pool}, layout, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(); pool.Close() })
		return s, layout
	}
	a, la = mk()
	b, lb = mk()
	return a, b, la, lb
}

// A file stored through one replica is copied into another's uploads
// when it asks (before a run, or a download), and names stay unique
// across replicas.
func TestUploadsAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	a, b, _, lb := replicasOnPostgres(t)
	content := bytes.Repeat([]byte("0123456789abcdef"), 150000) // 2.4 MB: three chunks
	att, err := a.SaveAttachment(ctx, "f", "data.bin", "file", bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.SyncUploads(ctx, "f"); err != nil || n != 1 {
		t.Fatalf("synced %d, %v", n, err)
	}
	got, err := os.ReadFile(filepath.Join(lb.UploadsDir("f"), att.Name))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the copy on b: %d bytes, %v", len(got), err)
	}
	if n, err := b.SyncUploads(ctx, "f"); err != nil || n != 0 {
		t.Fatalf("synced again: %d, %v", n, err)
	}
	// A name a's file has is not given to b's, even where b's directory
	// lacks a's file; and a gets b's file.
	os.Remove(filepath.Join(lb.UploadsDir("f"), att.Name))
	att2, err := b.SaveAttachment(ctx, "f", "data.bin", "file", strings.NewReader("b's"))
	if err != nil || att2.Name == att.Name {
		t.Fatalf("b's file: %+v %v", att2, err)
	}
	if n, err := a.SyncUploads(ctx, "f"); err != nil || n != 1 {
		t.Fatalf("a synced %d, %v", n, err)
	}
	// A discarded upload is gone from the database too.
	up := a.NewUpload("f")
	if _, err := up.Add(ctx, "gone.txt", strings.NewReader("x"), 100); err != nil {
		t.Fatal(err)
	}
	if err := up.Discard(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.SyncUploads(ctx, "f"); err != nil || n != 1 { // data.bin again, not gone.txt
		t.Fatalf("b synced %d, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(lb.UploadsDir("f"), "gone.txt")); err == nil {
		t.Fatal("a discarded file reached another replica")
	}
}

// A subscriber on one replica gets the events another replica
// publishes, once; its own replica's events come once too.
func TestEventsAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	a, b, _, _ := replicasOnPostgres(t)
	onB, stopB := b.Subscribe("x")
	defer stopB()
	onA, stopA := a.Subscribe("x")
	defer stopA()
	// The listener connects in the background; post until one arrives.
	var got chat.Event
	deadline := time.After(30 * time.Second)
	first := int64(0)
wait:
	for {
		m, err := a.AddMessage(ctx, userMsg("x", "hello from a"))
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = m.ID
		}
		select {
		case got = <-onB:
			break wait
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no event reached the other replica")
		}
	}
	if got.Type != chat.EventMessage || got.Message == nil || got.Message.Text != "hello from a" || got.Message.ID < first {
		t.Fatalf("event on b: %+v", got)
	}
	turn, _, err := a.ClaimTurn(ctx, "x")
	if err != nil || turn == nil {
		t.Fatal(turn, err)
	}
	for {
		select {
		case e := <-onB:
			if e.Type != chat.EventTurn {
				continue
			}
			if e.Turn == nil || e.Turn.ID != turn.ID || e.Turn.Status != chat.TurnRunning {
				t.Fatalf("turn event on b: %+v", e)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the turn's event did not reach the other replica")
		}
		break
	}
	// a's own subscriber saw each of its messages once.
	seen := map[int64]int{}
	for len(onA) > 0 {
		if e := <-onA; e.Message != nil {
			seen[e.Message.ID]++
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("message %d reached its own replica's subscriber %d times", id, n)
		}
	}
}
