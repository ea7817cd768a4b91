// Package cgroup puts each sandbox run in a control group of its own, so
// its memory and process count are limited as a whole: rlimits bind one
// process at a time, and a run that forks can otherwise add them up.
//
// It supports the unified hierarchy (cgroup v2: memory.max, pids.max) and
// the legacy one (v1: the memory and pids controllers), whichever the host
// mounts at /sys/fs/cgroup; creating groups needs root.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Root is where the hierarchies are mounted.
const Root = "/sys/fs/cgroup"

// Manager creates per-run groups under a "nekro" group of its own.
type Manager struct {
	v2   bool
	dirs []string // v2: <root>/nekro; v1: <root>/memory/nekro, <root>/pids/nekro
}

// Detect finds a usable hierarchy and prepares the nekro parent group. The
// error says why limits per run are not available (not root, no memory or
// pids controller).
func Detect() (*Manager, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not running as root")
	}
	if b, err := os.ReadFile(filepath.Join(Root, "cgroup.controllers")); err == nil {
		ctrl := strings.Fields(string(b))
		if !contains(ctrl, "memory") || !contains(ctrl, "pids") {
			return nil, fmt.Errorf("cgroup v2 lacks the memory or pids controller (has %v)", ctrl)
		}
		parent := filepath.Join(Root, "nekro")
		if err := os.WriteFile(filepath.Join(Root, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			return nil, fmt.Errorf("enable memory and pids controllers: %w", err)
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			return nil, fmt.Errorf("enable controllers under %s: %w", parent, err)
		}
		sweep([]string{parent})
		return &Manager{v2: true, dirs: []string{parent}}, nil
	}
	var dirs []string
	defer func() { sweep(dirs) }()
	for _, c := range []string{"memory", "pids"} {
		if _, err := os.Stat(filepath.Join(Root, c, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("no cgroup v1 %s controller at %s", c, filepath.Join(Root, c))
		}
		d := filepath.Join(Root, c, "nekro")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		dirs = append(dirs, d)
	}
	return &Manager{dirs: dirs}, nil
}

// sweep removes run groups left by hosts that died before removing them:
// those older than ten minutes that are empty (rmdir refuses the others).
func sweep(parents []string) {
	for _, parent := range parents {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "run-") {
				continue
			}
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 10*time.Minute {
				os.Remove(filepath.Join(parent, e.Name()))
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Group is one run's control group: one directory under v2, one per
// controller (memory, pids) under v1.
type Group struct {
	m    *Manager
	dirs []string // in the order of m.dirs
}

// New creates the group name with the given limits.
func (m *Manager) New(name string, memoryBytes int64, processes int) (*Group, error) {
	g := &Group{m: m}
	for _, parent := range m.dirs {
		d := filepath.Join(parent, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			g.Remove()
			return nil, fmt.Errorf("cgroup %s: %w", d, err)
		}
		g.dirs = append(g.dirs, d)
	}
	mem := strconv.FormatInt(memoryBytes, 10)
	pids := strconv.Itoa(processes)
	type setting struct {
		dir, file, value string
		optional         bool
	}
	var settings []setting
	if m.v2 {
		settings = []setting{{g.dirs[0], "memory.max", mem, false}, {g.dirs[0], "memory.swap.max", "0", true}, {g.dirs[0], "pids.max", pids, false}}
	} else {
		settings = []setting{{g.dirs[0], "memory.limit_in_bytes", mem, false}, {g.dirs[0], "memory.memsw.limit_in_bytes", mem, true}, {g.dirs[1], "pids.max", pids, false}}
	}
	for _, st := range settings {
		if err := os.WriteFile(filepath.Join(st.dir, st.file), []byte(st.value), 0); err != nil && !(st.optional && errors.Is(err, os.ErrNotExist)) {
			g.Remove()
			return nil, fmt.Errorf("cgroup %s = %s: %w", st.file, st.value, err)
		}
	}
	return g, nil
}

// AddTree moves pid and all its descendants into the group. Called while
// the sandbox waits to be released, it catches every process of the run:
// later ones inherit the group.
func (g *Group) AddTree(pid int) error {
	for _, p := range append([]int{pid}, Descendants(pid)...) {
		if err := g.Add(p); err != nil {
			return err
		}
	}
	return nil
}

// Add moves the process pid alone into the group; what it forks from
// then on starts in the group. A caller that knows pid has forked
// nothing yet uses it rather than AddTree, which walks /proc for
// descendants (a fifth of a millisecond of a template run's start).
// A process that has exited meanwhile is not an error.
func (g *Group) Add(pid int) error {
	for _, d := range g.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			if isESRCH(err) {
				return nil // it exited meanwhile
			}
			return fmt.Errorf("move %d into %s: %w", pid, d, err)
		}
	}
	return nil
}

// OOMKilled reports whether the kernel killed a process of the group for
// exceeding its memory limit.
func (g *Group) OOMKilled() bool {
	if g.m.v2 {
		return eventCount(filepath.Join(g.dirs[0], "memory.events"), "oom_kill") > 0
	}
	return eventCount(filepath.Join(g.dirs[0], "memory.oom_control"), "oom_kill") > 0
}

// KillAll sends SIGKILL to every process still in the group (a process
// that escaped the run's process tree, or one still exiting).
func (g *Group) KillAll() {
	for _, d := range g.dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// RemoveWhenEmpty deletes the group once its processes are gone, killing
// any still in it and trying again with a growing pause (10 ms to 0.5 s),
// for at most within: on a busy host, processes the OOM killer or a kill
// hit can take seconds to exit. It blocks; callers run it off their path.
// A group still there at the end is left to the next start's sweep.
func (g *Group) RemoveWhenEmpty(within time.Duration) error {
	deadline := time.Now().Add(within)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := g.Remove()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		g.KillAll()
		time.Sleep(wait)
	}
}

// Remove deletes the group; its processes must have exited.
func (g *Group) Remove() error {
	var errs []error
	for _, d := range g.dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func eventCount(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Descendants lists pid's descendants (children first, depth first)
// through /proc/<pid>/task/*/children.
func Descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
				out = append(out, Descendants(c)...)
			}
		}
	}
	return out
}

func isESRCH(err error) bool { return errors.Is(err, syscall.ESRCH) }
