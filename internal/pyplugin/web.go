package pyplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nekro-go/nekro/internal/pluginhost"
)

// A Python plugin's web router (mount_router) runs in its process
// (nekro_agent/_web.py): the server's /plugins/{key}/... requests reach
// routeHandler, which sends each over the plugin's connection and writes
// back the answer as the process sends it, chunk by chunk (streamed
// answers, SSE, stream; nothing is buffered whole).
const (
	// MaxRouteBody bounds a request's body; a larger one gets 413 and
	// never reaches the plugin.
	MaxRouteBody = 1 << 20
	// RouteStartTimeout is how long a plugin has to start its answer
	// (status and headers): a handler that has not started by then gets
	// its request cancelled and the client 504. Once started, an answer
	// (an event stream) lasts as long as the client stays.
	RouteStartTimeout = 30 * time.Second
	// routeWindow is the body chunks the process may send before nekro
	// acknowledges the first (_web.py's WINDOW): the stream's channel
	// holds them all, so the connection's reader never waits for a slow
	// client.
	routeWindow = 16
	// routeCancelGrace is how long a process has to end a request nekro
	// cancelled (the client left, or the answer never started): the
	// request's task is cancelled a second after (_web.py's
	// CANCEL_GRACE). A process that does not answer by then has its event
	// loop blocked (a handler calling time.sleep, say) and is restarted,
	// as a sandbox call's missed deadline restarts it.
	routeCancelGrace = 10 * time.Second
	// routeBodies is how many requests with a body one plugin takes in
	// at once (each is held whole, and once more as JSON, until it is
	// sent to the process): others wait, within RouteStartTimeout, and a
	// body must arrive within that time too, so slow senders cannot
	// hold the slots.
	routeBodies = 32
)

// stream is one request's answer, as the connection's reader delivers
// its lines ("http.start", "http.body", then the request's answer).
type stream struct {
	ch   chan message
	over chan struct{} // closed when the process sent more than the window
}

// deliver hands m to the stream without blocking the connection's
// reader; a process that overruns the window loses the stream.
func (s *stream) deliver(m message) {
	select {
	case s.ch <- m:
	default:
		select {
		case <-s.over:
		default:
			close(s.over)
		}
	}
}

// routeRequest is what the process builds the ASGI scope from.
type routeRequest struct {
	Method  string      `json:"method"`
	Scheme  string      `json:"scheme"`
	Path    string      `json:"path"`
	RawPath string      `json:"raw_path"`
	Query   string      `json:"query"`
	Headers [][2]string `json:"headers"`
	Body    []byte      `json:"body"` // base64 in JSON
	Client  [2]any      `json:"client"`
	Server  [2]any      `json:"server"`
}

// routePart is a line of the answer: its start (status and headers,
// usually with the first chunk of the body), or a chunk of the body.
type routePart struct {
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers"`
	Body    []byte      `json:"body"` // base64 in JSON
	// More says whether more of the body follows; absent on a start
	// without a body chunk.
	More *bool `json:"more"`
}

// hopByHop are the headers of one connection, never passed on.
var hopByHop = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Transfer-Encoding": true, "Te": true, "Trailer": true, "Upgrade": true}

// routeHandler serves the plugin's routes; the server has stripped
// /plugins/{key} from the path and checked that the plugin is enabled.
type routeHandler struct{ h *host }

