// Command nekro is the standard nekro binary: the built-in plugins and the
// ported examples of the plugin documents. Subcommands live in
// internal/cli, one file each.
package main

import (
	"github.com/nekro-go/nekro"
	_ "github.com/nekro-go/nekro/adapters/all"
	_ "github.com/nekro-go/nekro/examples/all"
	_ "github.com/nekro-go/nekro/plugins/all"
)

func main() { nekro.Main() }
