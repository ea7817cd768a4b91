// Command nekro-files2 is nekro with the seed-003 file examples
// (examples/files2) instead of the seed-002 ones, whose generate_report
// has the same Python name. It is also the shape of any custom nekro
// binary: import the plugins, call nekro.Main.
package main

import (
	"github.com/nekro-go/nekro"
	_ "github.com/nekro-go/nekro/examples/files2"
)

func main() { nekro.Main() }
