// Package pluginconfig is a plugin's typed settings: the schema its author
// declares (a Go struct with tags, or a Python ConfigBase class described
// by its plugin process), validation of values against it, and the file
// that keeps them, data/plugins/<key>/config.yaml (the reference's file,
// editable by hand), re-read when it changes so a running nekro picks up
// an edit without a restart.
//
// Values are JSON-shaped: string, bool, int64 (integer fields), float64
// (number fields), []any and map[string]any. A schema is a list of fields
// in declaration order; that order is the file's and the API's.
package pluginconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Kinds of a field's value, as JSON Schema names them.
const (
	String  = "string"
	Integer = "integer"
	Number  = "number"
	Boolean = "boolean"
	Array   = "array"
	Object  = "object"
)

// Field is one setting.
type Field struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Secret      bool     `json:"secret,omitempty"`    // masked wherever it is shown
	Multiline   bool     `json:"multiline,omitempty"` // edited as a text area
	Hidden      bool     `json:"hidden,omitempty"`    // not offered in the UI
	Required    bool     `json:"required,omitempty"`  // must not be empty
	Choices     []any    `json:"choices,omitempty"`
	Min         *float64 `json:"min,omitempty"`
	Max         *float64 `json:"max,omitempty"`
	Default     any      `json:"default"`
	Nullable    bool     `json:"nullable,omitempty"` // null is a value (Python's Optional)
}

// Schema is a plugin's settings, in declaration order.
type Schema struct {
	Fields []Field
}

// Field returns the named field.
func (s *Schema) Field(name string) (*Field, bool) {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i], true
		}
	}
	return nil, false
}

func (s *Schema) names() string {
	var n []string
	for _, f := range s.Fields {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

// Defaults returns every field's default value.
func (s *Schema) Defaults() map[string]any {
	out := make(map[string]any, len(s.Fields))
	for _, f := range s.Fields {
		out[f.Name] = clone(f.Default)
	}
	return out
}

// FieldError is a value that does not fit its field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("setting %s: %s", e.Field, e.Msg) }

// Check validates values (a whole config) against the schema and returns
// them normalised: defaults for missing fields, numbers in their kinds.
// Unknown fields are an error naming them.
func (s *Schema) Check(values map[string]any) (map[string]any, error) {
	out := s.Defaults()
	for name, v := range values {
		f, ok := s.Field(name)
		if !ok {
			return nil, &FieldError{name, fmt.Sprintf("no such setting (settings: %s)", s.names())}
		}
		nv, err := f.check(v)
		if err != nil {
			return nil, err
		}
		out[name] = nv
	}
	return out, nil
}

// check validates one value and returns it in its normal form.
func (f *Field) check(v any) (any, error) {
	bad := func(format string, a ...any) (any, error) {
		return nil, &FieldError{f.Name, fmt.Sprintf(format, a...)}
	}
	if v == nil {
		if f.Nullable {
			return nil, nil
		}
		return bad("must be %s, not empty (null)", article(f.Kind))
	}
	var nv any
	switch f.Kind {
	case String:
		s, ok := v.(string)
		if !ok {
			return bad("must be a string, got %s", describe(v))
		}
		if f.Required && s == "" {
			return bad("must not be empty")
		}
		nv = s
	case Boolean:
		b, ok := v.(bool)
		if !ok {
			return bad("must be true or false, got %s", describe(v))
		}
		nv = b
	case Integer:
		n, ok := toFloat(v)
		if !ok || n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return bad("must be a whole number, got %s", describe(v))
		}
		nv = int64(n)
	case Number:
		n, ok := toFloat(v)
		if !ok || math.IsNaN(n) || math.IsInf(n, 0) {
			return bad("must be a number, got %s", describe(v))
		}
		nv = n
	case Array:
		a, ok := v.([]any)
		if !ok {
			return bad("must be a list, got %s", describe(v))
		}
		if f.Required && len(a) == 0 {
			return bad("must not be empty")
		}
		nv = a
	case Object:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("must be a mapping, got %s", describe(v))
		}
		nv = m
	default:
		nv = v // a kind nekro does not know: the plugin checks it
	}
	if n, ok := toFloat(nv); ok && (f.Kind == Integer || f.Kind == Number) {
		if f.Min != nil && n < *f.Min {
			return bad("must be at least %v, got %v", *f.Min, nv)
		}
		if f.Max != nil && n > *f.Max {
			return bad("must be at most %v, got %v", *f.Max, nv)
		}
	}
	if len(f.Choices) > 0 && !slices.ContainsFunc(f.Choices, func(c any) bool { return equal(c, nv) }) {
		var cs []string
		for _, c := range f.Choices {
			cs = append(cs, fmt.Sprint(c))
		}
		return bad("must be one of %s, got %v", strings.Join(cs, ", "), nv)
	}
	return nv, nil
}

