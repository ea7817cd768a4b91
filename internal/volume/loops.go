package volume

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Manager mounts volumes for one process and remembers which loop device
// each image it mounted is bound to, so a mount does not read every loop
// device of the host to find out whether the image is still bound to one
// (a lazily unmounted volume whose filesystem something still holds, such
// as a sandbox's bind mount): with thousands of loop devices that read was
// most of nekro's own CPU under many chats (docs/benchmarks.md).
//
// What it knows comes from three places: one read of every loop device at
// its first mount (devices an earlier process left bound), the devices it
// binds itself, and the record each image's lock file keeps of the device
// last bound to it, written by whichever process bound it (devices another
// process running beside this one bound). Each is checked against the
// device's backing file before use, a single read. Only the wait before an
// offline resize (awaitDetached) still reads every device: it must see
// devices bound by processes of an older nekro too, and runs only when a
// resize is due.
type Manager struct {
	mu      sync.Mutex
	scanned bool
	scans   int               // reads of every device (tests)
	loops   map[string]string // absolute image path -> "/dev/loopN", mounted by this manager
	found   map[string]string // the same, bound when it first read every device
	pruneAt int               // len(loops) that makes remember drop stale entries

	tmu    sync.Mutex // held while an empty image is found or made (template)
	bindMu sync.Mutex // held while a free loop device is found and bound (mountLoop)
}

// NewManager returns a manager with nothing mounted.
func NewManager() *Manager {
	return &Manager{loops: map[string]string{}, pruneAt: 64}
}

// bound returns the loop device image is bound to, or "". rec, when not
// nil, is the image's lock file, read for the device another process
// recorded there.
func (m *Manager) bound(image string, rec *os.File) (string, error) {
	m.mu.Lock()
	if !m.scanned {
		all, err := boundLoops()
		if err != nil {
			m.mu.Unlock()
			return "", err
		}
		m.scanned = true
		m.scans++
		m.found = all
	}
	dev, ok := m.loops[image]
	fromStart := false
	if !ok {
		dev, ok = m.found[image]
		fromStart = ok
	}
	m.mu.Unlock()
	if ok {
		if backingFile(dev) == image {
			return dev, nil
		}
		m.mu.Lock()
		if fromStart {
			delete(m.found, image) // gone since: found bound at the start, dropped once stale
		} else if m.loops[image] == dev {
			delete(m.loops, image)
		}
		m.mu.Unlock()
	}
	if dev := readRecord(rec); dev != "" && backingFile(dev) == image {
		m.remember(image, dev)
		return dev, nil
	}
	return "", nil
}

// remember notes that image is bound to dev.
func (m *Manager) remember(image, dev string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loops[image] = dev
	if len(m.loops) < m.pruneAt {
		return
	}
	// Devices that went away (autoclear) once nothing held them: drop
	// them, so the map follows the mounted volumes, not every one seen.
	for img, d := range m.loops {
		if backingFile(d) != img {
			delete(m.loops, img)
		}
	}
	m.pruneAt = max(64, 2*len(m.loops))
}

// forget drops image's entry if it is still dev.
func (m *Manager) forget(image, dev string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loops[image] == dev {
		delete(m.loops, image)
	}
}

// unmounted is told that this process unmounted image: its entry goes
// unless the device is still bound (something else still holds the
// filesystem, and a later mount must go through that device).
func (m *Manager) unmounted(image string) {
	m.mu.Lock()
	dev, ok := m.loops[image]
	m.mu.Unlock()
	if ok && backingFile(dev) != image {
		m.forget(image, dev)
	}
}

// Bound returns how many images this manager mounted that it knows bound
// to a loop device (those mounted, and those whose device something else
// still held when it unmounted them).
func (m *Manager) Bound() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for img, d := range m.loops {
		if backingFile(d) != img {
			delete(m.loops, img) // freed once what held it let go
		}
	}
	return len(m.loops)
}

// backingFile returns the file dev ("/dev/loopN") is bound to, or "".
func backingFile(dev string) string {
	b, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/loop/backing_file")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// boundLoops reads every loop device: image path -> device.
func boundLoops() (map[string]string, error) {
	bound, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(bound))
	for _, f := range bound {
		if b, err := os.ReadFile(f); err == nil {
			out[strings.TrimSuffix(string(b), "\n")] = "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		}
	}
	return out, nil
}

// boundLoop returns the loop device image is bound to, or "", reading
// every loop device: for awaitDetached alone.
func boundLoop(image string) (string, error) {
	abs, err := filepath.Abs(image)
	if err != nil {
		return "", err
	}
	all, err := boundLoops()
	if err != nil {
		return "", err
	}
	return all[abs], nil
}

var loopName = regexp.MustCompile(`^loop[0-9]+$`)

// An image's lock file is also its record: its first line names the loop
// device last bound to the image, its second, for a split volume, the
// binds (splitRecord). maxRecord bounds what is read of it.
const maxRecord = 4 << 10

// recordLines returns the lock file rec's two lines.
func recordLines(rec *os.File) (dev, binds string) {
	b := make([]byte, maxRecord)
	n, err := rec.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", ""
	}
	dev, rest, _ := strings.Cut(string(b[:n]), "\n")
	binds, _, _ = strings.Cut(rest, "\n")
	return strings.TrimSpace(dev), strings.TrimSpace(binds)
}

// writeRecordLines replaces the lock file rec's content (held exclusively).
func writeRecordLines(rec *os.File, dev, binds string) error {
	content := dev + "\n"
	if binds != "" {
		content += binds + "\n"
	}
	if err := rec.Truncate(0); err != nil {
		return err
	}
	_, err := rec.WriteAt([]byte(content), 0)
	return err
}

// readRecord returns the device the lock file rec records, or "".
func readRecord(rec *os.File) string {
	if rec == nil {
		return ""
	}
	name, _ := recordLines(rec)
	if !loopName.MatchString(name) {
		return ""
	}
	return "/dev/" + name
}

// writeRecord records in the lock file rec (held exclusively) that the
// image is bound to dev; a split volume's binds stay recorded.
func writeRecord(rec *os.File, dev string) error {
	if rec == nil {
		return nil
	}
	_, binds := recordLines(rec)
	return writeRecordLines(rec, filepath.Base(dev), binds)
}

// mountedDevice returns the loop device mounted at dir (mount(8) chose
// it), or "".
func mountedDevice(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return ""
	}
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return ""
	}
	if name := filepath.Base(link); loopName.MatchString(name) {
		return "/dev/" + name
	}
	return ""
}

// absPath is path made absolute, as loop devices name their files.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
