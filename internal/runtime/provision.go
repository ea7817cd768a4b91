package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nekro-go/nekro/internal/files"
	"github.com/nekro-go/nekro/internal/sandbox"
	"github.com/nekro-go/nekro/internal/volume"
)

// provisioner prepares chat and plugin directories as they are first
// used (files.Provisioner). A chat's uploads and shared directories
// belong to the chat's own uid, mode 0700, so neither other chats'
// sandboxes nor other host users can reach them. Where the host allows
// (root, loop devices), a chat's two directories are bound from one
// volume of its own and each plugin's data directory is one: an ext4
// image of the quota's size, which bounds bytes and files while they are
// written and shows a sandbox no host path.
//
// A chat's volumes stay mounted while it is in use and are unmounted
// (their loop devices freed) once it is not: no sandbox prepared for it (a
// run or a warm spare, between prepare and discard) and no zygote of it
// (sandbox.DirHolder) for Config.VolumeIdle, or sooner, least recently
// used first, when more than Config.MaxVolumes chat volumes are mounted.
// What they hold stays in their images; the chat's next run mounts them
// again. Plugins' volumes stay until close.
type provisioner struct {
	rt         *Runtime
	volumesErr error // why volumes are off; nil when on
	mgr        *volume.Manager
	idle       time.Duration // a chat's volumes unused this long are unmounted
	max        int           // chat volumes mounted before idle ones go early
	grace      time.Duration // volumeGrace (tests shorten it)
	stop, done chan struct{} // the idle sweep's (nil unless started)

	mu       sync.Mutex
	vols     map[string]*heldVolume // by mount point
	dirLocks map[string]*dirLock    // one acquisition or release per mount point at a time
	chats    map[string]*chatVolumes
	mounted  int // chat volumes in vols
	leaving  int // volumes taken out of vols and not yet released
}

// heldVolume is a volume this process holds.
type heldVolume struct {
	v    *volume.Volume
	chat string   // "" for a plugin's directory
	key  string   // the mount point its acquisitions and release lock (dirLock)
	dirs []string // where it shows: a chat's two directories, or one
}

// chatVolumes is what keeps a chat's volumes mounted.
type chatVolumes struct {
	users     int       // sandboxes prepared for the chat and not yet discarded
	used      time.Time // last provided or held
	dirs      []string  // its mounted volumes' mount points (p.vols' keys)
	sharedDir string    // its shared directory, as runners name the chat
}

// dirLock serialises the acquisitions and releases of one mount point;
// refs counts who uses it, so it goes when nobody does.
type dirLock struct {
	sync.Mutex
	refs int
}

// volumeGrace is how long after a chat's directory was last provided
// that the cap may unmount it: a caller outside a run (an upload being
// imported) uses the directory briefly after asking for it. (A file it
// still has open stays in the volume, lazily unmounted; one it creates
// after the unmount lands in the plain directory and is moved into the
// volume at its next mount.) It makes the cap soft: chats used within it
// keep their volumes. At 300 new chats x 1, 32 at once (bench load), 3 s
// kept the mounted volumes at the cap; 10 s let 58 more stay.
const volumeGrace = 3 * time.Second

var _ files.Provisioner = (*provisioner)(nil)

func newProvisioner(rt *Runtime) *provisioner {
	p := &provisioner{rt: rt, mgr: volume.NewManager(), vols: map[string]*heldVolume{}, dirLocks: map[string]*dirLock{},
		chats: map[string]*chatVolumes{}, idle: rt.cfg.VolumeIdle, max: rt.cfg.MaxVolumes, grace: volumeGrace}
	if rt.cfg.NoVolumes {
		p.volumesErr = fmt.Errorf("turned off by the operator")
	} else {
		p.volumesErr = volume.Available()
	}
	return p
}

// start sweeps idle chats' volumes until close.
func (p *provisioner) start() {
	if p.volumesErr != nil || p.idle <= 0 {
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		tick := time.NewTicker(min(max(p.idle/4, time.Second), time.Minute))
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case now := <-tick.C:
				p.sweep(now)
			}
		}
	}()
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

