package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/nereusstream/nereus-go/metadata"
)

// MaxNameLen bounds stream names (they are metadata keys).
const MaxNameLen = 512

func validateName(name string) error {
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("%w: stream name must be 1..%d bytes of UTF-8", ErrInvalidArgument, MaxNameLen)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: stream name %q contains a control character", ErrInvalidArgument, name)
		}
	}
	return nil
}

// retryUnknown bounds how long an operation keeps re-reading to settle an
// unknown metadata outcome before giving up with the context's error.
const unknownBackoff = 20 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Create implements Storage. The name record is the atomic creation point:
// it is written create-only and carries the whole creation spec; the head is
// derived from it (create-only too) by whoever finds it missing.
func (c *Core) Create(ctx context.Context, name string, opts CreateOptions) (Info, error) {
	if err := validateName(name); err != nil {
		return Info{}, err
	}
	if c.isClosed() {
		return Info{}, ErrClosed
	}
	p := opts.Profile
	if p == ProfileUnspecified {
		p = DefaultProfile
	}
	if p > ObjectWALAsyncObject {
		return Info{}, fmt.Errorf("%w: unknown profile %d", ErrInvalidArgument, p)
	}
	if _, err := c.providerFor(p); err != nil {
		return Info{}, err
	}
	// The attributes are copied once here: every Info of the stream shares
	// the head's map from then on (Info.Attributes), so the caller's map
	// must not be it.
	nr := nameRecord{ID: ID(c.random() >> 1), Name: name, Profile: p, CreatedMs: c.nowMs(),
		Attributes: maps.Clone(opts.Attributes), Retention: opts.Retention}
	if nr.ID == 0 {
		nr.ID = 1
	}
	for {
		_, err := c.meta.Put(ctx, nameKey(name), nr.encode(), metadata.NotExists)
		switch metadata.Classify(err) {
		case metadata.Applied:
			h, err := c.ensureHead(ctx, nr)
			if err != nil {
				return Info{}, err
			}
			return h.info(), nil
		case metadata.Conflict:
			existing, err := c.lookupName(ctx, name)
			if errors.Is(err, ErrStreamNotFound) {
				continue // a deleted stream's name record was just cleaned up
			}
			if err != nil {
				return Info{}, err
			}
			if existing.ID == nr.ID { // our own earlier attempt whose response was lost
				return existing, nil
			}
			return existing, fmt.Errorf("%w: %q", ErrStreamExists, name)
		case metadata.NotApplied:
			return Info{}, fmt.Errorf("nereus/stream: creating %q: %w", name, err)
		default: // unknown: the loop re-puts; a conflict then settles it
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return Info{}, fmt.Errorf("%w: creating %q: %w", ErrCommitUnknown, name, err)
			}
		}
	}
}

// ensureHead creates the head from the name record if it does not exist yet.
func (c *Core) ensureHead(ctx context.Context, nr nameRecord) (*head, error) {
	for {
		h, _, err := c.readHead(ctx, nr.ID)
		if err == nil {
			return h, nil
		}
		if !errors.Is(err, ErrStreamNotFound) {
			return nil, err
		}
		h = newHead(nr)
		_, err = c.meta.Put(ctx, headKey(nr.ID), h.encode(), metadata.NotExists)
		switch metadata.Classify(err) {
		case metadata.Applied:
			c.metrics.streamsCreated.Add(1)
			return h, nil
		case metadata.Conflict:
			continue
		case metadata.NotApplied:
			return nil, err
		default:
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return nil, err
			}
		}
	}
}

func (c *Core) readHead(ctx context.Context, id ID) (*head, metadata.Version, error) {
	rec, err := c.meta.Get(ctx, headKey(id))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w: %v", ErrStreamNotFound, id)
	}
	if err != nil {
		return nil, 0, err
	}
	h, err := decodeHead(rec.Value)
	if err != nil {
		return nil, 0, err
	}
	return h, rec.Version, nil
}

// lookupName resolves a name to its live stream, repairing a creation or
// deletion that was interrupted between its two keys.
func (c *Core) lookupName(ctx context.Context, name string) (Info, error) {
	rec, err := c.meta.Get(ctx, nameKey(name))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return Info{}, fmt.Errorf("%w: %q", ErrStreamNotFound, name)
	}
	if err != nil {
		return Info{}, err
	}
	nr, err := decodeNameRecord(rec.Value)
	if err != nil {
		return Info{}, err
	}
	h, err := c.ensureHead(ctx, nr)
	if err != nil {
		return Info{}, err
	}
	if h.State == StateDeleting || h.State == StateDeleted {
		// The deletion stopped before freeing the name: finish it.
		err := c.meta.Delete(ctx, nameKey(name), rec.Version)
		if err != nil && metadata.Classify(err) != metadata.Conflict && !errors.Is(err, metadata.ErrKeyNotFound) {
			return Info{}, err
		}
		return Info{}, fmt.Errorf("%w: %q", ErrStreamNotFound, name)
	}
	if o := c.owner(h.ID); o != nil {
		return o.info(), nil
	}
	return h.info(), nil
}

