package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"
)

// EnvConfig names the MCP servers' config file when --mcp-config is not
// given.
const EnvConfig = "NEKRO_MCP_CONFIG"

// ServerSpec is one MCP server of the config file.
type ServerSpec struct {
	// Name is the server's name in the file; Module is it made a Python
	// identifier: the plugin is mcp.<Module>, its methods <Module>_<tool>.
	Name, Module string
	// A stdio server: the command, its arguments, its environment (added
	// to a minimal one: PATH, HOME, USER, LANG, TZ, TMPDIR; nekro's own
	// variables never reach it) and its working directory.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	// An HTTP server: its URL (streamable HTTP, or SSE with "type":"sse")
	// and the headers every request carries.
	URL     string
	Headers map[string]string
	SSE     bool
	// Timeout bounds each call ("timeout", in seconds); zero is nekro's
	// --call-timeout.
	Timeout time.Duration
}

// LoadConfig reads the config file desktop MCP clients use:
//
//	{"mcpServers": {"NAME": {"command": "...", "args": [...], "env": {...}},
//	                "OTHER": {"url": "https://...", "headers": {...}}}}
//
// Also understood: "type" (stdio, http, streamable-http or sse), "cwd",
// "timeout" (seconds per call) and "disabled" (true leaves the server
// out). Unknown fields are logged and ignored; a malformed entry is an
// error naming the file and the server.
func LoadConfig(path string, log *slog.Logger) ([]ServerSpec, error) {
	if log == nil {
		log = slog.Default()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--mcp-config: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("--mcp-config %s: not a JSON object: %w", path, err)
	}
	for k := range top {
		if k != "mcpServers" {
			log.Warn("MCP config: unknown top-level field ignored", "file", path, "field", k)
		}
	}
	var servers map[string]json.RawMessage
	if raw, ok := top["mcpServers"]; ok {
		if err := json.Unmarshal(raw, &servers); err != nil {
			return nil, fmt.Errorf("--mcp-config %s: mcpServers must be an object of servers by name: %w", path, err)
		}
	} else {
		log.Warn("MCP config has no mcpServers: no MCP server is used", "file", path)
	}
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []ServerSpec
	var errs []error
	modules := map[string]string{}
	for _, name := range names {
		spec, skip, err := parseServer(name, servers[name], func(field string) {
			log.Warn("MCP config: unknown field ignored", "file", path, "server", name, "field", field)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("--mcp-config %s: server %q: %w", path, name, err))
			continue
		}
		if skip {
			log.Info("MCP server disabled in its config", "file", path, "server", name)
			continue
		}
		if other, dup := modules[spec.Module]; dup {
			errs = append(errs, fmt.Errorf("--mcp-config %s: servers %q and %q both become plugin mcp.%s: rename one", path, other, name, spec.Module))
			continue
		}
		modules[spec.Module] = name
		out = append(out, spec)
	}
	return out, errors.Join(errs...)
}

// parseServer reads one server's entry.
func parseServer(name string, raw json.RawMessage, unknown func(string)) (spec ServerSpec, disabled bool, err error) {
	spec = ServerSpec{Name: name, Module: moduleName(name)}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return spec, false, fmt.Errorf("must be an object with \"command\" (stdio) or \"url\" (HTTP)")
	}
	get := func(field string, dst any, want string) error {
		v, ok := fields[field]
		if !ok || string(v) == "null" {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("field %q must be %s", field, want)
		}
		return nil
	}
	var typ string
	var timeout float64
	for _, e := range []error{
		get("command", &spec.Command, "a string"),
		get("args", &spec.Args, "a list of strings"),
		get("env", &spec.Env, "an object of strings"),
		get("cwd", &spec.Cwd, "a string"),
		get("url", &spec.URL, "a string"),
		get("headers", &spec.Headers, "an object of strings"),
		get("type", &typ, "a string"),
		get("timeout", &timeout, "a number of seconds"),
		get("disabled", &disabled, "true or false"),
	} {
		if e != nil {
			return spec, false, e
		}
	}
	known := map[string]bool{"command": true, "args": true, "env": true, "cwd": true, "url": true, "headers": true,
		"type": true, "timeout": true, "disabled": true}
	var extra []string
	for k := range fields {
		if !known[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		unknown(k)
	}
	if timeout < 0 {
		return spec, false, fmt.Errorf("field \"timeout\" must not be negative")
	}
	spec.Timeout = time.Duration(timeout * float64(time.Second))
	switch typ {
	case "", "stdio", "http", "streamable-http", "streamableHttp", "streamable_http":
	case "sse":
		spec.SSE = true
	default:
		return spec, false, fmt.Errorf("type %q is not stdio, http, streamable-http or sse", typ)
	}
	switch {
	case spec.Command != "" && spec.URL != "":
		return spec, false, fmt.Errorf("has both \"command\" and \"url\": choose stdio or HTTP")
	case spec.Command == "" && spec.URL == "":
		return spec, false, fmt.Errorf("needs \"command\" (a stdio server) or \"url\" (an HTTP server)")
	case spec.Command != "" && (typ == "http" || typ == "sse" || typ == "streamable-http"):
		return spec, false, fmt.Errorf("type %q needs \"url\", not \"command\"", typ)
	case spec.URL != "" && typ == "stdio":
		return spec, false, fmt.Errorf("type \"stdio\" needs \"command\", not \"url\"")
	case spec.URL != "" && (len(spec.Args) > 0 || len(spec.Env) > 0 || spec.Cwd != ""):
		return spec, false, fmt.Errorf("args, env and cwd are for stdio servers; an HTTP server takes url and headers")
	case spec.Command != "" && len(spec.Headers) > 0:
		return spec, false, fmt.Errorf("headers are for HTTP servers; a stdio server takes command, args and env")
	}
	return spec, disabled, nil
}

// moduleName makes a server's name the module of its plugin key: a
// Python identifier (other characters become _, a leading digit or _
// gets "mcp_" before it).
func moduleName(name string) string { return pyIdent(name, "mcp") }
