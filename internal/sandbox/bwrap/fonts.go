package bwrap

// matplotlib's font cache, built once per runner.
//
// Every sandbox has its own /tmp, where MPLCONFIGDIR points: each new
// sandbox or zygote that imported matplotlib found no font cache and built
// one, asking fontconfig (fc-list) and reading every system font (issue
// 26: 2% of the whole tree's CPU at 10 chats, and a chart's first import
// in a new chat). The runner builds the cache once, in a sandbox like a
// run's (the same fonts under the same paths), keeps it in memory and
// gives it to every sandbox read-only at /tmp/.matplotlib (a zygote's
// spares, whose /tmp is a new tmpfs, get a copy from the zygote).

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nekro-go/nekro/internal/sandbox"
)

// fontCache is matplotlib's font list as it writes it to its cache
// directory: the file's name (fontlist-vNNN.json) and content.
type fontCache struct {
	name string
	data []byte
}

// fontCacheScript prints the cache's file name and content after
// importing matplotlib's font manager, which builds it; nothing when
// matplotlib is not installed.
const fontCacheScript = `
import os, sys
try:
    import matplotlib, matplotlib.font_manager as fm
except Exception:
    sys.exit(0)
p = os.path.join(matplotlib.get_cachedir(), "fontlist-v%s.json" % fm.FontManager.__version__)
with open(p, "rb") as f:
    data = f.read()
sys.stdout.buffer.write(os.path.basename(p).encode() + b"\n" + data)
`

// fontCacheDir is where a sandbox's matplotlib looks for the cache: the
// run's MPLCONFIGDIR (systemArgs).
const fontCacheDir = "/tmp/.matplotlib"

// startFontCache builds the font cache in the background the first time
// it is called, when Runner.FontCache is set; sandboxes started meanwhile
// go without it, as before. Warm calls it when the server starts, so the
// build (a python3 reading every font: 0.3-0.4 s of CPU) is not paid
// inside the first runs; Start calls it too, for runners nobody warmed.
func (r *Runner) startFontCache() {
	if !r.FontCache {
		return
	}
	r.fontOnce.Do(func() {
		r.fontDone = make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r.fontStop = cancel // Close stops a build still going
		go func() {
			defer close(r.fontDone)
			defer cancel()
			if fc := r.buildFontCache(ctx); fc != nil {
				r.fonts.Store(fc)
			}
		}()
	})
}

// Warm starts what every sandbox of the runner shares in the background:
// matplotlib's font cache (when FontCache is set) and the template of
// fresh sandboxes (when Template and TemplateBoot are set).
func (r *Runner) Warm() {
	r.startFontCache()
	if r.Template && r.TemplateBoot != nil {
		go r.templateFor(r.TemplateBoot)
	}
}

// Warmed waits until what Warm started is done, or ctx ends.
func (r *Runner) Warmed(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r.Template && r.TemplateBoot != nil {
			r.templateFor(r.TemplateBoot) // the one Warm started, or a new one
		}
		if r.FontCache {
			r.startFontCache()
			<-r.fontDone
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("warm the sandbox runner: %w", ctx.Err())
	}
}

var _ sandbox.Warmer = (*Runner)(nil)

func (r *Runner) buildFontCache(ctx context.Context) *fontCache {
	out, err := r.Probe(ctx, fontCacheScript)
	if err != nil {
		return nil
	}
	name, data, ok := bytes.Cut(out, []byte("\n"))
	n := string(name)
	if !ok || !strings.HasPrefix(n, "fontlist-") || !strings.HasSuffix(n, ".json") || strings.Contains(n, "/") || len(data) == 0 {
		return nil
	}
	return &fontCache{name: n, data: data}
}

// fontArgs places fc read-only in the sandbox's matplotlib cache
// directory, read from descriptor fd; none without a cache.
func fontArgs(fc *fontCache, fd int) []string {
	if fc == nil {
		return nil
	}
	return []string{"--ro-bind-data", strconv.Itoa(fd), fontCacheDir + "/" + fc.name}
}
