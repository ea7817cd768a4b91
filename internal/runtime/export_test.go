package runtime

import "time"

// SetVolumeGrace sets how long after its last use the cap on mounted
// volumes may unmount a chat's (volumeGrace by default).
func SetVolumeGrace(rt *Runtime, d time.Duration) {
	rt.provision.mu.Lock()
	defer rt.provision.mu.Unlock()
	rt.provision.grace = d
}

// ColdRuns is how many runs started their own sandbox, finding none warm.
func ColdRuns(rt *Runtime) int64 { return rt.coldRuns.Load() }
