package testutil

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Served is the test binary's `nekro serve`, on a free loopback port.
type Served struct {
	Addr  string
	Token string        // the API token it was started with
	Logs  *bytes.Buffer // what it printed
	cmd   *exec.Cmd
	done  bool
}

// Serve starts `nekro serve --data data` with NEKRO_API_TOKEN=token and
// env added to the test's environment (a model's NEKRO_LLM_* for
// instance), waits until its API answers, and stops it (SIGINT) when the
// test ends, or at Stop.
func Serve(t testing.TB, data, token string, env ...string) *Served {
	t.Helper()
	return ServeBinary(t, Nekro(t), data, token, env...)
}

// ServeExamples is Serve with the examples binary (NekroExamples).
func ServeExamples(t testing.TB, data, token string, env ...string) *Served {
	t.Helper()
	return ServeBinary(t, NekroExamples(t), data, token, env...)
}

// ServeBinary is Serve with the nekro binary bin.
func ServeBinary(t testing.TB, bin, data, token string, env ...string) *Served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Served{Addr: ln.Addr().String(), Token: token, Logs: &bytes.Buffer{}}
	ln.Close()
	s.cmd = exec.Command(bin, "serve", "--data", data, "--listen", s.Addr)
	s.cmd.Env = append(append(os.Environ(), "NEKRO_API_TOKEN="+token), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.Logs, s.Logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, _ := s.Call("GET", "/api/status", token, nil); st == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("nekro serve did not start:\n%s", s.Logs.String())
		}
	}
}

// API calls the server with its token; body, when not nil, goes as JSON.
// It returns the status (0 when the call failed) and the body.
func (s *Served) API(method, path string, body any) (int, string) {
	return s.Call(method, path, s.Token, body)
}

// Call is API with another token ("" for none).
func (s *Served) Call(method, path, token string, body any) (int, string) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+s.Addr+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Stop stops the server and waits for it; later calls do nothing.
func (s *Served) Stop() {
	if !s.done {
		s.done = true
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
	}
}