func (rh routeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { rh.h.serveRoute(w, r) }

func (h *host) serveRoute(w http.ResponseWriter, r *http.Request) {
	if next, err := h.admit(); err != nil {
		routeError(w, http.StatusNotFound, err.Error())
		return
	} else if next != nil { // reloaded: the new version answers
		next.serveRoute(w, r)
		return
	}
	defer h.leave()
	ctx := r.Context()
	if err := h.refusal(webCaller, time.Now()); err != nil { // its routes ended its process, again and again
		routeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	startBy := time.NewTimer(RouteStartTimeout)
	defer startBy.Stop()
	var body []byte
	release := func() {}
	if r.ContentLength != 0 {
		if r.ContentLength > MaxRouteBody {
			routeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxRouteBody))
			return
		}
		select {
		case h.bodySlots <- struct{}{}:
			var once sync.Once
			release = func() { once.Do(func() { <-h.bodySlots }) }
			defer release()
		case <-startBy.C:
			routeError(w, http.StatusServiceUnavailable, fmt.Sprintf("plugin %s is busy receiving other requests", h.plugin.Key()))
			return
		case <-ctx.Done():
			return
		}
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(RouteStartTimeout))
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, MaxRouteBody+1))
		if err != nil {
			// Closed unread, the connection is not kept: the server does
			// not wait for the rest of the body before it answers.
			r.Body.Close()
		} else {
			rc.SetReadDeadline(time.Time{}) // the server's watch for the client leaving must not time out
		}
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig) || len(body) > MaxRouteBody:
			routeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxRouteBody))
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			routeError(w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %s", RouteStartTimeout))
			return
		case err != nil:
			routeError(w, http.StatusBadRequest, "request body: "+err.Error())
			return
		}
		startBy.Reset(RouteStartTimeout) // the plugin's time starts when it has the request
	}
	waitCtx, cancel := context.WithTimeout(ctx, RouteStartTimeout)
	p, err := h.current(waitCtx)
	cancel()
	if err != nil {
		routeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	id, st := p.openStream()
	cancelled := false
	defer func() {
		if cancelled {
			go h.awaitCancelled(p, id, st)
		} else {
			p.closeStream(id)
		}
	}()
	args, _ := json.Marshal(h.routeRequest(r, body))
	err = p.send(message{ID: &id, Op: "http", Args: args})
	body, args = nil, nil
	release()
	if err != nil {
		routeError(w, http.StatusBadGateway, fmt.Sprintf("plugin %s: %v", h.plugin.Key(), err))
		return
	}
	cancelRequest := func() {
		cancelled = true
		p.send(message{ID: &id, Op: "http.cancel"})
	}
	rc := http.NewResponseController(w)
	shutdown, retired := pluginhost.Shutdown(ctx), h.retiredCh
	started := false
	for {
		select {
		case m := <-st.ch:
			switch m.Op {
			case "http.start", "http.body":
				var part routePart
				err := json.Unmarshal(m.Args, &part)
				if m.Op == "http.start" {
					if err != nil || part.Status < 200 || part.Status > 999 || started {
						h.log.Warn("python plugin sent a bad answer start", "path", r.URL.Path, "err", err)
						cancelRequest()
						h.failRoute(w, started)
						return
					}
					started = true
					startBy.Stop()
					hdr := w.Header()
					for _, kv := range part.Headers {
						k := http.CanonicalHeaderKey(latin1(kv[0]))
						if !hopByHop[k] {
							hdr.Add(k, latin1(kv[1]))
						}
					}
					w.WriteHeader(part.Status)
					if part.More == nil { // no body chunk with it
						continue
					}
				} else if err != nil || !started || part.More == nil {
					h.log.Warn("python plugin sent a bad body chunk, or one before its answer's start", "path", r.URL.Path, "err", err)
					cancelRequest()
					h.failRoute(w, started)
					return
				}
				if len(part.Body) > 0 {
					if _, err := w.Write(part.Body); err != nil { // the client left
						cancelRequest()
						return
					}
				}
				if !*part.More {
					return
				}
				rc.Flush()
				p.send(message{ID: &id, Op: "http.ack"})
			default: // the request's answer: the application returned or raised
				if len(m.Error) > 0 && !started {
					// The process logged the exception and its traceback; the
					// client learns only that the route failed.
					routeError(w, http.StatusInternalServerError, fmt.Sprintf("plugin %s: the route failed", h.plugin.Key()))
					return
				}
				if !started {
					routeError(w, http.StatusBadGateway, fmt.Sprintf("plugin %s: the route sent no answer", h.plugin.Key()))
				}
				return
			}
		case <-st.over:
			h.log.Warn("python plugin sent more of an answer than was acknowledged: the request is ended", "path", r.URL.Path)
			cancelRequest()
			h.failRoute(w, started)
			return
		case <-startBy.C:
			if !started {
				h.log.Warn("python plugin route did not start its answer in time: cancelled", "path", r.URL.Path,
					"timeout", RouteStartTimeout)
				cancelRequest()
				routeError(w, http.StatusGatewayTimeout, fmt.Sprintf("plugin %s did not answer within %s", h.plugin.Key(), RouteStartTimeout))
				return
			}
		case <-p.done:
			if len(st.ch) > 0 { // what it sent before it ended comes first
				continue
			}
			h.log.Warn("python plugin process ended during a web request", "path", r.URL.Path)
			if !started {
				routeError(w, http.StatusBadGateway, fmt.Sprintf("plugin %s: its process ended during the request; it is restarted", h.plugin.Key()))
				return
			}
			panic(http.ErrAbortHandler) // the client sees the answer cut short
		case <-ctx.Done():
			cancelRequest()
			return
		case <-shutdown:
			if started { // a stream: it ends now, the others finish
				cancelRequest()
				return
			}
			shutdown = nil
		case <-retired:
			// Reloaded or removed: a stream ends (an EventSource
			// reconnects, to the new version); the others finish here.
			if started {
				cancelRequest()
				return
			}
			retired = nil
		}
	}
}

