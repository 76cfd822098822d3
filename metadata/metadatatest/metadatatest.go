// Package metadatatest is the conformance suite of the metadata.Store
// contract. Every implementation (memstore, boltstore, faultstore over
// either, etcdstore) runs the same Run, so they agree on CAS semantics,
// version rules, batch independence, range scans, sessions, watches,
// concurrency and Close.
//
// It owns the executable reading of the contract in package metadata. It
// must never test an implementation detail that another conforming store
// could do differently: versions of different keys are not compared,
// ops on different keys in one Batch are not assumed ordered, and a
// watcher's buffer size is assumed only to be below the overflow test's
// event count (4000).
//
// Optional capability: a store that implements KeepAliveStopper also gets
// the TTL-expiry test; otherwise that subtest is skipped with a message.
//
// It also holds the harnesses the durable local stores (boltstore,
// logstore) share, so both are checked and measured the same way: the
// kill -9 / power-cut crash harness (crash.go) and the benchmarks
// (bench.go). It is imported by tests only, never by a store or a binary.
package metadatatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// KeepAliveStopper is implemented by stores that let a test stop a
// session's keep-alive, after which the session must expire within its TTL
// (plus the store's expiry granularity).
type KeepAliveStopper interface {
	StopKeepAlive(id metadata.SessionID) bool
}

// OverflowEvents is how many events the overflow test writes without
// reading: a conforming store's per-watcher buffer must be smaller.
const OverflowEvents = 4000

// Run runs the whole suite. open must return a new, empty store (or an
// isolated namespace of one) each time it is called; Run closes it.
func Run(t *testing.T, open func(t *testing.T) metadata.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s metadata.Store)
	}{
		{"PutGetCAS", testPutGetCAS},
		{"Delete", testDelete},
		{"VersionsNeverReused", testVersionsNeverReused},
		{"InvalidArgument", testInvalidArgument},
		{"ValuesNotAliased", testValuesNotAliased},
		{"BatchIndependence", testBatchIndependence},
		{"BatchSameKeyOrder", testBatchSameKeyOrder},
		{"BatchLarge", testBatchLarge},
		{"RangeScan", testRangeScan},
		{"SessionClose", testSessionClose},
		{"SessionExpiry", testSessionExpiry},
		{"SessionKeepAlive", testSessionKeepAlive},
		{"WatchOrder", testWatchOrder},
		{"WatchOverflowResync", testWatchOverflowResync},
		{"WatchCancel", testWatchCancel},
		{"ConcurrentCAS", testConcurrentCAS},
		{"ConcurrentCreate", testConcurrentCreate},
		{"CancelledContext", testCancelledContext},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantOutcome(t *testing.T, what string, err error, want metadata.Outcome) {
	t.Helper()
	if got := metadata.Classify(err); got != want {
		t.Fatalf("%s: outcome %v (err %v), want %v", what, got, err, want)
	}
}

func mustPut(t *testing.T, s metadata.Store, key, value string, expected metadata.Version) metadata.Version {
	t.Helper()
	v, err := s.Put(ctxFor(t), key, []byte(value), expected)
	if err != nil {
		t.Fatalf("Put(%q, expected %d): %v", key, expected, err)
	}
	if v <= 0 {
		t.Fatalf("Put(%q) returned version %d, want > 0", key, v)
	}
	return v
}

func mustGet(t *testing.T, s metadata.Store, key string) metadata.Record {
	t.Helper()
	r, err := s.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return r
}

func wantAbsent(t *testing.T, s metadata.Store, key string) {
	t.Helper()
	_, err := s.Get(ctxFor(t), key)
	if !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatalf("Get(%q): err %v, want ErrKeyNotFound", key, err)
	}
}

