//go:build linux && (amd64 || arm64)

// Package seccomp builds the system-call filter every sandbox runs under.
//
// The sandbox already has no capabilities, its own namespaces and a
// read-only view of the host; the filter closes the kernel surface that
// is left and that no Python code needs: creating namespaces (a nested
// user namespace gives full capabilities inside it, and with them
// netfilter and mount), tracing other processes (ptrace of PID 1, or
// reading another process's memory), eBPF, perf events, the kernel
// keyring, the mount API, kernel modules and kexec, io_uring (a large,
// often-exploited surface that also bypasses this filter), file handles
// (open_by_handle_at escapes bind mounts), userfaultfd, and packet and
// netlink sockets other than NETLINK_ROUTE (which glibc's getaddrinfo and
// getifaddrs use). Every denial returns an error (EPERM, or ENOSYS for
// clone3 so that glibc falls back to clone, whose flags the filter can
// check); a call from another architecture's ABI kills the process.
//
// One table of rules drives the three forms: Filter (the classic BPF
// program bubblewrap loads), DockerProfile (a Docker seccomp profile) and
// Denied (the list `nekro doctor` and the README show).
package seccomp

import (
	"golang.org/x/sys/unix"
)

// rule denies one system call, always or when its arguments match.
type rule struct {
	name  string
	nr    int // this architecture's number; -1 when it has none
	errno unix.Errno
	// cond, when set, limits the denial to some arguments.
	cond *cond
}

// cond is a test of an argument's low 32 bits.
type cond struct {
	arg int
	// anyBits denies when arg & anyBits != 0.
	anyBits uint32
	// equal denies when arg == equal (and, with andArg, when
	// andArg's value != andNotEqual).
	equal       *uint32
	andArg      int
	andNotEqual *uint32
}

func u32(v uint32) *uint32 { return &v }

// cloneNewFlags are the CLONE_NEW* flags: any of them makes a namespace.
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// group is one line of Denied: what a set of rules keeps out.
type group struct {
	what  string
	rules []rule
}

func deny(name string, nr int) rule { return rule{name: name, nr: nr, errno: unix.EPERM} }

// groups is the table every form is built from.
func groups() []group {
	return []group{
		{"new namespaces (unshare, setns, clone with CLONE_NEW* flags; clone3 answers ENOSYS)", []rule{
			deny("unshare", unix.SYS_UNSHARE), deny("setns", unix.SYS_SETNS),
			{name: "clone", nr: unix.SYS_CLONE, errno: unix.EPERM, cond: &cond{arg: 0, anyBits: cloneNewFlags}},
			{name: "clone3", nr: unix.SYS_CLONE3, errno: unix.ENOSYS},
		}},
		{"tracing other processes (ptrace, process_vm_readv/writev, pidfd_getfd)", []rule{
			deny("ptrace", unix.SYS_PTRACE), deny("process_vm_readv", unix.SYS_PROCESS_VM_READV),
			deny("process_vm_writev", unix.SYS_PROCESS_VM_WRITEV), deny("pidfd_getfd", unix.SYS_PIDFD_GETFD),
		}},
		{"eBPF and perf events (bpf, perf_event_open)", []rule{
			deny("bpf", unix.SYS_BPF), deny("perf_event_open", unix.SYS_PERF_EVENT_OPEN),
		}},
		{"the kernel keyring (keyctl, add_key, request_key)", []rule{
			deny("keyctl", unix.SYS_KEYCTL), deny("add_key", unix.SYS_ADD_KEY), deny("request_key", unix.SYS_REQUEST_KEY),
		}},
		{"mounting (mount, umount2, pivot_root and the new mount API)", []rule{
			deny("mount", unix.SYS_MOUNT), deny("umount2", unix.SYS_UMOUNT2), deny("pivot_root", unix.SYS_PIVOT_ROOT),
			deny("move_mount", unix.SYS_MOVE_MOUNT), deny("open_tree", unix.SYS_OPEN_TREE), deny("fsopen", unix.SYS_FSOPEN),
			deny("fsconfig", unix.SYS_FSCONFIG), deny("fsmount", unix.SYS_FSMOUNT), deny("fspick", unix.SYS_FSPICK),
			deny("mount_setattr", unix.SYS_MOUNT_SETATTR),
		}},
		{"kernel modules and kexec", []rule{
			deny("init_module", unix.SYS_INIT_MODULE), deny("finit_module", unix.SYS_FINIT_MODULE),
			deny("delete_module", unix.SYS_DELETE_MODULE), deny("kexec_load", unix.SYS_KEXEC_LOAD),
			deny("kexec_file_load", unix.SYS_KEXEC_FILE_LOAD),
		}},
		{"io_uring", []rule{
			deny("io_uring_setup", unix.SYS_IO_URING_SETUP), deny("io_uring_enter", unix.SYS_IO_URING_ENTER),
			deny("io_uring_register", unix.SYS_IO_URING_REGISTER),
		}},
		{"file handles, userfaultfd, fanotify and host administration (open_by_handle_at, swapon, reboot, acct, quotactl, syslog, ...)", []rule{
			deny("open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT), deny("name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT),
			deny("userfaultfd", unix.SYS_USERFAULTFD), deny("fanotify_init", unix.SYS_FANOTIFY_INIT),
			deny("swapon", unix.SYS_SWAPON), deny("swapoff", unix.SYS_SWAPOFF), deny("reboot", unix.SYS_REBOOT),
			deny("acct", unix.SYS_ACCT), deny("quotactl", unix.SYS_QUOTACTL), deny("syslog", unix.SYS_SYSLOG),
			deny("lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE),
		}},
		{"packet sockets, and netlink sockets other than NETLINK_ROUTE", []rule{
			{name: "socket", nr: unix.SYS_SOCKET, errno: unix.EAFNOSUPPORT, cond: &cond{arg: 0, equal: u32(unix.AF_PACKET)}},
			{name: "socket", nr: unix.SYS_SOCKET, errno: unix.EPERM, cond: &cond{arg: 0, equal: u32(unix.AF_NETLINK),
				andArg: 2, andNotEqual: u32(unix.NETLINK_ROUTE)}},
		}},
	}
}

// Denied lists what the filter keeps out, one line per kind.
func Denied() []string {
	var out []string
	for _, g := range groups() {
		out = append(out, g.what)
	}
	return out
}
