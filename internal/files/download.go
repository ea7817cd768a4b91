package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// maxRedirects bounds the redirects one download follows.
const maxRedirects = 5

// downloader fetches URLs for a run's plugins. Its guard runs when a
// connection is made, on the address actually dialed, so neither a DNS
// name that resolves to 127.0.0.1 nor a redirect to one gets through, and
// it ignores proxy settings, through which the guard could not see.
type downloader struct {
	client  *http.Client
	max     int64
	timeout time.Duration
}

func newDownloader(opts Options) *downloader {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	if !opts.AllowPrivateNetworks {
		dialer.Control = guardDial
	}
	dial := dialer.DialContext
	if len(opts.AllowHosts) > 0 && !opts.AllowPrivateNetworks {
		allowed := map[string]bool{}
		for _, h := range opts.AllowHosts {
			allowed[strings.ToLower(h)] = true
		}
		open := &net.Dialer{Timeout: 10 * time.Second}
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if allowed[strings.ToLower(addr)] {
				return open.DialContext(ctx, network, addr)
			}
			return dialer.DialContext(ctx, network, addr)
		}
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		DisableKeepAlives:      true, // one bridge per run: nothing to reuse
	}
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to a %s: URL refused", req.URL.Scheme)
			}
			return nil
		},
	}
	return &downloader{client: client, max: opts.MaxDownloadBytes, timeout: opts.DownloadTimeout}
}

// Downloader fetches URLs for the host itself (a chat platform's images
// and files) with the guard of plugins' downloads: no private, loopback
// or own address unless Options allow it, size and time limits, at most
// 5 redirects.
type Downloader struct{ d *downloader }

// NewDownloader returns a Downloader; zero Options fields take their
// defaults.
func NewDownloader(opts Options) *Downloader {
	if opts.MaxDownloadBytes <= 0 {
		opts.MaxDownloadBytes = DefaultMaxDownloadBytes
	}
	if opts.DownloadTimeout <= 0 {
		opts.DownloadTimeout = DefaultDownloadTimeout
	}
	return &Downloader{newDownloader(opts)}
}

// Fetch streams rawURL into w and returns the bytes written and the
// response's Content-Type.
func (d *Downloader) Fetch(ctx context.Context, rawURL string, w io.Writer) (int64, string, error) {
	return d.d.fetch(ctx, rawURL, w)
}

// Download fetches rawURL into w.
func (f *FS) Download(ctx context.Context, rawURL string, w io.Writer) (int64, error) {
	n, _, err := f.dl.fetch(ctx, rawURL, w)
	return n, err
}

// fetch streams rawURL into w and returns the bytes written and the
// response's Content-Type. Errors name the URL without its credentials.
func (d *downloader) fetch(ctx context.Context, rawURL string, w io.Writer) (int64, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, "", fmt.Errorf("download: bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return 0, "", fmt.Errorf("download %s: only http and https URLs are allowed", u.Redacted())
	}
	if u.Host == "" {
		return 0, "", fmt.Errorf("download %s: URL has no host", u.Redacted())
	}
	shown := u.Redacted()
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, "", fmt.Errorf("download %s: %w", shown, err)
	}
	req.Header.Set("User-Agent", "nekro-go")
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, "", d.explain(ctx, shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, "", fmt.Errorf("download %s: HTTP status %s", shown, resp.Status)
	}
	if resp.ContentLength > d.max {
		return 0, "", fmt.Errorf("download %s: %d bytes is over the %d-byte limit", shown, resp.ContentLength, d.max)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, d.max+1))
	if n > d.max {
		return n, "", fmt.Errorf("download %s: stopped at the %d-byte limit", shown, d.max)
	}
	if err != nil {
		return n, "", d.explain(ctx, shown, err)
	}
	return n, resp.Header.Get("Content-Type"), nil
}

// explain words a failed download for the AI.
func (d *downloader) explain(ctx context.Context, shown string, err error) error {
	var blocked *blockedAddrError
	switch {
	case errors.As(err, &blocked):
		return fmt.Errorf("download %s: %w", shown, blocked)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("download %s: timed out after %s: %w", shown, d.timeout, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("download %s: %w", shown, context.Canceled)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // drop the repeated method and URL
	}
	return fmt.Errorf("download %s: %w", shown, err)
}

// ErrPrivateAddress is wrapped by the error of a download refused because
// it would reach a loopback, private, link-local or other non-public
// address.
var ErrPrivateAddress = errors.New("address is not public")

type blockedAddrError struct {
	addr netip.Addr
	own  bool // an address of this host
}

func (e *blockedAddrError) Error() string {
	if e.own {
		return fmt.Sprintf("refused to connect to %s: %v (it is an address of this host, which reaches the host's own services; the operator can allow it with %s=1)",
			e.addr, ErrPrivateAddress, AllowPrivateEnv)
	}
	return fmt.Sprintf("refused to connect to %s: %v (loopback, private and link-local addresses are blocked; the operator can allow them with %s=1)",
		e.addr, ErrPrivateAddress, AllowPrivateEnv)
}

func (e *blockedAddrError) Unwrap() error { return ErrPrivateAddress }

// guardDial is the net.Dialer Control hook: it sees the resolved address
// about to be connected and refuses non-public ones.
func guardDial(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q: %w", address, err)
	}
	if !PublicAddr(ap.Addr()) {
		return &blockedAddrError{addr: ap.Addr()}
	}
	if own, err := hostAddr(ap.Addr()); err != nil || own {
		// A public address of the host's own reaches every service bound
		// to 0.0.0.0 or ::, which may trust local callers.
		return &blockedAddrError{addr: ap.Addr(), own: true}
	}
	return nil
}

// hostAddr reports whether addr is an address of one of this host's
// interfaces. They are listed at each connection: addresses come and go.
func hostAddr(addr netip.Addr) (bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, fmt.Errorf("list the host's addresses: %w", err)
	}
	addr = addr.Unmap()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == addr {
			return true, nil
		}
	}
	return false, nil
}

// nonPublic lists ranges that are not reachable on the public internet
// beyond what netip's predicates cover, or that embed IPv4 addresses a
// translator could turn into private ones.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"), // 6to4
	netip.MustParsePrefix("fec0::/10"), // site-local
}

// PublicAddr reports whether a download may connect to addr: a global
// unicast address outside the private, shared, documentation and
// translation ranges. IPv4-mapped IPv6 addresses are judged as IPv4.
func PublicAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || !addr.IsGlobalUnicast() || addr.IsPrivate() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}
