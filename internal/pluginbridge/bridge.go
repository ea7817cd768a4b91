// Package pluginbridge lets internal/pluginhost call the parts of package
// plugin that only the host uses, with their own types, without
// exporting them to plugin authors (package plugin is their face;
// pluginhost the host's, as database/sql/driver and database/sql are).
//
// Package plugin declares an unexported type, hostSide, whose exported
// methods are everything the host does to plugins and authors cannot
// (plugin/bridge.go), and embeds Core[hostSide] in plugin.Plugin under
// an unexported name. Core's one method is unexported, so it gives
// authors nothing, but it makes *plugin.Plugin name hostSide; Host
// returns that type's value to pluginhost, which calls its methods as
// any other: checked by the compiler, followed by go-to-definition.
// Nothing is set at run time, and nothing else may use this package.
package pluginbridge

import (
	"io"
	"time"
)

// Core names H, the type whose methods are the host's side of a plugin
// package. It has no fields and no exported methods: embedded in that
// package's plugin type it adds nothing authors can use.
type Core[H any] struct{}

// side returns the zero H; it is promoted into the embedding plugin type,
// which is how Host finds H.
func (Core[H]) side() H {
	var h H
	return h
}

// Host returns the host's side of the plugin package whose plugin type P
// embeds a Core[H]: pluginhost calls it as Host[*plugin.Plugin](), and
// H, plugin's own unexported type, is inferred. H is a zero-size value
// with only methods; keeping it is free.
func Host[P interface{ side() H }, H any]() H {
	var h H
	return h
}

// Param is one parameter of a sandbox method, as both sides describe it
// (pluginhost.Param has the same fields and converts to and from it).
type Param struct {
	Name      string // Python parameter name (the field's json name)
	Doc       string // from the field's `jsonschema:"..."` tag
	PyType    string // Python type hint, e.g. "int", "list[str]", "Optional[dict]"
	Optional  bool   // omitempty or pointer field
	DefaultPy string // the Python default; empty for required parameters
}

// CommandCall is one use of a chat command, as the host hands it to the
// command: the words after its name (quotes removed), the same text as
// typed, and who typed it. Go commands read Words; commands implemented
// outside Go (a Python plugin's) read the rest.
type CommandCall struct {
	Words []string
	// Line is the text after the command's name, trimmed, quotes kept.
	Line string
	// UserName is the sender's display name ("" when unknown).
	UserName string
	// SuperUser: the sender is one of the operator's super users;
	// Admin: the sender administers the chat.
	SuperUser, Admin bool
	// Wait, when not nil, lets the command ask the sender a question
	// (Nekro Agent's CmdCtl.wait): the sender's next message in the chat
	// answers it. nil where nobody can answer.
	Wait func(CommandWait)
	// Attach, when not nil, posts a file with the command's answer
	// (kind "image" or "file"; an image must be one).
	Attach func(name, kind string, content io.Reader) error
}

// CommandWait is a command's question to its sender: the sender's next
// message in the same chat that is not a command runs the command
// Callback, with that message's text, then Extra, as its arguments. A
// command the sender uses meanwhile, or Timeout passing, cancels it
// (TimeoutMessage, when not empty, is then posted in the chat).
type CommandWait struct {
	Callback       string
	Extra          string
	Timeout        time.Duration
	TimeoutMessage string
}
