package attack_test

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nekro-go/nekro/internal/testutil"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A secret given as a flag is in every process listing of the host (ps
// shows argv to every user). nekro cannot take it back, but says so once
// at start, naming the flag and the variable to use, never the value.
func TestSecretFlagsDrawAWarning(t *testing.T) {
	const token = "ob-flag-secret-4711"
	var out lockedBuffer
	cmd := exec.Command(testutil.Nekro(t), "serve", "--data", testutil.DataDir(t), "--listen", "127.0.0.1:0",
		"--onebot-token", token)
	cmd.Env = append(os.Environ(), "NEKRO_API_TOKEN=tok-secret-flags")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "serving on"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nekro serve did not start:\n%s", out.String())
		}
	}
	logs := out.String()
	if !strings.Contains(logs, "--onebot-token") || !strings.Contains(logs, "NEKRO_ONEBOT_TOKEN") || !strings.Contains(logs, "ps") {
		t.Errorf("no warning naming --onebot-token and NEKRO_ONEBOT_TOKEN:\n%s", logs)
	}
	if n := strings.Count(logs, "--onebot-token holds a secret"); n != 1 {
		t.Errorf("the warning shows %d times, want once:\n%s", n, logs)
	}
	if strings.Contains(logs, token) {
		t.Errorf("the log shows the token itself:\n%s", logs)
	}

	// A database URL with a password is a secret too; one without is not.
	const password = "pg-flag-password-0815"
	r := testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t), "--database", "postgres://nekro:"+password+"@127.0.0.1:1/nekro")
	if !strings.Contains(r.Stderr+r.Stdout, "--database holds a secret") || !strings.Contains(r.Stderr+r.Stdout, "NEKRO_DATABASE_URL") {
		t.Errorf("doctor --database with a password: no warning:\n%s%s", r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stderr+r.Stdout, password) {
		t.Errorf("doctor shows the database password:\n%s%s", r.Stdout, r.Stderr)
	}
	r = testutil.RunNekro(t, nil, "doctor", "--data", testutil.DataDir(t), "--database", "postgres://nekro@127.0.0.1:1/nekro")
	if strings.Contains(r.Stderr+r.Stdout, "holds a secret") {
		t.Errorf("a database URL without a password drew the warning:\n%s%s", r.Stdout, r.Stderr)
	}
}
