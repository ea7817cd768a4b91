package pyplugin

import "fmt"

// LoadError is why a Python plugin did not load, as the reference's
// failed-plugin registry records it: the exception its import (or its
// description) raised and the line it was raised at.
type LoadError struct {
	// Path is the plugin: its .py file or package directory.
	Path string
	// File and Line are where the exception was raised: the innermost
	// line of the plugin's own files in the traceback (a syntax error's
	// line); empty and 0 when the plugin's code is not in it (a module
	// without `plugin`).
	File string
	Line int
	// Type is the exception's class name (ModuleNotFoundError, ...).
	Type string
	// Message is "Type: text", as Python prints the exception.
	Message string
	// Traceback is Python's traceback, its last 4000 characters.
	Traceback string
}

// Error reads "PATH: FILE:LINE: Type: text" (PATH alone when FILE is
// the plugin's file, FILE:LINE left out when unknown).
func (e *LoadError) Error() string {
	switch e.File {
	case "":
		return fmt.Sprintf("%s: %s", e.Path, e.Message)
	case e.Path:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	}
	return fmt.Sprintf("%s: %s:%d: %s", e.Path, e.File, e.Line, e.Message)
}