func testPutGetCAS(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	wantAbsent(t, s, "k")
	v1 := mustPut(t, s, "k", "one", metadata.NotExists)
	r := mustGet(t, s, "k")
	if r.Key != "k" || string(r.Value) != "one" || r.Version != v1 || r.Session != 0 {
		t.Fatalf("Get = %+v, want k=one@%d persistent", r, v1)
	}

	_, err := s.Put(ctx, "k", []byte("again"), metadata.NotExists)
	wantOutcome(t, "create over existing", err, metadata.Conflict)

	v2 := mustPut(t, s, "k", "two", v1)
	if v2 <= v1 {
		t.Fatalf("version went %d -> %d, want increase", v1, v2)
	}
	_, err = s.Put(ctx, "k", []byte("stale"), v1)
	wantOutcome(t, "CAS with stale version", err, metadata.Conflict)
	if !errors.Is(err, metadata.ErrUnexpectedVersion) {
		t.Fatalf("stale CAS err %v, want ErrUnexpectedVersion", err)
	}
	if r := mustGet(t, s, "k"); string(r.Value) != "two" || r.Version != v2 {
		t.Fatalf("after failed CAS: %+v, want two@%d", r, v2)
	}

	v3 := mustPut(t, s, "k", "three", metadata.AnyVersion)
	if v3 <= v2 {
		t.Fatalf("unconditional put version %d, want > %d", v3, v2)
	}

	_, err = s.Put(ctx, "absent", []byte("x"), v3)
	wantOutcome(t, "CAS on absent key", err, metadata.Conflict)
	if !errors.Is(err, metadata.ErrKeyNotFound) || !errors.Is(err, metadata.ErrUnexpectedVersion) {
		t.Fatalf("CAS on absent key: err %v, want both ErrUnexpectedVersion and ErrKeyNotFound", err)
	}
	wantAbsent(t, s, "absent")

	vEmpty := mustPut(t, s, "empty", "", metadata.NotExists)
	if r := mustGet(t, s, "empty"); len(r.Value) != 0 || r.Version != vEmpty {
		t.Fatalf("empty value: %+v", r)
	}
}

func testDelete(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	err := s.Delete(ctx, "nope", metadata.AnyVersion)
	if !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatalf("delete absent: %v, want ErrKeyNotFound", err)
	}
	wantOutcome(t, "delete absent", err, metadata.NotApplied)

	err = s.Delete(ctx, "nope", 7)
	wantOutcome(t, "delete absent expecting a version", err, metadata.Conflict)
	if !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatalf("delete absent expecting a version: %v, want ErrKeyNotFound too", err)
	}

	v := mustPut(t, s, "d", "x", metadata.NotExists)
	v2 := mustPut(t, s, "d", "y", v)
	err = s.Delete(ctx, "d", v)
	wantOutcome(t, "delete with stale version", err, metadata.Conflict)
	mustGet(t, s, "d")
	if err := s.Delete(ctx, "d", v2); err != nil {
		t.Fatalf("delete at current version: %v", err)
	}
	wantAbsent(t, s, "d")

	mustPut(t, s, "d2", "x", metadata.NotExists)
	if err := s.Delete(ctx, "d2", metadata.AnyVersion); err != nil {
		t.Fatalf("unconditional delete: %v", err)
	}
	wantAbsent(t, s, "d2")
}

func testVersionsNeverReused(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	var last metadata.Version
	for i := range 5 {
		v := mustPut(t, s, "cycle", fmt.Sprint(i), metadata.NotExists)
		if v <= last {
			t.Fatalf("cycle %d: recreated key got version %d, want > %d", i, v, last)
		}
		v2 := mustPut(t, s, "cycle", fmt.Sprint(i), v)
		if v2 <= v {
			t.Fatalf("cycle %d: version %d after %d", i, v2, v)
		}
		if err := s.Delete(ctx, "cycle", v2); err != nil {
			t.Fatalf("cycle %d: delete: %v", i, err)
		}
		// A stale version from before the delete must not match the
		// recreated key.
		last = v2
	}
	v := mustPut(t, s, "cycle", "final", metadata.NotExists)
	_, err := s.Put(ctx, "cycle", []byte("stale"), last)
	wantOutcome(t, "CAS with pre-delete version", err, metadata.Conflict)
	if v <= last {
		t.Fatalf("final version %d, want > %d", v, last)
	}
}

func testInvalidArgument(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, metadata.ErrInvalidArgument) {
			t.Fatalf("%s: %v, want ErrInvalidArgument", what, err)
		}
		wantOutcome(t, what, err, metadata.NotApplied)
	}
	_, err := s.Put(ctx, "", []byte("x"), metadata.AnyVersion)
	check("put empty key", err)
	_, err = s.Get(ctx, "")
	check("get empty key", err)
	check("delete empty key", s.Delete(ctx, "", metadata.AnyVersion))
	_, err = s.Put(ctx, "k", []byte("x"), -5)
	check("put expecting version -5", err)
	check("delete expecting NotExists", s.Delete(ctx, "k", metadata.NotExists))
	_, err = s.RangeScan(ctx, "b", "a", 0)
	check("reversed range", err)
	_, err = s.NewSession(ctx, 0)
	check("session ttl 0", err)
	_, err = s.PutEphemeral(ctx, "k", []byte("x"), metadata.AnyVersion, 0)
	check("PutEphemeral without session", err)
	res, err := s.Batch(ctx, []metadata.Op{{Kind: 99, Key: "k"}})
	if err != nil {
		t.Fatalf("batch with unknown op kind: round trip failed: %v", err)
	}
	check("unknown op kind", res[0].Err)
	wantAbsent(t, s, "k")
}

