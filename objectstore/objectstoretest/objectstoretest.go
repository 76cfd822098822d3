// Package objectstoretest is the conformance suite every
// objectstore.ObjectStore backend must pass. It owns the executable form of
// the contract in package objectstore: conditional-write outcomes, version
// semantics, ranged reads, listing order, key rules and cancellation. It must
// never contain backend-specific knowledge beyond the documented
// Capabilities switches.
//
// Use it from a backend's tests:
//
//	func TestConformance(t *testing.T) {
//		objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore {
//			return newEmptyStore(t) // cleaned up by t.Cleanup
//		})
//	}
//
// newStore is called once per subtest and must return an empty store (or an
// empty namespace of one) that nobody else writes to.
package objectstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Capabilities switches off expectations a backend cannot meet by design.
// The zero value is the strictest contract.
type Capabilities struct {
	// ContentDerivedVersions: writing identical bytes yields the same
	// version (S3 ETags). The suite then skips the "identical rewrite gets a
	// new version" and "ABA after delete+recreate with identical bytes"
	// checks, which such a backend fails by design (see the objectstore
	// package doc).
	ContentDerivedVersions bool
	// NoObjectPrefixOverlap: the backend cannot hold an object "a" and an
	// object "a/b" at the same time (versitygw's posix backend maps keys to
	// files and directories). The listing test then leaves out keys that
	// are also a prefix of another key. S3 itself has no such limit.
	NoObjectPrefixOverlap bool
}

// Run runs the whole suite with the strictest contract.
func Run(t *testing.T, newStore func(t *testing.T) objectstore.ObjectStore) {
	RunWith(t, newStore, Capabilities{})
}

// RunWith runs the whole suite with the given capabilities.
func RunWith(t *testing.T, newStore func(t *testing.T) objectstore.ObjectStore, caps Capabilities) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objectstore.ObjectStore, caps Capabilities)
	}{
		{"PutGetHead", testPutGetHead},
		{"EmptyObject", testEmptyObject},
		{"NotFound", testNotFound},
		{"InvalidKeys", testInvalidKeys},
		{"SpecialCharacterKeys", testSpecialKeys},
		{"BuffersAreCallerOwned", testBuffersOwned},
		{"Overwrite", testOverwrite},
		{"CreateOnly", testCreateOnly},
		{"CASStaleVersion", testCASStale},
		{"CASAfterDeleteRecreate", testCASAfterDeleteRecreate},
		{"ConditionalDelete", testConditionalDelete},
		{"RacePutUpdate32", testRacePutUpdate},
		{"RacePutCreate32", testRacePutCreate},
		{"RangedReads", testRangedReads},
		{"ReadRangeIntoBuffer", testReadRange},
		{"ListOrderAndPrefix", testList},
		{"ListEarlyStop", testListEarlyStop},
		{"LargeObject", testLargeObject},
		{"ConcurrentDistinctKeys", testConcurrentDistinctKeys},
		{"ContextCancellation", testContextCancellation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t), caps)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustPut(t *testing.T, s objectstore.ObjectStore, key string, data []byte, opts objectstore.PutOptions) objectstore.UpdateVersion {
	t.Helper()
	v, err := s.Put(ctxT(t), key, data, opts)
	if err != nil {
		t.Fatalf("Put(%q, mode %d): %v", key, opts.Mode, err)
	}
	if v.IsZero() {
		t.Fatalf("Put(%q) returned an empty version", key)
	}
	return v
}

func overwrite() objectstore.PutOptions {
	return objectstore.PutOptions{Mode: objectstore.PutOverwrite}
}
func create() objectstore.PutOptions { return objectstore.PutOptions{Mode: objectstore.PutCreate} }
func update(v objectstore.UpdateVersion) objectstore.PutOptions {
	return objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v}
}

// expectContent checks key holds data at version v (v may be zero to skip).
func expectContent(t *testing.T, s objectstore.ObjectStore, key string, data []byte, v objectstore.UpdateVersion) {
	t.Helper()
	got, gv, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("Get(%q) = %d bytes %.32q, want %d bytes %.32q", key, len(got), got, len(data), data)
	}
	if !v.IsZero() && !gv.Equal(v) {
		t.Fatalf("Get(%q) version = %q, want %q", key, gv.ETag, v.ETag)
	}
}

func expectNotFound(t *testing.T, s objectstore.ObjectStore, key string) {
	t.Helper()
	if _, _, err := s.Get(ctxT(t), key); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("Get(%q) err = %v, want ErrNotFound", key, err)
	}
}

