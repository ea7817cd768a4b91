package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ListenPassed starts a run's server with no socket path at all: it
// returns the server and the sandbox's end of a control socket, which the
// backend hands to the sandbox as an inherited descriptor. Nothing outside
// the run can reach the server: there is no name to connect to, only the
// descriptor, which the host closes on its side once the sandbox holds it.
//
// The protocol on the control socket (SOCK_SEQPACKET, so each message is
// whole) is one byte asking for a connection; the host answers each with a
// one-byte message carrying, as SCM_RIGHTS, a fresh connected stream
// socket served like any connection of the run. Every answer is an
// equivalent fresh connection, so processes of the run that ask at the
// same time need not tell their answers apart. Descriptors the sandbox
// sends on the control socket are never installed in the host: the host
// reads without room for control messages, so the kernel drops them.
func ListenPassed(ctx context.Context, cfg Config) (*Server, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("rpc control socket: %w", err)
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "rpc-control")
	sandboxEnd := os.NewFile(uintptr(fds[1]), "rpc-control-sandbox")
	fc, err := net.FileConn(hostEnd)
	hostEnd.Close() // FileConn holds its own duplicate
	if err != nil {
		sandboxEnd.Close()
		return nil, nil, fmt.Errorf("rpc control socket: %w", err)
	}
	ln := &passedListener{ctl: fc.(*net.UnixConn), done: make(chan struct{})}
	return serve(ctx, ln, cfg), sandboxEnd, nil
}

// passedListener is a net.Listener whose connections are created on the
// sandbox's request over the control socket.
type passedListener struct {
	ctl       *net.UnixConn
	closeOnce sync.Once
	done      chan struct{}
}

var errListenerClosed = errors.New("rpc: control socket closed")

// Accept waits for the sandbox to ask for a connection, makes a connected
// pair, sends one end to the sandbox and returns the other.
func (l *passedListener) Accept() (net.Conn, error) {
	buf := make([]byte, 16)
	for {
		n, err := l.ctl.Read(buf) // no room for control messages: passed fds are dropped
		if err != nil {
			return nil, err
		}
		if n == 0 {
			// Zero-length message: the sandbox end was closed (every
			// process of the run is gone).
			return nil, errListenerClosed
		}
		conn, err := l.newConn()
		if err != nil {
			return nil, err
		}
		if conn != nil {
			return conn, nil
		}
	}
}

// newConn makes a stream socket pair and sends the sandbox's end. A
// request whose answer cannot be delivered (the asking process died) is
// dropped, returning nil without error.
func (l *passedListener) newConn() (net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("rpc connection pair: %w", err)
	}
	host := os.NewFile(uintptr(fds[0]), "rpc-conn")
	theirs := os.NewFile(uintptr(fds[1]), "rpc-conn-sandbox")
	_, _, err = l.ctl.WriteMsgUnix([]byte{'c'}, unix.UnixRights(int(theirs.Fd())), nil)
	theirs.Close()
	if err != nil {
		host.Close()
		select {
		case <-l.done:
			return nil, errListenerClosed
		default:
		}
		return nil, nil
	}
	c, err := net.FileConn(host)
	host.Close()
	if err != nil {
		return nil, fmt.Errorf("rpc connection: %w", err)
	}
	return c, nil
}

func (l *passedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.ctl.Close()
}

func (l *passedListener) Addr() net.Addr { return passedAddr{} }

type passedAddr struct{}

func (passedAddr) Network() string { return "unix" }
func (passedAddr) String() string  { return "(passed descriptor)" }
