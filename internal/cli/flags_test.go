package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// Every value a flag cannot mean is refused before anything runs, with a
// non-zero exit and a message naming the flag (or the environment
// variable it came from) and what it accepts.
func TestBadValuesAreRefused(t *testing.T) {
	data := testutil.DataDir(t)
	notExec := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"exec", "--timeout", "0"}, "--timeout 0s: must be positive, e.g. 30s"},
		{nil, []string{"exec", "--timeout", "-5s"}, "--timeout -5s: must be positive"},
		{nil, []string{"exec", "--call-timeout", "-1s"}, "--call-timeout -1s: must not be negative"},
		{nil, []string{"exec", "--max-runs", "0"}, "--max-runs 0: must be at least 1"},
		{nil, []string{"exec", "--log-level", "loud"}, "--log-level loud: must be one of debug, info, warn, error"},
		{nil, []string{"exec", "--sandbox", "lxc"}, "--sandbox lxc: must be bwrap or docker"},
		{nil, []string{"exec", "--kv-max-value", "0"}, "--kv-max-value 0: must be at least 1"},
		{nil, []string{"exec", "--shared-inodes", "0"}, "--shared-inodes 0: must be at least 1"},
		{nil, []string{"exec", "--shared-quota", "0"}, "--shared-quota 0: must be a size"},
		{nil, []string{"exec", "--sandbox-uids", "9-1"}, "--sandbox-uids 9-1"},
		{[]string{"NEKRO_MAX_RUNS=abc"}, []string{"exec"}, `NEKRO_MAX_RUNS="abc" is not a whole number`},
		{[]string{"NEKRO_CALL_TIMEOUT=xyz"}, []string{"exec"}, `NEKRO_CALL_TIMEOUT="xyz" is not a duration`},
		{[]string{"NEKRO_MAX_RUNS=0"}, []string{"exec"}, "NEKRO_MAX_RUNS=0 (--max-runs): must be at least 1"},
		{[]string{"NEKRO_LOG_LEVEL=chatty"}, []string{"exec"}, "NEKRO_LOG_LEVEL=chatty (--log-level): must be one of"},
		{[]string{"NEKRO_SHARED_QUOTA=lots"}, []string{"exec"}, "NEKRO_SHARED_QUOTA"},
		{nil, []string{"exec", "--python", "/nope/python3"}, "--python /nope/python3: no such file inside the sandbox; set --python or NEKRO_PYTHON to a python3 (nekro doctor checks this)"},
		{nil, []string{"exec", "--python", "python3"}, "--python python3: not an absolute path"},
		{nil, []string{"serve", "--listen", "nowhere"}, "--listen nowhere: want HOST:PORT"},
		{[]string{"NEKRO_LISTEN=x:y"}, []string{"serve"}, "NEKRO_LISTEN=x:y (--listen): want HOST:PORT"},
		{nil, []string{"serve", "--max-iterations", "0"}, "--max-iterations 0: must be at least 1"},
		{nil, []string{"serve", "--python", "/usr/bin/true"}, "--python /usr/bin/true: not a Python 3"},
		{nil, []string{"serve", "--python", notExec}, "--python " + notExec + ": not an executable file"},
	}
	for _, c := range cases {
		args := append([]string{"--data", data}, c.args...)
		if c.args[0] == "exec" {
			args = append(args, "--chat", "c", "-")
		}
		r := run(t, c.env, []byte("print('ran')"), args...)
		if r.Code == 0 || strings.Contains(r.Stdout, "ran") || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%v %v: want a refusal with %q, got %+v", c.env, c.args, c.want, r)
		}
	}
	// A bad variable of a flag the command does not have is not its
	// concern: kv has no --max-runs.
	r := run(t, []string{"NEKRO_MAX_RUNS=abc"}, nil, "--data", data, "kv", "--plugin", "nekro.basic", "list")
	if strings.Contains(r.Stderr, "NEKRO_MAX_RUNS") {
		t.Errorf("kv refused NEKRO_MAX_RUNS: %+v", r)
	}
}

// run runs the production binary with env added.
func run(t *testing.T, env []string, stdin []byte, args ...string) testutil.Result {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	r := testutil.RunNekro(t, stdin, args...)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		os.Unsetenv(k)
	}
	return r
}