func testValuesNotAliased(t *testing.T, s metadata.Store) {
	in := []byte("original")
	mustPut(t, s, "alias", string(in), metadata.NotExists)
	v, err := s.Put(ctxFor(t), "alias2", in, metadata.NotExists)
	if err != nil || v <= 0 {
		t.Fatalf("put: %v", err)
	}
	copy(in, "XXXXXXXX")
	r := mustGet(t, s, "alias2")
	if string(r.Value) != "original" {
		t.Fatalf("store retained the caller's slice: %q", r.Value)
	}
	copy(r.Value, "YYYYYYYY")
	if r2 := mustGet(t, s, "alias2"); string(r2.Value) != "original" {
		t.Fatalf("returned slice aliases the store: %q", r2.Value)
	}
	recs, err := s.RangeScan(ctxFor(t), "alias", "aliat", 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("scan: %v %v", recs, err)
	}
	copy(recs[0].Value, "ZZZZZZZZ")
	if r3 := mustGet(t, s, "alias"); string(r3.Value) != "original" {
		t.Fatalf("scanned slice aliases the store: %q", r3.Value)
	}
}

func testBatchIndependence(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	vd := mustPut(t, s, "b/d", "d", metadata.NotExists)
	vc := mustPut(t, s, "b/c", "c", metadata.NotExists)
	ops := []metadata.Op{
		{Kind: metadata.OpPut, Key: "b/a", Value: []byte("a"), Expected: metadata.NotExists}, // ok
		{Kind: metadata.OpPut, Key: "b/b", Value: []byte("b"), Expected: 12345},              // absent: conflict
		{Kind: metadata.OpPut, Key: "b/c", Value: []byte("c2"), Expected: vc},                // ok
		{Kind: metadata.OpDelete, Key: "b/x", Expected: metadata.AnyVersion},                 // absent: not found
		{Kind: metadata.OpPut, Key: "", Value: []byte("e")},                                  // invalid
		{Kind: metadata.OpPut, Key: "b/d", Value: []byte("d2"), Expected: vd + 1000},         // stale: conflict
		{Kind: metadata.OpGet, Key: "b/zz"},                                                  // not found
		{Kind: metadata.OpDelete, Key: "b/d", Expected: vd},                                  // ok
		{Kind: metadata.OpGet, Key: "b/c"},                                                   // sees c2
	}
	res, err := s.Batch(ctx, ops)
	if err != nil {
		t.Fatalf("Batch: %v", err)
	}
	if len(res) != len(ops) {
		t.Fatalf("Batch returned %d results for %d ops", len(res), len(ops))
	}
	want := []metadata.Outcome{metadata.Applied, metadata.Conflict, metadata.Applied, metadata.NotApplied,
		metadata.NotApplied, metadata.Conflict, metadata.NotApplied, metadata.Applied, metadata.Applied}
	for i, w := range want {
		if got := metadata.Classify(res[i].Err); got != w {
			t.Errorf("op %d (%v %q): outcome %v (err %v), want %v", i, ops[i].Kind, ops[i].Key, got, res[i].Err, w)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if !errors.Is(res[4].Err, metadata.ErrInvalidArgument) || !errors.Is(res[6].Err, metadata.ErrKeyNotFound) {
		t.Fatalf("errors: invalid=%v get-absent=%v", res[4].Err, res[6].Err)
	}
	if res[0].Version <= 0 || res[2].Version <= vc {
		t.Fatalf("put versions: %d, %d (c was %d)", res[0].Version, res[2].Version, vc)
	}
	if string(res[8].Record.Value) != "c2" || res[8].Record.Version != res[2].Version || res[8].Version != res[2].Version {
		t.Fatalf("get after put in one batch: %+v, want c2@%d", res[8], res[2].Version)
	}
	if r := mustGet(t, s, "b/a"); string(r.Value) != "a" || r.Version != res[0].Version {
		t.Fatalf("b/a = %+v", r)
	}
	wantAbsent(t, s, "b/b")
	wantAbsent(t, s, "b/d")

	empty, err := s.Batch(ctx, nil)
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty batch: %v, %v", empty, err)
	}
	reads, err := s.Batch(ctx, []metadata.Op{{Kind: metadata.OpGet, Key: "b/a"}, {Kind: metadata.OpGet, Key: "b/b"}})
	if err != nil || string(reads[0].Record.Value) != "a" || !errors.Is(reads[1].Err, metadata.ErrKeyNotFound) {
		t.Fatalf("read-only batch: %+v, %v", reads, err)
	}
}

func testBatchSameKeyOrder(t *testing.T, s metadata.Store) {
	res, err := s.Batch(ctxFor(t), []metadata.Op{
		{Kind: metadata.OpPut, Key: "o", Value: []byte("1"), Expected: metadata.NotExists},
		{Kind: metadata.OpPut, Key: "o", Value: []byte("dup"), Expected: metadata.NotExists},
		{Kind: metadata.OpPut, Key: "o", Value: []byte("2"), Expected: metadata.AnyVersion},
		{Kind: metadata.OpGet, Key: "o"},
		{Kind: metadata.OpDelete, Key: "o", Expected: metadata.AnyVersion},
		{Kind: metadata.OpGet, Key: "o"},
	})
	if err != nil {
		t.Fatalf("Batch: %v", err)
	}
	if res[0].Err != nil || metadata.Classify(res[1].Err) != metadata.Conflict || res[2].Err != nil {
		t.Fatalf("puts: %v / %v / %v", res[0].Err, res[1].Err, res[2].Err)
	}
	if res[2].Version <= res[0].Version {
		t.Fatalf("versions %d then %d", res[0].Version, res[2].Version)
	}
	if string(res[3].Record.Value) != "2" || res[3].Record.Version != res[2].Version {
		t.Fatalf("get: %+v", res[3])
	}
	if res[4].Err != nil || !errors.Is(res[5].Err, metadata.ErrKeyNotFound) {
		t.Fatalf("delete then get: %v / %v", res[4].Err, res[5].Err)
	}
}

func testBatchLarge(t *testing.T, s metadata.Store) {
	const n = 2000
	ops := make([]metadata.Op, n)
	for i := range ops {
		ops[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("l/%05d", i), Value: []byte{byte(i)}, Expected: metadata.NotExists}
	}
	res, err := s.Batch(ctxFor(t), ops)
	if err != nil {
		t.Fatalf("Batch: %v", err)
	}
	// Versions of different keys may coincide (one etcd transaction gives
	// all its writes one revision); only per-key rules are checked.
	for i, r := range res {
		if r.Err != nil || r.Version <= 0 {
			t.Fatalf("op %d: %+v", i, r)
		}
	}
	// Second round: CAS every key at its version, half of them stale.
	for i := range ops {
		ops[i].Expected = res[i].Version
		if i%2 == 1 {
			ops[i].Expected = res[i].Version + metadata.Version(10*n)
		}
	}
	res2, err := s.Batch(ctxFor(t), ops)
	if err != nil {
		t.Fatalf("Batch 2: %v", err)
	}
	for i, r := range res2 {
		want := metadata.Applied
		if i%2 == 1 {
			want = metadata.Conflict
		}
		if got := metadata.Classify(r.Err); got != want {
			t.Fatalf("op %d: %v (%v), want %v", i, got, r.Err, want)
		}
		if want == metadata.Applied && r.Version <= res[i].Version {
			t.Fatalf("op %d: version %d after %d", i, r.Version, res[i].Version)
		}
	}
	recs, err := s.RangeScan(ctxFor(t), "l/", "l0", 0)
	if err != nil || len(recs) != n {
		t.Fatalf("scan: %d records, %v", len(recs), err)
	}
}

func testRangeScan(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	var ops []metadata.Op
	for i := 19; i >= 0; i-- {
		ops = append(ops, metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("r/%02d", i), Value: []byte(fmt.Sprint(i))})
	}
	ops = append(ops,
		metadata.Op{Kind: metadata.OpPut, Key: "r", Value: []byte("below")},
		metadata.Op{Kind: metadata.OpPut, Key: "r0", Value: []byte("above")},
		metadata.Op{Kind: metadata.OpPut, Key: "r/\xff", Value: []byte("high byte")})
	res, err := s.Batch(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]metadata.Version{}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("put %q: %v", ops[i].Key, r.Err)
		}
		versions[ops[i].Key] = r.Version
	}
	keys := func(recs []metadata.Record) []string {
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = r.Key
			if r.Version != versions[r.Key] {
				t.Fatalf("scan: %q at version %d, want %d", r.Key, r.Version, versions[r.Key])
			}
		}
		return out
	}
	want := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("r/%02d", i))
		}
		return out
	}
	eq := func(what string, got, want []string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	}
	all, err := s.RangeScan(ctx, "r/", "r0", 0)
	if err != nil {
		t.Fatal(err)
	}
	eq("full range", keys(all), append(want(0, 20), "r/\xff"))
	if string(all[3].Value) != "3" {
		t.Fatalf("value of r/03: %q", all[3].Value)
	}
	lim, err := s.RangeScan(ctx, "r/", "r0", 5)
	if err != nil {
		t.Fatal(err)
	}
	eq("limit 5", keys(lim), want(0, 5))
	mid, err := s.RangeScan(ctx, "r/05", "r/10", 0)
	if err != nil {
		t.Fatal(err)
	}
	eq("[r/05, r/10)", keys(mid), want(5, 10))
	none, err := s.RangeScan(ctx, "r/10", "r/10", 0)
	if err != nil || len(none) != 0 {
		t.Fatalf("empty range: %v %v", none, err)
	}
	gap, err := s.RangeScan(ctx, "q", "qz", 10)
	if err != nil || len(gap) != 0 {
		t.Fatalf("range with no keys: %v %v", gap, err)
	}
	wide, err := s.RangeScan(ctx, "", "\xff", 100)
	if err != nil {
		t.Fatal(err)
	}
	eq("whole key space", keys(wide), append(append([]string{"r"}, want(0, 20)...), "r/\xff", "r0"))
}

