package pluginconfig

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Reflect builds the schema of a Go plugin's settings from defaults, a
// struct value (plugin.MountConfig's). Each exported field is a setting
// named by its json tag (or its Go name), with its value in defaults as
// default, described by the tags
//
//	title:"API key" description:"..." secret:"true" multiline:"true"
//	hidden:"true" required:"true" choices:"fast,slow" min:"1" max:"60"
//
// Choices are parsed in the field's kind. A field tagged json:"-" is not
// a setting.
func Reflect(defaults any) (*Schema, error) {
	v := reflect.ValueOf(defaults)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, fmt.Errorf("config: the defaults are a nil pointer")
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: the settings must be a struct, not %s", v.Type())
	}
	t := v.Type()
	for i := range t.NumField() {
		if sf := t.Field(i); sf.IsExported() && sf.Tag.Get("json") != "-" && kindOf(sf.Type) == "" {
			return nil, fmt.Errorf("config: field %s: %s is not a setting type (use string, bool, numbers, slices, maps or structs)", sf.Name, sf.Type)
		}
	}
	// The defaults, as JSON values: what the file and the API hold.
	raw, err := json.Marshal(v.Interface())
	if err != nil {
		return nil, fmt.Errorf("config: the defaults cannot be written as JSON: %w", err)
	}
	var defs map[string]any
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	s := &Schema{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() || sf.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := Field{Name: name, Kind: kindOf(sf.Type), Title: sf.Tag.Get("title"), Description: sf.Tag.Get("description"),
			Secret: sf.Tag.Get("secret") == "true", Multiline: sf.Tag.Get("multiline") == "true",
			Hidden: sf.Tag.Get("hidden") == "true", Required: sf.Tag.Get("required") == "true",
			Nullable: sf.Type.Kind() == reflect.Pointer}
		for _, b := range []struct {
			tag string
			dst **float64
		}{{"min", &f.Min}, {"max", &f.Max}} {
			if text := sf.Tag.Get(b.tag); text != "" {
				n, err := strconv.ParseFloat(text, 64)
				if err != nil {
					return nil, fmt.Errorf("config: field %s: %s:%q is not a number", sf.Name, b.tag, text)
				}
				*b.dst = &n
			}
		}
		if text := sf.Tag.Get("choices"); text != "" {
			plain := Field{Name: f.Name, Kind: f.Kind}
			for _, c := range strings.Split(text, ",") {
				v, err := plain.Parse(strings.TrimSpace(c))
				if err != nil {
					return nil, fmt.Errorf("config: field %s: choice %q: %w", sf.Name, c, err)
				}
				f.Choices = append(f.Choices, v)
			}
		}
		f.Default = defs[name]
		def, err := (&Field{Name: f.Name, Kind: f.Kind, Nullable: true}).check(f.Default)
		if err != nil {
			return nil, fmt.Errorf("config: default of %w", err)
		}
		f.Default = emptyFor(f, def)
		s.Fields = append(s.Fields, f)
	}
	if len(s.Fields) == 0 {
		return nil, fmt.Errorf("config: %s has no exported fields", t)
	}
	return s, nil
}

func kindOf(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return String
	case reflect.Bool:
		return Boolean
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Integer
	case reflect.Float32, reflect.Float64:
		return Number
	case reflect.Slice, reflect.Array:
		return Array
	case reflect.Map, reflect.Struct:
		return Object
	}
	return ""
}

// Fields reads a schema described as JSON (a Python plugin's ConfigBase
// fields, sent by its process), checking each default against its field.
func Fields(raw json.RawMessage) (*Schema, error) {
	var fields []Field
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	s := &Schema{}
	seen := map[string]bool{}
	for _, f := range fields {
		if f.Name == "" || seen[f.Name] {
			return nil, fmt.Errorf("config schema: a field is unnamed or named twice (%q)", f.Name)
		}
		seen[f.Name] = true
		if f.Default != nil {
			d, err := (&Field{Name: f.Name, Kind: f.Kind, Nullable: true}).check(f.Default)
			if err != nil {
				return nil, fmt.Errorf("config schema: default of %w", err)
			}
			f.Default = d
		}
		f.Default = emptyFor(f, f.Default)
		s.Fields = append(s.Fields, f)
	}
	return s, nil
}

// emptyFor gives a list or mapping that may not be null an empty default
// in place of null (a nil Go slice or map).
func emptyFor(f Field, def any) any {
	if def != nil || f.Nullable {
		return def
	}
	switch f.Kind {
	case Array:
		return []any{}
	case Object:
		return map[string]any{}
	}
	return def
}
