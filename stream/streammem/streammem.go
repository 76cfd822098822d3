// Package streammem is an in-memory stream.Storage with the core's logical
// semantics (sessions and fencing, conditional appends, producer
// deduplication, containing-entry reads, long polls, trim, seal, delete) and
// none of its durability. It exists so protocol front ends can be tested fast
// and in isolation; it must never be used where data has to survive.
package streammem

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/internal/dedup"
)

type memStream struct {
	info    stream.Info
	entries []stream.ReadEntry // committed, ascending offsets
	token   uint64
	dedup   *dedup.Table
	changed chan struct{}
}

// Storage is the in-memory implementation.
type Storage struct {
	mu      sync.Mutex
	nextID  stream.ID
	byID    map[stream.ID]*memStream
	byName  map[string]stream.ID
	closed  bool
	nowFunc func() time.Time
}

// New returns an empty Storage.
func New() *Storage {
	return &Storage{nextID: 1, byID: map[stream.ID]*memStream{}, byName: map[string]stream.ID{}, nowFunc: time.Now}
}

var _ stream.Storage = (*Storage)(nil)

func (s *Storage) get(id stream.ID) (*memStream, error) {
	if s.closed {
		return nil, stream.ErrClosed
	}
	st, ok := s.byID[id]
	if !ok || st.info.State == stream.StateDeleted {
		return nil, fmt.Errorf("%w: %v", stream.ErrStreamNotFound, id)
	}
	return st, nil
}

func copyInfo(in stream.Info) stream.Info {
	out := in
	if in.Attributes != nil {
		out.Attributes = make(map[string]string, len(in.Attributes))
		for k, v := range in.Attributes {
			out.Attributes[k] = v
		}
	}
	return out
}

// Create implements stream.Storage.
func (s *Storage) Create(ctx context.Context, name string, opts stream.CreateOptions) (stream.Info, error) {
	if name == "" {
		return stream.Info{}, fmt.Errorf("%w: empty stream name", stream.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return stream.Info{}, stream.ErrClosed
	}
	if id, ok := s.byName[name]; ok {
		return copyInfo(s.byID[id].info), stream.ErrStreamExists
	}
	p := opts.Profile
	if p == stream.ProfileUnspecified {
		p = stream.DefaultProfile
	}
	id := s.nextID
	s.nextID++
	st := &memStream{
		info: stream.Info{ID: id, Name: name, Profile: p, State: stream.StateActive,
			Attributes: opts.Attributes, Retention: opts.Retention, CreatedAt: s.nowFunc()},
		dedup:   dedup.New(),
		changed: make(chan struct{}),
	}
	st.info = copyInfo(st.info)
	s.byID[id] = st
	s.byName[name] = id
	return copyInfo(st.info), nil
}

// Lookup implements stream.Storage.
func (s *Storage) Lookup(ctx context.Context, name string) (stream.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.byName[name]
	if !ok {
		return stream.Info{}, fmt.Errorf("%w: %q", stream.ErrStreamNotFound, name)
	}
	return copyInfo(s.byID[id].info), nil
}

// Describe implements stream.Storage.
func (s *Storage) Describe(ctx context.Context, id stream.ID) (stream.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return stream.Info{}, err
	}
	info := copyInfo(st.info)
	for _, e := range st.entries {
		info.RetainedBytes += int64(len(e.Payload))
	}
	return info, nil
}

// List implements stream.Storage.
func (s *Storage) List(ctx context.Context, prefix, after string, limit int) ([]stream.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.byName {
		if strings.HasPrefix(n, prefix) && n > after {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]stream.Info, 0, len(names))
	for _, n := range names {
		out = append(out, copyInfo(s.byID[s.byName[n]].info))
	}
	return out, nil
}

func randToken() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (s *Storage) bump(st *memStream) {
	close(st.changed)
	st.changed = make(chan struct{})
}

