package crashfs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// minode is one inode of the model.
type minode struct {
	ino  uint64
	dir  bool
	mode uint32 // permission bits

	// Regular files: data is what readers see (the page cache), durable
	// what survives a power cut (as of the last fsync).
	data, durable []byte
	// Directories: entries is the current view, durEntries what survives.
	entries, durEntries map[string]*minode
}

// model is the disk. One mutex: the tests it serves are not about file
// system throughput.
type model struct {
	mu      sync.Mutex
	root    *minode
	nextIno uint64
	stats   Stats
}

// Stats counts what the file system saw.
type Stats struct {
	Writes, FileSyncs, DirSyncs, PowerCuts int64
	// Lost* count what the power cuts dropped: bytes of unsynced file data
	// and unsynced directory entry changes.
	LostBytes, LostEntries int64
}

func newModel() *model {
	m := &model{nextIno: 2}
	m.root = &minode{ino: 1, dir: true, mode: 0o755, entries: map[string]*minode{}, durEntries: map[string]*minode{}}
	return m
}

func (m *model) newInode(dir bool, mode uint32) *minode {
	m.nextIno++
	in := &minode{ino: m.nextIno, dir: dir, mode: mode & 0o7777}
	if dir {
		in.entries, in.durEntries = map[string]*minode{}, map[string]*minode{}
	}
	return in
}

// nlink counts the current entries naming in (the model keeps no parent
// pointers; directories report 2).
func (m *model) nlink(in *minode) uint32 {
	if in.dir {
		return 2
	}
	n := uint32(0)
	var walk func(d *minode)
	seen := map[*minode]bool{}
	walk = func(d *minode) {
		if seen[d] {
			return
		}
		seen[d] = true
		for _, c := range d.entries {
			if c == in {
				n++
			}
			if c.dir {
				walk(c)
			}
		}
	}
	walk(m.root)
	return max(n, 1)
}

// cut drops everything not durable: the durable tree from the root, each
// file's durable data.
func (m *model) cut() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.PowerCuts++
	seen := map[*minode]bool{}
	var walk func(d *minode)
	walk = func(d *minode) {
		if seen[d] {
			return
		}
		seen[d] = true
		if d.dir {
			for name, c := range d.entries {
				if d.durEntries[name] != c {
					m.stats.LostEntries++
				}
			}
			for name := range d.durEntries {
				if _, ok := d.entries[name]; !ok {
					m.stats.LostEntries++ // an unlink that did not survive
				}
			}
			d.entries = clone(d.durEntries)
			for _, c := range d.entries {
				walk(c)
			}
			return
		}
		m.stats.LostBytes += lostBytes(d.data, d.durable)
		d.data = append([]byte(nil), d.durable...)
	}
	walk(m.root)
}

func clone(e map[string]*minode) map[string]*minode {
	out := make(map[string]*minode, len(e))
	for k, v := range e {
		out[k] = v
	}
	return out
}

// Serve is the daemon side (crashfsd): it mounts an empty crash file system
// on dir, prints "READY", and then answers commands read from in, one per
// line — "CUT" (power cut and remount; answers "OK" or "ERR <reason>"),
// "STATS" (answers a JSON Stats line) — until "EXIT" or the end of in, when
// it unmounts and returns.
func Serve(dir string, in io.Reader, out io.Writer) error {
	m := newModel()
	srv, err := mountModel(dir, m)
	if err != nil {
		return err
	}
	defer func() {
		if srv != nil {
			_ = srv.Unmount()
		}
	}()
	fmt.Fprintln(out, "READY")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch sc.Text() {
		case "CUT":
			var uerr error
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if uerr = srv.Unmount(); uerr == nil || time.Now().After(deadline) {
					break
				}
			}
			if uerr != nil {
				fmt.Fprintf(out, "ERR unmount for the power cut: %v (a file under %s is still open)\n", uerr, dir)
				continue
			}
			srv = nil
			m.cut()
			if srv, err = mountModel(dir, m); err != nil {
				fmt.Fprintf(out, "ERR remount after the power cut: %v\n", err)
				return err
			}
			fmt.Fprintln(out, "OK")
		case "STATS":
			m.mu.Lock()
			b, _ := json.Marshal(m.stats)
			m.mu.Unlock()
			fmt.Fprintln(out, string(b))
		case "EXIT":
			return nil
		default:
			fmt.Fprintf(out, "ERR unknown command %q\n", sc.Text())
		}
	}
	return sc.Err()
}