func testSessionClose(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	sess, err := s.NewSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	other, err := s.NewSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	defer func() { _ = other.Close(ctx) }()
	if sess.ID() == 0 || sess.ID() == other.ID() {
		t.Fatalf("session IDs %d and %d", sess.ID(), other.ID())
	}
	events, err := s.Watch(ctx, "e/")
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.PutEphemeral(ctx, "e/mine", []byte("x"), metadata.NotExists, sess.ID())
	if err != nil {
		t.Fatalf("PutEphemeral: %v", err)
	}
	if r := mustGet(t, s, "e/mine"); r.Session != sess.ID() || r.Version != v {
		t.Fatalf("ephemeral record %+v, want session %d version %d", r, sess.ID(), v)
	}
	// An ephemeral overwritten by a persistent put is no longer the
	// session's.
	ve, err := s.PutEphemeral(ctx, "e/converted", []byte("x"), metadata.NotExists, sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "e/converted", "persistent", ve)
	if _, err := s.PutEphemeral(ctx, "e/theirs", []byte("x"), metadata.NotExists, other.ID()); err != nil {
		t.Fatal(err)
	}
	// A persistent key taken over by the session dies with it.
	vp := mustPut(t, s, "e/taken", "p", metadata.NotExists)
	if _, err := s.PutEphemeral(ctx, "e/taken", []byte("e"), vp, sess.ID()); err != nil {
		t.Fatal(err)
	}

	if err := sess.Close(ctx); err != nil {
		t.Fatalf("session Close: %v", err)
	}
	waitClosed(t, "session Done after Close", sess.Done())
	wantAbsent(t, s, "e/mine")
	wantAbsent(t, s, "e/taken")
	if r := mustGet(t, s, "e/converted"); r.Session != 0 || string(r.Value) != "persistent" {
		t.Fatalf("converted record %+v", r)
	}
	mustGet(t, s, "e/theirs")
	_, err = s.PutEphemeral(ctx, "e/late", []byte("x"), metadata.AnyVersion, sess.ID())
	if !errors.Is(err, metadata.ErrSessionExpired) {
		t.Fatalf("PutEphemeral on closed session: %v, want ErrSessionExpired", err)
	}
	wantOutcome(t, "PutEphemeral on closed session", err, metadata.NotApplied)
	wantAbsent(t, s, "e/late")
	// A dead session fails only its own op of a Batch.
	res, err := s.Batch(ctx, []metadata.Op{
		{Kind: metadata.OpPut, Key: "e/sib1", Expected: metadata.NotExists},
		{Kind: metadata.OpPut, Key: "e/late2", Session: sess.ID()},
		{Kind: metadata.OpPut, Key: "e/sib2", Session: other.ID()},
	})
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, metadata.ErrSessionExpired) || res[2].Err != nil {
		t.Fatalf("batch with an op on a closed session: %+v / %v", res, err)
	}
	wantAbsent(t, s, "e/late2")
	mustGet(t, s, "e/sib1")
	if r := mustGet(t, s, "e/sib2"); r.Session != other.ID() {
		t.Fatalf("sibling ephemeral %+v", r)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("second session Close: %v", err)
	}

	// The watcher saw the ephemeral deletes.
	deleted := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for !deleted["e/mine"] || !deleted["e/taken"] {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("watch closed")
			}
			if ev.Kind == metadata.EventDelete {
				deleted[ev.Key] = true
			}
		case <-deadline:
			t.Fatalf("no delete events for ephemerals; saw %v", deleted)
		}
	}
	if deleted["e/converted"] || deleted["e/theirs"] || deleted["e/sib2"] {
		t.Fatalf("deleted records that were not the session's: %v", deleted)
	}
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not closed within 30s", what)
	}
}

