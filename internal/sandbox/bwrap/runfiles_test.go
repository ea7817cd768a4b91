package bwrap

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Runs of one content share one set of sealed memfds; another content
// gets its own; a set pushed out of the cache is closed once the run
// using it is done with it, not before.
func TestRunFileSetsAreSharedSealedAndClosedAfterTheirLastUse(t *testing.T) {
	var c runFileCache
	defer c.closeAll()
	names := []string{"a.py", "b.py"}
	files := map[string][]byte{"a.py": []byte("A = 1\n"), "b.py": []byte("B = 2\n")}
	s1, err := c.get(names, files)
	if err != nil {
		t.Fatal(err)
	}
	c.put(s1)
	s2, err := c.get(names, map[string][]byte{"a.py": []byte("A = 1\n"), "b.py": []byte("B = 2\n")})
	if err != nil {
		t.Fatal(err)
	}
	if s2 != s1 || s2.files[0].Fd() != s1.files[0].Fd() {
		t.Errorf("the same content got another set")
	}
	b := make([]byte, 16)
	if n, err := unix.Pread(int(s2.files[1].Fd()), b, 0); err != nil || string(b[:n]) != "B = 2\n" {
		t.Errorf("b.py's memfd reads %q, %v", b[:n], err)
	}
	if _, err := unix.Pwrite(int(s2.files[0].Fd()), []byte("X"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("writing a sealed memfd: %v, want EPERM", err)
	}
	other, err := c.get(names, map[string][]byte{"a.py": []byte("A = 3\n"), "b.py": []byte("B = 2\n")})
	if err != nil {
		t.Fatal(err)
	}
	if other.key == s1.key {
		t.Errorf("another content has the same key %s", other.key)
	}
	c.put(other)

	// s2 is still in use while the cache fills past its bound.
	for i := range runFileBound + 1 {
		s, err := c.get([]string{"n.py"}, map[string][]byte{"n.py": []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		c.put(s)
	}
	if len(c.sets) != runFileBound {
		t.Errorf("the cache holds %d sets, want %d", len(c.sets), runFileBound)
	}
	if len(s2.files) == 0 {
		t.Fatal("a set in use was closed when it left the cache")
	}
	f := s2.files[0]
	c.put(s2)
	if len(s2.files) != 0 {
		t.Error("a set out of the cache was not closed after its last use")
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("its memfd after the last use: %v, want closed", err)
	}
}
