package metered_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/objectstore/metered"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

// The wrapper passes the whole conformance suite: it changes nothing.
func TestConformance(t *testing.T) {
	objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		return metered.Wrap(memstore.New(), mp.Meter("test"))
	})
}

func TestCountsAndBytes(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s := metered.Wrap(memstore.New(), mp.Meter("test"))

	if _, err := s.Put(ctx, "a", []byte("hello"), objectstore.PutOptions{Mode: objectstore.PutCreate}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a", []byte("again"), objectstore.PutOptions{Mode: objectstore.PutCreate}); !errors.Is(err, objectstore.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, _, err := s.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "missing"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := s.GetRange(ctx, "a", 1, 2); err != nil {
		t.Fatal(err)
	}
	for range s.List(ctx, "") {
	}
	if err := s.Delete(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	ops := map[[2]string]int64{}
	sums := map[string]int64{}
	hist := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if m.Name == "nereus.objectstore.operations" {
						op, _ := p.Attributes.Value("operation")
						res, _ := p.Attributes.Value("result")
						ops[[2]string{op.AsString(), res.AsString()}] += p.Value
					} else {
						sums[m.Name] += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value("operation")
					hist[op.AsString()] += p.Count
				}
			}
		}
	}
	want := map[[2]string]int64{
		{"put", "ok"}: 1, {"put", "already_exists"}: 1, {"get", "ok"}: 1, {"get", "not_found"}: 1,
		{"get_range", "ok"}: 1, {"list", "ok"}: 1, {"delete", "ok"}: 1,
	}
	for k, v := range want {
		if ops[k] != v {
			t.Errorf("operations%v = %d, want %d (all: %v)", k, ops[k], v, ops)
		}
	}
	if got := sums["nereus.objectstore.written_bytes"]; got != 10 {
		t.Errorf("written bytes = %d, want 10", got)
	}
	if got := sums["nereus.objectstore.read_bytes"]; got != 7 {
		t.Errorf("read bytes = %d, want 7", got)
	}
	if hist["put"] != 2 || hist["get"] != 2 || hist["list"] != 1 {
		t.Errorf("latency counts = %v", hist)
	}
}

// TestReadRangePieces: the wrapper keeps the inner store's pieces (fsstore
// reads the range piece by piece; filled sees each) and, over a store
// without them (memstore), reads the range once and calls filled once.
func TestReadRangePieces(t *testing.T) {
	ctx := context.Background()
	fs, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<10)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	for _, c := range []struct {
		inner objectstore.ObjectStore
		calls int
	}{{fs, 8}, {memstore.New(), 1}} {
		s := metered.Wrap(c.inner, mp.Meter("test"))
		if _, err := s.Put(ctx, "a/b", data, objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, len(data))
		calls := 0
		n, err := s.ReadRangePieces(ctx, "a/b", 0, dst, 8<<10, objectstore.ReadRangeOptions{CallerVerifies: true}, func(int) error {
			calls++
			return nil
		})
		if err != nil || n != len(data) || !bytes.Equal(dst, data) || calls != c.calls {
			t.Fatalf("%T: n %d, %d filled calls (want %d), err %v", c.inner, n, calls, c.calls, err)
		}
	}
}
