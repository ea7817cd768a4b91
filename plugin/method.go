package plugin

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginbridge"
	"github.com/nekro-go/nekro/internal/pylit"
)

// MethodType decides what happens to a sandbox method's result.
type MethodType int

const (
	// Tool returns its result (any JSON-encodable value) to the calling code.
	Tool MethodType = iota + 1
	// Agent returns a string, ends the run, and the string goes back to the
	// model, which answers in a new round.
	Agent
	// Behavior returns a string to the code and records it in the chat as a
	// system message; it does not start a new round.
	Behavior
	// MultimodalAgent returns content parts (text and images), ends the run,
	// and the parts go back to the model for a new round.
	MultimodalAgent
)

// String returns the type's name as the reference spells it (TOOL, AGENT, ...).
func (t MethodType) String() string {
	switch t {
	case Tool:
		return "TOOL"
	case Agent:
		return "AGENT"
	case Behavior:
		return "BEHAVIOR"
	case MultimodalAgent:
		return "MULTIMODAL_AGENT"
	}
	return fmt.Sprintf("MethodType(%d)", int(t))
}

// EndsRun reports whether a call of this type ends the sandbox run.
func (t MethodType) EndsRun() bool { return t == Agent || t == MultimodalAgent }

// Method describes a sandbox method when it is mounted.
type Method struct {
	Type MethodType
	// Name is the Python function the AI's code calls: a Python identifier,
	// not starting with "_", unique across enabled plugins.
	Name string
	// Description is one line for people (CLI, web UI).
	Description string
	// Doc is the full text the AI reads: a summary line, then Returns:
	// and Example: sections. It becomes the stub's docstring and the
	// method's entry in the prompt, with an Args: section made from the
	// parameters' `jsonschema:"..."` tags (one written here is replaced;
	// a parameter without a tag keeps its line from it).
	Doc string
	// Timeout bounds one call; zero means the runtime's default. The call's
	// Ctx is cancelled when it passes, and the caller gets an error.
	Timeout time.Duration
}

// mountedMethod is a mounted sandbox method: its description, its
// parameters and a raw entry point taking JSON arguments. The host sees it
// as a pluginhost.MethodInfo.
type mountedMethod struct {
	Method
	plugin     *Plugin
	params     []param
	resultType reflect.Type
	invoke     func(ctx *Ctx, args map[string]json.RawMessage) (any, error)
	// rawResult, for a method mounted by the host from outside Go (a
	// Python plugin's): its result type hint; invoke returns JSON.
	rawResult string
}

// resultPyType is the Python type hint of the method's result.
func (m *mountedMethod) resultPyType() string {
	if m.resultType == nil {
		return m.rawResult
	}
	return pyType(m.resultType)
}

// param is one parameter of a sandbox method, from one field of its
// arguments struct: what the host sees of it (DefaultPy is "None" for an
// optional field without a `default:"..."` tag), and how to decode it.
type param struct {
	pluginbridge.Param

	goType      reflect.Type
	field       []int
	defaultJSON json.RawMessage
}

// ArgumentError is returned when the code passes a wrong or missing argument.
// Its message names the parameter and the expected Python type.
type ArgumentError struct {
	Method, Param, Msg string
}

func (e *ArgumentError) Error() string {
	if e.Param == "" {
		return fmt.Sprintf("%s(): %s", e.Method, e.Msg)
	}
	return fmt.Sprintf("%s(): argument '%s' %s", e.Method, e.Param, e.Msg)
}

// MountSandboxMethod adds a method the sandboxed code can call.
//
// In must be a struct: its exported fields, in order, are the Python
// parameters. The json tag names a parameter, `jsonschema:"..."` describes
// it (the text becomes its line in the Args: section the AI reads), and
// omitempty or a pointer makes it optional (default None, or the
// JSON literal in a `default:"..."` tag). Out must fit the method type:
// any JSON-encodable value for Tool, string for Agent and Behavior,
// []ContentPart for MultimodalAgent.
//
// Mistakes panic, naming the plugin and the method: call it from init().
func MountSandboxMethod[In, Out any](p *Plugin, m Method, fn func(ctx *Ctx, args In) (Out, error)) {
	where := fmt.Sprintf("plugin %s: method %q", p.Key(), m.Name)
	if fn == nil {
		panic(where + ": nil function")
	}
	var err error
	if m, err = checkMethod(p, m); err != nil {
		panic(where + ": " + err.Error())
	}
	inType := reflect.TypeFor[In]()
	outType := reflect.TypeFor[Out]()
	params, err := paramsOf(inType)
	if err != nil {
		panic(fmt.Sprintf("%s: arguments %s: %v", where, inType, err))
	}
	if err := checkResultType(m.Type, outType); err != nil {
		panic(fmt.Sprintf("%s: %v", where, err))
	}
	info := &mountedMethod{Method: m, plugin: p, params: params, resultType: outType}
	info.invoke = func(ctx *Ctx, raw map[string]json.RawMessage) (any, error) {
		var in In
		if err := decodeArgs(m.Name, params, raw, reflect.ValueOf(&in).Elem()); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	}
	p.methods = append(p.methods, info)
}

