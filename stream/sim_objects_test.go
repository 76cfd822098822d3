package stream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// simObjects is the object store of a simulation (the generations' home),
// shared by every simulated process and surviving their crashes: memstore's
// semantics on the simulated clock, with injected failures (before
// applying) and lost responses (after applying) on PUT and DELETE, and a
// latency on PUT and GET during which the calling simulated goroutine is
// parked — a crash in that window means the request never reached the
// store. Ranged reads (generation footers and blocks) are atomic: the
// generation reader shares footer loads between goroutines through a
// channel, which a parked coroutine would deadlock.
//
// Deleted objects are kept in a grave (for debugging a replay); onDelete is
// called before an object is deleted (the GC invariants).
type simObjects struct {
	w        *simWorld
	objs     map[string]*simObject
	grave    map[string][]byte
	next     uint64
	onDelete func(key string)
	// the real Object WAL's traffic (seeds with realWAL): segments PUT and
	// deleted, manifest writes (claims, commits, truncations)
	segPuts, segDeletes, manifestPuts int
	// downUntil: until this simulated time every GET, PUT and DELETE fails
	// (an outage of the store; ranged reads still answer)
	downUntil int64
}

func (s *simObjects) down() error {
	if s.w.now < s.downUntil {
		return errors.New("sim: object store unreachable")
	}
	return nil
}

type simObject struct {
	data    []byte
	version uint64
	mod     int64
}

var _ objectstore.ObjectStore = (*simObjects)(nil)

func newSimObjects(w *simWorld) *simObjects {
	return &simObjects{w: w, objs: map[string]*simObject{}, grave: map[string][]byte{}}
}

func (s *simObjects) ver(o *simObject) objectstore.UpdateVersion {
	return objectstore.UpdateVersion{ETag: strconv.FormatUint(o.version, 16)}
}

// latency parks the calling simulated goroutine (if any) for a store round
// trip.
func (s *simObjects) latency() {
	s.w.sleepCoro(s.w.jitter(s.w.faults.maxWALLat))
}

func (s *simObjects) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	s.latency()
	if err := s.down(); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	o := s.objs[key]
	if o == nil {
		return nil, objectstore.UpdateVersion{}, objectstore.ErrNotFound
	}
	return slices.Clone(o.data), s.ver(o), nil
}

func (s *simObjects) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	o := s.objs[key]
	if o == nil {
		return nil, objectstore.ErrNotFound
	}
	if offset >= int64(len(o.data)) {
		return nil, nil
	}
	end := int64(len(o.data))
	if length >= 0 {
		end = min(end, offset+length)
	}
	return slices.Clone(o.data[offset:end]), nil
}

func (s *simObjects) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	o := s.objs[key]
	if o == nil {
		return objectstore.ObjectInfo{}, objectstore.ErrNotFound
	}
	return objectstore.ObjectInfo{Key: key, Size: int64(len(o.data)), Version: s.ver(o), ModTime: time.Unix(0, o.mod)}, nil
}

func (s *simObjects) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	data = slices.Clone(data)
	s.latency()
	if err := s.down(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	if s.w.chance(s.w.faults.walFail) {
		return objectstore.UpdateVersion{}, fmt.Errorf("sim: object PUT failed before applying: %w", objectstore.ErrConflict)
	}
	cur := s.objs[key]
	switch opts.Mode {
	case objectstore.PutCreate:
		if cur != nil {
			return objectstore.UpdateVersion{}, objectstore.ErrAlreadyExists
		}
	case objectstore.PutUpdate:
		if cur == nil || !s.ver(cur).Equal(opts.Version) {
			return objectstore.UpdateVersion{}, objectstore.ErrPreconditionFailed
		}
	}
	s.next++
	o := &simObject{data: data, version: s.next, mod: s.w.now}
	s.objs[key] = o
	s.count(key, &s.segPuts, &s.manifestPuts)
	if s.w.chance(s.w.faults.walLost) {
		return objectstore.UpdateVersion{}, fmt.Errorf("sim: object PUT applied, response lost")
	}
	return s.ver(o), nil
}

func (s *simObjects) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	if err := s.down(); err != nil {
		return err
	}
	if s.w.chance(s.w.faults.walFail) {
		return fmt.Errorf("sim: object DELETE failed before applying: %w", objectstore.ErrConflict)
	}
	o := s.objs[key]
	if o == nil {
		return objectstore.ErrNotFound
	}
	if ifVersion != nil && !s.ver(o).Equal(*ifVersion) {
		return objectstore.ErrPreconditionFailed
	}
	if s.onDelete != nil {
		s.onDelete(key)
	}
	s.grave[key] = o.data
	delete(s.objs, key)
	s.count(key, &s.segDeletes, nil)
	if s.w.chance(s.w.faults.walLost) {
		return fmt.Errorf("sim: object DELETE applied, response lost")
	}
	return nil
}

func (s *simObjects) count(key string, seg, manifest *int) {
	if !strings.HasPrefix(key, "wal/") {
		return
	}
	switch {
	case strings.Contains(key, "/seg/"):
		*seg++
	case manifest != nil && strings.HasSuffix(key, "/manifest"):
		*manifest++
	}
}

func (s *simObjects) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	var infos []objectstore.ObjectInfo
	for k, o := range s.objs {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, objectstore.ObjectInfo{Key: k, Size: int64(len(o.data)), Version: s.ver(o), ModTime: time.Unix(0, o.mod)})
		}
	}
	slices.SortFunc(infos, func(a, b objectstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		for _, info := range infos {
			if !yield(info, nil) {
				return
			}
		}
	}
}
