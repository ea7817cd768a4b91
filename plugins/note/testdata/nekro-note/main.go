// Command nekro-note is the standard nekro binary's built-in plugins
// (plugins/all) with nekro.note, for this package's tests. The standard
// binary cannot carry nekro.note yet: the example plugin
// nekro_examples.kvstore, which it also carries, mounts a method named
// get_note too, and two enabled plugins may not share a method name.
package main

import (
	"github.com/nekro-go/nekro"
	_ "github.com/nekro-go/nekro/plugins/all"
	_ "github.com/nekro-go/nekro/plugins/note"
)

func main() { nekro.Main() }
