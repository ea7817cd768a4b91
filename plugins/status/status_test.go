package status_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// These tests drive nekro.status as a user would, through the standard
// binary: Python code through `nekro exec`, the prompt through `nekro
// chats prompt`, resets through `nekro chats reset`, the store through
// `nekro kv`.

func run(t *testing.T, data, chat, code string) string {
	t.Helper()
	r := testutil.RunNekro(t, []byte(code), "--data", data, "exec", "--chat", chat, "--user", "u1", "-")
	if r.Code != 0 {
		t.Fatalf("exec in %s: exit %d\n%s%s", chat, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// statusBlock returns the status block of the prompt a turn in chat would
// send now.
func statusBlock(t *testing.T, data, chat string) string {
	t.Helper()
	r := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", chat)
	if r.Code != 0 {
		t.Fatalf("chats prompt %s: %+v", chat, r)
	}
	_, block, ok := strings.Cut(r.Stdout, `<plugin_runtime_context name="Character status" module_name="status">`)
	block, _, closed := strings.Cut(block, "</plugin_runtime_context>")
	if !ok || !closed {
		t.Fatalf("no status block in chat %s's prompt:\n%s", chat, r.Stdout)
	}
	return strings.TrimSpace(block)
}

const noStatus = "Current Character Setting status: No special status. (Use `update_preset_status` to update it **immediately**!)"

// The status shows in its own chat's prompt, with the one before it, and
// in no other chat's; resetting the chat clears it there only.
func TestStatusShowsInItsChatAndResetClearsIt(t *testing.T) {
	data := testutil.DataDir(t)
	out := run(t, data, "roleplay", `
print(update_preset_status(_ck, "戴着帽子的莉莉", "由于 出门，戴上了帽子"))
print(update_preset_status(_ck, "正在认真看书的莉莉", "由于 下雨，\n开始认真看书且仍然戴着帽子"))`)
	want := "Preset status updated to `戴着帽子的莉莉`\n" +
		"Preset status updated from `戴着帽子的莉莉` to `正在认真看书的莉莉` (Use `set_note` or `remove_note` method to maintain the scene consistency)\n"
	if out != want {
		t.Errorf("update_preset_status printed\n%s\nwant\n%s", out, want)
	}
	block := statusBlock(t, data, "roleplay")
	for _, want := range []string{
		"History Status:\n 戴着帽子的莉莉: 由于 出门，戴上了帽子 (updated 00:00:0",
		"Current Character Setting status: 正在认真看书的莉莉: 由于 下雨， 开始认真看书且仍然戴着帽子 (updated 00:00:0",
		"Use `update_preset_status` to update it If doesn't fit the current scene description.)",
	} {
		if !strings.Contains(block, want) {
			t.Errorf("roleplay's status lacks %q:\n%s", want, block)
		}
	}

	run(t, data, "other", `update_preset_status(_ck, "午睡的莉莉", "由于 困了，开始午睡")`)
	if block := statusBlock(t, data, "other"); strings.Contains(block, "看书") || !strings.Contains(block, "午睡的莉莉") {
		t.Errorf("other's status:\n%s", block)
	}
	if block := statusBlock(t, data, "quiet"); block != noStatus {
		t.Errorf("a chat without a status shows:\n%s", block)
	}

	if r := testutil.RunNekro(t, nil, "--data", data, "chats", "reset", "roleplay"); r.Code != 0 {
		t.Fatalf("chats reset: %+v", r)
	}
	if block := statusBlock(t, data, "roleplay"); block != noStatus {
		t.Errorf("after the reset roleplay shows:\n%s", block)
	}
	if r := testutil.RunNekro(t, nil, "--data", data, "kv", "--plugin", "nekro.status", "get", "--chat", "roleplay", "status"); r.Code != 1 {
		t.Errorf("after the reset the store still holds roleplay's status: %+v", r)
	}
	if block := statusBlock(t, data, "other"); !strings.Contains(block, "午睡的莉莉") {
		t.Errorf("resetting roleplay cleared other's status:\n%s", block)
	}
}

// Code naming another chat's key is refused, and that chat's status
// stays as it was.
func TestStatusRefusesAnotherChat(t *testing.T) {
	data := testutil.DataDir(t)
	run(t, data, "victim", `update_preset_status(_ck, "Alice", "reading")`)
	out := run(t, data, "attacker", `
for name, call in [("update", lambda: update_preset_status("victim", "Evil Alice", "hacked")),
                   ("clear", lambda: clear_status("victim"))]:
    try:
        print(name, "returned", repr(call()))
    except Exception as e:
        print(name, "refused:", e)`)
	for _, name := range []string{"update", "clear"} {
		if !strings.Contains(out, name+` refused: chat_key "victim" is not this chat`) || !strings.Contains(out, "pass _ck") {
			t.Errorf("%s on another chat was not refused:\n%s", name, out)
		}
	}
	if block := statusBlock(t, data, "victim"); !strings.Contains(block, "Current Character Setting status: Alice: reading") ||
		strings.Contains(block, "Evil") {
		t.Errorf("the victim's status:\n%s", block)
	}
	if block := statusBlock(t, data, "attacker"); block != noStatus {
		t.Errorf("the attacker's status:\n%s", block)
	}
}

// clear_status clears the chat's status, and says when there was none;
// the same setting name again refreshes the current status.
func TestClearAndRefreshStatus(t *testing.T) {
	data := testutil.DataDir(t)
	out := run(t, data, "c", `
print(clear_status(_ck))
print(update_preset_status(_ck, "Alice", "reading"))
print(update_preset_status(_ck, "Alice", "reading, with a hat"))`)
	want := "No status to clear\nPreset status updated to `Alice`\n" +
		"Preset status `Alice` refreshed: same setting name, its description and time updated\n"
	if out != want {
		t.Errorf("printed\n%s\nwant\n%s", out, want)
	}
	if block := statusBlock(t, data, "c"); strings.Contains(block, "History") || !strings.Contains(block, "Alice: reading, with a hat (") {
		t.Errorf("after the refresh:\n%s", block)
	}
	if got := run(t, data, "c", `print(clear_status(_ck)); print(clear_status(_ck))`); got != "Character status cleared\nNo status to clear\n" {
		t.Errorf("clear_status printed %q", got)
	}
	if block := statusBlock(t, data, "c"); block != noStatus {
		t.Errorf("after clear_status:\n%s", block)
	}
}

// The operator's MAX_PRESET_STATUS_LIST_SIZE bounds the statuses kept and
// MAX_PRESET_STATUS_REFER_SIZE those shown.
func TestStatusSettings(t *testing.T) {
	data := testutil.DataDir(t)
	if r := testutil.RunNekro(t, nil, "--data", data, "plugins", "config", "nekro.status",
		"--set", "MAX_PRESET_STATUS_LIST_SIZE=3", "--set", "MAX_PRESET_STATUS_REFER_SIZE=2"); r.Code != 0 {
		t.Fatalf("plugins config: %+v", r)
	}
	run(t, data, "c", `
for i in range(5):
    update_preset_status(_ck, "state %d" % i, "description %d" % i)`)
	block := statusBlock(t, data, "c")
	if !strings.Contains(block, "History Status:\n state 3: description 3") || strings.Contains(block, "state 2") ||
		!strings.Contains(block, "Current Character Setting status: state 4: description 4") {
		t.Errorf("with 2 shown:\n%s", block)
	}
	if n := storedStatuses(t, data, "c"); n != 3 {
		t.Errorf("the store keeps %d statuses, want 3", n)
	}
}

func storedStatuses(t *testing.T, data, chat string) int {
	t.Helper()
	r := testutil.RunNekro(t, nil, "--data", data, "kv", "--plugin", "nekro.status", "get", "--chat", chat, "status")
	var stored struct {
		List []struct {
			SettingName string `json:"setting_name"`
		} `json:"preset_status_list"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &stored); err != nil {
		t.Fatalf("kv get status: %v\n%+v", err, r)
	}
	return len(stored.List)
}

// Several runs updating one chat's status at once all land in its
// history (the reference's read-modify-write lost some).
func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	data := testutil.DataDir(t)
	run(t, data, "busy", `print("warm")`)
	const procs, threads = 4, 5
	var wg sync.WaitGroup
	for proc := range procs {
		wg.Go(func() {
			code := fmt.Sprintf(`
import threading
ts = [threading.Thread(target=update_preset_status, args=(_ck, "state %d-%%d" %% i, "d")) for i in range(%d)]
for t in ts: t.start()
for t in ts: t.join()
print("done")`, proc, threads)
			r := testutil.RunNekro(t, []byte(code), "--data", data, "exec", "--chat", "busy", "--user", "u1", "-")
			if r.Code != 0 || r.Stdout != "done\n" {
				t.Errorf("process %d: exit %d\n%s%s", proc, r.Code, r.Stdout, r.Stderr)
			}
		})
	}
	wg.Wait()
	if n := storedStatuses(t, data, "busy"); n != procs*threads {
		t.Errorf("the store keeps %d statuses, want %d", n, procs*threads)
	}
}
