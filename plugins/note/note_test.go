package note_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// These tests drive nekro.note as a user would: Python code through
// `nekro exec`, the prompt through `nekro chats prompt`, the store
// through `nekro kv`.
//
// They run the standard binary, cmd/nekro, as a user would.

// nekro runs the binary with data as its data directory.
func nekro(t *testing.T, data string, stdin string, args ...string) testutil.Result {
	t.Helper()
	var in []byte
	if stdin != "" {
		in = []byte(stdin)
	}
	return testutil.RunNekro(t, in, append([]string{"--data", data}, args...)...)
}

// run runs code in chat's sandbox and returns what it printed; the code
// must end normally.
func run(t *testing.T, data, chat, code string) string {
	t.Helper()
	r := nekro(t, data, code, "exec", "--chat", chat, "--user", "u1", "-")
	if r.Code != 0 {
		t.Fatalf("exec in %s: exit %d\n%s%s", chat, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// notesBlock returns the Notes block of the prompt a turn in chat would
// send now.
func notesBlock(t *testing.T, data, chat string) string {
	t.Helper()
	r := nekro(t, data, "", "chats", "prompt", chat)
	if r.Code != 0 {
		t.Fatalf("chats prompt %s: %+v", chat, r)
	}
	_, block, ok := strings.Cut(r.Stdout, `<plugin_runtime_context name="Notes" module_name="note">`)
	block, _, closed := strings.Cut(block, "</plugin_runtime_context>")
	if !ok || !closed {
		t.Fatalf("no Notes block in chat %s's prompt:\n%s", chat, r.Stdout)
	}
	return block
}

// A note shows in its own chat's prompt and is read back there; another
// chat's prompt and get_note know nothing of it.
func TestNoteShowsInItsOwnChatOnly(t *testing.T) {
	data := testutil.DataDir(t)
	out := run(t, data, "group_a", `
print(set_note(_ck, "Alice's email", "[记忆] alice@example.org"))
print(set_note(_ck, "arm injured", "[效果] fell down, must see a doctor", 3600))
print(get_note(_ck, "email"))`)
	if out != "Note `Alice's email` set\nNote `arm injured` set\n[记忆] alice@example.org\n" {
		t.Errorf("set_note/get_note printed %q", out)
	}
	block := notesBlock(t, data, "group_a")
	for _, want := range []string{"note_title: Alice's email", "note_description: [记忆] alice@example.org", "no expiry",
		"note_title: arm injured", "expires in 00:59:"} {
		if !strings.Contains(block, want) {
			t.Errorf("group_a's notes lack %q:\n%s", want, block)
		}
	}

	if got := run(t, data, "group_b", `print(repr(get_note(_ck, "email")))`); got != "''\n" {
		t.Errorf("get_note in group_b = %q, want ''", got)
	}
	r := nekro(t, data, "", "chats", "prompt", "group_b")
	if r.Code != 0 || strings.Contains(r.Stdout, "alice@example.org") || strings.Contains(r.Stdout, "Alice's email") {
		t.Fatalf("group_b's prompt shows group_a's note (exit %d):\n%s", r.Code, r.Stdout)
	}
	if block := notesBlock(t, data, "group_b"); !strings.Contains(block, "No notes. (use `set_note` to add one)") {
		t.Errorf("group_b's notes:\n%s", block)
	}
}

// Code naming another chat's key is refused by every method, and the
// other chat's notes stay as they were, unread.
func TestNoteRefusesAnotherChat(t *testing.T) {
	data := testutil.DataDir(t)
	run(t, data, "victim", `set_note(_ck, "vault code", "4711")`)
	out := run(t, data, "attacker", `
for name, call in [("get", lambda: get_note("victim", "vault code")),
                   ("set", lambda: set_note("victim", "vault code", "0000")),
                   ("remove", lambda: remove_note("victim", "vault code"))]:
    try:
        print(name, "returned", repr(call()))
    except Exception as e:
        print(name, "refused:", e)`)
	for _, name := range []string{"get", "set", "remove"} {
		if !strings.Contains(out, name+` refused: chat_key "victim" is not this chat`) || !strings.Contains(out, "pass _ck") {
			t.Errorf("%s_note on another chat was not refused:\n%s", name, out)
		}
	}
	if strings.Contains(out, "4711") || strings.Contains(out, "returned") {
		t.Errorf("the attacker got an answer:\n%s", out)
	}
	if got := run(t, data, "victim", `print(get_note(_ck, "vault code"))`); got != "4711\n" {
		t.Errorf("the victim's note is now %q", got)
	}
	if block := notesBlock(t, data, "attacker"); !strings.Contains(block, "No notes.") {
		t.Errorf("the attacker's chat has notes:\n%s", block)
	}
}

// A title very like an existing one replaces that note (the reference's
// de-duplication); an unlike title adds a note; the same title updates
// its note. The operator's NOTE_DEDUP_SIMILARITY changes the bound.
func TestSimilarTitleReplacesTheNote(t *testing.T) {
	data := testutil.DataDir(t)
	out := run(t, data, "c", `
print(set_note(_ck, "手臂受伤", "[效果] 因为摔倒而受伤"))
print(set_note(_ck, "手臂受伤了", "[效果] 伤得更重了"))
print(set_note(_ck, "心情愉悦", "[效果] 开心"))
print(set_note(_ck, "心情不错", "[效果] 还行"))
print(set_note(_ck, "心情愉悦", "[效果] 非常开心"))`)
	want := "Note `手臂受伤` set\n" +
		"Note `手臂受伤了` set (it replaced the similar note `手臂受伤`)\n" +
		"Note `心情愉悦` set\nNote `心情不错` set\nNote `心情愉悦` set\n"
	if out != want {
		t.Errorf("set_note printed\n%s\nwant\n%s", out, want)
	}
	block := notesBlock(t, data, "c")
	if strings.Count(block, "note_title:") != 3 || strings.Contains(block, "note_title: 手臂受伤\n") ||
		!strings.Contains(block, "伤得更重了") || !strings.Contains(block, "非常开心") || strings.Contains(block, "[效果] 开心") {
		t.Errorf("notes after de-duplication:\n%s", block)
	}

	if r := nekro(t, data, "", "plugins", "config", "nekro.note", "--set", "NOTE_DEDUP_SIMILARITY=0.95"); r.Code != 0 {
		t.Fatalf("plugins config: %+v", r)
	}
	if got := run(t, data, "c", `print(set_note(_ck, "手臂受伤", "[效果] 另一只手臂"))`); got != "Note `手臂受伤` set\n" {
		t.Errorf("with similarity 0.95: %q", got)
	}
	if n := strings.Count(notesBlock(t, data, "c"), "note_title:"); n != 4 {
		t.Errorf("with similarity 0.95 there are %d notes, want 4", n)
	}
}

// remove_note removes by exact title or by a part of exactly one title;
// a part of several titles, an unknown title and an empty one are refused
// and remove nothing.
func TestRemoveNote(t *testing.T) {
	data := testutil.DataDir(t)
	out := run(t, data, "c", `
set_note(_ck, "alice email", "a@example.org")
set_note(_ck, "alice phone", "555-0100")
set_note(_ck, "birthday", "May 1")
for title in ["alice", "nobody", "", "birth day", "alice phone"]:
    try:
        print(remove_note(_ck, title))
    except Exception as e:
        print("refused:", e)`)
	want := "refused: note `alice` is not a title, and it is part of 2 titles: `alice email`, `alice phone`; remove one by its exact title\n" +
		"refused: note `nobody` not found. Make sure the spelling is correct!\n" +
		"refused: title is empty: name the note\n" +
		"Note `birthday` removed\n" +
		"Note `alice phone` removed\n"
	if out != want {
		t.Errorf("remove_note printed\n%s\nwant\n%s", out, want)
	}
	block := notesBlock(t, data, "c")
	if strings.Count(block, "note_title:") != 1 || !strings.Contains(block, "note_title: alice email") {
		t.Errorf("notes left:\n%s", block)
	}
}

// Several processes, each with several threads, set notes in one chat at
// once: every note is kept (the reference's read-modify-write lost some).
func TestConcurrentSetNoteLosesNothing(t *testing.T) {
	data := testutil.DataDir(t)
	run(t, data, "busy", `print("warm")`) // create the chat's store and sandbox once
	const procs, threads = 4, 8
	// Titles of distinct CJK characters: no two are alike, so no
	// de-duplication merges them; only a lost update would.
	code := func(proc int) string {
		return fmt.Sprintf(`
import threading
def put(i):
    n = %d * %d + i
    set_note(_ck, chr(0x4e00 + 2*n) + chr(0x4e01 + 2*n), "value %%d" %% n)
ts = [threading.Thread(target=put, args=(i,)) for i in range(%d)]
for t in ts: t.start()
for t in ts: t.join()
print("done")`, proc, threads, threads)
	}
	var wg sync.WaitGroup
	for proc := range procs {
		wg.Go(func() {
			r := nekro(t, data, code(proc), "exec", "--chat", "busy", "--user", "u1", "-")
			if r.Code != 0 || r.Stdout != "done\n" {
				t.Errorf("process %d: exit %d\n%s%s", proc, r.Code, r.Stdout, r.Stderr)
			}
		})
	}
	wg.Wait()
	out := run(t, data, "busy", fmt.Sprintf(`
titles = [chr(0x4e00 + 2*n) + chr(0x4e01 + 2*n) for n in range(%d)]
print("missing:", [t for t in titles if get_note(_ck, t) != "value %%d" %% titles.index(t)])`, procs*threads))
	if out != "missing: []\n" {
		t.Errorf("after concurrent set_note: %s", out)
	}
	r := nekro(t, data, "", "kv", "--plugin", "nekro.note", "get", "--chat", "busy", "note")
	var stored struct{ Notes []struct{ Title string } }
	if err := json.Unmarshal([]byte(r.Stdout), &stored); err != nil || len(stored.Notes) != procs*threads {
		t.Errorf("the store holds %d notes, want %d (%v)\n%s", len(stored.Notes), procs*threads, err, r.Stdout)
	}
}

// Many long notes: the prompt lists the older ones by title, details the
// latest, warns to clean up, and stays whole (within the host's bound
// on a plugin's text, which would otherwise cut it).
func TestManyNotesFitThePrompt(t *testing.T) {
	data := testutil.DataDir(t)
	run(t, data, "c", `
for n in range(60):
    set_note(_ck, chr(0x4e00 + 3*n) + chr(0x4e01 + 3*n) + chr(0x4e02 + 3*n) + " topic", ("detail %d " % n) * 30)`)
	block := notesBlock(t, data, "c")
	last := string([]rune{0x4e00 + 3*59, 0x4e01 + 3*59, 0x4e02 + 3*59}) + " topic"
	for _, want := range []string{"[Older notes (", "ONLY TITLES SHOWN", "  - 一丁丂 topic (recent)", "[Recent notes (",
		"note_title: " + last, "...(note too long, use `get_note` to get the full note...)", "Warning: You have too many notes."} {
		if !strings.Contains(block, want) {
			t.Errorf("the notes lack %q:\n%s", want, block)
		}
	}
	if strings.Contains(block, "[... cut") || len(block) > 4<<10 {
		t.Errorf("the notes were cut (%d bytes):\n%s", len(block), block)
	}
	if got := run(t, data, "c", `print(get_note(_ck, "一丁丂"))`); got != strings.Repeat("detail 0 ", 30)+"\n" {
		t.Errorf("get_note of an old note = %q", got)
	}
}
