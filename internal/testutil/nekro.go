package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// Nekro builds cmd/nekro once per test binary and returns its path. The
// binary goes to the checkout's bin/test/ (ignored by git, reused and
// replaced by later builds), not to /tmp: tests leave nothing behind
// there. Each test binary builds its own copy under a unique name, so
// packages testing in parallel never replace each other's.
func Nekro(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		repo := filepath.Join(filepath.Dir(here), "..", "..")
		dir := filepath.Join(repo, "bin", "test")
		if buildErr = os.MkdirAll(dir, 0o755); buildErr != nil {
			return
		}
		os.Chmod(dir, 0o755)
		// go test runs each package's tests in the package's directory.
		wd, _ := os.Getwd()
		sum := sha256.Sum256([]byte(wd))
		binPath = filepath.Join(dir, "nekro-"+hex.EncodeToString(sum[:6]))
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