// A command's help lists the flags that apply to it only.
func TestHelpListsOnlyTheCommandsFlags(t *testing.T) {
	sandbox := []string{"--python", "--sandbox", "--max-runs", "--docker-image", "--sandbox-uids", "--shared-quota", "--call-timeout"}
	for _, c := range []struct {
		args       []string
		has, lacks []string
	}{
		{[]string{"kv", "--help"}, []string{"--plugin", "--data", "--database", "--kv-max-value"}, sandbox},
		{[]string{"kv", "get", "--help"}, []string{"--plugin", "--data"}, sandbox},
		{[]string{"plugins", "--help"}, []string{"--plugins", "--plugin-dir"}, append(sandbox, "--database", "--kv-quota")},
		{[]string{"bench", "kv", "--help"}, []string{"--keys"}, append(sandbox, "--data")},
		{[]string{"bench", "spine", "--help"}, []string{"--python"}, []string{"--data", "--max-runs"}},
		{[]string{"exec", "--help"}, append(sandbox, "--data", "--plugins", "--timeout"), nil},
		{[]string{"serve", "--help"}, append(sandbox, "--listen", "--data"), nil},
		{[]string{"--help"}, nil, append(sandbox, "--data", "--plugins")},
	} {
		r := testutil.RunNekro(t, nil, c.args...)
		if r.Code != 0 {
			t.Fatalf("%v: %+v", c.args, r)
		}
		for _, f := range c.has {
			if !strings.Contains(r.Stdout, f+" ") {
				t.Errorf("nekro %v lacks %s:\n%s", c.args, f, r.Stdout)
			}
		}
		for _, f := range c.lacks {
			if strings.Contains(r.Stdout, f+" ") {
				t.Errorf("nekro %v lists %s, which does not apply to it:\n%s", c.args, f, r.Stdout)
			}
		}
	}
}

// The production binary carries the built-in plugins only; the document
// examples are in nekro-examples.
func TestExamplesOnlyInTheExamplesBinary(t *testing.T) {
	prod := testutil.RunNekro(t, nil, "plugins")
	if prod.Code != 0 || !strings.Contains(prod.Stdout, "nekro.basic") || strings.Contains(prod.Stdout, "nekro_examples.") ||
		strings.Contains(prod.Stdout, "my_sum_function") {
		t.Errorf("nekro plugins:\n%s%s", prod.Stdout, prod.Stderr)
	}
	ex := testutil.RunNekroExamples(t, nil, "plugins")
	if ex.Code != 0 || !strings.Contains(ex.Stdout, "nekro.basic") || !strings.Contains(ex.Stdout, "nekro_examples.sandbox_methods") ||
		!strings.Contains(ex.Stdout, "my_sum_function") {
		t.Errorf("nekro-examples plugins:\n%s%s", ex.Stdout, ex.Stderr)
	}
}

// nekro kv refuses a plugin key no plugin answers to, listing the known
// ones, and still reaches a plugin's values once stored (also a plugin no
// longer compiled in).
func TestKVRefusesAnUnknownPlugin(t *testing.T) {
	data := testutil.DataDir(t)
	if r := testutil.RunNekro(t, []byte("pass"), "--data", data, "exec", "--chat", "c", "-"); r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	r := testutil.RunNekro(t, nil, "--data", data, "kv", "--plugin", "nekro.notes", "set", "k", "v")
	if r.Code == 0 || !strings.Contains(r.Stderr, "--plugin nekro.notes: no such plugin") || !strings.Contains(r.Stderr, "nekro.note,") {
		t.Fatalf("kv set on a misspelt plugin: %+v", r)
	}
	if r := testutil.RunNekro(t, nil, "--data", data, "kv", "--plugin", "nekro.note", "list"); r.Code != 0 {
		t.Fatalf("kv list of a compiled-in plugin: %+v", r)
	}
	// Values of a plugin only the examples binary has stay reachable from
	// the production binary, as a plugin no longer compiled in.
	if r := testutil.RunNekroExamples(t, nil, "--data", data, "kv", "--plugin", "nekro_examples.files", "set", "k", "v"); r.Code != 0 {
		t.Fatalf("kv set in the examples binary: %+v", r)
	}
	if r := testutil.RunNekro(t, nil, "--data", data, "kv", "--plugin", "nekro_examples.files", "get", "k"); r.Code != 0 || r.Stdout != "v\n" {
		t.Fatalf("kv get of a plugin not compiled in, with values: %+v", r)
	}
}

// The start-up line names the data directory by its absolute path.
func TestServePrintsTheAbsoluteDataPath(t *testing.T) {
	abs := testutil.DataDir(t)
	wd, _ := os.Getwd()
	data, err := filepath.Rel(wd, abs) // as an operator types it
	if err != nil {
		t.Fatal(err)
	}
	srv := testutil.Serve(t, data, "tok-abs")
	srv.Stop()
	if !strings.Contains(srv.Logs.String(), "(data "+abs+")") {
		t.Errorf("start-up line lacks the absolute data path %s:\n%s", abs, srv.Logs.String())
	}
}