// ProvideChatDir makes dir, one of chatKey's two directories, ready. With
// volumes, one volume holds both (Layout.ChatVolumeImage), bound at each:
// a new chat costs one image, one loop device and one mount of a
// filesystem, not two, and its quota bounds the two together. A chat an
// earlier version gave a volume per directory keeps them.
func (p *provisioner) ProvideChatDir(kind files.Area, chatKey, dir string) error {
	if p.volumesErr == nil && p.provided(chatKey, dir) {
		return nil
	}
	ctx := context.Background()
	uid, gid, err := p.rt.chatUID(ctx, chatKey)
	if err != nil {
		return err
	}
	if p.volumesErr != nil {
		return ownDir(dir, uid, gid)
	}
	ck := files.ContainerKey(chatKey)
	shared, uploads := p.rt.layout.SharedDir(ck), p.rt.layout.UploadsDir(chatKey)
	if dir != shared && dir != uploads {
		return fmt.Errorf("%s is not a directory of chat %q", dir, chatKey)
	}
	spec := volume.Spec{Bytes: p.rt.cfg.SharedQuota, Inodes: p.rt.cfg.SharedInodes,
		UID: uid, GID: gid, Mode: 0o700, Log: p.rt.log}
	var onMount func()
	if p.rt.janitor != nil {
		onMount = func() { p.rt.janitor.remounted(shared) }
	}
	if image, ok := p.chatImage(ck, shared, uploads); ok {
		return p.acquire(ctx, chatKey, image, shared, []volume.Bind{{Dir: "shared", Mountpoint: shared}, {Dir: "uploads", Mountpoint: uploads}}, spec, onMount)
	}
	image, ok := p.rt.layout.VolumeImage(dir)
	if !ok {
		return fmt.Errorf("%s is not a chat directory", dir)
	}
	if kind != files.Shared {
		onMount = nil
	}
	return p.acquire(ctx, chatKey, image, dir, nil, spec, onMount)
}

// chatImage returns the image of the chat's volume for both directories,
// and false when the chat has a volume per directory from an earlier
// version (which it keeps: moving its files is not worth the risk).
func (p *provisioner) chatImage(containerKey, shared, uploads string) (string, bool) {
	image := p.rt.layout.ChatVolumeImage(containerKey)
	if _, err := os.Lstat(image); err == nil {
		return image, true
	}
	for _, dir := range []string{shared, uploads} {
		if old, ok := p.rt.layout.VolumeImage(dir); ok {
			if _, err := os.Lstat(old); err == nil {
				return "", false
			}
		}
	}
	return image, true
}

func (p *provisioner) ProvidePluginDir(pluginKey, dir string) error {
	if p.volumesErr != nil {
		return ownDir(dir, -1, -1)
	}
	image, ok := p.rt.layout.VolumeImage(dir)
	if !ok {
		return fmt.Errorf("%s is not a plugin directory", dir)
	}
	return p.acquire(context.Background(), "", image, dir, nil, volume.Spec{Bytes: p.rt.cfg.PluginDataQuota,
		Inodes: p.rt.cfg.SharedInodes, UID: -1, Mode: 0o700, Journal: true, Log: p.rt.log}, nil)
}

// acquire holds the volume at dir, chatKey's ("" for a plugin's), until it
// is unmounted idle or at close; a volume held already costs nothing
// more. With binds, it is a split volume shown at each bind's mount point
// (dir is the first's). Different volumes are acquired at the same time
// (each takes ~20 ms: mkfs or a mount); callers for one dir wait for one
// acquisition. onMount, when set, is called once this call has acquired
// it, before any other caller for dir gets it.
func (p *provisioner) acquire(ctx context.Context, chatKey, image, dir string, binds []volume.Bind, spec volume.Spec, onMount func()) error {
	if p.provided(chatKey, dir) {
		return nil
	}
	dl := p.lockDir(dir)
	over, err := p.acquireLocked(ctx, chatKey, image, dir, binds, spec, onMount)
	p.unlockDir(dir, dl)
	if over {
		// Not under dir's lock: eviction takes other dirs' locks.
		p.evictOver(time.Now())
	}
	return err
}

