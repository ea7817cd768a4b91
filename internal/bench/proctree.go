package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The process tree of this process, read from /proc (Linux): what nekro
// and every sandbox, zygote and spare it started cost together.

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux nekro runs on).
const clockTick = 10 * time.Millisecond

// descendants returns the pids below pid, found through each of its
// threads' children lists (a pid namespace's processes appear with the
// pids of this /proc).
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "task", t.Name(), "children"))
			if err != nil {
				continue
			}
			for f := range strings.FieldsSeq(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// procCPU is the CPU time of pid and of its children it has reaped
// (utime+stime+cutime+cstime of /proc/<pid>/stat).
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] { // utime stime cutime cstime
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// pss is the proportional set size of pid in bytes (smaps_rollup).
func pss(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// treeSample is the tree of this process at one moment.
type treeSample struct {
	Procs int           // descendant processes (this one not counted)
	PSS   int64         // bytes, this process and its descendants
	CPU   time.Duration // CPU used so far by this process, its live descendants and every reaped one
}

// sampleTree reads the tree; withPSS also reads every process's PSS
// (slower: the kernel walks their page tables). With a cpuGroup the CPU is
// the group's, else what /proc shows of the tree.
func sampleTree(g *cpuGroup, withPSS bool) treeSample {
	self := os.Getpid()
	kids := descendants(self)
	s := treeSample{Procs: len(kids), CPU: procCPU("self")}
	if withPSS {
		s.PSS = pss("self")
	}
	for _, k := range kids {
		p := strconv.Itoa(k)
		// A live descendant's own time plus what it reaped; its live
		// children are counted in turn. Once reaped, its time moves to
		// its parent's cutime, so the sum never counts it twice.
		s.CPU += procCPU(p)
		if withPSS {
			s.PSS += pss(p)
		}
	}
	if g != nil {
		s.CPU = g.usage()
	}
	return s
}

// cpuGroup meters the CPU of this process and everything it starts
// through a cgroup v1 cpuacct group of its own: unlike /proc, it keeps
// the time of processes nobody in the tree reaps (a sandbox's processes
// killed with its PID namespace). Children inherit the group; nekro moves
// runs only in the memory and pids hierarchies.
type cpuGroup struct {
	dir, home string
}

const cpuacctRoot = "/sys/fs/cgroup/cpuacct"

// openCPUGroup moves this process into a new cpuacct group; nil when the
// host has no cgroup v1 cpuacct hierarchy or this process may not.
func openCPUGroup() *cpuGroup {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	home := ""
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) == 3 && strings.Contains(","+f[1]+",", ",cpuacct,") {
			home = filepath.Join(cpuacctRoot, f[2])
		}
	}
	if home == "" {
		return nil
	}
	dir := filepath.Join(home, "nekro-bench-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Remove(dir)
		return nil
	}
	return &cpuGroup{dir: dir, home: home}
}

// usage is the group's CPU so far.
func (g *cpuGroup) usage() time.Duration {
	b, err := os.ReadFile(filepath.Join(g.dir, "cpuacct.usage"))
	if err != nil {
		return 0
	}
	ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns)
}

// close moves this process back and removes the group once the last of
// its other processes has gone.
func (g *cpuGroup) close() {
	os.WriteFile(filepath.Join(g.home, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
	for range 50 {
		if os.Remove(g.dir) == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// machineBusy is the machine's busy CPU time so far, every CPU summed
// (/proc/stat: all but idle and iowait); 0 when it cannot be read.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:8] { // user nice system idle iowait irq softirq
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		busy += n
	}
	return time.Duration(busy) * clockTick
}