// AcquireSession implements stream.Storage.
func (s *Storage) AcquireSession(ctx context.Context, id stream.ID, opts stream.SessionOptions) (stream.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return stream.Session{}, err
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	now := s.nowFunc()
	cur := st.info.Session
	live := cur.WriterID != "" && now.Before(cur.Expires)
	switch {
	case cur.WriterID == "":
	case opts.AuthorityEpoch > 0 && opts.AuthorityEpoch < cur.AuthorityEpoch:
		return stream.Session{}, fmt.Errorf("%w: authority epoch %d < %d", stream.ErrFenced, opts.AuthorityEpoch, cur.AuthorityEpoch)
	case cur.WriterID == opts.WriterID && live && opts.AuthorityEpoch <= cur.AuthorityEpoch:
		st.info.Session.Expires = now.Add(ttl)
		return stream.Session{Stream: id, Epoch: cur.Epoch, Token: st.token, WriterID: cur.WriterID}, nil
	case opts.AuthorityEpoch > cur.AuthorityEpoch:
	case live:
		return stream.Session{}, fmt.Errorf("%w: held by %q", stream.ErrSessionBusy, cur.WriterID)
	case !opts.StealExpired && cur.WriterID != opts.WriterID:
		return stream.Session{}, fmt.Errorf("%w: expired session of %q (set StealExpired)", stream.ErrSessionBusy, cur.WriterID)
	}
	st.token = randToken()
	st.info.Session = stream.SessionInfo{Epoch: cur.Epoch + 1, WriterID: opts.WriterID, AuthorityEpoch: max(opts.AuthorityEpoch, cur.AuthorityEpoch), Expires: now.Add(ttl)}
	s.bump(st)
	return stream.Session{Stream: id, Epoch: st.info.Session.Epoch, Token: st.token, WriterID: opts.WriterID}, nil
}

// ReleaseSession implements stream.Storage.
func (s *Storage) ReleaseSession(ctx context.Context, sess stream.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(sess.Stream)
	if err != nil {
		return err
	}
	if st.info.Session.Epoch != sess.Epoch || st.token != sess.Token {
		return stream.ErrFenced
	}
	st.info.Session.Expires = time.Time{}
	return nil
}

// AppendAsync implements stream.Storage. The in-memory store commits
// synchronously, so the future is already resolved.
func (s *Storage) AppendAsync(sess stream.Session, req stream.AppendRequest) *stream.AppendFuture {
	f := stream.NewAppendFuture()
	f.Resolve(s.appendLocked(sess, req))
	return f
}

// Append implements stream.Storage.
func (s *Storage) Append(ctx context.Context, sess stream.Session, req stream.AppendRequest) (stream.AppendResult, error) {
	return s.AppendAsync(sess, req).Wait(ctx)
}

func (s *Storage) appendLocked(sess stream.Session, req stream.AppendRequest) (stream.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(sess.Stream)
	if err != nil {
		return stream.AppendResult{}, err
	}
	if len(req.Entries) == 0 {
		return stream.AppendResult{}, fmt.Errorf("%w: no entries", stream.ErrInvalidArgument)
	}
	for _, e := range req.Entries {
		if e.RecordCount == 0 {
			return stream.AppendResult{}, fmt.Errorf("%w: entry with RecordCount 0", stream.ErrInvalidArgument)
		}
	}
	if st.info.Session.Epoch != sess.Epoch || st.token != sess.Token {
		return stream.AppendResult{}, fmt.Errorf("%w: session epoch %d, stream at %d", stream.ErrFenced, sess.Epoch, st.info.Session.Epoch)
	}
	if st.info.State != stream.StateActive {
		return stream.AppendResult{}, stream.ErrStreamSealed
	}
	start := st.info.EndOffset
	if req.ExpectedStart >= 0 && req.ExpectedStart != start {
		return stream.AppendResult{}, fmt.Errorf("%w: expected %d, end is %d", stream.ErrOffsetConflict, req.ExpectedStart, start)
	}
	var count int64
	for _, e := range req.Entries {
		count += int64(e.RecordCount)
	}
	if q := req.Sequence; q != nil {
		v, orig := st.dedup.Check(dedup.Mode(q.Mode), q.Producer, q.Epoch, q.FirstSeq, q.LastSeq)
		switch v {
		case dedup.Duplicate:
			return stream.AppendResult{Start: orig.Start, End: orig.End, Duplicate: true}, nil
		case dedup.OutOfOrder:
			return stream.AppendResult{}, stream.ErrOutOfOrderSequence
		case dedup.Fenced:
			return stream.AppendResult{}, stream.ErrProducerFenced
		case dedup.Unknown:
			return stream.AppendResult{}, stream.ErrUnknownProducer
		}
		st.dedup.Record(q.Producer, q.Epoch, dedup.Batch{FirstSeq: q.FirstSeq, LastSeq: q.LastSeq, Start: start, End: start + count})
	}
	off := start
	for _, e := range req.Entries {
		st.entries = append(st.entries, stream.ReadEntry{Offset: off, RecordCount: e.RecordCount, Timestamp: e.Timestamp,
			Payload: append([]byte(nil), e.Payload...)})
		off += int64(e.RecordCount)
		st.info.CommittedBytes += int64(len(e.Payload))
	}
	st.info.EndOffset = off
	s.bump(st)
	return stream.AppendResult{Start: start, End: off}, nil
}

