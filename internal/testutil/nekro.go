package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// build is one binary built once per test binary.
type build struct {
	once sync.Once
	path string
	err  error
}

// builds holds a *build per package path, filled as tests ask.
var builds sync.Map

// Nekro builds cmd/nekro, the production binary (the built-in plugins
// only), once per test binary and returns its path. The binary goes to the
// checkout's bin/test/ (ignored by git, reused and replaced by later
// builds), not to /tmp: tests leave nothing behind there. Each test binary
// builds its own copy under a unique name, so packages testing in parallel
// never replace each other's.
func Nekro(t testing.TB) string {
	t.Helper()
	return Binary(t, "./cmd/nekro")
}

// NekroExamples builds cmd/nekro-examples, the binary that also carries
// the ported document examples (nekro_examples.*: my_sum_function,
// search_kb, the kvstore and files examples, ...), as Nekro builds
// cmd/nekro, and returns its path.
func NekroExamples(t testing.TB) string {
	t.Helper()
	return Binary(t, "./cmd/nekro-examples")
}

// Binary builds the main package pkg (a path relative to the checkout's
// root, e.g. "./examples/files2/nekro-files2") as Nekro builds cmd/nekro:
// once per test binary, into bin/test/.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	b, _ := builds.LoadOrStore(pkg, &build{})
	return b.(*build).get(t, pkg, path.Base(pkg)+"-")
}

func (b *build) get(t testing.TB, pkg, prefix string) string {
	t.Helper()
	b.once.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		repo := filepath.Join(filepath.Dir(here), "..", "..")
		dir := filepath.Join(repo, "bin", "test")
		if b.err = os.MkdirAll(dir, 0o755); b.err != nil {
			return
		}
		os.Chmod(dir, 0o755)
		// go test runs each package's tests in the package's directory.
		wd, _ := os.Getwd()
		sum := sha256.Sum256([]byte(wd))
		b.path = filepath.Join(dir, prefix+hex.EncodeToString(sum[:6]))
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = errors.New("go build " + pkg + ": " + err.Error() + "\n" + string(out))
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Result is what a nekro command printed and its exit status.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// RunNekro runs the nekro binary (Nekro) with args and returns its output
// and exit status (a failure to start fails the test).
func RunNekro(t testing.TB, stdin []byte, args ...string) Result {
	t.Helper()
	return Run(t, Nekro(t), stdin, args...)
}

// RunNekroExamples is RunNekro with the examples binary (NekroExamples).
func RunNekroExamples(t testing.TB, stdin []byte, args ...string) Result {
	t.Helper()
	return Run(t, NekroExamples(t), stdin, args...)
}

// Run runs the binary bin with args, as RunNekro does.
func Run(t testing.TB, bin string, stdin []byte, args ...string) Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
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
