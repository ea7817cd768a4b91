// Package all imports every built-in plugin, so a binary gets them with one
// blank import.
package all

import (
	_ "github.com/nekro-go/nekro/plugins/basic"
	_ "github.com/nekro-go/nekro/plugins/dice"
	_ "github.com/nekro-go/nekro/plugins/github"
	_ "github.com/nekro-go/nekro/plugins/history_travel"
	_ "github.com/nekro-go/nekro/plugins/knowledge"
	_ "github.com/nekro-go/nekro/plugins/note"
	_ "github.com/nekro-go/nekro/plugins/status"
	_ "github.com/nekro-go/nekro/plugins/timer"
	_ "github.com/nekro-go/nekro/plugins/view_image"
)
