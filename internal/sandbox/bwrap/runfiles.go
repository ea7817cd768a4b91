package bwrap

// A template run's files, sent as sealed memfds that are made once per
// content.
//
// A run's files (boot.py, the stubs and their byte code, pip's shim) are
// the same for every run of a plugin configuration, and a chat's key is
// the same for all of its runs. Each template run used to copy them into
// new memfds (an eighth of a millisecond of nekro's CPU), and its child
// wrote them into a tmpfs of its own (0.4 ms of the run's). Now the
// runner keeps one set of sealed memfds per content and sends those, with
// a key naming the content; the template writes the files into the chat's
// base mount namespace once, when it builds it, and a later run joins the
// base only when the key is the same (template.py, _kept_for).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// runFileBound is how many file sets a runner keeps: a few per plugin
// configuration, as pycBound. A chat's key is not part of a set.
const runFileBound = 32

// chatKeyFile is the run file that differs between chats: it is sent on
// its own, in a memfd of the run's.
const chatKeyFile = "chat_key"

// runFileCache keeps sets of sealed memfds by content.
type runFileCache struct {
	mu   sync.Mutex
	sets map[[32]byte]*runFileSet
	used [][32]byte // least recently used first
}

// runFileSet is the sealed memfds of one content, in the order of its
// names, and the content's key.
type runFileSet struct {
	key     string
	names   []string
	files   []*os.File
	users   int  // runs between get and put
	evicted bool // out of the cache: closed when its last user is done
}

// get returns the set for names (sorted, without chatKeyFile) and their
// contents in files, making it if needed; the caller puts it back once
// the template has its own copies of the descriptors.
func (c *runFileCache) get(names []string, files map[string][]byte) (*runFileSet, error) {
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	var sum [32]byte
	h.Sum(sum[:0])

	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sets[sum]; s != nil {
		s.users++
		c.touchLocked(sum)
		return s, nil
	}
	s := &runFileSet{key: hex.EncodeToString(sum[:16]), names: names, users: 1}
	for _, n := range names {
		f, err := sealedMemFile("nekro-"+n, files[n])
		if err != nil {
			s.close()
			return nil, err
		}
		s.files = append(s.files, f)
	}
	if c.sets == nil {
		c.sets = map[[32]byte]*runFileSet{}
	}
	c.sets[sum] = s
	c.used = append(c.used, sum)
	for len(c.used) > runFileBound {
		old := c.sets[c.used[0]]
		delete(c.sets, c.used[0])
		c.used = c.used[1:]
		old.evicted = true
		if old.users == 0 {
			old.close()
		}
	}
	return s, nil
}

// put ends a use of s that get began.
func (c *runFileCache) put(s *runFileSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.users--
	if s.evicted && s.users == 0 {
		s.close()
	}
}

// closeAll closes every set no run uses (the runner's Close).
func (c *runFileCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for sum, s := range c.sets {
		s.evicted = true
		if s.users == 0 {
			s.close()
		}
		delete(c.sets, sum)
	}
	c.used = nil
}

func (c *runFileCache) touchLocked(sum [32]byte) {
	for i, u := range c.used {
		if u == sum {
			copy(c.used[i:], c.used[i+1:])
			c.used[len(c.used)-1] = sum
			return
		}
	}
}

func (s *runFileSet) close() {
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
}

// sealedMemFile is memFile's file sealed against any change: every run
// of its content gets the same descriptor.
func sealedMemFile(name string, b []byte) (*os.File, error) {
	return newMemFile(name, b, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
}
