// Command nekro-examples is nekro with the ported examples of the plugin
// documents (examples/all: nekro_examples.*, e.g. my_sum_function and
// search_kb) next to the built-in plugins: for trying nekro out, the
// playground and the examples' tests. It is not for production: the
// examples add 19 methods (25 with the KV examples) and their docs to
// every turn's prompt, and some keep state shared across chats, as the
// documents wrote them.
package main

import (
	"github.com/nekro-go/nekro"
	_ "github.com/nekro-go/nekro/examples/all"
	_ "github.com/nekro-go/nekro/plugins/all"
)

func main() { nekro.Main() }
