package mcp

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginhost"
	"github.com/nekro-go/nekro/internal/pylit"
)

// This file translates between the two descriptions of a method's
// parameters: nekro's (Python type hints, made from the Go argument
// struct's field types, or written by a Python plugin) and MCP's (a JSON
// Schema object). Out (server): Python hints to JSON Schema. In (client):
// an MCP tool's input schema to Python parameters.

// inputSchema is the JSON Schema (draft 2020-12, the MCP default, named
// in $schema) of a method's arguments: one property per parameter, in
// Python order, described by its doc text; required unless optional; an
// optional one's default when it has a literal one. No other property is
// allowed (additionalProperties: false): a call with an argument the
// method lacks fails, as a Python call with an unexpected keyword does.
func inputSchema(m *pluginhost.MethodInfo) *jsonschema.Schema {
	s := &jsonschema.Schema{Schema: "https://json-schema.org/draft/2020-12/schema", Type: "object",
		Properties: map[string]*jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	for _, p := range m.Params() {
		ps := schemaOfPy(p.PyType)
		ps.Description = strings.TrimSpace(p.Doc)
		if p.Optional {
			if def, ok := jsonOfPyLiteral(p.DefaultPy); ok && def != "null" {
				ps.Default = json.RawMessage(def)
			}
		} else {
			s.Required = append(s.Required, p.Name)
		}
		s.Properties[p.Name] = ps
		s.PropertyOrder = append(s.PropertyOrder, p.Name)
	}
	return s
}

// schemaOfPy returns the JSON Schema of a Python type hint as nekro writes
// them (int, str, float, bool, bytes, Any, dict, list[T], dict[str, T],
// Optional[T]); hints it does not know (a Python plugin's own classes)
// accept any value.
func schemaOfPy(hint string) *jsonschema.Schema {
	hint = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(hint), "typing."))
	name, arg, generic := strings.Cut(hint, "[")
	if generic {
		arg = strings.TrimSuffix(arg, "]")
	}
	switch strings.ToLower(name) {
	case "int":
		return &jsonschema.Schema{Type: "integer"}
	case "str":
		return &jsonschema.Schema{Type: "string"}
	case "float":
		return &jsonschema.Schema{Type: "number"}
	case "bool":
		return &jsonschema.Schema{Type: "boolean"}
	case "bytes":
		return &jsonschema.Schema{Type: "string", ContentEncoding: "base64"}
	case "list", "tuple", "set":
		s := &jsonschema.Schema{Type: "array"}
		if generic {
			s.Items = schemaOfPy(arg)
		}
		return s
	case "dict":
		s := &jsonschema.Schema{Type: "object"}
		if generic {
			if _, v, ok := splitTop(arg); ok {
				s.AdditionalProperties = schemaOfPy(v)
			}
		}
		return s
	case "optional":
		inner := schemaOfPy(arg)
		switch {
		case inner.Type != "":
			inner.Types, inner.Type = []string{inner.Type, "null"}, ""
			return inner
		case inner.Types == nil && inner.AnyOf == nil && inner.Items == nil && inner.Properties == nil:
			return inner // Any stays any
		}
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{inner, {Type: "null"}}}
	}
	return &jsonschema.Schema{}
}

// splitTop splits "K, V" at its top-level comma.
func splitTop(s string) (string, string, bool) {
	depth := 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true
			}
		}
	}
	return "", "", false
}

