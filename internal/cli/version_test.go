package cli_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// make build stamps the binary: --version and nekro version print the
// checkout's description and commit (from git, as the Makefile asks it),
// the build date and the Go version; a broken config file does not stop
// nekro version.
func TestVersionOfAMakeBuild(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	commit := strings.TrimSpace(string(head))
	desc, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nekro")
	if out, err := exec.Command("make", "-C", repo, "build", "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("nekro %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	line := run("--version")
	want := "nekro " + strings.TrimSpace(string(desc)) + " (commit " + commit + ", built "
	if !strings.HasPrefix(line, want) || !strings.Contains(line, "go1.") {
		t.Errorf("--version: %q, want it to start %q and name the Go version", line, want)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	out := run("--config", bad, "version") // names no file: version does not read it
	for _, w := range []string{"nekro " + strings.TrimSpace(string(desc)) + "\n", "commit  " + commit, "built   20", "go      go1."} {
		if !strings.Contains(out, w) {
			t.Errorf("nekro version lacks %q:\n%s", w, out)
		}
	}

	// The status API says the same to the operator (not to a user).
	s := testutil.ServeBinary(t, bin, testutil.DataDir(t), "tok-version")
	st, body := s.API("GET", "/api/status", nil)
	var status struct {
		Build struct {
			Version   string `json:"version"`
			Commit    string `json:"commit"`
			BuildDate string `json:"build_date"`
			Go        string `json:"go"`
		} `json:"build"`
	}
	json.Unmarshal([]byte(body), &status)
	b := status.Build
	if st != 200 || b.Version != strings.TrimSpace(string(desc)) || !strings.HasPrefix(b.Commit, commit) ||
		!strings.HasPrefix(b.BuildDate, "20") || !strings.HasPrefix(b.Go, "go1.") {
		t.Errorf("/api/status build: %d %+v\n%s", st, b, body)
	}
}
