package plugin

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/nekro-go/nekro/internal/keys"
	"github.com/nekro-go/nekro/internal/pluginbridge"
)

// Command is a chat command (MountCommand): a message "/name args..." is
// answered by the plugin at once, with no model turn.
type Command struct {
	Name        string   // what follows the prefix: "roll" answers "/roll"
	Aliases     []string // other names for it
	Description string   // one line, shown by /help
	Usage       string   // e.g. "/roll 2d6"; made from the arguments when empty
	// Permission says who may use it: "public" (anyone, the default),
	// "user" (a sender with a user id), "admin" (the chat's admins and
	// super users) or "super" (the super users the operator names).
	Permission string
}

// MountCommand mounts a chat command. In's exported fields, in order,
// take the words after the command's name (quote a word with spaces in
// "..."): string, integer, float and bool fields, optional when they
// have omitempty or a `default:"..."` tag (a JSON literal); a last
// string field takes the rest of the line. fn's text is posted in the
// chat as the answer; an error is posted as the reason the command
// failed. Mistakes panic: call it from init().
func MountCommand[In any](p *Plugin, c Command, fn func(ctx *Ctx, args In) (string, error)) {
	where := fmt.Sprintf("plugin %s: command %q", p.Key(), c.Name)
	for _, n := range append([]string{c.Name}, c.Aliases...) {
		if !keys.Ident(strings.ReplaceAll(n, "-", "_")) {
			panic(where + ": names are letters, digits, _ and -, not starting with a digit")
		}
	}
	if c.Permission == "" {
		c.Permission = "public"
	}
	if !slices.Contains([]string{"public", "user", "admin", "super"}, c.Permission) {
		panic(fmt.Sprintf("%s: permission %q is not public, user, admin or super", where, c.Permission))
	}
	if fn == nil {
		panic(where + ": nil function")
	}
	params, err := paramsOf(reflect.TypeFor[In]())
	if err != nil {
		panic(fmt.Sprintf("%s: arguments: %v", where, err))
	}
	for _, pa := range params {
		switch pa.goType.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		default:
			panic(fmt.Sprintf("%s: argument %s: a command takes words: use string, numbers or bool", where, pa.Name))
		}
	}
	if c.Usage == "" {
		c.Usage = "/" + c.Name
		for _, pa := range params {
			if pa.Optional {
				c.Usage += " [" + pa.Name + "]"
			} else {
				c.Usage += " <" + pa.Name + ">"
			}
		}
	}
	mc := &mountedCommand{Command: c, plugin: p}
	mc.run = func(ctx *Ctx, call pluginbridge.CommandCall) (string, error) {
		raw, err := wordsToArgs(params, call.Words)
		if err != nil {
			return "", fmt.Errorf("%v (usage: %s)", err, c.Usage)
		}
		var in In
		if err := decodeArgs(c.Name, params, raw, reflect.ValueOf(&in).Elem()); err != nil {
			return "", fmt.Errorf("%v (usage: %s)", err, c.Usage)
		}
		return fn(ctx, in)
	}
	p.mu.Lock()
	p.commands = append(p.commands, mc)
	p.mu.Unlock()
}

// mountedCommand is a command as the host runs it.
type mountedCommand struct {
	Command
	plugin *Plugin
	run    func(ctx *Ctx, call pluginbridge.CommandCall) (string, error)
	hidden bool // left out of /help (a Python plugin's internal command)
}

// mountRawCommand mounts on p a command implemented outside Go (a Python
// plugin's): run gets the whole call and parses its own arguments. Its
// names may hold dots (a command group's "group.sub") and any letters,
// not only ASCII ones; they have no spaces and do not start with the
// prefix character "/".
func mountRawCommand(p *Plugin, c Command, hidden bool, run func(ctx *Ctx, call pluginbridge.CommandCall) (string, error)) error {
	for _, n := range append([]string{c.Name}, c.Aliases...) {
		if n == "" || strings.IndexFunc(n, unicode.IsSpace) >= 0 || strings.HasPrefix(n, "/") {
			return fmt.Errorf("plugin %s: command %q: a name is one word, not starting with /", p.Key(), n)
		}
	}
	if c.Permission == "" {
		c.Permission = "public"
	}
	if !slices.Contains([]string{"public", "user", "admin", "super"}, c.Permission) {
		return fmt.Errorf("plugin %s: command %q: permission %q is not public, user, admin or super", p.Key(), c.Name, c.Permission)
	}
	if run == nil {
		return fmt.Errorf("plugin %s: command %q: nil function", p.Key(), c.Name)
	}
	if c.Usage == "" {
		c.Usage = "/" + c.Name
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, mc := range p.commands {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if mc.Name == n || slices.Contains(mc.Aliases, n) {
				return fmt.Errorf("plugin %s: command name %q is mounted twice", p.Key(), n)
			}
		}
	}
	p.commands = append(p.commands, &mountedCommand{Command: c, plugin: p, run: run, hidden: hidden})
	return nil
}

// wordsToArgs gives each parameter its word as a JSON value of its kind;
// a last string parameter takes the rest of the words.
func wordsToArgs(params []param, words []string) (map[string]json.RawMessage, error) {
	raw := map[string]json.RawMessage{}
	for i, pa := range params {
		if i >= len(words) {
			break
		}
		w := words[i]
		if i == len(params)-1 && pa.goType.Kind() == reflect.String {
			w = strings.Join(words[i:], " ")
		}
		var v any = w
		switch pa.goType.Kind() {
		case reflect.String:
		case reflect.Bool:
			b, err := strconv.ParseBool(w)
			if err != nil {
				return nil, fmt.Errorf("%s must be true or false, not %q", pa.Name, w)
			}
			v = b
		case reflect.Float32, reflect.Float64:
			f, err := strconv.ParseFloat(w, 64)
			if err != nil {
				return nil, fmt.Errorf("%s must be a number, not %q", pa.Name, w)
			}
			v = f
		default:
			n, err := strconv.ParseInt(w, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s must be a whole number, not %q", pa.Name, w)
			}
			v = n
		}
		b, _ := json.Marshal(v)
		raw[pa.Name] = b
	}
	if len(words) > len(params) && (len(params) == 0 || params[len(params)-1].goType.Kind() != reflect.String) {
		return nil, fmt.Errorf("too many words")
	}
	return raw, nil
}
