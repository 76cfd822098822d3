// Package memstore is an in-memory objectstore.ObjectStore for tests and for
// embedding. It owns nothing durable: everything is lost with the process.
// It must never be used where a user expects data to survive a restart.
package memstore

import (
	"context"
	"iter"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

type object struct {
	data    []byte
	version uint64
	modTime time.Time
}

// Store is a map of key to object guarded by one mutex. Versions come from a
// store-wide counter, so a rewrite with identical bytes still gets a new
// version (stronger than S3, which tests of ETag ABA must not rely on).
type Store struct {
	mu      sync.RWMutex
	objects map[string]*object
	next    uint64
}

// New returns an empty store.
func New() *Store { return &Store{objects: make(map[string]*object)} }

var _ objectstore.ObjectStore = (*Store)(nil)

func (s *Store) versionOf(o *object) objectstore.UpdateVersion {
	return objectstore.UpdateVersion{ETag: strconv.FormatUint(o.version, 16)}
}

// Get implements objectstore.ObjectStore.
func (s *Store) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	if err := ctx.Err(); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, objectstore.UpdateVersion{}, objectstore.ErrNotFound
	}
	return append([]byte(nil), o.data...), s.versionOf(o), nil
}

// ReadRange implements objectstore.RangeReader (a copy under the read
// lock; memstore has no checksums to skip).
func (s *Store) ReadRange(ctx context.Context, key string, offset int64, dst []byte, _ objectstore.ReadRangeOptions) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return 0, err
	}
	if offset < 0 {
		return 0, objectstore.ErrInvalidArgument
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[key]
	if !ok {
		return 0, objectstore.ErrNotFound
	}
	if offset >= int64(len(o.data)) {
		return 0, nil
	}
	return copy(dst, o.data[offset:]), nil
}

// GetRange implements objectstore.ObjectStore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, objectstore.ErrInvalidArgument
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, objectstore.ErrNotFound
	}
	n := int64(len(o.data))
	if offset >= n {
		return []byte{}, nil
	}
	end := n
	if length >= 0 && offset+length < n {
		end = offset + length
	}
	return append([]byte(nil), o.data[offset:end]...), nil
}

// Head implements objectstore.ObjectStore.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.objects[key]
	if !ok {
		return objectstore.ObjectInfo{}, objectstore.ErrNotFound
	}
	return objectstore.ObjectInfo{Key: key, Size: int64(len(o.data)), Version: s.versionOf(o), ModTime: o.modTime}, nil
}

// Put implements objectstore.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if err := ctx.Err(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	if opts.Mode == objectstore.PutUpdate && opts.Version.IsZero() {
		return objectstore.UpdateVersion{}, objectstore.ErrInvalidArgument
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, exists := s.objects[key]
	switch opts.Mode {
	case objectstore.PutCreate:
		if exists {
			return objectstore.UpdateVersion{}, objectstore.ErrAlreadyExists
		}
	case objectstore.PutUpdate:
		if !exists || !s.versionOf(cur).Equal(opts.Version) {
			return objectstore.UpdateVersion{}, objectstore.ErrPreconditionFailed
		}
	}
	s.next++
	o := &object{data: append([]byte(nil), data...), version: s.next, modTime: time.Now()}
	s.objects[key] = o
	return s.versionOf(o), nil
}

// Delete implements objectstore.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[key]
	if !ok {
		return objectstore.ErrNotFound
	}
	if ifVersion != nil && !s.versionOf(cur).Equal(*ifVersion) {
		return objectstore.ErrPreconditionFailed
	}
	delete(s.objects, key)
	return nil
}

// List implements objectstore.ObjectStore.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(objectstore.ObjectInfo{}, err)
			return
		}
		s.mu.RLock()
		infos := make([]objectstore.ObjectInfo, 0)
		for k, o := range s.objects {
			if strings.HasPrefix(k, prefix) {
				infos = append(infos, objectstore.ObjectInfo{Key: k, Size: int64(len(o.data)), Version: s.versionOf(o), ModTime: o.modTime})
			}
		}
		s.mu.RUnlock()
		sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
		for _, info := range infos {
			if !yield(info, nil) {
				return
			}
		}
	}
}
