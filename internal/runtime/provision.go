package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/volume"
)

// provisioner prepares chat and plugin directories as they are first
// used (files.Provisioner). A chat's uploads and shared directories
// belong to the chat's own uid, mode 0700, so neither other chats'
// sandboxes nor other host users can reach them. Where the host allows
// (root, loop devices), each chat directory and each plugin's data
// directory is also a volume of its own: an ext4 image of the quota's
// size mounted there, which bounds bytes and files while they are
// written and shows a sandbox no host path.
type provisioner struct {
	rt         *Runtime
	volumesErr error // why volumes are off; nil when on
	mgr        *volume.Manager

	mu       sync.Mutex
	vols     map[string]*volume.Volume // by mount point
	dirLocks map[string]*sync.Mutex    // one acquisition per mount point at a time
}

var _ files.Provisioner = (*provisioner)(nil)

func newProvisioner(rt *Runtime) *provisioner {
	p := &provisioner{rt: rt, mgr: volume.NewManager(), vols: map[string]*volume.Volume{}, dirLocks: map[string]*sync.Mutex{}}
	if rt.cfg.NoVolumes {
		p.volumesErr = fmt.Errorf("turned off by the operator")
	} else {
		p.volumesErr = volume.Available()
	}
	return p
}

// OpenLayout returns the data directory's layout for a command that runs
// no sandbox (`nekro plugins config`): its chat and plugin directories
// are made available as a running runtime makes them (a volume is
// mounted, or shared with the nekro process that holds it). Call release
// when done.
func OpenLayout(cfg Config) (layout files.Layout, release func(), err error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.PluginDataQuota <= 0 {
		cfg.PluginDataQuota = DefaultPluginDataQuota
	}
	if cfg.SharedInodes <= 0 {
		cfg.SharedInodes = DefaultSharedInodes
	}
	layout, err = files.NewLayout(cfg.DataDir)
	if err != nil {
		return files.Layout{}, nil, err
	}
	rt := &Runtime{cfg: cfg, layout: layout, log: cfg.Log}
	rt.provision = newProvisioner(rt)
	rt.layout.Provision = rt.provision
	return rt.layout, rt.provision.close, nil
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
	ctx := context.Background()
	uid, gid, err := p.rt.chatUID(ctx, chatKey)
	if err != nil {
		return err
	}
	if p.volumesErr != nil {
		return ownDir(dir, uid, gid)
	}
	image, ok := p.rt.layout.VolumeImage(dir)
	if !ok {
		return fmt.Errorf("%s is not a chat directory", dir)
	}
	return p.acquire(ctx, image, dir, volume.Spec{Bytes: p.rt.cfg.SharedQuota, Inodes: p.rt.cfg.SharedInodes,
		UID: uid, GID: gid, Mode: 0o700, Log: p.rt.log})
}

func (p *provisioner) ProvidePluginDir(pluginKey, dir string) error {
	if p.volumesErr != nil {
		return ownDir(dir, -1, -1)
	}
	image, ok := p.rt.layout.VolumeImage(dir)
	if !ok {
		return fmt.Errorf("%s is not a plugin directory", dir)
	}
	return p.acquire(context.Background(), image, dir, volume.Spec{Bytes: p.rt.cfg.PluginDataQuota,
		Inodes: p.rt.cfg.SharedInodes, UID: -1, Mode: 0o700, Journal: true, Log: p.rt.log})
}

// acquire holds the volume at dir until close; a volume held already costs
// nothing more. Different volumes are acquired at the same time (each
// takes ~20 ms: mkfs or a mount); callers for one dir wait for one
// acquisition.
func (p *provisioner) acquire(ctx context.Context, image, dir string, spec volume.Spec) error {
	p.mu.Lock()
	if _, ok := p.vols[dir]; ok {
		p.mu.Unlock()
		return nil
	}
	dl, ok := p.dirLocks[dir]
	if !ok {
		dl = &sync.Mutex{}
		p.dirLocks[dir] = dl
	}
	p.mu.Unlock()
	dl.Lock()
	defer dl.Unlock()
	p.mu.Lock()
	_, held := p.vols[dir]
	p.mu.Unlock()
	if held {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(image), 0o700); err != nil {
		return fmt.Errorf("volumes dir: %w", err)
	}
	v, err := p.mgr.Acquire(ctx, image, dir, spec)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.vols[dir] = v
	p.mu.Unlock()
	return nil
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

// volumes reports whether directories are bounded volumes.
func (p *provisioner) volumes() bool { return p.volumesErr == nil }

// close releases the volumes this process holds; the last holder of each
// unmounts it.
func (p *provisioner) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for dir, v := range p.vols {
		if err := v.Release(); err != nil {
			p.rt.log.Warn("release volume", "dir", dir, "err", err)
		}
		delete(p.vols, dir)
	}
}

// Protections lists the sandbox backend's defences and the runtime's own
// (per-chat uids, bounded directories, the download guard) and whether
// each is in force on this host: what `nekro doctor` reports.
func (rt *Runtime) Protections() []sandbox.Protection {
	var ps []sandbox.Protection
	if p, ok := rt.runner.(sandbox.Protector); ok {
		ps = p.Protections()
	}
	if rt.uids != nil {
		ps = append(ps, sandbox.Protection{Name: "a uid per chat", Active: true,
			Detail: fmt.Sprintf("each chat's sandboxes run as its own uid from %s; its directories are closed to other chats and host users", rt.uids)})
	} else {
		ps = append(ps, sandbox.Protection{Name: "a uid per chat",
			Detail: "off: nekro does not run as root, so every sandbox runs as nekro's own uid and chats are kept apart by their mounts only"})
	}
	if rt.provision.volumes() {
		ps = append(ps, sandbox.Protection{Name: "bounded directories", Active: true,
			Detail: fmt.Sprintf("each chat's /app/shared and /app/uploads is a volume of %d MiB and %d files, each plugin's data directory one of %d MiB: writes past them fail while they happen",
				rt.cfg.SharedQuota>>20, rt.cfg.SharedInodes, rt.cfg.PluginDataQuota>>20)})
	} else {
		ps = append(ps, sandbox.Protection{Name: "bounded directories",
			Detail: fmt.Sprintf("off (%v): /app/shared is only emptied after a run that left more than %d MiB; plugin data directories are unbounded", rt.provision.volumesErr, rt.cfg.SharedQuota>>20)})
	}
	if rt.cfg.Files.AllowPrivateNetworks {
		ps = append(ps, sandbox.Protection{Name: "download guard", Detail: "off: plugins' downloads may reach private, loopback and this host's own addresses (" + files.AllowPrivateEnv + ")"})
	} else {
		ps = append(ps, sandbox.Protection{Name: "download guard", Active: true, Detail: "plugins' downloads reach only public addresses that are not this host's own"})
	}
	return ps
}
