//go:build linux && (amd64 || arm64)

package seccomp

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"
)

// Classic BPF opcodes and seccomp return values (linux/filter.h,
// linux/seccomp.h).
const (
	ldAbs   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge     = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset    = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	ret     = unix.BPF_RET | unix.BPF_K
	retKill = 0x80000000 // SECCOMP_RET_KILL_PROCESS
	retErr  = 0x00050000 // SECCOMP_RET_ERRNO | errno
	retOK   = 0x7fff0000 // SECCOMP_RET_ALLOW

	offNr   = 0
	offArch = 4
)

// offArg is the offset of argument i's low 32 bits in struct
// seccomp_data; both supported architectures are little-endian.
func offArg(i int) uint32 { return 16 + 8*uint32(i) }

// insn is one instruction with symbolic jump targets ("" is the next one).
type insn struct {
	code   uint16
	jt, jf string
	k      uint32
	label  string // this instruction's own label, if any
}

// Filter returns the compiled program in the form bubblewrap's
// --seccomp FD reads: the array of struct sock_filter, native byte order.
func Filter() ([]byte, error) { return compile(program(groups())) }

// ZygoteFilter is the filter a warm per-chat zygote runs under: Filter's,
// except that unshare (without CLONE_NEWUSER, CLONE_NEWCGROUP,
// CLONE_NEWUTS or CLONE_NEWTIME) and mount are allowed, which the zygote's
// spares need to give each run fresh mount, IPC, PID and network
// namespaces with its own /tmp, /dev/shm and /proc, and so is setns of a
// PID namespace alone (nstype exactly CLONE_NEWPID), with which the zygote
// forks its next children in its own PID namespace again after forking a
// spare into a new one. Each spare loads Filter on top of it (filters
// stack; the strictest answer wins) before the run's code is read, so the
// code itself runs under Filter.
func ZygoteFilter() ([]byte, error) {
	var gs []group
	for _, g := range groups() {
		var rules []rule
		for _, r := range g.rules {
			switch r.name {
			case "mount":
				continue
			case "unshare":
				r.cond = &cond{arg: 0, anyBits: unix.CLONE_NEWUSER | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWTIME}
			case "setns":
				// nstype 0 joins whatever namespace the descriptor is.
				rules = append(rules, rule{name: r.name, nr: r.nr, errno: r.errno, cond: &cond{arg: 1, equal: u32(0)}})
				r.cond = &cond{arg: 1, anyBits: cloneNewFlags &^ unix.CLONE_NEWPID}
			}
			rules = append(rules, r)
		}
		gs = append(gs, group{what: g.what, rules: rules})
	}
	return compile(program(gs))
}