func testSessionExpiry(t *testing.T, s metadata.Store) {
	stopper, ok := s.(KeepAliveStopper)
	if !ok {
		t.Fatalf("%T cannot stop a session's keep-alive (no StopKeepAlive): the conformance suite needs it to test expiry", s)
	}
	ctx := ctxFor(t)
	sess, err := s.NewSession(ctx, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutEphemeral(ctx, "x/eph", []byte("x"), metadata.NotExists, sess.ID()); err != nil {
		t.Fatal(err)
	}
	if !stopper.StopKeepAlive(sess.ID()) {
		t.Fatal("StopKeepAlive: session not alive")
	}
	waitClosed(t, "session Done after keep-alive stopped", sess.Done())
	wantAbsent(t, s, "x/eph")
	_, err = s.PutEphemeral(ctx, "x/eph2", []byte("x"), metadata.NotExists, sess.ID())
	if !errors.Is(err, metadata.ErrSessionExpired) {
		t.Fatalf("PutEphemeral on expired session: %v", err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("Close of expired session: %v", err)
	}
}

func testSessionKeepAlive(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	const ttl = 300 * time.Millisecond
	sess, err := s.NewSession(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutEphemeral(ctx, "ka/eph", []byte("x"), metadata.NotExists, sess.ID()); err != nil {
		t.Fatal(err)
	}
	// Not a synchronisation sleep: the check is that nothing happens for
	// several TTLs while the keep-alive runs.
	select {
	case <-sess.Done():
		t.Fatalf("session with running keep-alive ended within %v", 4*ttl)
	case <-time.After(4 * ttl):
	}
	if r := mustGet(t, s, "ka/eph"); r.Session != sess.ID() {
		t.Fatalf("ephemeral %+v", r)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantAbsent(t, s, "ka/eph")
}

func nextEvent(t *testing.T, ch <-chan metadata.Event) metadata.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
	}
	return metadata.Event{}
}

func testWatchOrder(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	mustPut(t, s, "w/before", "x", metadata.NotExists)
	ch, err := s.Watch(ctx, "w/")
	if err != nil {
		t.Fatal(err)
	}
	va := mustPut(t, s, "w/a", "1", metadata.NotExists)
	mustPut(t, s, "x/other", "1", metadata.NotExists)
	vb := mustPut(t, s, "w/b", "1", metadata.NotExists)
	va2 := mustPut(t, s, "w/a", "2", va)
	if err := s.Delete(ctx, "w/b", vb); err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(ctx, "w/a", []byte("lost"), va) // conflict: no event
	wantOutcome(t, "stale put", err, metadata.Conflict)
	res, err := s.Batch(ctx, []metadata.Op{
		{Kind: metadata.OpPut, Key: "w/c", Value: []byte("1")},
		{Kind: metadata.OpPut, Key: "w/d", Value: []byte("1")},
		{Kind: metadata.OpPut, Key: "w/a", Value: []byte("bad"), Expected: va}, // conflict
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []metadata.Event{
		{Kind: metadata.EventPut, Key: "w/a", Version: va},
		{Kind: metadata.EventPut, Key: "w/b", Version: vb},
		{Kind: metadata.EventPut, Key: "w/a", Version: va2},
		{Kind: metadata.EventDelete, Key: "w/b"},
	}
	for i, w := range want {
		if got := nextEvent(t, ch); got != w {
			t.Fatalf("event %d: %+v, want %+v", i, got, w)
		}
	}
	// Ops on different keys in one batch may commit in any order.
	got := []metadata.Event{nextEvent(t, ch), nextEvent(t, ch)}
	sort.Slice(got, func(i, j int) bool { return got[i].Key < got[j].Key })
	wantBatch := []metadata.Event{
		{Kind: metadata.EventPut, Key: "w/c", Version: res[0].Version},
		{Kind: metadata.EventPut, Key: "w/d", Version: res[1].Version},
	}
	if fmt.Sprint(got) != fmt.Sprint(wantBatch) {
		t.Fatalf("batch events %+v, want %+v", got, wantBatch)
	}
	// Nothing else is pending: a marker put is the next event.
	vm := mustPut(t, s, "w/marker", "1", metadata.NotExists)
	if ev := nextEvent(t, ch); ev != (metadata.Event{Kind: metadata.EventPut, Key: "w/marker", Version: vm}) {
		t.Fatalf("unexpected event %+v (conflicting writes must not notify)", ev)
	}

	// Concurrent writers: every key's events arrive with increasing
	// versions, and every acknowledged write is seen.
	const writers, each = 8, 20
	var wg sync.WaitGroup
	acked := make([][]metadata.Version, writers)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("w/conc/%d", w)
			expected := metadata.NotExists
			for range each {
				v, err := s.Put(ctx, key, []byte("v"), expected)
				if err != nil {
					errs <- err
					return
				}
				acked[w] = append(acked[w], v)
				expected = v
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string][]metadata.Version{}
	for range writers * each {
		ev := nextEvent(t, ch)
		seen[ev.Key] = append(seen[ev.Key], ev.Version)
	}
	for w := range writers {
		key := fmt.Sprintf("w/conc/%d", w)
		if fmt.Sprint(seen[key]) != fmt.Sprint(acked[w]) {
			t.Fatalf("%s: events %v, acknowledged %v", key, seen[key], acked[w])
		}
	}
}

func testWatchOverflowResync(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	ch, err := s.Watch(ctx, "of/")
	if err != nil {
		t.Fatal(err)
	}
	const perBatch = 500
	versions := map[string]metadata.Version{}
	for b := 0; b < OverflowEvents/perBatch; b++ {
		ops := make([]metadata.Op, perBatch)
		for i := range ops {
			ops[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("of/%05d", b*perBatch+i), Value: []byte("x")}
		}
		res, err := s.Batch(ctx, ops)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			versions[ops[i].Key] = r.Version
		}
	}
	// Unread for OverflowEvents events: the watcher must have overflowed.
	// Everything before the resync marker is genuine and unique.
	seen := map[string]bool{}
	for {
		ev := nextEvent(t, ch)
		if ev.Key == "" {
			if ev != (metadata.Event{}) {
				t.Fatalf("resync marker carries data: %+v", ev)
			}
			break
		}
		if seen[ev.Key] || versions[ev.Key] != ev.Version || ev.Kind != metadata.EventPut {
			t.Fatalf("event %+v: duplicate or unknown (want version %d)", ev, versions[ev.Key])
		}
		seen[ev.Key] = true
		if len(seen) == OverflowEvents {
			t.Fatalf("all %d events delivered without a resync: the watch buffer must be smaller", OverflowEvents)
		}
	}
	// After the resync the watcher is live again: drain stragglers (events
	// published after the marker) until a fresh marker key shows up.
	vm := mustPut(t, s, "of/zz-marker", "1", metadata.NotExists)
	for {
		ev := nextEvent(t, ch)
		if ev.Key == "of/zz-marker" {
			if ev.Version != vm {
				t.Fatalf("marker event %+v, want version %d", ev, vm)
			}
			break
		}
		if ev.Key != "" && versions[ev.Key] != ev.Version {
			t.Fatalf("straggler %+v", ev)
		}
	}
	recs, err := s.RangeScan(ctx, "of/", "of0", 0)
	if err != nil || len(recs) != OverflowEvents+1 {
		t.Fatalf("re-read after resync: %d records, %v", len(recs), err)
	}
}

func testWatchCancel(t *testing.T, s metadata.Store) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	ch, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "any", "1", metadata.NotExists)
	if ev := nextEvent(t, ch); ev.Key != "any" {
		t.Fatalf("event %+v", ev)
	}
	cancel()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel not closed after ctx cancel")
		}
	}
}

