package plugin

// FS is the file bridge between a run's sandbox and the host. (Placeholder:
// the file-bridge issue defines the full interface.)
type FS interface {
	ChatKey() string
	ContainerKey() string
}

// FS returns the run's file bridge.
func (c *Ctx) FS() FS { return c.env.FS }
