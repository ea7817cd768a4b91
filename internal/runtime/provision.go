package runtime

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/nekro-go/nekro/internal/files"
)

// provisioner prepares chat and plugin directories as they are first
// used (files.Provisioner): a chat's uploads and shared directories
// belong to the chat's own uid, mode 0700, so neither other chats'
// sandboxes nor other host users can reach them.
type provisioner struct {
	rt *Runtime
	mu sync.Mutex
}

var _ files.Provisioner = (*provisioner)(nil)

func newProvisioner(rt *Runtime) *provisioner {
	return &provisioner{rt: rt}
}

// chatUID returns the uid and gid chatKey's sandboxes run as, or -1, -1
// when they run as nekro's own uid.
func (rt *Runtime) chatUID(ctx context.Context, chatKey string) (int, int, error) {
	if rt.uids == nil {
		return -1, -1, nil
	}
	uid, err := rt.uids.UID(ctx, chatKey)
	if err != nil {
		return 0, 0, err
	}
	return uid, uid, nil
}

func (p *provisioner) ProvideChatDir(kind files.Area, chatKey, dir string) error {
	uid, gid, err := p.rt.chatUID(context.Background(), chatKey)
	if err != nil {
		return err
	}
	return ownDir(dir, uid, gid)
}

func (p *provisioner) ProvidePluginDir(pluginKey, dir string) error {
	return ownDir(dir, -1, -1)
}

// ownDir gives dir to uid (unless -1) with mode 0700.
func ownDir(dir string, uid, gid int) error {
	if uid >= 0 {
		if err := os.Lchown(dir, uid, gid); err != nil {
			return fmt.Errorf("give %s to uid %d: %w", dir, uid, err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

// close releases what the provisioner holds.
func (p *provisioner) close() {}