func testConcurrentCAS(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	const goroutines, attempts = 64, 8
	v0 := mustPut(t, s, "race", "start", metadata.NotExists)
	type win struct {
		expected, got metadata.Version
		value         string
	}
	var (
		mu   sync.Mutex
		wins []win
		wg   sync.WaitGroup
	)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range attempts {
				r, err := s.Get(ctx, "race")
				if err != nil {
					errs <- err
					return
				}
				val := fmt.Sprintf("g%d-a%d", g, a)
				v, err := s.Put(ctx, "race", []byte(val), r.Version)
				switch metadata.Classify(err) {
				case metadata.Applied:
					mu.Lock()
					wins = append(wins, win{r.Version, v, val})
					mu.Unlock()
				case metadata.Conflict:
				default:
					errs <- fmt.Errorf("CAS: %v (outcome %v)", err, metadata.Classify(err))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(wins) == 0 {
		t.Fatal("no CAS won")
	}
	sort.Slice(wins, func(i, j int) bool { return wins[i].got < wins[j].got })
	prev := v0
	for i, w := range wins {
		if w.expected != prev {
			t.Fatalf("win %d expected version %d, but the key was at %d: two winners for one version or a gap", i, w.expected, prev)
		}
		prev = w.got
	}
	final := mustGet(t, s, "race")
	last := wins[len(wins)-1]
	if final.Version != last.got || string(final.Value) != last.value {
		t.Fatalf("final %+v, want %s@%d", final, last.value, last.got)
	}
	t.Logf("%d winning CAS of %d attempts", len(wins), goroutines*attempts)
}

func testConcurrentCreate(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	const goroutines = 64
	var wg sync.WaitGroup
	outcomes := make([]metadata.Outcome, goroutines)
	versions := make([]metadata.Version, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Put(ctx, "create-once", fmt.Appendf(nil, "%d", g), metadata.NotExists)
			outcomes[g], versions[g] = metadata.Classify(err), v
		}()
	}
	wg.Wait()
	winner := -1
	for g, o := range outcomes {
		switch o {
		case metadata.Applied:
			if winner >= 0 {
				t.Fatalf("goroutines %d and %d both created the key", winner, g)
			}
			winner = g
		case metadata.Conflict:
		default:
			t.Fatalf("goroutine %d: outcome %v", g, o)
		}
	}
	if winner < 0 {
		t.Fatal("nobody created the key")
	}
	r := mustGet(t, s, "create-once")
	if r.Version != versions[winner] || !bytes.Equal(r.Value, fmt.Appendf(nil, "%d", winner)) {
		t.Fatalf("record %+v, winner %d@%d", r, winner, versions[winner])
	}
}

func testCancelledContext(t *testing.T, s metadata.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, "c", []byte("x"), metadata.NotExists); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	} else if metadata.Classify(err) == metadata.Applied || metadata.Classify(err) == metadata.Conflict {
		t.Fatalf("Put with a cancelled context: %v classified %v", err, metadata.Classify(err))
	}
	if _, err := s.Get(ctx, "c"); err == nil {
		t.Fatal("Get with a cancelled context succeeded")
	}
	if _, err := s.Batch(ctx, []metadata.Op{{Kind: metadata.OpPut, Key: "c"}}); err == nil {
		t.Fatal("Batch with a cancelled context succeeded")
	}
}

