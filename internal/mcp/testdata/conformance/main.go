// Command conformance is nekro with the MCP conformance suite's fixture
// tools (package fixture) next to the built-in plugins: the binary
// internal/mcp's conformance test serves /mcp from. It is built only by
// that test (testutil.Binary), never shipped.
package main

import (
	"github.com/nekro-go/nekro"
	_ "github.com/nekro-go/nekro/adapters/all"
	_ "github.com/nekro-go/nekro/internal/mcp/testdata/conformance/fixture"
	_ "github.com/nekro-go/nekro/plugins/all"
)

func main() { nekro.Main() }
