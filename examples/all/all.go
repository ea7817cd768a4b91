// Package all imports every example plugin ported from the plugin
// documents, so a binary (and the tests that drive it) gets them with one
// blank import.
package all

import (
	_ "github.com/nekro-go/nekro/examples/chatmessage"
	_ "github.com/nekro-go/nekro/examples/countdown"
	_ "github.com/nekro-go/nekro/examples/files"
	_ "github.com/nekro-go/nekro/examples/kvstore"
	_ "github.com/nekro-go/nekro/examples/sandboxmethods"
)