// checkMethod checks what every mounted method needs, Go or not, and
// fills Description from Doc.
func checkMethod(p *Plugin, m Method) (Method, error) {
	if !keys.Ident(m.Name) || strings.HasPrefix(m.Name, "_") || pyKeywords[m.Name] {
		return m, fmt.Errorf("name must be a Python identifier, not a keyword, not starting with _")
	}
	for _, other := range p.methods {
		if other.Name == m.Name {
			return m, fmt.Errorf("mounted twice")
		}
	}
	if strings.TrimSpace(m.Doc) == "" {
		return m, fmt.Errorf("Doc is empty; the AI learns the method only from it")
	}
	if m.Description == "" {
		m.Description = strings.SplitN(strings.TrimSpace(m.Doc), "\n", 2)[0]
	}
	if m.Type < Tool || m.Type > MultimodalAgent {
		return m, fmt.Errorf("unknown method type %d", int(m.Type))
	}
	return m, nil
}

// mountRaw mounts a method implemented outside Go (a Python plugin's):
// the host gives its parameters and result type as Python sees them, and
// a call that takes and returns JSON. Arguments are checked here for
// unknown and missing names; the implementation checks their types.
func mountRaw(p *Plugin, m Method, params []param, result string,
	call func(ctx *Ctx, args map[string]json.RawMessage) (json.RawMessage, error)) error {
	if strings.TrimSpace(m.Doc) == "" {
		m.Doc = m.Description // a Python function may have no docstring
	}
	m, err := checkMethod(p, m)
	if err != nil {
		return fmt.Errorf("plugin %s: method %q: %w", p.Key(), m.Name, err)
	}
	seen := map[string]bool{}
	for _, pa := range params {
		if !keys.Ident(pa.Name) || pyKeywords[pa.Name] || seen[pa.Name] {
			return fmt.Errorf("plugin %s: method %q: parameter %q is not a Python identifier or appears twice", p.Key(), m.Name, pa.Name)
		}
		seen[pa.Name] = true
	}
	info := &mountedMethod{Method: m, plugin: p, params: params, rawResult: result}
	info.invoke = func(ctx *Ctx, raw map[string]json.RawMessage) (any, error) {
		for name := range raw {
			if !seen[name] {
				return nil, &ArgumentError{Method: m.Name, Msg: fmt.Sprintf("got an unexpected argument '%s'", name)}
			}
		}
		for _, pa := range params {
			if _, ok := raw[pa.Name]; !ok && !pa.Optional {
				return nil, &ArgumentError{Method: m.Name, Param: pa.Name, Msg: fmt.Sprintf("is missing (expected %s)", pa.PyType)}
			}
		}
		return call(ctx, raw)
	}
	p.methods = append(p.methods, info)
	return nil
}

func checkResultType(t MethodType, out reflect.Type) error {
	switch t {
	case Tool:
		if err := checkGoType(out, true); err != nil {
			return fmt.Errorf("TOOL result %s is not JSON-encodable: %v", out, err)
		}
	case Agent, Behavior:
		if out.Kind() != reflect.String {
			return fmt.Errorf("%s methods must return a string, not %s", t, out)
		}
	case MultimodalAgent:
		if out != reflect.TypeFor[[]ContentPart]() {
			return fmt.Errorf("MULTIMODAL_AGENT methods must return []plugin.ContentPart, not %s", out)
		}
	default:
		return fmt.Errorf("unknown method type %d (use plugin.Tool, Agent, Behavior or MultimodalAgent)", int(t))
	}
	return nil
}