// Read implements stream.Storage.
func (s *Storage) Read(ctx context.Context, id stream.ID, from int64, opts stream.ReadOptions) (stream.ReadResult, error) {
	maxBytes, maxEntries := opts.MaxBytes, opts.MaxEntries
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	if maxEntries <= 0 {
		maxEntries = 1000
	}
	var deadline <-chan time.Time
	if opts.Wait > 0 {
		t := time.NewTimer(opts.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		s.mu.Lock()
		st, err := s.get(id)
		if err != nil {
			s.mu.Unlock()
			return stream.ReadResult{}, err
		}
		res := stream.ReadResult{StartOffset: st.info.StartOffset, EndOffset: st.info.EndOffset, Next: from}
		if from < st.info.StartOffset || from > st.info.EndOffset {
			s.mu.Unlock()
			return res, fmt.Errorf("%w: %d not in [%d, %d]", stream.ErrOffsetOutOfRange, from, st.info.StartOffset, st.info.EndOffset)
		}
		i := sort.Search(len(st.entries), func(i int) bool {
			e := st.entries[i]
			return e.Offset+int64(e.RecordCount) > from
		})
		size := 0
		for ; i < len(st.entries) && len(res.Entries) < maxEntries; i++ {
			e := st.entries[i]
			if len(res.Entries) > 0 && size+len(e.Payload) > maxBytes {
				break
			}
			size += len(e.Payload)
			e.Payload = append([]byte(nil), e.Payload...)
			res.Entries = append(res.Entries, e)
			res.Next = e.Offset + int64(e.RecordCount)
		}
		changed := st.changed
		s.mu.Unlock()
		if len(res.Entries) > 0 || deadline == nil {
			return res, nil
		}
		select {
		case <-changed:
		case <-deadline:
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

// Notify implements stream.Storage.
func (s *Storage) Notify(ctx context.Context, id stream.ID) (int64, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return 0, nil, err
	}
	return st.info.EndOffset, st.changed, nil
}

// OffsetForTimestamp implements stream.Storage.
func (s *Storage) OffsetForTimestamp(ctx context.Context, id stream.ID, ts int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return 0, err
	}
	for _, e := range st.entries {
		if e.Offset+int64(e.RecordCount) > st.info.StartOffset && e.Timestamp >= ts {
			return max(e.Offset, st.info.StartOffset), nil
		}
	}
	return st.info.EndOffset, nil
}

// Trim implements stream.Storage.
func (s *Storage) Trim(ctx context.Context, id stream.ID, to int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return err
	}
	to = min(to, st.info.EndOffset)
	if to <= st.info.StartOffset {
		return nil
	}
	st.info.StartOffset = to
	// Drop whole entries that end at or before the new start.
	i := sort.Search(len(st.entries), func(i int) bool {
		e := st.entries[i]
		return e.Offset+int64(e.RecordCount) > to
	})
	st.entries = append([]stream.ReadEntry(nil), st.entries[i:]...)
	s.bump(st)
	return nil
}

// SetRetention implements stream.Storage. Retention is recorded, not
// enforced, in memory.
func (s *Storage) SetRetention(ctx context.Context, id stream.ID, r stream.Retention) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return err
	}
	st.info.Retention = r
	return nil
}

// Seal implements stream.Storage.
func (s *Storage) Seal(ctx context.Context, id stream.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return err
	}
	st.info.State = stream.StateSealed
	s.bump(st)
	return nil
}

// Delete implements stream.Storage.
func (s *Storage) Delete(ctx context.Context, id stream.ID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return err
	}
	st.info.State = stream.StateDeleted
	delete(s.byName, st.info.Name)
	s.bump(st)
	return nil
}

// Close makes every later call fail with stream.ErrClosed.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
