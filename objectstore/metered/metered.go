// Package metered wraps any objectstore.ObjectStore and records, per
// operation (get, get_range, head, put, delete, list), how many calls were
// made, how they ended and how long they took, plus the bytes moved, on an
// OpenTelemetry meter. Through the server's Prometheus exporter they are
// nereus_objectstore_operations_total{operation,result},
// nereus_objectstore_operation_duration_seconds{operation} and
// nereus_objectstore_{read,written}_bytes_total.
//
// It owns only measurement. It must never change what the wrapped store
// does: every call, argument, result and error passes through unchanged,
// and a meter that refuses an instrument gets a no-op one.
package metered

import (
	"context"
	"errors"
	"iter"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/nereusstream/nereus-go/objectstore"
)

// InstrumentationName names this package's meter.
const InstrumentationName = "github.com/nereusstream/nereus-go/objectstore/metered"

// Store is the metered wrapper. Safe for concurrent use (as the wrapped
// store is).
type Store struct {
	inner   objectstore.ObjectStore
	ops     metric.Int64Counter
	latency metric.Float64Histogram
	read    metric.Int64Counter
	written metric.Int64Counter
	// attrs holds the precomputed attribute sets, so a call allocates none.
	opAttrs     map[string]metric.MeasurementOption
	resultAttrs map[[2]string]metric.MeasurementOption
}

var _ objectstore.ObjectStore = (*Store)(nil)

// Operation names (the "operation" attribute).
const (
	OpGet      = "get"
	OpGetRange = "get_range"
	OpHead     = "head"
	OpPut      = "put"
	OpDelete   = "delete"
	OpList     = "list"
)

// Result names (the "result" attribute): ok, and the definite refusals by
// kind; "error" is everything else, including unknown outcomes of writes.
var results = []string{"ok", "not_found", "already_exists", "precondition_failed", "conflict", "invalid", "corrupt", "closed", "error"}

func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, objectstore.ErrNotFound):
		return "not_found"
	case errors.Is(err, objectstore.ErrAlreadyExists):
		return "already_exists"
	case errors.Is(err, objectstore.ErrPreconditionFailed):
		return "precondition_failed"
	case errors.Is(err, objectstore.ErrConflict):
		return "conflict"
	case errors.Is(err, objectstore.ErrInvalidArgument):
		return "invalid"
	case errors.Is(err, objectstore.ErrCorrupt):
		return "corrupt"
	case errors.Is(err, objectstore.ErrClosed):
		return "closed"
	default:
		return "error"
	}
}

// Wrap returns inner instrumented on meter (nil: a no-op meter).
func Wrap(inner objectstore.ObjectStore, meter metric.Meter) *Store {
	nm := noop.NewMeterProvider().Meter(InstrumentationName)
	if meter == nil {
		meter = nm
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			c, _ = nm.Int64Counter(name)
		}
		return c
	}
	h, err := meter.Float64Histogram("nereus.objectstore.operation_duration", metric.WithUnit("s"),
		metric.WithDescription("object store call latency by operation (lists: the whole iteration)"),
		metric.WithExplicitBucketBoundaries(.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10))
	if err != nil {
		h, _ = nm.Float64Histogram("nereus.objectstore.operation_duration")
	}
	s := &Store{
		inner:       inner,
		ops:         counter("nereus.objectstore.operations", "{call}", "object store calls by operation and result"),
		latency:     h,
		read:        counter("nereus.objectstore.read_bytes", "By", "object bytes returned by get and get_range"),
		written:     counter("nereus.objectstore.written_bytes", "By", "object bytes sent by put (applied or not)"),
		opAttrs:     map[string]metric.MeasurementOption{},
		resultAttrs: map[[2]string]metric.MeasurementOption{},
	}
	for _, op := range []string{OpGet, OpGetRange, OpHead, OpPut, OpDelete, OpList} {
		s.opAttrs[op] = metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op)))
		for _, r := range results {
			s.resultAttrs[[2]string{op, r}] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("operation", op), attribute.String("result", r)))
		}
		// Exported from the start (at zero), so a dashboard's rate is 0, not absent.
		s.ops.Add(context.Background(), 0, s.resultAttrs[[2]string{op, "ok"}])
	}
	s.read.Add(context.Background(), 0)
	s.written.Add(context.Background(), 0)
	return s
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() objectstore.ObjectStore { return s.inner }