func mountModel(dir string, m *model) (*fuse.Server, error) {
	zero := time.Duration(0)
	return fs.Mount(dir, &node{m: m, in: m.root}, &fs.Options{
		MountOptions: fuse.MountOptions{DirectMount: true, DirectMountStrict: true, FsName: "crashfs", Name: "crashfs",
			DisableXAttrs: true, MaxBackground: 16},
		// No caching of names or attributes in the kernel: every lookup
		// asks the model, so nothing stale outlives an operation.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
	})
}

// node is an inode of the mounted tree: a view of one model inode.
type node struct {
	fs.Inode
	m  *model
	in *minode
}

var (
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeMkdirer     = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRmdirer     = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeLinker      = (*node)(nil)
	_ fs.NodeReaddirer   = (*node)(nil)
	_ fs.NodeReader      = (*node)(nil)
	_ fs.NodeWriter      = (*node)(nil)
	_ fs.NodeFsyncer     = (*node)(nil)
	_ fs.NodeFlusher     = (*node)(nil)
	_ fs.NodeReleaser    = (*node)(nil)
	_ fs.NodeAllocater   = (*node)(nil)
	_ fs.NodeStatfser    = (*node)(nil)
	_ fs.NodeOpendirer   = (*node)(nil)
	_ fs.NodeAccesser    = (*node)(nil)
	_ fs.NodeOnForgetter = (*node)(nil)
)

func typeBits(in *minode) uint32 {
	if in.dir {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}

func (n *node) child(ctx context.Context, in *minode) *fs.Inode {
	return n.NewInode(ctx, &node{m: n.m, in: in}, fs.StableAttr{Mode: typeBits(in), Ino: in.ino})
}

func (n *node) fill(in *minode, a *fuse.Attr) {
	a.Ino = in.ino
	a.Mode = typeBits(in) | in.mode
	a.Size = uint64(len(in.data))
	a.Blocks = (a.Size + 511) / 512
	a.Nlink = n.m.nlink(in)
	a.Blksize = 4096
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if !n.in.dir {
		return nil, syscall.ENOTDIR
	}
	c, ok := n.in.entries[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	n.fill(c, &out.Attr)
	return n.child(ctx, c), 0
}

func (n *node) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	n.fill(n.in, &out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if sz, ok := in.GetSize(); ok {
		if n.in.dir {
			return syscall.EISDIR
		}
		n.in.data = resize(n.in.data, int(sz))
	}
	if mode, ok := in.GetMode(); ok {
		n.in.mode = mode & 0o7777
	}
	n.fill(n.in, &out.Attr)
	return 0
}

func resize(b []byte, size int) []byte {
	if size <= len(b) {
		return b[:size:size]
	}
	return append(b, make([]byte, size-len(b))...)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if flags&syscall.O_TRUNC != 0 && !n.in.dir {
		n.in.data = nil
	}
	return nil, 0, 0
}

func (n *node) Opendir(ctx context.Context) syscall.Errno { return 0 }

func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno { return 0 }

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if c, ok := n.in.entries[name]; ok {
		if flags&syscall.O_EXCL != 0 {
			return nil, nil, 0, syscall.EEXIST
		}
		if c.dir {
			return nil, nil, 0, syscall.EISDIR
		}
		if flags&syscall.O_TRUNC != 0 {
			c.data = nil
		}
		n.fill(c, &out.Attr)
		return n.child(ctx, c), nil, 0, 0
	}
	c := n.m.newInode(false, mode)
	n.in.entries[name] = c
	n.fill(c, &out.Attr)
	return n.child(ctx, c), nil, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if _, ok := n.in.entries[name]; ok {
		return nil, syscall.EEXIST
	}
	c := n.m.newInode(true, mode)
	n.in.entries[name] = c
	n.fill(c, &out.Attr)
	return n.child(ctx, c), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	c, ok := n.in.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case c.dir:
		return syscall.EISDIR
	}
	delete(n.in.entries, name)
	return 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	c, ok := n.in.entries[name]
	switch {
	case !ok:
		return syscall.ENOENT
	case !c.dir:
		return syscall.ENOTDIR
	case len(c.entries) > 0:
		return syscall.ENOTEMPTY
	}
	delete(n.in.entries, name)
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	c, ok := n.in.entries[name]
	if !ok {
		return syscall.ENOENT
	}
	const renameNoReplace = 1
	if flags&^renameNoReplace != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE / WHITEOUT: not modelled
	}
	if old, exists := np.in.entries[newName]; exists {
		switch {
		case flags&renameNoReplace != 0:
			return syscall.EEXIST
		case old.dir && !c.dir:
			return syscall.EISDIR
		case !old.dir && c.dir:
			return syscall.ENOTDIR
		case old.dir && len(old.entries) > 0:
			return syscall.ENOTEMPTY
		}
	}
	delete(n.in.entries, name)
	np.in.entries[newName] = c
	return 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if _, exists := n.in.entries[name]; exists {
		return nil, syscall.EEXIST
	}
	if t.in.dir {
		return nil, syscall.EPERM
	}
	n.in.entries[name] = t.in
	n.fill(t.in, &out.Attr)
	return n.child(ctx, t.in), 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	names := make([]string, 0, len(n.in.entries))
	for name := range n.in.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	list := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		c := n.in.entries[name]
		list = append(list, fuse.DirEntry{Name: name, Mode: typeBits(c), Ino: c.ino})
	}
	return fs.NewListDirStream(list), 0
}

