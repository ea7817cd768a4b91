package runtime

import (
	"time"

	"github.com/nekro-go/nekro/internal/pluginhost"
)

// RunObserver is told about every sandbox run as it ends: how it
// stopped, how long its code ran, and each plugin method call it made
// (those beyond rpc.MaxCallRecords are not reported). Its methods must
// return quickly and be safe for concurrent use; nekro's metrics
// implement it.
type RunObserver interface {
	RunFinished(stopType string, d time.Duration)
	MethodCalled(plugin, method string, failed bool)
}

// observe reports res to the configured observer. methods are the run's:
// they name each call's plugin.
func (rt *Runtime) observe(res *ExecResult, methods []*pluginhost.MethodInfo) {
	o := rt.cfg.Observer
	if o == nil {
		return
	}
	o.RunFinished(res.StopType.String(), res.Duration)
	byName := make(map[string]string, len(methods))
	for _, m := range methods {
		byName[m.Name] = m.Plugin().Key()
	}
	for _, c := range res.Calls {
		// A name no plugin of the run has (code may send any name down
		// its socket) is not a label of its own: one series per name
		// would let code grow the metrics without bound.
		plugin, method := byName[c.Method], c.Method
		if plugin == "" {
			method = "(unknown)"
		}
		o.MethodCalled(plugin, method, c.Error != "")
	}
}

// WarmSpares returns how many started sandboxes wait for their chat's
// next run (Config.WarmSpares).
func (rt *Runtime) WarmSpares() int {
	if rt.spares == nil {
		return 0
	}
	rt.spares.mu.Lock()
	defer rt.spares.mu.Unlock()
	return len(rt.spares.byKey)
}