// call decodes and checks args against the method's parameters, runs the
// method and returns its result encoded as JSON. A bad argument gives an
// *ArgumentError; the method's own error is returned unchanged. It does
// not recover panics: the caller (the RPC server) does.
func (m *mountedMethod) call(ctx *Ctx, args map[string]json.RawMessage) (json.RawMessage, error) {
	out, err := m.invoke(ctx, args)
	if err != nil {
		return nil, err
	}
	if raw, ok := out.(json.RawMessage); ok && m.resultType == nil {
		return m.checkRaw(raw)
	}
	if m.Type == MultimodalAgent {
		for i, part := range out.([]ContentPart) {
			if err := part.validate(); err != nil {
				return nil, fmt.Errorf("%s returned an invalid content part %d: %w", m.Name, i, err)
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%s returned a value that cannot be encoded as JSON: %w", m.Name, err)
	}
	return b, nil
}

// checkRaw holds a result from outside Go to what its method type
// promises: a string for AGENT and BEHAVIOR, valid content parts for
// MULTIMODAL_AGENT, JSON for TOOL.
func (m *mountedMethod) checkRaw(raw json.RawMessage) (json.RawMessage, error) {
	switch m.Type {
	case Agent, Behavior:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%s is a %s method and must return a string", m.Name, m.Type)
		}
	case MultimodalAgent:
		var parts []ContentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, fmt.Errorf("%s must return a list of content parts: %w", m.Name, err)
		}
		for i, part := range parts {
			if err := part.validate(); err != nil {
				return nil, fmt.Errorf("%s returned an invalid content part %d: %w", m.Name, i, err)
			}
		}
	default:
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%s returned invalid JSON", m.Name)
		}
	}
	return raw, nil
}

func paramsOf(t reflect.Type) ([]param, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("must be a struct (use struct{} for no arguments)")
	}
	var params []param
	seen := map[string]bool{}
	optionalSeen := ""
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			return nil, fmt.Errorf("embedded field %s is not supported; name the field", f.Name)
		}
		name, optional, ok := jsonField(f)
		if !ok {
			continue
		}
		if !keys.Ident(name) || pyKeywords[name] {
			return nil, fmt.Errorf("field %s: parameter name %q is not a Python identifier", f.Name, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("parameter %q appears twice", name)
		}
		seen[name] = true
		if err := checkGoType(f.Type, false); err != nil {
			return nil, fmt.Errorf("field %s: %v", f.Name, err)
		}
		p := param{Param: pluginbridge.Param{Name: name, Doc: f.Tag.Get("jsonschema"), PyType: pyType(f.Type), Optional: optional},
			goType: f.Type, field: f.Index}
		if def, ok := f.Tag.Lookup("default"); ok {
			if !p.Optional {
				return nil, fmt.Errorf("field %s has a default but is not optional (add omitempty or use a pointer)", f.Name)
			}
			if err := checkValue(f.Type, []byte(def)); err != nil {
				return nil, fmt.Errorf("field %s: default %s: %v", f.Name, def, err)
			}
			p.defaultJSON = json.RawMessage(def)
			py, err := pylit.FromJSON([]byte(def))
			if err != nil {
				return nil, fmt.Errorf("field %s: default %s: %v", f.Name, def, err)
			}
			p.DefaultPy = py
		} else if p.Optional {
			p.DefaultPy = "None"
		}
		if p.Optional {
			optionalSeen = name
		} else if optionalSeen != "" {
			return nil, fmt.Errorf("required parameter %q follows optional %q; put optional fields last", name, optionalSeen)
		}
		params = append(params, p)
	}
	return params, nil
}

func decodeArgs(method string, params []param, raw map[string]json.RawMessage, dst reflect.Value) error {
	for name := range raw {
		if !slices.ContainsFunc(params, func(p param) bool { return p.Name == name }) {
			return &ArgumentError{Method: method, Msg: fmt.Sprintf("got an unexpected argument '%s'", name)}
		}
	}
	for _, p := range params {
		v, ok := raw[p.Name]
		if !ok || (p.Optional && string(v) == "null") {
			if p.defaultJSON == nil {
				if !p.Optional {
					return &ArgumentError{Method: method, Param: p.Name, Msg: fmt.Sprintf("is missing (expected %s)", p.PyType)}
				}
				continue
			}
			v = p.defaultJSON
		}
		if err := checkValue(p.goType, v); err != nil {
			return &ArgumentError{Method: method, Param: p.Name, Msg: err.Error()}
		}
		if err := json.Unmarshal(v, dst.FieldByIndex(p.field).Addr().Interface()); err != nil {
			return &ArgumentError{Method: method, Param: p.Name, Msg: fmt.Sprintf("could not be decoded as %s: %v", p.PyType, err)}
		}
	}
	return nil
}

var pyKeywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`False None True and as assert async await break class continue def del
		elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield
		print exit`) {
		pyKeywords[k] = true
	}
}