// Parse turns the text of a command-line assignment into the field's
// value, as the reference's config API does: booleans from
// true/false/yes/no/1/0/on/off, numbers from their digits, lists and
// mappings from JSON, strings as they are. The result is checked.
func (f *Field) Parse(text string) (any, error) {
	var v any
	switch f.Kind {
	case String:
		v = text
	case Boolean:
		switch strings.ToLower(strings.TrimSpace(text)) {
		case "true", "t", "yes", "y", "1", "on":
			v = true
		case "false", "f", "no", "n", "0", "off":
			v = false
		default:
			return nil, &FieldError{f.Name, fmt.Sprintf("must be true or false, got %q", text)}
		}
	case Integer:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return nil, &FieldError{f.Name, fmt.Sprintf("must be a whole number, got %q", text)}
		}
		v = n
	case Number:
		n, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return nil, &FieldError{f.Name, fmt.Sprintf("must be a number, got %q", text)}
		}
		v = n
	default:
		if f.Nullable && strings.TrimSpace(text) == "" {
			return nil, nil
		}
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			return nil, &FieldError{f.Name, fmt.Sprintf("must be JSON (%s), got %q", article(f.Kind), text)}
		}
	}
	return f.check(v)
}

// Mask returns values with every non-empty secret replaced by "********".
func (s *Schema) Mask(values map[string]any) map[string]any {
	out := make(map[string]any, len(values))
	for k, v := range values {
		out[k] = v
		if f, ok := s.Field(k); ok && f.Secret && v != nil && v != "" {
			out[k] = Masked
		}
	}
	return out
}

// Masked stands for a secret's value wherever values are shown. Sent back
// unchanged (PUT of what GET returned), it keeps the secret.
const Masked = "********"

// JSONSchema describes the settings as a JSON Schema object, for the API
// and UI: title, description, default, enum, minimum, maximum per
// property, with "x-secret", "x-multiline" and "x-hidden" marks.
func (s *Schema) JSONSchema() map[string]any {
	props := map[string]any{}
	var order, required []string
	for _, f := range s.Fields {
		p := map[string]any{"type": f.Kind}
		if f.Nullable {
			p["type"] = []string{f.Kind, "null"}
		}
		if f.Kind == "" {
			delete(p, "type")
		}
		for k, v := range map[string]any{"title": f.Title, "description": f.Description} {
			if v != "" {
				p[k] = v
			}
		}
		p["default"] = f.Default
		if f.Secret {
			p["x-secret"] = true
			if f.Default != nil && f.Default != "" {
				p["default"] = Masked
			}
		}
		if f.Multiline {
			p["x-multiline"] = true
		}
		if f.Hidden {
			p["x-hidden"] = true
		}
		if len(f.Choices) > 0 {
			p["enum"] = f.Choices
		}
		if f.Min != nil {
			p["minimum"] = *f.Min
		}
		if f.Max != nil {
			p["maximum"] = *f.Max
		}
		props[f.Name] = p
		order = append(order, f.Name)
		if f.Required {
			required = append(required, f.Name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "x-order": order, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func equal(a, b any) bool {
	fa, oka := toFloat(a)
	fb, okb := toFloat(b)
	if oka && okb {
		return fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func describe(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprint(v)
}

func article(kind string) string {
	switch kind {
	case Integer:
		return "a whole number"
	case Number:
		return "a number"
	case Boolean:
		return "true or false"
	case Array:
		return "a list"
	case Object:
		return "a mapping"
	}
	return "a string"
}

// clone deep-copies a JSON-shaped value (defaults are handed out often).
func clone(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = clone(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = clone(e)
		}
		return out
	}
	return v
}

// ErrNoConfig is returned for a plugin that declared no settings.
var ErrNoConfig = errors.New("the plugin has no settings")
