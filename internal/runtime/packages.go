package runtime

import (
	"context"
	"time"

	"github.com/nekro-go/nekro/internal/sandbox"
)

// packageProbeTimeout bounds the one probe of the sandbox's packages.
const packageProbeTimeout = 20 * time.Second

// Packages returns the well-known Python packages the sandbox's code can
// import, probed once per Runtime in a sandbox like the runs' (what the
// prompt lists). On a backend that cannot be probed, or a failed probe,
// it returns nil and the error, and the prompt says only the standard
// library is there.
func (rt *Runtime) Packages(ctx context.Context) ([]sandbox.Package, error) {
	rt.pkgOnce.Do(func() {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), packageProbeTimeout)
		defer cancel()
		rt.pkgs, rt.pkgErr = sandbox.ProbePackages(pctx, rt.runner)
		if rt.pkgErr != nil {
			rt.log.Warn("cannot list the sandbox's Python packages: the prompt names the standard library only", "err", rt.pkgErr)
		}
	})
	return rt.pkgs, rt.pkgErr
}

// PackagesSentence is the prompt's sentence about what the code can import.
func (rt *Runtime) PackagesSentence(ctx context.Context) string {
	pkgs, _ := rt.Packages(ctx)
	_, installer := rt.runner.(sandbox.Installer)
	return sandbox.PackagesSentence(pkgs) + " " + sandbox.PipSentence(installer && rt.cfg.PythonIndex != "")
}
