package bwrap_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/nekro-go/nekro/internal/testutil"
)

// The data-science stack scripts/deps.sh installs works in the sandbox as
// the AI's code uses it: a matplotlib chart saved to /app/shared (Debian
// keeps matplotlibrc in /etc, which the sandbox must see), numpy, pandas
// and Pillow, with nothing on stderr from fontconfig.
func TestDataStackInTheSandbox(t *testing.T) {
	data := testutil.DataDir(t)
	code := `
import matplotlib.pyplot as plt, numpy as np, pandas as pd
from PIL import Image
plt.plot([1, 2, 3]); plt.savefig('/app/shared/p.png')
with open('/app/shared/p.png', 'rb') as f:
    head = f.read(8)
im = Image.open('/app/shared/p.png')
print("png", head == b'\x89PNG\r\n\x1a\n', im.size[0] > 100)
print("numpy", int(np.arange(5).sum()), "pandas", int(pd.DataFrame({"a": [1, 2]})["a"].sum()))
import matplotlib; print("backend", matplotlib.get_backend())
`
	r := testutil.RunNekro(t, []byte(code), "exec", "--data", data, "--chat", "stack", "-")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"png True True", "numpy 10 pandas 3", "backend agg"} {
		if !strings.Contains(strings.ToLower(r.Stdout), strings.ToLower(want)) {
			t.Errorf("output lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout+r.Stderr, "Fontconfig") || strings.Contains(r.Stdout+r.Stderr, "matplotlibrc") {
		t.Errorf("noise in the run's output:\n%s\n%s", r.Stdout, r.Stderr)
	}
	// The next run in the chat finds the chart where the first left it.
	r = testutil.RunNekro(t, []byte("import os; print(os.path.getsize('/app/shared/p.png') > 1000)"), "exec", "--data", data, "--chat", "stack", "-")
	if !strings.Contains(r.Stdout, "True") {
		t.Errorf("the chart is gone: %s %s", r.Stdout, r.Stderr)
	}
}

// The prompt names the packages the sandbox's Python has, found by
// probing it, instead of claiming only the standard library is there.
func TestPromptListsInstalledPackages(t *testing.T) {
	data := testutil.DataDir(t)
	r := testutil.RunNekro(t, nil, "--data", data, "chats", "prompt", "c")
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	for _, want := range []string{"numpy 1.", "pandas ", "matplotlib ", "Pillow (import PIL) ", "plt.savefig("} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("prompt lacks %q:\n%.3000s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "Only the Python standard library") {
		t.Errorf("prompt still says only the standard library")
	}
}

// A fresh sandbox's interpreter starts without site (-S, site.go), yet the
// AI's code sees what site gives: the same sys.path as `python3 -I` on
// the host (plus nekro's own entries), site's builtins, and packages that
// only a .pth file used to reach (matplotlib's mpl_toolkits).
func TestFreshSandboxHasWhatSiteGives(t *testing.T) {
	want, err := exec.Command("/usr/bin/python3", "-I", "-c", "import sys; print(sys.path)").Output()
	if err != nil {
		t.Fatal(err)
	}
	code := `
import sys
print("path", [p for p in sys.path if not p.startswith("/app/")])
print("builtins", callable(exit), callable(quit), type(help).__name__, "license" in dir(__builtins__))
import mpl_toolkits.mplot3d, numpy
print("imports ok")
`
	r := testutil.RunNekro(t, []byte(code), "exec", "--data", testutil.DataDir(t), "--chat", "site", "-")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	for _, line := range []string{"path " + strings.TrimSpace(string(want)), "builtins True True _Helper True", "imports ok"} {
		if !strings.Contains(r.Stdout, line) {
			t.Errorf("output lacks %q:\n%s", line, r.Stdout)
		}
	}
}
