package bwrap

// The run's Python files, compiled once per content.
//
// Python compiles a script it is given by name, and a module whose
// __pycache__ it cannot use, at every start: in a fresh sandbox that is
// boot.py and the generated api_caller.py (28 KB with the plugins'
// methods), about 5 ms of an interpreter start's 14 ms of CPU (issue 26),
// paid by every new chat's run. The runner compiles each distinct content
// once with its own interpreter, as the sandbox's uid, keeps the byte code
// (a pyc file whose header says "hash-based, not checked against the
// source": the content is the key) and gives it to later sandboxes next to
// the source:
//
//   - boot.py and zygote.py, the scripts the interpreter is started on, as
//     boot.pyc and zygote.pyc, which the command line then names (Python
//     runs a pyc file given as its script);
//   - api_caller.py as __pycache__/api_caller.<tag>.pyc, which the import
//     system loads instead of compiling the source.
//
// The source stays where it was, so tracebacks show its lines, and a
// sandbox started before the byte code is ready (the first runs with a
// new content) compiles the source as before. The byte code is made by
// the very interpreter the sandbox runs (Runner.Python, under the same
// /usr), so its magic number and cache tag match; the docker backend runs
// another interpreter and keeps the source alone.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pycFiles names the run files worth compiling ahead, and how the sandbox
// finds their byte code: as a script (true) or as a module (false).
var pycFiles = map[string]bool{"boot.py": true, "zygote.py": true, "api_caller.py": false}

// pycBound is how many compiled contents a runner keeps: a few per plugin
// configuration (api_caller.py changes with the methods a chat can call).
const pycBound = 32

// pycScript reads a Python source on stdin and writes the interpreter's
// cache tag, a newline and the source compiled as the pyc file of the
// file named by argv[1] (hash-based, unchecked).
const pycScript = `
import sys, _imp, importlib._bootstrap_external as e
src = sys.stdin.buffer.read()
code = compile(src, sys.argv[1], "exec", dont_inherit=True)
data = e._code_to_hash_pyc(code, _imp.source_hash(e._RAW_MAGIC_NUMBER, src), False)
sys.stdout.buffer.write(sys.implementation.cache_tag.encode() + b"\n" + data)
`

// pycKey identifies a file's content compiled by one interpreter (its
// path and the file it names now).
type pycKey [sha256.Size]byte

func makePycKey(python, name string, src []byte) pycKey {
	h := sha256.New()
	// The interpreter's file too: upgraded in place (python3 3.11 to
	// 3.12 under the same path), it must not be handed 3.11's byte code
	// as its script, which it would refuse (bad magic number).
	var id string
	if fi, err := os.Stat(python); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			id = fmt.Sprintf("%d:%d:%d:%d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", python, id, name)
	h.Write(src)
	var k pycKey
	h.Sum(k[:0])
	return k
}

// pycEntry is one content's byte code; data is nil while it compiles, and
// stays nil when it could not be compiled (the source is then used).
type pycEntry struct {
	tag  string // sys.implementation.cache_tag, e.g. cpython-311
	data []byte
}

// pycCache is a runner's compiled files, at most pycBound.
type pycCache struct {
	mu      sync.Mutex
	entries map[pycKey]*pycEntry
	order   []pycKey // oldest first, for the bound
}

// lookup returns the byte code of src, or nil when there is none yet; a
// content seen for the first time is compiled in the background by
// compile.
func (c *pycCache) lookup(key pycKey, compile func() (*pycEntry, error)) *pycEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		if e.data == nil {
			return nil
		}
		return e
	}
	if c.entries == nil {
		c.entries = map[pycKey]*pycEntry{}
	}
	if len(c.order) >= pycBound {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	c.entries[key] = &pycEntry{}
	c.order = append(c.order, key)
	go func() {
		e, err := compile()
		if err != nil {
			return // stays without byte code: its sandboxes compile the source
		}
		c.mu.Lock()
		if _, ok := c.entries[key]; ok {
			c.entries[key] = e
		}
		c.mu.Unlock()
	}()
	return nil
}

// compilePyc compiles src, the run file name, with the runner's
// interpreter as the sandbox's uid (it only compiles: nothing of the file
// runs).
func (r *Runner) compilePyc(name string, src []byte) (*pycEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.Python, "-I", "-S", "-c", pycScript, "/app/.nekro/"+name)
	cmd.SysProcAttr = r.sysProcAttr(-1, -1)
	cmd.Env = bwrapEnv
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(src)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	tag, data, ok := bytes.Cut(out, []byte("\n"))
	if !ok || len(tag) == 0 || bytes.ContainsAny(tag, "/\x00") || len(data) < 16 {
		return nil, fmt.Errorf("compile %s: unexpected output", name)
	}
	return &pycEntry{tag: string(tag), data: data}, nil
}

// withPyc returns files with the byte code of those in pycFiles that the
// runner has compiled (and starts compiling those it has not): files
// itself when there is none, or when CompileRunFiles is off.
func (r *Runner) withPyc(files map[string][]byte) map[string][]byte {
	return r.withPycOf(files, pycFiles)
}

// withPycOf is withPyc for the run files of names (as pycFiles: whether
// each is a script).
func (r *Runner) withPycOf(files map[string][]byte, names map[string]bool) map[string][]byte {
	if !r.CompileRunFiles {
		return files
	}
	var out map[string][]byte
	for name, script := range names {
		src, ok := files[name]
		if !ok {
			continue
		}
		e := r.pyc.lookup(makePycKey(r.Python, name, src), func() (*pycEntry, error) { return r.compilePyc(name, src) })
		if e == nil {
			continue
		}
		if out == nil {
			out = make(map[string][]byte, len(files)+2)
			for n, b := range files {
				out[n] = b
			}
		}
		if script {
			out[name+"c"] = e.data
		} else {
			out["__pycache__/"+strings.TrimSuffix(name, ".py")+"."+e.tag+".pyc"] = e.data
		}
	}
	if out == nil {
		return files
	}
	return out
}

// scriptPath is the path in the sandbox the interpreter is started on for
// the run file name (boot.py, zygote.py): its byte code when files has it.
func scriptPath(files map[string][]byte, name string) string {
	if _, ok := files[name+"c"]; ok {
		return "/app/.nekro/" + name + "c"
	}
	return "/app/.nekro/" + name
}
