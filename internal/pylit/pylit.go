// Package pylit writes JSON values as Python literals, for the defaults in
// the Python signatures the sandbox's stubs and the prompt show.
package pylit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// FromJSON returns the Python literal of one JSON value: null, true and
// false become None, True and False, numbers keep their digits, strings
// stay JSON strings (valid Python literals), and object keys are sorted.
func FromJSON(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	var b strings.Builder
	write(&b, v)
	return b.String(), nil
}

func write(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case json.Number:
		b.WriteString(string(v))
	case string:
		s, _ := json.Marshal(v) // a JSON string is a valid Python string literal
		b.Write(s)
	case []any:
		b.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			write(b, item)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			write(b, k)
			b.WriteString(": ")
			write(b, v[k])
		}
		b.WriteByte('}')
	}
}