// Lookup implements Storage.
func (c *Core) Lookup(ctx context.Context, name string) (Info, error) {
	if err := validateName(name); err != nil {
		return Info{}, err
	}
	return c.lookupName(ctx, name)
}

// Describe implements Storage.
func (c *Core) Describe(ctx context.Context, id ID) (Info, error) {
	if o := c.owner(id); o != nil {
		return o.info(), nil
	}
	h, _, err := c.readHead(ctx, id)
	if err != nil {
		return Info{}, err
	}
	if h.State == StateDeleted {
		return Info{}, fmt.Errorf("%w: %v", ErrStreamNotFound, id)
	}
	return h.info(), nil
}

// List implements Storage.
func (c *Core) List(ctx context.Context, prefix, after string, limit int) ([]Info, error) {
	ls, err := c.listHeads(ctx, prefix, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(ls))
	for i, l := range ls {
		out[i] = l.info
	}
	return out, nil
}

// listedStream is one live stream as List found it, with the head it
// read: for a stream this process owns, the owner's committed head (the
// freshest), otherwise the store's.
type listedStream struct {
	info  Info
	h     *head
	owned bool // an owner in this process (h is its committed head)
}

// listHeads is List keeping the heads, so passes over every stream (GC)
// need not read each head again.
func (c *Core) listHeads(ctx context.Context, prefix, after string, limit int) ([]listedStream, error) {
	var out []listedStream
	err := c.eachHead(ctx, prefix, after, func(l listedStream) bool {
		out = append(out, l)
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// eachHead calls fn with every live stream whose name has prefix and sorts
// after `after`, in name order, until fn returns false. A stream with an
// owner in this process is not read from the store at all: its committed
// head is the freshest this process knows (every change of it goes through
// that owner, and a change by another process fences the owner at its next
// CAS), and it is what the caller would have been handed anyway. With
// thousands of owned streams and three periodic passes each listing every
// stream, those head reads and decodes were most of the background work;
// nothing is collected either, so a pass over every stream holds one page
// of names at a time.
func (c *Core) eachHead(ctx context.Context, prefix, after string, fn func(listedStream) bool) error {
	min := nameKey(prefix)
	if after != "" && nameKey(after) >= min {
		min = nameKey(after) + "\x00"
	}
	max := nameKey(prefix) + "\xff"
	var (
		ops    []metadata.Op
		names  []nameRecord
		owners []*owner
	)
	for {
		recs, err := c.meta.RangeScan(ctx, min, max, 256)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		ops, names, owners = ops[:0], names[:0], owners[:0]
		for _, r := range recs {
			nr, err := decodeNameRecord(r.Value)
			if err != nil {
				return err
			}
			names = append(names, nr)
		}
		owners = c.ownersOf(names, owners)
		for i, o := range owners {
			if o == nil {
				ops = append(ops, metadata.Op{Kind: metadata.OpGet, Key: headKey(names[i].ID)})
			}
		}
		var res []metadata.Result
		if len(ops) > 0 {
			if res, err = c.meta.Batch(ctx, ops); err != nil {
				return err
			}
		}
		for i, o := range owners {
			l := listedStream{owned: o != nil}
			if o != nil {
				l.h, _ = o.committed()
			} else {
				r := res[0]
				res = res[1:]
				switch {
				case r.Err == nil:
					l.h, err = decodeHead(r.Record.Value)
					if err != nil {
						return err
					}
				case errors.Is(r.Err, metadata.ErrKeyNotFound):
					l.h = newHead(names[i]) // creation in progress; its head is implied
				default:
					return r.Err
				}
			}
			if l.h.State == StateDeleting || l.h.State == StateDeleted {
				continue
			}
			l.info = l.h.info()
			if !fn(l) {
				return nil
			}
		}
		min = recs[len(recs)-1].Key + "\x00"
	}
}

// mutation is an idempotent change to a head: applying it to a head that
// already reflects it reports changed=false. Idempotence is what lets a
// mutation whose CAS outcome was unknown simply be re-applied to a fresh
// read.
type mutation func(h *head) (changed bool, err error)

// mutate applies m to stream id's head by CAS: through the owner's commit
// pipeline when this process holds the stream's session (so it serialises
// with appends), directly otherwise.
func (c *Core) mutate(ctx context.Context, id ID, m mutation) (*head, error) {
	if o := c.owner(id); o != nil {
		h, err := o.mutate(ctx, m)
		if !errors.Is(err, errOwnerGone) {
			return h, err
		}
	}
	for {
		h, v, err := c.readHead(ctx, id)
		if err != nil {
			return nil, err
		}
		if h.State == StateDeleted {
			return nil, fmt.Errorf("%w: %v", ErrStreamNotFound, id)
		}
		nh := h.clone()
		changed, err := m(nh)
		if err != nil {
			return nil, err
		}
		if !changed {
			return h, nil
		}
		_, err = c.meta.Put(ctx, headKey(id), nh.encode(), v)
		switch metadata.Classify(err) {
		case metadata.Applied:
			c.watch.local(id)
			return nh, nil
		case metadata.NotApplied:
			return nil, err
		case metadata.Conflict:
			continue
		default:
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
			}
		}
	}
}

// Trim implements Storage. A trim that moved the start asks for a GC pass
// at once (gc_schedule.go): the sources it retired start their grace
// period there instead of at the next GC interval.
func (c *Core) Trim(ctx context.Context, id ID, to int64) error {
	moved, err := c.trim(ctx, id, to)
	if moved {
		c.gcKick()
	}
	return err
}

// trim is Trim without the GC kick (a retention pass kicks once, at its
// end); moved reports that the start moved.
func (c *Core) trim(ctx context.Context, id ID, to int64) (moved bool, err error) {
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return false, err
	}
	to = min(to, h.End)
	if to <= h.Start {
		return false, nil
	}
	startBytes, err := c.bytesBefore(ctx, h, to)
	if err != nil {
		return false, err
	}
	_, err = c.mutate(ctx, id, func(h *head) (bool, error) {
		if to <= h.Start || to > h.End {
			return false, nil
		}
		h.Start = to
		h.StartBytes = max(h.StartBytes, startBytes)
		moved = true
		return true, nil
	})
	return moved && err == nil, err
}

// SetRetention implements Storage.
func (c *Core) SetRetention(ctx context.Context, id ID, r Retention) error {
	if r.Time < 0 || r.Bytes < 0 {
		return fmt.Errorf("%w: negative retention", ErrInvalidArgument)
	}
	_, err := c.mutate(ctx, id, func(h *head) (bool, error) {
		if h.Retention == r {
			return false, nil
		}
		h.Retention = r
		return true, nil
	})
	return err
}

// Seal implements Storage.
func (c *Core) Seal(ctx context.Context, id ID) error {
	_, err := c.mutate(ctx, id, func(h *head) (bool, error) {
		if h.State != StateActive {
			return false, nil
		}
		h.State = StateSealed
		return true, nil
	})
	return err
}

// Delete implements Storage. The head moves to DELETED first (the logical
// deletion point), then the name record is freed; a crash in between is
// repaired by the next lookup of the name.
//
// The stream's records and bytes are reclaimed later by GC (gc.go), which
// finds it through the deletion queue entry written here first.
func (c *Core) Delete(ctx context.Context, id ID) error {
	cur, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return err
	}
	if _, err := c.meta.Put(ctx, deletedKey(id), encodeDeleted(cur.Name, c.nowMs()), metadata.NotExists); err != nil &&
		metadata.Classify(err) != metadata.Conflict {
		return fmt.Errorf("nereus/stream: queueing %v for GC: %w", id, err)
	}
	h, err := c.mutate(ctx, id, func(h *head) (bool, error) {
		if h.State == StateDeleted {
			return false, nil
		}
		h.State = StateDeleted
		return true, nil
	})
	if err != nil {
		return err
	}
	if o := c.owner(id); o != nil {
		o.fail(fmt.Errorf("%w: %v was deleted", ErrStreamNotFound, id))
		c.dropOwner(o)
	}
	c.tail.dropStream(id)
	rec, err := c.meta.Get(ctx, nameKey(h.Name))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	nr, err := decodeNameRecord(rec.Value)
	if err != nil || nr.ID != id {
		return err // the name already belongs to a newer stream
	}
	err = c.meta.Delete(ctx, nameKey(h.Name), rec.Version)
	if err != nil && !errors.Is(err, metadata.ErrKeyNotFound) && metadata.Classify(err) != metadata.Conflict {
		return err
	}
	c.metrics.streamsDeleted.Add(1)
	return nil
}

// readHeadView returns the freshest head this process knows: the owner's
// committed head for owned streams, the store's otherwise.
func (c *Core) readHeadView(ctx context.Context, id ID) (*head, metadata.Version, error) {
	if o := c.owner(id); o != nil {
		h, v := o.committed()
		return h, v, nil
	}
	h, v, err := c.readHead(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if h.State == StateDeleted {
		return nil, 0, fmt.Errorf("%w: %v", ErrStreamNotFound, id)
	}
	return h, v, nil
}
