package stream

import (
	"reflect"
	"testing"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestCommitReadyResetClearsEverything: reset writes only the fields a
// batch used, so a field it forgets (a new kind of effect) would leak into
// the next batch. Every field set, reset, and each must be zero again (or an
// empty slice whose elements were cleared).
func TestCommitReadyResetClearsEverything(t *testing.T) {
	op := &appendOp{}
	r := &commitReady{
		logs: []logLine{{msg: "x"}}, writes: []*appendOp{op}, committedRuns: []provider.Run{{Start: 1}},
		headChanged: true, releases: []release{{committed: true}}, resolves: []resolution{{future: NewAppendFuture()}},
		mutDone: []*mutationOp{{}}, probe: &indexProbe{}, kick: true, materialize: true, wakeAtMs: 5, drop: true,
		counters: machineCounters{admitted: 1, fenced: 2},
	}
	v := reflect.ValueOf(r).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			t.Fatalf("field %s not set by the test: set it so reset is checked for it", v.Type().Field(i).Name)
		}
	}
	writes := r.writes
	r.reset()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Slice {
			if f.Len() != 0 {
				t.Fatalf("field %s still holds %d elements", v.Type().Field(i).Name, f.Len())
			}
			continue
		}
		if !f.IsZero() {
			t.Fatalf("field %s not cleared: %v", v.Type().Field(i).Name, f.Interface())
		}
	}
	if writes[:1][0] != nil {
		t.Fatal("reset kept a reference to an executed write")
	}
	if !r.empty() {
		t.Fatal("a reset batch is not empty")
	}
}
