package pluginconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// FileName is the settings file in a plugin's data directory.
const FileName = "config.yaml"

// recheck is how often a File looks at its file for an edit made by hand
// or by another nekro process.
const recheck = time.Second

// File is a plugin's settings kept in its config.yaml. Values is cheap:
// it re-reads the file when the file changed (looked at, at most, once a
// second). A file that does not parse or fit the schema is reported by
// Err, and the last good values (or the defaults) stay in force: a typo
// in a hand edit never takes a plugin down.
type File struct {
	path   string
	schema *Schema

	mu      sync.Mutex
	values  map[string]any
	version uint64 // bumped whenever values change
	stamp   stamp  // of the file the values came from
	checked time.Time
	err     error

	raw        json.RawMessage // values encoded, for rawVersion
	rawVersion uint64
}

type stamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(fi fs.FileInfo) stamp {
	s := stamp{mod: fi.ModTime(), size: fi.Size()}
	s.ino = inode(fi)
	return s
}

// Open returns the settings kept in dir/config.yaml. A missing file is
// written with the defaults, each setting under a comment with its title
// and description, for the operator to edit.
func Open(dir string, schema *Schema) (*File, error) {
	f := &File{path: filepath.Join(dir, FileName), schema: schema, values: schema.Defaults(), version: 1}
	if _, err := os.Lstat(f.path); errors.Is(err, fs.ErrNotExist) {
		if err := f.write(f.values); err != nil {
			return nil, err
		}
	}
	f.reload(true)
	return f, nil
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Schema returns the settings' schema.
func (f *File) Schema() *Schema { return f.schema }

// Values returns the current settings (shared: do not modify) and their
// version, which changes whenever they do.
func (f *File) Values() (map[string]any, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= recheck {
		f.reloadLocked(false)
	}
	return f.values, f.version
}

// JSON returns the current settings as a JSON object and their version.
//
// It is asked on every call of a plugin with settings (a Python plugin's
// call, a Go plugin's Get), so the encoding is kept until they change.
func (f *File) JSON() (json.RawMessage, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= recheck {
		f.reloadLocked(false)
	}
	if f.rawVersion != f.version || f.raw == nil {
		f.raw, _ = json.Marshal(f.values)
		f.rawVersion = f.version
	}
	return f.raw, f.version
}

// Err reports why the file's present content is not in force, or nil.
func (f *File) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) >= recheck {
		f.reloadLocked(false)
	}
	return f.err
}

func (f *File) reload(force bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloadLocked(force)
}

func (f *File) reloadLocked(force bool) {
	f.checked = time.Now()
	fi, err := os.Stat(f.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil // deleted by hand: the values in force stay until it is back
		}
		f.err = err
		return
	}
	st := stampOf(fi)
	if !force && st == f.stamp {
		return
	}
	f.stamp = st
	values, err := f.read()
	if err != nil {
		f.err = err
		return
	}
	f.err = nil
	f.values = values
	f.version++
}

// read parses and checks the file.
func (f *File) read() (map[string]any, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.path, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	values, err := f.schema.Check(jsonShaped(raw).(map[string]any))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return values, nil
}

// Set changes the named settings, checked together, and writes the file.
// A secret given as Masked keeps its value.
func (f *File) Set(changes map[string]any) (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloadLocked(false)
	next := make(map[string]any, len(f.values))
	for k, v := range f.values {
		next[k] = v
	}
	for k, v := range changes {
		if fd, ok := f.schema.Field(k); ok && fd.Secret && v == Masked {
			continue
		}
		next[k] = v
	}
	values, err := f.schema.Check(next)
	if err != nil {
		return nil, err
	}
	if err := f.write(values); err != nil {
		return nil, err
	}
	f.values, f.err = values, nil
	f.version++
	if fi, err := os.Stat(f.path); err == nil {
		f.stamp = stampOf(fi)
	}
	f.checked = time.Now()
	return values, nil
}

// write replaces the file atomically: in schema order, each setting under
// a comment saying what it is.
func (f *File) write(values map[string]any) error {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	for _, fd := range f.schema.Fields {
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: fd.Name}
		comment := fd.Title
		if fd.Description != "" {
			if comment != "" {
				comment += ": "
			}
			comment += fd.Description
		}
		if len(fd.Choices) > 0 {
			comment += fmt.Sprintf(" (one of %v)", fd.Choices)
		}
		key.HeadComment = strings.TrimSpace(comment)
		var val yaml.Node
		if err := val.Encode(values[fd.Name]); err != nil {
			return fmt.Errorf("config: %s: %w", fd.Name, err)
		}
		if fd.Multiline {
			if s, ok := values[fd.Name].(string); ok && bytes.ContainsRune([]byte(s), '\n') {
				val.Style = yaml.LiteralStyle
			}
		}
		doc.Content = append(doc.Content, key, &val)
	}
	var buf bytes.Buffer
	buf.WriteString("# Settings of this plugin. Edit and save: a running nekro picks the change up within a second.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	enc.Close()
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// jsonShaped turns what YAML decodes (int, map[string]any, []any, ...)
// into JSON's shapes.
func jsonShaped(v any) any {
	switch v := v.(type) {
	case nil:
		return map[string]any{}
	case map[string]any:
		for k, e := range v {
			v[k] = jsonShapedValue(e)
		}
		return v
	}
	return map[string]any{}
}

func jsonShapedValue(v any) any {
	switch v := v.(type) {
	case int:
		return int64(v)
	case uint64:
		return float64(v)
	case map[string]any:
		for k, e := range v {
			v[k] = jsonShapedValue(e)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = jsonShapedValue(e)
		}
		return out
	case []any:
		for i, e := range v {
			v[i] = jsonShapedValue(e)
		}
		return v
	case time.Time:
		return v.Format(time.RFC3339)
	}
	return v
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
