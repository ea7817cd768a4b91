package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/nekro-go/nekro/adapter"
	"github.com/nekro-go/nekro/internal/adapterhost"
)

// doctorPlatforms prints the chat platforms the environment and the
// config file configure (NEKRO_ONEBOT_* and the like: doctor takes serve's
// settings from there, not from serve's flags) and what can be checked without
// `nekro serve` running: a forward URL is dialed; whether an
// implementation connects in reverse shows only in GET /api/status.
func (g *globals) doctorPlatforms(ctx context.Context, out io.Writer) error {
	fs := pflag.NewFlagSet("platforms", pflag.ContinueOnError)
	platforms := adapterhost.Bind(fs)
	if err := g.applyFile(fs, false); err != nil {
		return err
	}
	adapters, err := platforms.Open()
	if err != nil {
		return fmt.Errorf("chat platforms: %w", err)
	}
	if len(adapters) == 0 {
		fmt.Fprintln(out, "ok   chat platforms: none configured (NEKRO_ONEBOT_TOKEN for QQ through OneBot v11, NEKRO_QQBOT_APP_ID for QQ's official bot, NEKRO_TELEGRAM_TOKEN, NEKRO_DISCORD_TOKEN, NEKRO_SATORI_URL)")
		return nil
	}
	for _, a := range adapters {
		info := a.Info()
		fmt.Fprintf(out, "ok   chat platform %s: %s\n", info.Platform, info.Settings)
		if c, ok := a.(adapter.Checker); ok {
			for _, ch := range c.Check(ctx) {
				state := "ok  "
				if !ch.OK {
					state = "warn"
				}
				fmt.Fprintf(out, "%s %s: %s\n", state, info.Platform, ch.Detail)
			}
		}
	}
	return nil
}