// awaitCancelled waits for the end of a request nekro cancelled, and
// restarts the process when it does not come within routeCancelGrace.
func (h *host) awaitCancelled(p *process, id int64, st *stream) {
	defer p.closeStream(id)
	grace := time.NewTimer(routeCancelGrace)
	defer grace.Stop()
	for {
		select {
		case m := <-st.ch:
			if m.Op == "" { // the request's answer: it ended
				return
			}
			var part routePart
			if json.Unmarshal(m.Args, &part) == nil && part.More != nil && !*part.More {
				return // the answer's last chunk, sent before the cancellation arrived: it ended
			}
		case <-st.over:
			return
		case <-p.done:
			return
		case <-grace.C:
			h.log.Warn("python plugin did not end a cancelled web request: its event loop is blocked; restarting its process",
				"grace", routeCancelGrace)
			h.restart(p)
			return
		}
	}
}

// failRoute ends an answer the process got wrong: 502, or the connection
// cut when the answer had started.
func (h *host) failRoute(w http.ResponseWriter, started bool) {
	if started {
		panic(http.ErrAbortHandler)
	}
	routeError(w, http.StatusBadGateway, fmt.Sprintf("plugin %s sent a malformed answer", h.plugin.Key()))
}

// routeRequest is r as the process gets it: the path with the plugin's
// prefix, as the reference's handlers see it.
func (h *host) routeRequest(r *http.Request, body []byte) routeRequest {
	prefix := "/plugins/" + h.plugin.Key()
	req := routeRequest{Method: r.Method, Scheme: "http", Path: prefix + r.URL.Path, RawPath: prefix + r.URL.EscapedPath(),
		Query: r.URL.RawQuery, Body: body, Client: [2]any{"", 0}, Server: [2]any{"", 0}}
	if r.TLS != nil {
		req.Scheme = "https"
	}
	if r.Host != "" {
		req.Headers = append(req.Headers, [2]string{"host", r.Host})
	}
	for k, vs := range r.Header {
		if hopByHop[k] || k == "Host" {
			continue
		}
		for _, v := range vs {
			req.Headers = append(req.Headers, [2]string{strings.ToLower(k), v})
		}
	}
	if host, port, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		n, _ := strconv.Atoi(port)
		req.Client = [2]any{host, n}
	}
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if host, port, err := net.SplitHostPort(addr.String()); err == nil {
			n, _ := strconv.Atoi(port)
			req.Server = [2]any{host, n}
		}
	}
	return req
}

// latin1 turns the process's header text (each byte as the rune of the
// same value, as ASGI's latin-1) back into bytes.
func latin1(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			r = '?'
		}
		b = append(b, byte(r))
	}
	return string(b)
}

func routeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(append(b, '\n'))
}

// openStream registers a request's stream under a new request id.
func (p *process) openStream() (int64, *stream) {
	st := &stream{ch: make(chan message, 2*routeWindow+4), over: make(chan struct{})}
	p.pmu.Lock()
	defer p.pmu.Unlock()
	p.nextID++
	if p.streams == nil {
		p.streams = map[int64]*stream{}
	}
	p.streams[p.nextID] = st
	p.inflight[p.nextID] = webCaller // the process's death during it is the web callers' (judge)
	return p.nextID, st
}

func (p *process) closeStream(id int64) {
	p.pmu.Lock()
	delete(p.streams, id)
	select {
	case <-p.done: // judge has read it; keep it as it was
	default:
		delete(p.inflight, id)
	}
	p.pmu.Unlock()
}
