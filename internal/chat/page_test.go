package chat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/chat"
)

// Messages, turns and runs are paged the same way on both databases: the
// newest page first, each page oldest first, next_before leading to the
// older page and none after the oldest.
func TestPagesOfMessagesTurnsAndRuns(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, _ := open(t, kind)
		var ids []int64
		for i := range 250 {
			m, err := s.AddMessage(ctx, userMsg("p", fmt.Sprint("m", i)))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID)
			if i%10 == 9 { // 25 turns
				turn, _, err := s.ClaimTurn(ctx, "p")
				if err != nil || turn == nil {
					t.Fatal(turn, err)
				}
				turn.Status = chat.TurnDone // one turn runs per chat: end it before the next
				if err := s.FinishTurn(ctx, turn); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.AddMessage(ctx, userMsg("other", "not in p"))

		// Messages: 100, 100, 50, in order, covering all 250 once.
		var got []int64
		var sizes []int
		before := int64(0)
		for range 10 {
			page, next, err := s.MessagesPage(ctx, "p", 0, before)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(page))
			var pids []int64
			for _, m := range page {
				pids = append(pids, m.ID)
			}
			if !slices.IsSorted(pids) {
				t.Fatalf("a page is not oldest first: %v", pids)
			}
			got = append(pids, got...)
			if next == 0 {
				break
			}
			if next != page[0].ID {
				t.Fatalf("next_before %d, want the page's oldest id %d", next, page[0].ID)
			}
			before = next
		}
		if !slices.Equal(sizes, []int{100, 100, 50}) || !slices.Equal(got, ids) {
			t.Fatalf("pages of %v; ids %d..., want %d ids", sizes, len(got), len(ids))
		}
		// An exact fit has no older page.
		page, next, err := s.MessagesPage(ctx, "p", 50, ids[50])
		if err != nil || len(page) != 50 || next != 0 || page[0].ID != ids[0] {
			t.Fatalf("last page: %d messages, next %d, %v", len(page), next, err)
		}
		// Limits are held to 1..MaxPageLimit.
		if page, _, _ := s.MessagesPage(ctx, "p", 5000, 0); len(page) != 250 {
			t.Fatalf("a limit over the maximum gave %d", len(page))
		}

		turns, next, err := s.TurnsPage(ctx, "p", 10, 0)
		if err != nil || len(turns) != 10 || next != turns[0].ID || !slices.IsSortedFunc(turns, func(a, b chat.Turn) int { return int(a.ID - b.ID) }) {
			t.Fatalf("turns page: %d, next %d, %v", len(turns), next, err)
		}
		older, next2, err := s.TurnsPage(ctx, "p", 100, next)
		if err != nil || len(older) != 15 || next2 != 0 || older[len(older)-1].ID >= turns[0].ID {
			t.Fatalf("older turns: %d, next %d, %v", len(older), next2, err)
		}

		// Runs page by time, then run id; several share a time.
		at := time.Now().UTC().Truncate(time.Microsecond)
		var runIDs []string
		for i := range 7 {
			id := fmt.Sprintf("run-%02d", i)
			runIDs = append(runIDs, id)
			if err := s.RecordRun(ctx, chat.Run{RunID: id, ChatKey: "p", StopType: "NORMAL", Time: at.Add(time.Duration(i/2) * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		var gotRuns []string
		rb := ""
		for range 10 {
			rs, rnext, err := s.RunsPage(ctx, "p", 3, rb)
			if err != nil {
				t.Fatal(err)
			}
			var page []string
			for _, r := range rs {
				page = append(page, r.RunID)
			}
			gotRuns = append(page, gotRuns...)
			if rnext == "" {
				break
			}
			rb = rnext
		}
		if !slices.Equal(gotRuns, runIDs) {
			t.Fatalf("runs paged as %v, want %v", gotRuns, runIDs)
		}
		if _, _, err := s.RunsPage(ctx, "p", 3, "no-such-run"); !errors.Is(err, chat.ErrNoSuchRun) {
			t.Fatalf("unknown before run: %v", err)
		}
	})
}

// A user's files: kinds from the content, names that cannot leave the
// uploads, the per-file limit with nothing kept, and Discard removing
// every file of a message that was not stored.
func TestUploadStoresAndDiscards(t *testing.T) {
	ctx := context.Background()
	s, _, layout := openLayout(t, "sqlite")
	up := s.NewUpload("u")
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 32)...)
	img, err := up.Add(ctx, "photo.png", bytes.NewReader(png), 1<<20)
	if err != nil || img.Kind != "image" || img.MIME != "image/png" || img.Path != "/app/uploads/photo.png" {
		t.Fatalf("image: %+v %v", img, err)
	}
	for _, name := range []string{"../../etc/passwd", "", "a\x00b", strings.Repeat("n", 300) + ".txt", ".."} {
		a, err := up.Add(ctx, name, strings.NewReader("text"), 1<<20)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if a.Kind != "file" || strings.ContainsAny(a.Name, "/\x00") || len(a.Name) > 255 || a.Name == "" || a.Name == ".." {
			t.Fatalf("%q stored as %+v", name, a)
		}
		if _, err := os.Stat(filepath.Join(layout.UploadsDir("u"), a.Name)); err != nil {
			t.Fatalf("%q: not in the uploads: %v", name, err)
		}
	}
	if _, err := up.Add(ctx, "big.bin", bytes.NewReader(make([]byte, 101)), 100); !errors.Is(err, chat.ErrAttachmentTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(layout.UploadsDir("u"), "big.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file over the limit was kept: %v", err)
	}
	if n := len(up.Attachments()); n != 6 || up.Bytes() != int64(len(png))+5*4 {
		t.Fatalf("%d attachments, %d bytes", n, up.Bytes())
	}
	if err := up.Discard(); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(layout.UploadsDir("u"))
	if len(left) != 0 {
		t.Fatalf("Discard left %d files", len(left))
	}
}

// What a serving agent polls for: chats with unclaimed user messages or
// waking system messages, leaving out a chat whose turn is running.
func TestIdleWaitingChats(t *testing.T) {
	forEachDB(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		s, _ := open(t, kind)
		s.AddMessage(ctx, userMsg("busy", "first"))
		if turn, _, err := s.ClaimTurn(ctx, "busy"); err != nil || turn == nil {
			t.Fatal(turn, err)
		}
		s.AddMessage(ctx, userMsg("busy", "behind the running turn"))
		s.AddMessage(ctx, userMsg("idle", "waiting"))
		s.AddMessage(ctx, chat.Message{ChatKey: "woken", Role: chat.System, SenderID: chat.SystemID, Text: "timer", Wake: true})
		s.AddMessage(ctx, chat.Message{ChatKey: "note", Role: chat.System, SenderID: chat.SystemID, Text: "no wake"})
		all, err := s.WaitingChats(ctx)
		slices.Sort(all)
		if err != nil || !slices.Equal(all, []string{"busy", "idle", "woken"}) {
			t.Fatalf("waiting chats %v %v", all, err)
		}
		idle, err := s.IdleWaitingChats(ctx)
		slices.Sort(idle)
		if err != nil || !slices.Equal(idle, []string{"idle", "woken"}) {
			t.Fatalf("idle waiting chats %v %v", idle, err)
		}
	})
}
