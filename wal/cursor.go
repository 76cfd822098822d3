package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// CursorStore persists a replica's next-to-apply cursor so a restart resumes
// instead of replaying from the beginning. The cursor is saved after each
// applied segment; because Apply is idempotent, a crash between apply and save
// at worst re-applies one segment.
//
// This is the replica's private, local cursor. Publishing it for retention is
// a separate step (ReplicaConfig.ReplicaID): a GC keeps min(published cursor).
type CursorStore interface {
	// Load returns the persisted next-to-apply cursor. ok is false if nothing
	// has been persisted yet.
	Load(ctx context.Context) (next uint64, ok bool, err error)
	// Save persists the next-to-apply cursor durably.
	Save(ctx context.Context, next uint64) error
}

// MemCursorStore is an in-memory CursorStore for tests. Its zero value is
// ready to use. It is not durable.
type MemCursorStore struct {
	mu  sync.Mutex
	val uint64
	set bool
}

// Load implements CursorStore.
func (m *MemCursorStore) Load(context.Context) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.val, m.set, nil
}

// Save implements CursorStore.
func (m *MemCursorStore) Save(_ context.Context, next uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.val, m.set = next, true
	return nil
}

// FileCursorStore persists the cursor to a local file as 8 little-endian bytes,
// written atomically via a temp file and rename (the temp file and the
// directory are fsynced, so a crash leaves either the old or the new value).
// Suitable for a full local replica that keeps its cursor next to its data.
type FileCursorStore struct {
	path string
}

// NewFileCursorStore returns a FileCursorStore writing to path.
func NewFileCursorStore(path string) *FileCursorStore { return &FileCursorStore{path: path} }

// Load implements CursorStore.
func (f *FileCursorStore) Load(context.Context) (uint64, bool, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("nereus/wal: cursor load: %w", err)
	}
	if len(data) != 8 {
		return 0, false, fmt.Errorf("%w: cursor file %s has %d bytes, want 8", ErrCorrupt, f.path, len(data))
	}
	return binary.LittleEndian.Uint64(data), true, nil
}

// Save implements CursorStore.
func (f *FileCursorStore) Save(_ context.Context, next uint64) error {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], next)
	tmp := f.path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("nereus/wal: cursor save: %w", err)
	}
	if _, err = fh.Write(buf[:]); err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("nereus/wal: cursor save (temp file): %w", err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return fmt.Errorf("nereus/wal: cursor save (rename): %w", err)
	}
	if dir, err := os.Open(filepath.Dir(f.path)); err == nil {
		_ = dir.Sync() // best effort: some filesystems refuse directory fsync
		_ = dir.Close()
	}
	return nil
}

// Published cursors: "<ManifestPath>.cursors/<replicaID>", 14 bytes:
// next u64 | crc32c(next) u32 | version u16 (=1).
const (
	cursorSuffix        = ".cursors/"
	publishedCursorSize = 8 + 4 + 2
	publishedCursorV1   = 1
)

// cursorPrefix is the key prefix under which replicas publish cursors.
func cursorPrefix(manifestPath string) string { return manifestPath + cursorSuffix }

func validReplicaID(id string) error {
	if id == "" || strings.ContainsAny(id, "/\x00") {
		return fmt.Errorf("nereus/wal: replica ID %q must be non-empty and contain no '/'", id)
	}
	return nil
}

func encodePublishedCursor(next uint64) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, publishedCursorSize), next)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return binary.LittleEndian.AppendUint16(b, publishedCursorV1)
}

func decodePublishedCursor(b []byte) (uint64, error) {
	if len(b) != publishedCursorSize || binary.LittleEndian.Uint16(b[12:]) != publishedCursorV1 {
		return 0, corruptf("published cursor of %d bytes", len(b))
	}
	if got, want := crc32.Checksum(b[:8], castagnoli), binary.LittleEndian.Uint32(b[8:]); got != want {
		return 0, corruptf("published cursor crc32c %08x, stored %08x", got, want)
	}
	return binary.LittleEndian.Uint64(b), nil
}

// publishedCursor is one replica's cursor as seen by a collector.
type publishedCursor struct {
	replicaID string
	next      uint64
	modTime   time.Time
	err       error // non-nil: unreadable; the collector treats it as cursor 0
}

// readPublishedCursors lists every cursor published for manifestPath.
func readPublishedCursors(ctx context.Context, store objectstore.ObjectStore, manifestPath string) ([]publishedCursor, error) {
	prefix := cursorPrefix(manifestPath)
	var out []publishedCursor
	for info, err := range store.List(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("nereus/wal: list cursors: %w", err)
		}
		pc := publishedCursor{replicaID: strings.TrimPrefix(info.Key, prefix), modTime: info.ModTime}
		data, _, err := store.Get(ctx, info.Key)
		switch {
		case errors.Is(err, objectstore.ErrNotFound):
			continue // removed between list and get
		case err != nil:
			return nil, fmt.Errorf("nereus/wal: read cursor %s: %w", info.Key, err)
		}
		pc.next, pc.err = decodePublishedCursor(data)
		out = append(out, pc)
	}
	return out, nil
}