// acquireLocked is acquire under dir's lock; it reports whether more chat
// volumes than p.max are mounted now.
func (p *provisioner) acquireLocked(ctx context.Context, chatKey, image, dir string, binds []volume.Bind, spec volume.Spec, onMount func()) (bool, error) {
	if p.provided(chatKey, dir) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(image), 0o700); err != nil {
		return false, fmt.Errorf("volumes dir: %w", err)
	}
	h := &heldVolume{chat: chatKey, key: dir, dirs: []string{dir}}
	var err error
	if binds != nil {
		h.v, err = p.mgr.AcquireSplit(ctx, image, binds, spec)
		h.dirs = h.dirs[:0]
		for _, b := range binds {
			h.dirs = append(h.dirs, b.Mountpoint)
		}
	} else {
		h.v, err = p.mgr.Acquire(ctx, image, dir, spec)
	}
	if err != nil {
		return false, err
	}
	if onMount != nil {
		onMount()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range h.dirs {
		p.vols[d] = h
	}
	if chatKey != "" {
		c := p.chat(chatKey)
		c.dirs = append(c.dirs, h.dirs...)
		c.used = time.Now()
		p.mounted++
	}
	return p.max > 0 && p.mounted > p.max, nil
}

// provided reports whether dir's volume is held, noting the chat's use.
func (p *provisioner) provided(chatKey, dir string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.vols[dir]; !ok {
		return false
	}
	if c := p.chats[chatKey]; c != nil {
		c.used = time.Now()
	}
	return true
}

// chat returns chatKey's entry, made when missing; p.mu is held.
func (p *provisioner) chat(chatKey string) *chatVolumes {
	c := p.chats[chatKey]
	if c == nil {
		c = &chatVolumes{sharedDir: p.rt.layout.SharedDir(files.ContainerKey(chatKey))}
		p.chats[chatKey] = c
	}
	return c
}

func (p *provisioner) lockDir(dir string) *dirLock {
	p.mu.Lock()
	dl := p.dirLocks[dir]
	if dl == nil {
		dl = &dirLock{}
		p.dirLocks[dir] = dl
	}
	dl.refs++
	p.mu.Unlock()
	dl.Lock()
	return dl
}

func (p *provisioner) unlockDir(dir string, dl *dirLock) {
	dl.Unlock()
	p.mu.Lock()
	if dl.refs--; dl.refs == 0 {
		delete(p.dirLocks, dir)
	}
	p.mu.Unlock()
}

// hold keeps chatKey's volumes mounted until the matching unhold: a
// sandbox is being prepared for the chat (a run or a warm spare) and will
// have its directories mounted until it is discarded.
//
// The chat's idle time counts from the last hold, not from the last
// unhold: a warm spare, prepared just after a run, is discarded once idle
// itself, and the chat's volumes then go at once rather than an idle time
// later.
func (p *provisioner) hold(chatKey string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.chat(chatKey)
	c.users++
	c.used = time.Now()
}

func (p *provisioner) unhold(chatKey string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.chats[chatKey]
	if c == nil {
		return
	}
	c.users--
	if c.users <= 0 && len(c.dirs) == 0 {
		delete(p.chats, chatKey)
	}
}

// unused reports whether c's volumes may be unmounted: no sandbox of the
// chat is prepared, none of the runner's holds its directories, and it
// has not been used for at least idle. p.mu is held.
func (p *provisioner) unused(c *chatVolumes, now time.Time, idle time.Duration) bool {
	if c.users > 0 || len(c.dirs) == 0 || now.Sub(c.used) < idle {
		return false
	}
	if h, ok := p.rt.runner.(sandbox.DirHolder); ok && h.HoldsDir(c.sharedDir) {
		return false
	}
	return true
}

