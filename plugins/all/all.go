// Package all imports every built-in plugin, so a binary gets them with one
// blank import.
package all

import (
	_ "github.com/nekro-go/nekro/plugins/basic"
)