func expectIs(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	t.Fatalf("%s: err = %v, want one of %v", what, err, targets)
}

func testPutGetHead(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	data := []byte("hello, nereus")
	v := mustPut(t, s, "dir/obj", data, overwrite())
	expectContent(t, s, "dir/obj", data, v)
	info, err := s.Head(ctx, "dir/obj")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if info.Key != "dir/obj" || info.Size != int64(len(data)) || !info.Version.Equal(v) {
		t.Fatalf("Head = %+v, want key dir/obj size %d version %q", info, len(data), v.ETag)
	}
	if info.ModTime.IsZero() {
		t.Fatalf("Head ModTime is zero")
	}
	if c := objectstore.Classify(nil); c != objectstore.Applied {
		t.Fatalf("Classify(nil) = %v", c)
	}
}

func testEmptyObject(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	v := mustPut(t, s, "empty", nil, create())
	expectContent(t, s, "empty", []byte{}, v)
	info, err := s.Head(ctx, "empty")
	if err != nil || info.Size != 0 {
		t.Fatalf("Head(empty) = %+v, %v", info, err)
	}
	got, err := s.GetRange(ctx, "empty", 0, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("GetRange(empty) = %q, %v", got, err)
	}
}

func testNotFound(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	expectNotFound(t, s, "missing")
	_, err := s.GetRange(ctx, "missing", 0, 10)
	expectIs(t, "GetRange(missing)", err, objectstore.ErrNotFound)
	_, err = s.GetRange(ctx, "missing", 0, 0)
	expectIs(t, "GetRange(missing, len 0)", err, objectstore.ErrNotFound)
	_, err = s.Head(ctx, "missing")
	expectIs(t, "Head(missing)", err, objectstore.ErrNotFound)
	err = s.Delete(ctx, "missing", nil)
	expectIs(t, "Delete(missing)", err, objectstore.ErrNotFound)
	v := mustPut(t, s, "other", []byte("x"), overwrite())
	err = s.Delete(ctx, "missing", &v)
	expectIs(t, "conditional Delete(missing)", err, objectstore.ErrNotFound)
	if c := objectstore.Classify(err); c != objectstore.NotApplied {
		t.Fatalf("Classify(conditional delete of missing) = %v, want not-applied", c)
	}
}

func testInvalidKeys(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	long := string(bytes.Repeat([]byte("k"), objectstore.MaxKeyLen+1))
	longSeg := "a/" + string(bytes.Repeat([]byte("s"), objectstore.MaxKeySegmentLen+1))
	for _, key := range []string{"", "/abs", "a//b", "a/", "./a", "a/./b", "a/../b", "..", "nul\x00byte", "bad\xffutf8", long, longSeg} {
		_, err := s.Put(ctx, key, []byte("x"), overwrite())
		expectIs(t, fmt.Sprintf("Put(%.40q)", key), err, objectstore.ErrInvalidArgument)
		if c := objectstore.Classify(err); c != objectstore.NotApplied {
			t.Fatalf("Classify(Put(%.40q)) = %v, want not-applied", key, c)
		}
		_, _, err = s.Get(ctx, key)
		expectIs(t, fmt.Sprintf("Get(%.40q)", key), err, objectstore.ErrInvalidArgument)
		_, err = s.Head(ctx, key)
		expectIs(t, fmt.Sprintf("Head(%.40q)", key), err, objectstore.ErrInvalidArgument)
		err = s.Delete(ctx, key, nil)
		expectIs(t, fmt.Sprintf("Delete(%.40q)", key), err, objectstore.ErrInvalidArgument)
	}
	// The longest valid key and segment work.
	okKey := string(bytes.Repeat([]byte("k"), objectstore.MaxKeySegmentLen))
	mustPut(t, s, okKey, []byte("ok"), create())
	expectContent(t, s, okKey, []byte("ok"), objectstore.UpdateVersion{})

	_, err := s.Put(ctx, "k", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutUpdate})
	expectIs(t, "PutUpdate without version", err, objectstore.ErrInvalidArgument)
	expectNotFound(t, s, "k")
	_, err = s.GetRange(ctx, okKey, -1, 1)
	expectIs(t, "GetRange negative offset", err, objectstore.ErrInvalidArgument)
}