// sweep unmounts the volumes of chats unused for p.idle.
func (p *provisioner) sweep(now time.Time) {
	p.mu.Lock()
	var idle []string
	for key, c := range p.chats {
		if p.unused(c, now, p.idle) {
			idle = append(idle, key)
		}
	}
	p.mu.Unlock()
	for _, key := range idle {
		p.evict(key, now, p.idle)
	}
}

// evictOver unmounts the volumes of the least recently used chats not in
// use until no more than p.max are mounted. Chats in use are never
// unmounted: the cap is exceeded rather than a live run's directories
// taken away.
func (p *provisioner) evictOver(now time.Time) {
	p.mu.Lock()
	type cand struct {
		key  string
		used time.Time
	}
	var cands []cand
	for key, c := range p.chats {
		if p.unused(c, now, p.grace) {
			cands = append(cands, cand{key, c.used})
		}
	}
	need, grace := p.mounted-p.max, p.grace
	p.mu.Unlock()
	slices.SortFunc(cands, func(a, b cand) int { return a.used.Compare(b.used) })
	for _, c := range cands {
		if need <= 0 {
			return
		}
		need -= p.evict(c.key, now, grace)
	}
}

// evict unmounts chatKey's volumes if the chat is still unused for idle,
// and returns how many it released.
func (p *provisioner) evict(chatKey string, now time.Time, idle time.Duration) int {
	p.mu.Lock()
	c := p.chats[chatKey]
	if c == nil || !p.unused(c, now, idle) {
		p.mu.Unlock()
		return 0
	}
	delete(p.chats, chatKey)
	held := p.take(c.dirs)
	p.mounted -= len(held)
	p.leaving += len(held)
	p.mu.Unlock()
	if r, ok := p.rt.runner.(sandbox.DirReleaser); ok {
		r.ReleaseDir(c.sharedDir) // else its loop devices outlive the unmount
	}
	// A run starting meanwhile waits for the dir's lock, then mounts the
	// volume again; one that took it first shares it, and this release
	// then leaves it mounted (it is not the last holder).
	for _, h := range held {
		dl := p.lockDir(h.key)
		if err := h.v.Release(); err != nil {
			p.rt.log.Warn("unmount an idle chat's volume", "dir", h.key, "err", err)
		}
		p.unlockDir(h.key, dl)
		p.mu.Lock()
		p.leaving--
		p.mu.Unlock()
	}
	p.rt.log.Debug("unmounted an idle chat's volumes", "chat", chatKey, "volumes", len(held))
	return len(held)
}

// take removes the volumes at dirs from p.vols and returns them, each
// once (a split volume shows at two of them); p.mu is held.
func (p *provisioner) take(dirs []string) []*heldVolume {
	var held []*heldVolume
	for _, dir := range dirs {
		h := p.vols[dir]
		if h == nil {
			continue
		}
		for _, d := range h.dirs {
			delete(p.vols, d)
		}
		held = append(held, h)
	}
	return held
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

// close stops the idle sweep and releases the volumes this process
// holds; the last holder of each unmounts it.
func (p *provisioner) close() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.take(slices.Collect(maps.Keys(p.vols))) {
		if err := h.v.Release(); err != nil {
			p.rt.log.Warn("release volume", "dir", h.key, "err", err)
		}
	}
	p.chats, p.mounted = map[string]*chatVolumes{}, 0
}

// MountedVolumes returns how many volumes this process holds mounted (a
// chat's while it is in use, each plugin's data directory), those being
// unmounted included, and how many loop devices it knows bound to the
// images it mounted.
func (rt *Runtime) MountedVolumes() (volumes, loops int) {
	p := rt.provision
	p.mu.Lock()
	seen := map[*heldVolume]bool{}
	for _, h := range p.vols {
		seen[h] = true
	}
	volumes = len(seen) + p.leaving
	p.mu.Unlock()
	return volumes, p.mgr.Bound()
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
			Detail: fmt.Sprintf("each chat's /app/shared and /app/uploads are one volume of %d MiB and %d files, each plugin's data directory one of %d MiB: writes past them fail while they happen",
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