func compile(prog []insn) ([]byte, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	if len(prog) >= 4096 {
		return nil, fmt.Errorf("seccomp: program of %d instructions is too long", len(prog))
	}
	out := make([]byte, 0, 8*len(prog))
	for i, in := range prog {
		jt, err := jump(at, i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := jump(at, i, in.jf)
		if err != nil {
			return nil, err
		}
		out = binary.NativeEndian.AppendUint16(out, in.code)
		out = append(out, jt, jf)
		out = binary.NativeEndian.AppendUint32(out, in.k)
	}
	return out, nil
}

func jump(at map[string]int, i int, label string) (uint8, error) {
	if label == "" {
		return 0, nil
	}
	t, ok := at[label]
	if !ok {
		return 0, fmt.Errorf("seccomp: no label %q", label)
	}
	d := t - i - 1
	if d < 0 || d > 255 {
		return 0, fmt.Errorf("seccomp: jump from %d to %q (%d) out of range", i, label, t)
	}
	return uint8(d), nil
}

func errLabel(e unix.Errno) string { return fmt.Sprintf("errno-%d", int(e)) }

// program lays the rules out: the architecture check, one comparison per
// unconditionally denied call, a block per call whose arguments decide,
// then the return instructions they jump to.
func program(gs []group) []insn {
	p := []insn{
		{code: ldAbs, k: offArch},
		{code: jeq, jt: "arch-ok", k: auditArch},
		{code: ret, k: retKill},
		{code: ldAbs, k: offNr, label: "arch-ok"},
	}
	if x32Bit != 0 {
		// x32 calls reach the same kernel entry points under other numbers.
		p = append(p, insn{code: jge, jt: errLabel(unix.ENOSYS), k: x32Bit})
	}
	errnos := map[unix.Errno]bool{unix.ENOSYS: true}
	conditional := map[int][]rule{}
	for _, g := range gs {
		for _, r := range g.rules {
			errnos[r.errno] = true
			if r.cond != nil {
				conditional[r.nr] = append(conditional[r.nr], r)
				continue
			}
			p = append(p, insn{code: jeq, jt: errLabel(r.errno), k: uint32(r.nr)})
		}
	}
	nrs := make([]int, 0, len(conditional))
	for nr := range conditional {
		nrs = append(nrs, nr)
	}
	sort.Ints(nrs)
	for _, nr := range nrs {
		p = append(p, insn{code: jeq, jt: fmt.Sprintf("check-%d", nr), k: uint32(nr)})
	}
	p = append(p, insn{code: ret, k: retOK})
	for _, nr := range nrs {
		for i, r := range conditional[nr] {
			label := ""
			if i == 0 {
				label = fmt.Sprintf("check-%d", nr)
			}
			next := fmt.Sprintf("check-%d-%d", nr, i+1)
			c := r.cond
			p = append(p, insn{code: ldAbs, k: offArg(c.arg), label: label})
			switch {
			case c.anyBits != 0:
				p = append(p, insn{code: jset, jt: errLabel(r.errno), jf: next, k: c.anyBits})
			case c.andNotEqual != nil:
				and := fmt.Sprintf("check-%d-%d-and", nr, i)
				p = append(p, insn{code: jeq, jt: and, jf: next, k: *c.equal},
					insn{code: ldAbs, k: offArg(c.andArg), label: and},
					insn{code: jeq, jt: next, jf: errLabel(r.errno), k: *c.andNotEqual})
			default:
				p = append(p, insn{code: jeq, jt: errLabel(r.errno), jf: next, k: *c.equal})
			}
			if i == len(conditional[nr])-1 {
				p = append(p, insn{code: ret, k: retOK, label: next})
			} else {
				// The next rule's first instruction carries this label.
				p = append(p, insn{code: ldAbs, k: offNr, label: next})
			}
		}
	}
	list := make([]int, 0, len(errnos))
	for e := range errnos {
		list = append(list, int(e))
	}
	sort.Ints(list)
	for _, e := range list {
		p = append(p, insn{code: ret, k: retErr | uint32(e), label: errLabel(unix.Errno(e))})
	}
	return p
}

// DockerProfile returns a Docker seccomp profile with the same denials,
// for `docker run --security-opt seccomp=FILE`.
func DockerProfile() ([]byte, error) {
	type arg struct {
		Index    int    `json:"index"`
		Value    uint64 `json:"value"`
		ValueTwo uint64 `json:"valueTwo"`
		Op       string `json:"op"`
	}
	type entry struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet int      `json:"errnoRet"`
		Args     []arg    `json:"args,omitempty"`
	}
	profile := struct {
		DefaultAction string   `json:"defaultAction"`
		Architectures []string `json:"architectures"`
		Syscalls      []entry  `json:"syscalls"`
	}{DefaultAction: "SCMP_ACT_ALLOW", Architectures: []string{dockerArch}}
	for _, g := range groups() {
		for _, r := range g.rules {
			e := entry{Names: []string{r.name}, Action: "SCMP_ACT_ERRNO", ErrnoRet: int(r.errno)}
			c := r.cond
			switch {
			case c == nil:
				profile.Syscalls = append(profile.Syscalls, e)
			case c.anyBits != 0:
				// Docker has no "any bit set": one rule per flag.
				for bit := uint32(1); bit != 0; bit <<= 1 {
					if c.anyBits&bit != 0 {
						e := e
						e.Args = []arg{{Index: c.arg, Value: uint64(bit), ValueTwo: uint64(bit), Op: "SCMP_CMP_MASKED_EQ"}}
						profile.Syscalls = append(profile.Syscalls, e)
					}
				}
			default:
				e.Args = []arg{{Index: c.arg, Value: uint64(*c.equal), Op: "SCMP_CMP_EQ"}}
				if c.andNotEqual != nil {
					e.Args = append(e.Args, arg{Index: c.andArg, Value: uint64(*c.andNotEqual), Op: "SCMP_CMP_NE"})
				}
				profile.Syscalls = append(profile.Syscalls, e)
			}
		}
	}
	return json.MarshalIndent(profile, "", "  ")
}
