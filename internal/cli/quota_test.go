package cli_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
	"github.com/nekro-go/nekro/internal/volume"
)

// --shared-quota and --shared-inodes changed between two runs of nekro
// serve apply to a chat whose volume exists: it grows, it shrinks when
// what the chat left fits, and otherwise the volume keeps its size and
// the log says why.
func TestSharedQuotaAppliesToExistingChats(t *testing.T) {
	if err := volume.Available(); err != nil {
		t.Skip("volumes are off here, so there is no quota to change:", err)
	}
	data := testutil.DataDir(t)
	// total runs code in chat q under the quota and returns what it
	// printed last (by default the size of its /app/shared in MiB), and
	// the server's log.
	total := func(quota, code string, env ...string) (int, string) {
		t.Helper()
		s := testutil.Serve(t, data, "tok-quota", append(env, "NEKRO_SHARED_QUOTA="+quota)...)
		defer s.Stop()
		if !strings.Contains(code, "print(") {
			code += `
import shutil
print(shutil.disk_usage("/app/shared").total >> 20)`
		}
		st, body := s.API("POST", "/api/chats/q/exec", map[string]string{"code": code})
		var res struct {
			Output string `json:"output"`
		}
		if err := json.Unmarshal([]byte(body), &res); st != http.StatusOK || err != nil {
			t.Fatalf("exec with quota %s: %d %s\n%s", quota, st, body, s.Logs)
		}
		lines := strings.Fields(res.Output)
		var n int
		if len(lines) > 0 {
			json.Unmarshal([]byte(lines[len(lines)-1]), &n)
		}
		s.Stop()
		return n, s.Logs.String()
	}
	if mib, logs := total("32MiB", `open("/app/shared/ten", "wb").write(b"x" * (10 << 20))`); mib < 28 || mib > 32 {
		t.Fatalf("a new volume of 32MiB is %d MiB\n%s", mib, logs)
	}
	if mib, logs := total("64MiB", `assert len(open("/app/shared/ten", "rb").read()) == 10 << 20`); mib < 48 || mib > 64 {
		t.Errorf("grown to %d MiB, want about 64\n%s", mib, logs)
	}
	if mib, logs := total("24MiB", `assert len(open("/app/shared/ten", "rb").read()) == 10 << 20`); mib < 18 || mib > 24 {
		t.Errorf("shrunk to %d MiB, want about 24\n%s", mib, logs)
	}
	mib, logs := total("4MiB", `assert len(open("/app/shared/ten", "rb").read()) == 10 << 20`)
	if mib < 18 || mib > 24 || !strings.Contains(logs, "holds more than its new quota") {
		t.Errorf("a quota below what the chat holds: %d MiB, want the 24 it had and a log line\n%s", mib, logs)
	}
	files, logs := total("24MiB", `import os
print(os.statvfs("/app/shared").f_files)
assert len(open("/app/shared/ten", "rb").read()) == 10 << 20`, "NEKRO_SHARED_INODES=3000")
	if files < 2700 || files > 3300 {
		t.Errorf("--shared-inodes 3000 gave the existing volume %d files\n%s", files, logs)
	}
}
