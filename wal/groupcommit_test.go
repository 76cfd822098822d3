package wal

import (
	"context"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// gateSegments blocks every segment PUT until release is closed and reports
// each one entering on entered.
func gateSegments(fs *faultStore) (entered chan string, release chan struct{}) {
	entered, release = make(chan string, 64), make(chan struct{})
	fs.setGate(func(op, key string) {
		if op == "put" && keyClass(key) == "segment" {
			entered <- key
			<-release
		}
	})
	return entered, release
}

// TestGroupCommitSealsWithoutTimer: with GroupCommit a lone Append is sealed
// at once (FlushInterval is an hour, so a timer could not have sealed it),
// and Appends arriving while an upload is in flight are batched into ONE
// next segment, sealed when that upload finishes.
func TestGroupCommitSealsWithoutTimer(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.FlushInterval = time.Hour
	cfg.GroupCommit = true
	p := newTestProducer(t, fs, cfg)
	ctx := testCtx(t)

	d0, err := p.Append(ctx, [][]byte{[]byte("lone")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustWait(t, d0)

	entered, release := gateSegments(fs)
	d1, _ := p.Append(ctx, [][]byte{[]byte("a")}, nil)
	<-entered // d1's segment is uploading
	var later []*Durability
	for _, r := range []string{"b", "c", "d"} {
		d, err := p.Append(ctx, [][]byte{[]byte(r)}, []byte("m"))
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, d)
	}
	close(release)
	mustWait(t, d1)
	var loc string
	for i, d := range later {
		mustWait(t, d)
		pl, ok := d.Placement()
		if !ok {
			t.Fatal("no placement")
		}
		if i == 0 {
			loc = pl.Location
		} else if pl.Location != loc {
			t.Fatalf("appends made during one upload went to segments %s and %s: not batched", loc, pl.Location)
		}
	}
	if pl, _ := d1.Placement(); pl.Location == loc {
		t.Fatal("an append made during an upload joined the segment being uploaded")
	}
	if n := fs.count("put", "x.segments/y"); n != 3 {
		t.Fatalf("%d segment PUTs, want 3 (lone, a, b+c+d)", n)
	}
	got := readLog(t, memstoreOf(fs), testManifest)
	if len(got) != 5 || got[0].data != "lone" || got[4].data != "d" {
		t.Fatalf("log %+v", got)
	}
}

// TestTruncateRidesOnProducerCommits: a truncation on an idle producer is
// one manifest PUT and no read; while a segment is on its way it joins that
// segment's manifest commit (no PUT of its own); the producer never loses a
// CAS race to it (it is the manifest's only writer).
func TestTruncateRidesOnProducerCommits(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.GroupCommit = true
	p := newTestProducer(t, fs, cfg)
	ctx := testCtx(t)
	for _, r := range []string{"a", "b", "c"} {
		d, err := p.Append(ctx, [][]byte{[]byte(r)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		mustWait(t, d)
	}
	gets, puts := fs.count("get", testManifest), fs.count("put", testManifest)
	through := func(seq uint64) TruncatePlan {
		return func(entries []Entry) (uint64, bool) { return seq, len(entries) > 0 }
	}
	dropped, err := p.Truncate(ctx, through(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 || dropped[0].Sequence != 0 || dropped[1].Sequence != 1 {
		t.Fatalf("dropped %+v, want the entries of sequences 0 and 1", dropped)
	}
	if g, u := fs.count("get", testManifest)-gets, fs.count("put", testManifest)-puts; g != 0 || u != 1 {
		t.Fatalf("idle truncation: %d manifest GETs, %d PUTs; want 0 and 1", g, u)
	}

	entered, release := gateSegments(fs)
	d, _ := p.Append(ctx, [][]byte{[]byte("d")}, nil)
	<-entered
	res := make(chan error, 1)
	go func() {
		dropped, err := p.Truncate(context.Background(), through(2))
		if err == nil && (len(dropped) != 1 || dropped[0].Sequence != 2) {
			t.Errorf("dropped %+v, want the entry of sequence 2", dropped)
		}
		res <- err
	}()
	for p.truncSent.Load() < 2 { // bounded by the test context below
		select {
		case <-ctx.Done():
			t.Fatal("truncation request never reached the committer")
		case <-time.After(time.Millisecond):
		}
	}
	puts = fs.count("put", testManifest)
	close(release)
	mustWait(t, d)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if u := fs.count("put", testManifest) - puts; u != 1 {
		t.Fatalf("append + truncation took %d manifest PUTs, want 1", u)
	}
	if fs.count("get", testManifest) != gets {
		t.Fatal("truncation read the manifest")
	}
	m, _, _, err := NewStore(memstoreOf(fs), testManifest).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := m.Entries()
	pl, _ := d.Placement()
	if len(entries) != 1 || entries[0].Sequence != 3 || entries[0].Location != pl.Location || m.NextSequence() != 4 {
		t.Fatalf("manifest after truncation %+v (next %d), want only d's segment at 3", entries, m.NextSequence())
	}
}

// TestTruncateOnClosedProducer: a request to a closed producer fails (never
// reported as dropped).
func TestTruncateOnClosedProducer(t *testing.T) {
	p := newTestProducer(t, memstore.New(), testConfig())
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Truncate(testCtx(t), func([]Entry) (uint64, bool) { return 0, true }); err == nil {
		t.Fatal("truncation on a closed producer succeeded")
	}
}

// TestGroupCommitBatchesUnderLoad: with GroupCommitMinWait and
// GroupCommitMinBytes a lone Append to an idle producer is still sealed at
// once, but Appends made while earlier ones are in flight are not sealed at
// the upload's end: they wait until they are worth a segment (here 3 bytes;
// the hour-long waits mean no timer can seal them) and then share ONE
// segment.
func TestGroupCommitBatchesUnderLoad(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.GroupCommit = true
	cfg.FlushInterval, cfg.GroupCommitMinWait, cfg.GroupCommitMinBytes = time.Hour, time.Hour, 3
	p := newTestProducer(t, fs, cfg)
	ctx := testCtx(t)

	lone, err := p.Append(ctx, [][]byte{[]byte("x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustWait(t, lone) // idle: sealed at once despite the hour-long minimum

	entered, release := gateSegments(fs)
	da, _ := p.Append(ctx, [][]byte{[]byte("a")}, nil)
	<-entered // a is idle too: sealed at once, its upload held
	var later []*Durability
	for _, r := range []string{"b", "c"} {
		d, err := p.Append(ctx, [][]byte{[]byte(r)}, []byte("m"))
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, d)
	}
	close(release)
	mustWait(t, da)
	// a's upload ended with b and c pending: 2 bytes, below the minimum,
	// and nothing else can seal them.
	for _, d := range later {
		select {
		case <-d.done:
			t.Fatal("appends made while others were in flight were sealed below GroupCommitMinBytes")
		default:
		}
	}
	dd, err := p.Append(ctx, [][]byte{[]byte("d")}, []byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	later = append(later, dd)
	var loc string
	for i, d := range later {
		mustWait(t, d)
		pl, _ := d.Placement()
		if i == 0 {
			loc = pl.Location
		} else if pl.Location != loc {
			t.Fatalf("b, c, d went to segments %s and %s, want one", loc, pl.Location)
		}
	}
	if n := fs.count("put", "x.segments/y"); n != 3 {
		t.Fatalf("%d segment PUTs, want 3 (x, a, b+c+d)", n)
	}
	got := readLog(t, memstoreOf(fs), testManifest)
	if len(got) != 5 || got[0].data != "x" || got[4].data != "d" {
		t.Fatalf("log %+v", got)
	}
}

// TestGroupCommitMinWaitRearmsEarlier: an Append made during an upload arms
// the sealer for FlushInterval (an hour here); the upload's end must bring
// the deadline forward to GroupCommitMinWait, or the Append would wait the
// hour (the test's context would end first).
func TestGroupCommitMinWaitRearmsEarlier(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.GroupCommit = true
	cfg.FlushInterval, cfg.GroupCommitMinWait = time.Hour, 5*time.Millisecond
	p := newTestProducer(t, fs, cfg)
	ctx := testCtx(t)
	entered, release := gateSegments(fs)
	da, _ := p.Append(ctx, [][]byte{[]byte("a")}, nil)
	<-entered
	passes := p.sealPasses.Load()
	db, err := p.Append(ctx, [][]byte{[]byte("b")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The sealer saw b while a's upload was held: it armed for FlushInterval.
	eventually(t, "the sealer's pass over b", func() bool { return p.sealPasses.Load() > passes })
	close(release)
	mustWait(t, da)
	mustWait(t, db)
}

// TestGroupCommitMinWaitCountsFromLastSeal: GroupCommitMinWait bounds how
// often a busy producer seals, counted from the previous seal — an Append
// that arrives while an upload is in flight, but more than the minimum after
// that upload's seal, is sealed at the upload's end instead of waiting the
// whole minimum from its own arrival (a Pulsar producer's next batch behind
// a still-committing previous one; session 12).
func TestGroupCommitMinWaitCountsFromLastSeal(t *testing.T) {
	const minWait = 200 * time.Millisecond
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.GroupCommit = true
	cfg.FlushInterval, cfg.GroupCommitMinWait = time.Hour, minWait
	p := newTestProducer(t, fs, cfg)
	ctx := testCtx(t)
	entered, release := gateSegments(fs)
	da, _ := p.Append(ctx, [][]byte{[]byte("a")}, nil)
	<-entered // a: idle, sealed at once; its upload is held
	// Let the clock pass the minimum since a's seal (the rule under test is
	// about elapsed time, so this waits for the clock, not for an event).
	time.Sleep(minWait + 50*time.Millisecond)
	passes := p.sealPasses.Load()
	db, err := p.Append(ctx, [][]byte{[]byte("b")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// b found a in flight (not idle): the sealer's pass over it only armed.
	eventually(t, "the sealer's pass over b", func() bool { return p.sealPasses.Load() > passes })
	passes = p.sealPasses.Load()
	close(release)
	mustWait(t, da)
	// a's upload end kicked the sealer: that pass must have sealed b, the
	// minimum having passed since a's seal. (Counted from b's own arrival,
	// b would still be pending for most of minWait.)
	eventually(t, "the sealer's pass at a's upload end", func() bool { return p.sealPasses.Load() > passes })
	p.mu.Lock()
	pending := len(p.pending)
	p.mu.Unlock()
	if pending != 0 {
		t.Fatalf("b still pending after the upload-end pass, %v after the previous seal (want sealed: GroupCommitMinWait counts from the last seal)", minWait)
	}
	mustWait(t, db)
}