func testClose(t *testing.T, s metadata.Store) {
	ctx := ctxFor(t)
	mustPut(t, s, "k", "v", metadata.NotExists)
	sess, err := s.NewSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutEphemeral(ctx, "eph", []byte("v"), metadata.NotExists, sess.ID()); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed(t, "session Done after store Close", sess.Done())
	deadline := time.After(30 * time.Second)
drain:
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				break drain
			}
		case <-deadline:
			t.Fatal("watch channel not closed by store Close")
		}
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, metadata.ErrClosed) {
			t.Fatalf("%s after Close: %v, want ErrClosed", what, err)
		}
		wantOutcome(t, what+" after Close", err, metadata.NotApplied)
	}
	_, err = s.Get(ctx, "k")
	closed("Get", err)
	_, err = s.Put(ctx, "k", []byte("x"), metadata.AnyVersion)
	closed("Put", err)
	closed("Delete", s.Delete(ctx, "k", metadata.AnyVersion))
	_, err = s.RangeScan(ctx, "", "z", 0)
	closed("RangeScan", err)
	_, err = s.Batch(ctx, []metadata.Op{{Kind: metadata.OpPut, Key: "k"}})
	closed("Batch", err)
	_, err = s.NewSession(ctx, time.Second)
	closed("NewSession", err)
	_, err = s.Watch(ctx, "")
	closed("Watch", err)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