func (s *Store) done(ctx context.Context, op string, start time.Time, err error) {
	// Measurements must outlive a cancelled caller context.
	ctx = context.WithoutCancel(ctx)
	s.ops.Add(ctx, 1, s.resultAttrs[[2]string{op, result(err)}])
	s.latency.Record(ctx, time.Since(start).Seconds(), s.opAttrs[op])
}

// Get implements objectstore.ObjectStore.
func (s *Store) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	start := time.Now()
	b, v, err := s.inner.Get(ctx, key)
	s.done(ctx, OpGet, start, err)
	if len(b) > 0 {
		s.read.Add(context.WithoutCancel(ctx), int64(len(b)))
	}
	return b, v, err
}

// GetRange implements objectstore.ObjectStore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	start := time.Now()
	b, err := s.inner.GetRange(ctx, key, offset, length)
	s.done(ctx, OpGetRange, start, err)
	if len(b) > 0 {
		s.read.Add(context.WithoutCancel(ctx), int64(len(b)))
	}
	return b, err
}

// ReadRange implements objectstore.RangeReader (counted as a get_range; a
// store without it is read by GetRange and a copy, objectstore.ReadRange).
func (s *Store) ReadRange(ctx context.Context, key string, offset int64, dst []byte, opts objectstore.ReadRangeOptions) (int, error) {
	start := time.Now()
	n, err := objectstore.ReadRange(ctx, s.inner, key, offset, dst, opts)
	s.done(ctx, OpGetRange, start, err)
	if n > 0 {
		s.read.Add(context.WithoutCancel(ctx), int64(n))
	}
	return n, err
}

// ReadRangePieces implements objectstore.PieceReader (counted as one
// get_range, as ReadRange; the inner store's own pieces, or one ReadRange
// when it has none).
func (s *Store) ReadRangePieces(ctx context.Context, key string, offset int64, dst []byte, piece int, opts objectstore.ReadRangeOptions, filled func(n int) error) (int, error) {
	start := time.Now()
	n, err := objectstore.ReadRangePieces(ctx, s.inner, key, offset, dst, piece, opts, filled)
	s.done(ctx, OpGetRange, start, err)
	if n > 0 {
		s.read.Add(context.WithoutCancel(ctx), int64(n))
	}
	return n, err
}

// Cached implements objectstore.CacheProber by asking the inner store
// (false when it cannot tell). Not counted: it reads no data.
func (s *Store) Cached(ctx context.Context, key string, offset, length int64) (bool, error) {
	return objectstore.Cached(ctx, s.inner, key, offset, length)
}

// Head implements objectstore.ObjectStore.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	start := time.Now()
	info, err := s.inner.Head(ctx, key)
	s.done(ctx, OpHead, start, err)
	return info, err
}

// Put implements objectstore.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	start := time.Now()
	v, err := s.inner.Put(ctx, key, data, opts)
	s.done(ctx, OpPut, start, err)
	s.written.Add(context.WithoutCancel(ctx), int64(len(data)))
	return v, err
}

// Delete implements objectstore.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	start := time.Now()
	err := s.inner.Delete(ctx, key, ifVersion)
	s.done(ctx, OpDelete, start, err)
	return err
}

// List implements objectstore.ObjectStore. One list is one call, measured
// from the start of the iteration to its end (or the caller's break).
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		start := time.Now()
		var last error
		for info, err := range s.inner.List(ctx, prefix) {
			last = err
			if !yield(info, err) {
				break
			}
		}
		s.done(ctx, OpList, start, last)
	}
}

// Close closes the wrapped store if it has a Close method.
func (s *Store) Close() error {
	if c, ok := s.inner.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
