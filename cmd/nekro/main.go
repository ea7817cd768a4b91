// Command nekro is the standard nekro binary: the built-in plugins
// (plugins/all) and nothing else. The ported examples of the plugin
// documents build as cmd/nekro-examples. Subcommands live in internal/cli,
// one file each.
package main

import (
	"github.com/nekro-go/nekro"
	_ "github.com/nekro-go/nekro/adapters/all"
	_ "github.com/nekro-go/nekro/plugins/all"
)

func main() { nekro.Main() }
