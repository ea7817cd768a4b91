package users

import "context"

// Identity is who made an API request: the operator (Admin) or a user.
// The server's authentication puts it in the request's context; handlers
// and other entry points (the MCP endpoint) read it with FromContext.
type Identity struct {
	// Admin is true for the operator's token: every call is allowed.
	Admin bool
	// UserID is the user a user token belongs to ("" for the operator).
	UserID string
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity the request was authenticated as; ok
// is false when it went through no authentication.
func FromContext(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}