func testSpecialKeys(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	keys := []string{"with space", "plus+sign", "percent%20", "q?mark", "hash#tag", "amp&er=eq", "ünïcødé/ключ", "a.b/c-d_e~f", "x.d/y.o", "tab\tchar", "...", ".hidden/.x"}
	for i, k := range keys {
		data := []byte(fmt.Sprintf("value %d", i))
		v := mustPut(t, s, k, data, create())
		expectContent(t, s, k, data, v)
	}
	var listed []string
	for info, err := range s.List(ctxT(t), "") {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		listed = append(listed, info.Key)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("List = %q, want %q", listed, want)
	}
}

func testBuffersOwned(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	data := []byte("original")
	v := mustPut(t, s, "k", data, overwrite())
	copy(data, "MUTATED!")
	expectContent(t, s, "k", []byte("original"), v)
	got, _, err := s.Get(ctxT(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "XXXXXXXX")
	expectContent(t, s, "k", []byte("original"), v)
	r, err := s.GetRange(ctxT(t), "k", 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	copy(r, "YYYY")
	expectContent(t, s, "k", []byte("original"), v)
}

func testOverwrite(t *testing.T, s objectstore.ObjectStore, caps Capabilities) {
	v1 := mustPut(t, s, "k", []byte("one"), overwrite())
	v2 := mustPut(t, s, "k", []byte("two"), overwrite())
	if v1.Equal(v2) {
		t.Fatalf("overwrite with new content kept version %q", v1.ETag)
	}
	expectContent(t, s, "k", []byte("two"), v2)
	v3 := mustPut(t, s, "k", []byte("two"), overwrite())
	if !caps.ContentDerivedVersions && (v3.Equal(v2) || v3.Equal(v1)) {
		t.Fatalf("rewrite of identical bytes reused a version: %q", v3.ETag)
	}
	expectContent(t, s, "k", []byte("two"), v3)
}

func testCreateOnly(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	v1 := mustPut(t, s, "k", []byte("first"), create())
	_, err := s.Put(ctx, "k", []byte("second"), create())
	expectIs(t, "second PutCreate", err, objectstore.ErrAlreadyExists)
	if c := objectstore.Classify(err); c != objectstore.Conflict {
		t.Fatalf("Classify(ErrAlreadyExists) = %v, want conflict", c)
	}
	expectContent(t, s, "k", []byte("first"), v1)
	if err := s.Delete(ctx, "k", nil); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	v2 := mustPut(t, s, "k", []byte("third"), create())
	expectContent(t, s, "k", []byte("third"), v2)
}

func testCASStale(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	v1 := mustPut(t, s, "head", []byte("epoch-1"), create())
	v2 := mustPut(t, s, "head", []byte("epoch-2"), update(v1))
	if v2.Equal(v1) {
		t.Fatalf("PutUpdate kept version %q", v1.ETag)
	}
	_, err := s.Put(ctx, "head", []byte("epoch-2-stale"), update(v1))
	expectIs(t, "PutUpdate with stale version", err, objectstore.ErrPreconditionFailed)
	if c := objectstore.Classify(err); c != objectstore.Conflict {
		t.Fatalf("Classify(ErrPreconditionFailed) = %v, want conflict", c)
	}
	expectContent(t, s, "head", []byte("epoch-2"), v2)
	_, err = s.Put(ctx, "nohead", []byte("x"), update(v2))
	expectIs(t, "PutUpdate on missing key", err, objectstore.ErrPreconditionFailed)
	expectNotFound(t, s, "nohead")
	v3 := mustPut(t, s, "head", []byte("epoch-3"), update(v2))
	expectContent(t, s, "head", []byte("epoch-3"), v3)
}

func testCASAfterDeleteRecreate(t *testing.T, s objectstore.ObjectStore, caps Capabilities) {
	ctx := ctxT(t)
	v1 := mustPut(t, s, "head", []byte("generation"), create())
	if err := s.Delete(ctx, "head", &v1); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Put(ctx, "head", []byte("x"), update(v1))
	expectIs(t, "PutUpdate after delete", err, objectstore.ErrPreconditionFailed)
	expectNotFound(t, s, "head")

	// Recreate with different bytes: the old version must not match.
	v2 := mustPut(t, s, "head", []byte("generation-2"), create())
	if v2.Equal(v1) {
		t.Fatalf("recreated object reused version %q", v1.ETag)
	}
	_, err = s.Put(ctx, "head", []byte("y"), update(v1))
	expectIs(t, "PutUpdate with pre-delete version", err, objectstore.ErrPreconditionFailed)
	err = s.Delete(ctx, "head", &v1)
	expectIs(t, "Delete with pre-delete version", err, objectstore.ErrPreconditionFailed)
	expectContent(t, s, "head", []byte("generation-2"), v2)

	if caps.ContentDerivedVersions {
		return
	}
	// Recreate with identical bytes: still a new version (no ABA).
	if err := s.Delete(ctx, "head", &v2); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	v3 := mustPut(t, s, "head", []byte("generation-2"), create())
	if v3.Equal(v2) || v3.Equal(v1) {
		t.Fatalf("recreate with identical bytes reused version %q", v3.ETag)
	}
	_, err = s.Put(ctx, "head", []byte("z"), update(v2))
	expectIs(t, "PutUpdate with ABA version", err, objectstore.ErrPreconditionFailed)
	expectContent(t, s, "head", []byte("generation-2"), v3)
}

func testConditionalDelete(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	v1 := mustPut(t, s, "k", []byte("one"), create())
	v2 := mustPut(t, s, "k", []byte("two"), update(v1))
	err := s.Delete(ctx, "k", &v1)
	expectIs(t, "Delete with stale version", err, objectstore.ErrPreconditionFailed)
	expectContent(t, s, "k", []byte("two"), v2)
	if err := s.Delete(ctx, "k", &v2); err != nil {
		t.Fatalf("Delete with current version: %v", err)
	}
	expectNotFound(t, s, "k")
	err = s.Delete(ctx, "k", &v2)
	expectIs(t, "second conditional Delete", err, objectstore.ErrNotFound)
	// Unconditional delete.
	mustPut(t, s, "u", []byte("x"), overwrite())
	if err := s.Delete(ctx, "u", nil); err != nil {
		t.Fatalf("unconditional Delete: %v", err)
	}
	expectNotFound(t, s, "u")
}

// race runs n goroutines released at once and returns their errors.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

const (
	racers = 32
	// raceRounds repeats each race: one round of 32 goroutines can miss a
	// missing lock on 2 cores, several rounds rarely do.
	raceRounds = 8
)

// oneWinner checks that exactly one of errs is nil and that every other is
// one of the losing sentinels; it returns the winner's index.
func oneWinner(t *testing.T, what string, errs []error, losing ...error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("%s: two winners: racers %d and %d", what, winner, i)
			}
			winner = i
		case slices.ContainsFunc(losing, func(target error) bool { return errors.Is(err, target) }):
		default:
			t.Fatalf("%s: racer %d: unexpected error %v", what, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no winner among %d racers: %v", what, len(errs), errs)
	}
	return winner
}

func testRacePutUpdate(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	cur := mustPut(t, s, "head", []byte("base"), create())
	for round := range raceRounds {
		versions := make([]objectstore.UpdateVersion, racers)
		errs := race(racers, func(i int) error {
			v, err := s.Put(ctx, "head", []byte(fmt.Sprintf("round-%d-writer-%02d", round, i)), update(cur))
			versions[i] = v
			return err
		})
		w := oneWinner(t, fmt.Sprintf("PutUpdate round %d", round), errs, objectstore.ErrPreconditionFailed, objectstore.ErrConflict)
		expectContent(t, s, "head", []byte(fmt.Sprintf("round-%d-writer-%02d", round, w)), versions[w])
		cur = versions[w]
	}
}

func testRacePutCreate(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	for round := range raceRounds {
		key := fmt.Sprintf("created-%d", round)
		versions := make([]objectstore.UpdateVersion, racers)
		errs := race(racers, func(i int) error {
			v, err := s.Put(ctx, key, []byte(fmt.Sprintf("creator-%02d", i)), create())
			versions[i] = v
			return err
		})
		w := oneWinner(t, fmt.Sprintf("PutCreate round %d", round), errs, objectstore.ErrAlreadyExists, objectstore.ErrConflict)
		expectContent(t, s, key, []byte(fmt.Sprintf("creator-%02d", w)), versions[w])
	}
}

func testRangedReads(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	// Crosses several 16 KiB boundaries (the filesystem backend's checksum
	// blocks) and ends mid-block.
	const n = 5*16<<10 + 123
	data := randomBytes(7, n)
	mustPut(t, s, "blob", data, create())
	cases := []struct{ off, length int64 }{
		{0, 0}, {0, 1}, {0, -1}, {0, n}, {0, n + 100}, {0, 1 << 40},
		{1, 1}, {1, -1}, {16<<10 - 1, 2}, {16 << 10, 16 << 10}, {16<<10 - 1, 16<<10 + 2},
		{3 * 16 << 10, -1}, {n - 1, 1}, {n - 1, 10}, {n - 1, -1}, {n - 123, 123},
		{n, 1}, {n, -1}, {n, 0}, {n + 1, 5}, {1 << 40, 1},
	}
	for _, c := range cases {
		got, err := s.GetRange(ctx, "blob", c.off, c.length)
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.length, err)
		}
		lo := min(c.off, int64(n))
		hi := int64(n)
		if c.length >= 0 && c.length < hi-lo {
			hi = lo + c.length
		}
		if !bytes.Equal(got, data[lo:hi]) {
			t.Fatalf("GetRange(%d, %d) = %d bytes, want %d bytes [%d:%d]", c.off, c.length, len(got), hi-lo, lo, hi)
		}
	}
}

