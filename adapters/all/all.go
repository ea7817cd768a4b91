// Package all imports every built-in chat platform adapter, so a binary
// gets them with one blank import.
package all

import (
	_ "github.com/nekro-go/nekro/adapters/discord"
	_ "github.com/nekro-go/nekro/adapters/onebot"
	_ "github.com/nekro-go/nekro/adapters/qqbot"
	_ "github.com/nekro-go/nekro/adapters/satori"
	_ "github.com/nekro-go/nekro/adapters/telegram"
)
