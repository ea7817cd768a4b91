package plugin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// This file maps Go types to Python type hints and checks JSON values sent
// by sandboxed code against the Go type of a parameter, so that a wrong
// argument is refused with a message in Python's terms before the plugin
// runs.

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	bytesType      = reflect.TypeFor[[]byte]()
)

// checkGoType refuses types that cannot cross the JSON boundary.
func checkGoType(t reflect.Type, result bool) error {
	if t == rawMessageType || t == bytesType {
		return nil
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Interface,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return nil
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return checkGoType(t.Elem(), result)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("map keys must be strings, not %s", t.Key())
		}
		return checkGoType(t.Elem(), result)
	case reflect.Struct:
		if result {
			return nil // encoding/json handles structs, including time.Time
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && f.Tag.Get("json") != "-" {
				if err := checkGoType(f.Type, result); err != nil {
					return fmt.Errorf("%s.%s: %v", t.Name(), f.Name, err)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("type %s cannot be passed as JSON", t)
}

// pyType returns the Python type hint for a Go type.
func pyType(t reflect.Type) string {
	switch {
	case t == rawMessageType:
		return "Any"
	case t == bytesType:
		return "bytes"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "str"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Pointer:
		return "Optional[" + pyType(t.Elem()) + "]"
	case reflect.Slice, reflect.Array:
		return "list[" + pyType(t.Elem()) + "]"
	case reflect.Map:
		return "dict[str, " + pyType(t.Elem()) + "]"
	case reflect.Struct:
		return "dict"
	}
	return "Any"
}

// pyTypeOfJSON names the Python type of a decoded JSON value.
func pyTypeOfJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case string:
		return "str"
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return "float"
		}
		return "int"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// checkValue checks raw JSON against Go type t.
func checkValue(t reflect.Type, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("is not one JSON value")
	}
	return checkDecoded(t, v)
}

func mismatch(want string, v any) error {
	s := fmt.Sprint(v)
	if str, ok := v.(string); ok {
		s = strconv.Quote(str)
	}
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	if v == nil {
		return fmt.Errorf("must be %s, got None", want)
	}
	return fmt.Errorf("must be %s, got %s (%s)", want, pyTypeOfJSON(v), s)
}

func checkDecoded(t reflect.Type, v any) error {
	if t == rawMessageType {
		return nil
	}
	if t == bytesType {
		s, ok := v.(string)
		if !ok {
			return mismatch("bytes", v)
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			return fmt.Errorf("must be bytes (sent base64-encoded): %v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.Pointer:
		if v == nil {
			return nil
		}
		return checkDecoded(t.Elem(), v)
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return mismatch("bool", v)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return mismatch("str", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok || pyTypeOfJSON(v) != "int" {
			return mismatch("int", v)
		}
		i, err := strconv.ParseInt(string(n), 10, t.Bits())
		if err != nil {
			return fmt.Errorf("must be an int that fits in %d bits, got %s", t.Bits(), n)
		}
		_ = i
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok || pyTypeOfJSON(v) != "int" {
			return mismatch("int", v)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return fmt.Errorf("must be a non-negative int that fits in %d bits, got %s", t.Bits(), n)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return mismatch("float", v)
		}
		f, err := strconv.ParseFloat(string(n), t.Bits())
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("must be a float in range, got %s", n)
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return mismatch("list", v)
		}
		if t.Kind() == reflect.Array && len(list) != t.Len() {
			return fmt.Errorf("must be a list of %d items, got %d", t.Len(), len(list))
		}
		for i, item := range list {
			if err := checkDecoded(t.Elem(), item); err != nil {
				return fmt.Errorf("item [%d] %w", i, err)
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch("dict", v)
		}
		for k, item := range m {
			if err := checkDecoded(t.Elem(), item); err != nil {
				return fmt.Errorf("key %q %w", k, err)
			}
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch("dict", v)
		}
		return checkStruct(t, m)
	default:
		return fmt.Errorf("has an unsupported type %s", t)
	}
	return nil
}

func checkStruct(t reflect.Type, m map[string]any) error {
	known := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, optional, ok := jsonField(f)
		if !ok {
			continue
		}
		known[name] = true
		v, ok := m[name]
		if !ok {
			if !optional {
				return fmt.Errorf("is missing key %q (%s)", name, pyType(f.Type))
			}
			continue
		}
		if err := checkDecoded(f.Type, v); err != nil {
			return fmt.Errorf("key %q %w", name, err)
		}
	}
	for k := range m {
		if !known[k] {
			return fmt.Errorf("has an unexpected key %q", k)
		}
	}
	return nil
}

// jsonField reads a struct field as encoding/json does: its JSON name
// (the tag's, else the field's), whether it is optional (a pointer, or
// omitempty among the tag's options), and false for a field the tag
// leaves out ("-").
func jsonField(f reflect.StructField) (name string, optional, ok bool) {
	name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return "", false, false
	}
	if name == "" {
		name = f.Name
	}
	optional = f.Type.Kind() == reflect.Pointer || slices.Contains(strings.Split(opts, ","), "omitempty")
	return name, optional, true
}