// testReadRange: ReadRange (the store's own when it implements
// objectstore.RangeReader, else the GetRange fallback) reads exactly what
// GetRange returns, into the caller's buffer, with and without
// CallerVerifies; a missing key is ErrNotFound.
func testReadRange(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	const n = 5*16<<10 + 123
	data := randomBytes(8, n)
	mustPut(t, s, "blob", data, create())
	cases := []struct{ off, length int64 }{
		{0, 0}, {0, 1}, {0, n}, {0, n + 100}, {1, 1}, {16<<10 - 1, 2}, {16 << 10, 16 << 10},
		{16<<10 - 1, 16<<10 + 2}, {n - 1, 1}, {n - 1, 10}, {n - 123, 123}, {n, 1}, {n + 1, 5}, {1 << 40, 1},
	}
	for _, verifies := range []bool{false, true} {
		opts := objectstore.ReadRangeOptions{CallerVerifies: verifies}
		for _, c := range cases {
			dst := bytes.Repeat([]byte{0xa5}, int(c.length)+8)
			k, err := objectstore.ReadRange(ctx, s, "blob", c.off, dst[:c.length], opts)
			if err != nil {
				t.Fatalf("ReadRange(%d, %d, %+v): %v", c.off, c.length, opts, err)
			}
			lo := min(c.off, int64(n))
			hi := min(lo+c.length, int64(n))
			if !bytes.Equal(dst[:k], data[lo:hi]) {
				t.Fatalf("ReadRange(%d, %d, %+v) = %d bytes, want %d bytes [%d:%d]", c.off, c.length, opts, k, hi-lo, lo, hi)
			}
			for _, b := range dst[k:] {
				if b != 0xa5 {
					t.Fatalf("ReadRange(%d, %d, %+v) wrote past the %d bytes it returned", c.off, c.length, opts, k)
				}
			}
		}
		_, err := objectstore.ReadRange(ctx, s, "missing", 0, make([]byte, 10), opts)
		expectIs(t, "ReadRange of a missing key", err, objectstore.ErrNotFound)
	}
}

