package testutil

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Nekro builds cmd/nekro once per test binary and returns its path.
func Nekro(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		repo := filepath.Join(filepath.Dir(here), "..", "..")
		dir, err := os.MkdirTemp("", "nekro-bin-")
		if err != nil {
			buildErr = err
			return
		}
		os.Chmod(dir, 0o755)
		binPath = filepath.Join(dir, "nekro")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/nekro")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build ./cmd/nekro: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Result is what a nekro command printed and its exit status.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// RunNekro runs the nekro binary with args and returns its output and exit
// status (a failure to start fails the test).
func RunNekro(t testing.TB, stdin []byte, args ...string) Result {
	t.Helper()
	cmd := exec.Command(Nekro(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("nekro %v: %v", args, err)
	}
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: cmd.ProcessState.ExitCode()}
}
