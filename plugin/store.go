package plugin

import "context"

// Store is a plugin's KV namespace. (Placeholder: the KV issue defines the
// full interface.)
type Store interface {
	Get(ctx context.Context, scope Scope, key string) (value string, found bool, err error)
}

// Scope selects whose value a key holds: a chat's, a user's, a user's in one
// chat, or the plugin's own (both empty).
type Scope struct {
	ChatKey string
	UserKey string
}

// Store returns this run's view of the plugin's KV namespace.
func (c *Ctx) Store() Store {
	if c.env.StoreFor == nil {
		return nil
	}
	return c.env.StoreFor(c.plugin)
}