func testList(t *testing.T, s objectstore.ObjectStore, caps Capabilities) {
	ctx := ctxT(t)
	keys := []string{
		"a", "a/b", "a/b/c", "a/ba", "a-b", "a.b", "a0", "ab/c", "b", "é", "z",
		"seg/run1/0000000000000001", "seg/run1/0000000000000002", "seg/run1/000000000000000a",
		"seg/run2/0000000000000001", "seg/run10/x",
	}
	if caps.NoObjectPrefixOverlap {
		all := slices.Clone(keys)
		keys = slices.DeleteFunc(keys, func(k string) bool {
			return slices.ContainsFunc(all, func(o string) bool { return strings.HasPrefix(o, k+"/") })
		})
	}
	versions := map[string]objectstore.UpdateVersion{}
	for i, k := range slices.Backward(keys) { // insertion order is not key order
		versions[k] = mustPut(t, s, k, bytes.Repeat([]byte{'x'}, i+1), create())
	}
	sizes := map[string]int64{}
	for i, k := range keys {
		sizes[k] = int64(i + 1)
	}
	list := func(prefix string) []string {
		var out []string
		for info, err := range s.List(ctx, prefix) {
			if err != nil {
				t.Fatalf("List(%q): %v", prefix, err)
			}
			if info.Size != sizes[info.Key] || !info.Version.Equal(versions[info.Key]) {
				t.Fatalf("List(%q) info %+v, want size %d version %q", prefix, info, sizes[info.Key], versions[info.Key].ETag)
			}
			out = append(out, info.Key)
		}
		return out
	}
	want := func(prefix string) []string {
		var out []string
		for _, k := range keys {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, prefix := range []string{"", "a", "a/", "a/b", "a/b/", "a/b/c", "a-", "ab", "b", "seg/", "seg/run1", "seg/run1/", "seg/run1/00000000000000", "seg/run", "zz", "missing/", "é", "/", "a//"} {
		got, exp := list(prefix), want(prefix)
		if !slices.Equal(got, exp) {
			t.Fatalf("List(%q) = %q, want %q", prefix, got, exp)
		}
	}
	// A deleted key disappears from listings.
	if err := s.Delete(ctx, "a/b/c", nil); err != nil {
		t.Fatal(err)
	}
	if got := list("a/b/"); len(got) != 0 {
		t.Fatalf("List(a/b/) after delete = %q", got)
	}
}

func testListEarlyStop(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	for i := range 10 {
		mustPut(t, s, fmt.Sprintf("p/%02d", i), []byte{byte(i)}, create())
	}
	var got []string
	for info, err := range s.List(ctxT(t), "p/") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
		if len(got) == 3 {
			break
		}
	}
	if !slices.Equal(got, []string{"p/00", "p/01", "p/02"}) {
		t.Fatalf("early-stopped List = %q", got)
	}
}

func testLargeObject(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	const n = 12<<20 + 3
	data := randomBytes(42, n)
	v := mustPut(t, s, "large/object", data, create())
	expectContent(t, s, "large/object", data, v)
	info, err := s.Head(ctx, "large/object")
	if err != nil || info.Size != n {
		t.Fatalf("Head = %+v, %v", info, err)
	}
	off := int64(5<<20 + 77)
	got, err := s.GetRange(ctx, "large/object", off, 3<<20)
	if err != nil {
		t.Fatalf("GetRange: %v", err)
	}
	if !bytes.Equal(got, data[off:off+3<<20]) {
		t.Fatalf("GetRange of large object returned wrong bytes")
	}
	v2 := mustPut(t, s, "large/object", data[:n-1], update(v))
	expectContent(t, s, "large/object", data[:n-1], v2)
}

func testConcurrentDistinctKeys(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	ctx := ctxT(t)
	const writers, perWriter = 8, 6
	errs := race(writers, func(w int) error {
		for j := range perWriter {
			key := fmt.Sprintf("c/w%d/%d", w, j)
			if _, err := s.Put(ctx, key, []byte(key), create()); err != nil {
				return err
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	n := 0
	for info, err := range s.List(ctx, "c/") {
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != int64(len(info.Key)) {
			t.Fatalf("%s: size %d", info.Key, info.Size)
		}
		n++
	}
	if n != writers*perWriter {
		t.Fatalf("listed %d objects, want %d", n, writers*perWriter)
	}
}

func testContextCancellation(t *testing.T, s objectstore.ObjectStore, _ Capabilities) {
	v := mustPut(t, s, "k", []byte("kept"), create())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with cancelled ctx: %v", err)
	}
	if _, err := s.GetRange(ctx, "k", 0, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetRange with cancelled ctx: %v", err)
	}
	if _, err := s.Head(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Head with cancelled ctx: %v", err)
	}
	if _, err := s.Put(ctx, "new", []byte("x"), create()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled ctx: %v", err)
	}
	if _, err := s.Put(ctx, "k", []byte("x"), update(v)); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutUpdate with cancelled ctx: %v", err)
	}
	if err := s.Delete(ctx, "k", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Delete with cancelled ctx: %v", err)
	}
	var listErr error
	for _, err := range s.List(ctx, "") {
		listErr = err
		if err != nil {
			break
		}
	}
	if !errors.Is(listErr, context.Canceled) {
		t.Fatalf("List with cancelled ctx: %v", listErr)
	}
	// Nothing above applied.
	expectNotFound(t, s, "new")
	expectContent(t, s, "k", []byte("kept"), v)

	// A deadline that expires mid-listing stops the iteration with an error.
	for i := range 20 {
		mustPut(t, s, fmt.Sprintf("l/%02d", i), []byte("x"), create())
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	seen, sawErr := 0, false
	for _, err := range s.List(ctx2, "l/") {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("List error after cancel: %v", err)
			}
			sawErr = true
			break
		}
		seen++
		if seen == 2 {
			cancel2()
		}
	}
	// A backend may have fetched the whole (small) listing before the
	// cancel; it must then still stop or finish cleanly.
	if !sawErr && seen != 20 {
		t.Fatalf("List after cancel stopped silently after %d items", seen)
	}
}