// jsonOfPyLiteral turns a Python literal nekro writes as a default (None,
// True, False, numbers, strings, lists and dicts of them) into JSON.
func jsonOfPyLiteral(py string) (string, bool) {
	py = strings.TrimSpace(py)
	switch py {
	case "":
		return "", false
	case "None":
		return "null", true
	case "True":
		return "true", true
	case "False":
		return "false", true
	}
	if strings.HasPrefix(py, "'") && strings.HasSuffix(py, "'") && len(py) >= 2 {
		inner := strings.ReplaceAll(py[1:len(py)-1], `\'`, `'`)
		b, _ := json.Marshal(inner)
		return string(b), !strings.Contains(inner, `\`)
	}
	var v any
	s := strings.NewReplacer("None", "null", "True", "true", "False", "false").Replace(py)
	if json.Unmarshal([]byte(s), &v) == nil {
		return s, true
	}
	return "", false
}

// toolParam is one Python parameter made from a property of an MCP tool's
// input schema.
type toolParam struct {
	pluginhost.Param
	// Prop is the property's name in the schema (Name is it made a Python
	// identifier).
	Prop string
	// Nullable: the schema accepts null, so None is sent, not left out.
	Nullable bool
}

// paramsOfSchema makes Python parameters of an MCP tool's input schema:
// the required properties first, in the schema's order, then the
// optional ones by name; each named as a Python identifier (a keyword or
// an invalid name gets a trailing _ or has its invalid characters
// replaced), typed from its schema, documented by its description and
// defaulting to its default, else None.
func paramsOfSchema(raw any) []toolParam {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	b, _ := json.Marshal(raw)
	json.Unmarshal(b, &s)
	required := map[string]bool{}
	var order []string
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; ok && !required[r] {
			required[r] = true
			order = append(order, r)
		}
	}
	var optional []string
	for name := range s.Properties {
		if !required[name] {
			optional = append(optional, name)
		}
	}
	sort.Strings(optional)
	order = append(order, optional...)
	var out []toolParam
	used := map[string]bool{}
	for _, prop := range order {
		var ps propSchema
		json.Unmarshal(s.Properties[prop], &ps)
		name := uniqueIdent(pyIdent(prop, "arg"), used)
		p := toolParam{Prop: prop, Param: pluginhost.Param{Name: name, Doc: oneLine(ps.Description), PyType: ps.pyType()},
			Nullable: ps.nullable()}
		if !required[prop] {
			p.Optional = true
			p.DefaultPy = "None"
			if len(ps.Default) > 0 {
				if lit, err := pylit.FromJSON(ps.Default); err == nil {
					p.DefaultPy = lit
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// propSchema is what the Python side needs of a property's schema.
type propSchema struct {
	Type        json.RawMessage       `json:"type"`
	Items       *propSchema           `json:"items"`
	AnyOf       []propSchema          `json:"anyOf"`
	OneOf       []propSchema          `json:"oneOf"`
	AddlProps   json.RawMessage       `json:"additionalProperties"`
	Properties  map[string]propSchema `json:"properties"`
	Description string                `json:"description"`
	Default     json.RawMessage       `json:"default"`
}

func (p *propSchema) types() []string {
	var one string
	if json.Unmarshal(p.Type, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	json.Unmarshal(p.Type, &many)
	for _, alt := range append(append([]propSchema(nil), p.AnyOf...), p.OneOf...) {
		many = append(many, alt.types()...)
	}
	return many
}

func (p *propSchema) nullable() bool {
	for _, t := range p.types() {
		if t == "null" {
			return true
		}
	}
	return false
}

// pyType is the Python hint of a property's schema: str, int, float,
// bool, list[...], dict or dict[str, ...], Optional[...] when it may be
// null, Any when it may be several things or says nothing.
func (p *propSchema) pyType() string {
	var kinds []string
	nullable := false
	for _, t := range p.types() {
		if t == "null" {
			nullable = true
		} else if !contains(kinds, t) {
			kinds = append(kinds, t)
		}
	}
	hint := "Any"
	if len(kinds) == 1 {
		switch kinds[0] {
		case "string":
			hint = "str"
		case "integer":
			hint = "int"
		case "number":
			hint = "float"
		case "boolean":
			hint = "bool"
		case "array":
			hint = "list"
			if p.Items != nil {
				hint = "list[" + p.Items.pyType() + "]"
			}
		case "object":
			hint = "dict"
			var addl propSchema
			if len(p.AddlProps) > 0 && string(p.AddlProps) != "true" && string(p.AddlProps) != "false" &&
				json.Unmarshal(p.AddlProps, &addl) == nil && len(p.Properties) == 0 {
				if t := addl.pyType(); t != "Any" {
					hint = "dict[str, " + t + "]"
				}
			}
		}
	}
	if nullable && hint != "Any" {
		hint = "Optional[" + hint + "]"
	}
	return hint
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pyKeywords are the names a parameter or method may not take.
var pyKeywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`False None True and as assert async await break class continue def del
		elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield
		print exit`) {
		pyKeywords[k] = true
	}
}

// pyIdent makes s a Python identifier: characters other than ASCII
// letters, digits and _ become _, a leading digit or _ gets prefix
// before it, and a keyword gets a trailing _.
func pyIdent(s, prefix string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" || out[0] == '_' || ('0' <= out[0] && out[0] <= '9') {
		out = prefix + "_" + strings.TrimLeft(out, "_")
	}
	if pyKeywords[out] {
		out += "_"
	}
	if !keys.Ident(out) {
		return prefix
	}
	return out
}

// uniqueIdent returns name, or name_2, name_3, ... if taken, and marks it
// taken.
func uniqueIdent(name string, used map[string]bool) string {
	out := name
	for i := 2; used[out]; i++ {
		out = fmt.Sprintf("%s_%d", name, i)
	}
	used[out] = true
	return out
}

// oneLine squeezes a description into one line of text.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