func (n *node) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if off >= int64(len(n.in.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(n.in.data)))
	return fuse.ReadResultData(append([]byte(nil), n.in.data[off:end]...)), 0
}

func (n *node) Write(ctx context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if end := int(off) + len(data); end > len(n.in.data) {
		n.in.data = resize(n.in.data, end)
	}
	copy(n.in.data[off:], data)
	n.m.stats.Writes++
	return uint32(len(data)), 0
}

// Allocate (fallocate) extends the file like a write of zeros.
func (n *node) Allocate(ctx context.Context, _ fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if mode != 0 {
		return syscall.EOPNOTSUPP
	}
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if end := int(off + size); end > len(n.in.data) {
		n.in.data = resize(n.in.data, end)
	}
	return 0
}

// Fsync makes a file's data, or a directory's entries, durable. fdatasync
// is the same here (the model has no metadata apart from size).
func (n *node) Fsync(ctx context.Context, _ fs.FileHandle, flags uint32) syscall.Errno {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	if n.in.dir {
		n.in.durEntries = clone(n.in.entries)
		n.m.stats.DirSyncs++
		return 0
	}
	n.in.durable = append([]byte(nil), n.in.data...)
	n.m.stats.FileSyncs++
	return 0
}

func (n *node) Flush(ctx context.Context, _ fs.FileHandle) syscall.Errno   { return 0 }
func (n *node) Release(ctx context.Context, _ fs.FileHandle) syscall.Errno { return 0 }
func (n *node) OnForget()                                                  {}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize = 4096, 4096
	out.Blocks, out.Bfree, out.Bavail = 1<<20, 1<<19, 1<<19
	out.Files, out.Ffree = 1<<20, 1<<19
	out.NameLen = 255
	return 0
}

// lostBytes counts the bytes a cut changes: data beyond the durable length,
// and bytes of the durable range that were overwritten since the sync.
func lostBytes(data, durable []byte) int64 {
	n := int64(max(len(data)-len(durable), 0))
	for i := range min(len(data), len(durable)) {
		if data[i] != durable[i] {
			n++
		}
	}
	return n
}
