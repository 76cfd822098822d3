package objectwal_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metamem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/stream/provider"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// needed judges every run needed (nothing may be deleted).
func needed(_ context.Context, runs []provider.RunRef) ([]provider.Verdict, error) {
	out := make([]provider.Verdict, len(runs))
	for i := range out {
		out[i] = provider.RunNeeded
	}
	return out, nil
}

// TestUnreadableSegmentsAreSkippedNotFatal: one segment whose stored
// header is corrupt (fsstore's List fails for it) and one whose bytes are
// (Get fails), among three segments of an earlier incarnation with a
// committed run each. ScanRuns must still report the readable segment's run
// and then say the scan was incomplete; reclaim must still judge and delete
// the readable retired segment, keep both unreadable ones (nothing is
// deleted without proof), report them as pending, and count them. Before,
// both stopped at the first unreadable segment (`return err`), so one
// corrupt segment stopped reclaim of every segment listed after it, forever.
func TestUnreadableSegmentsAreSkippedNotFatal(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	objs, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/a", TruncateInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 3; s++ { // one at a time: one segment each
		done := make(chan error, 1)
		var tg provider.Target
		p1.Write(provider.Run{Stream: s, Epoch: 1, Token: 1, Commit: 1, Start: 0,
			Entries: []provider.Entry{{Payload: []byte("x"), RecordCount: 1}}}, func(t provider.Target, err error) { tg = t; done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		p1.Release(tg, true)
	}
	for i := 0; ; i++ { // until truncation dropped all three from the manifest
		rep, err := p1.Reclaim(ctx, needed, provider.ReclaimOptions{Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Units == 3 {
			break
		}
		if i == 2000 {
			t.Fatalf("segments never left the manifest: %+v", rep)
		}
		time.Sleep(time.Millisecond)
	}
	if err := p1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Damage the first two segments (key order = file order: one run ID).
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(path, "seg") {
			files = append(files, path)
		}
		return nil
	})
	slices.Sort(files)
	if len(files) != 3 {
		t.Fatalf("segment files %v, want 3", files)
	}
	flip := func(path string, at int64) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if at < 0 {
			fi, _ := f.Stat()
			at += fi.Size()
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, at); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
	}
	flip(files[0], 20) // the object header: List fails for this key
	flip(files[1], -1) // the data: Get fails

	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	p, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/a", TruncateInterval: time.Hour, Meter: meter})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	counted := func(op string) int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "nereus.objectwal.unreadable_segments" {
					for _, dp := range sum.DataPoints {
						if v, _ := dp.Attributes.Value(attribute.Key("op")); v.AsString() == op {
							return dp.Value
						}
					}
				}
			}
		}
		return 0
	}

	var scanned []uint64
	err = p.ScanRuns(ctx, func(run provider.Run, _ provider.Target) error {
		scanned = append(scanned, run.Stream)
		return nil
	})
	if !errors.Is(err, provider.ErrIncompleteScan) || !slices.Equal(scanned, []uint64{3}) {
		t.Fatalf("ScanRuns: runs of streams %v, err %v; want stream 3's run and ErrIncompleteScan", scanned, err)
	}
	if n := counted("scan"); n != 2 {
		t.Fatalf("scan counted %d unreadable segments, want 2", n)
	}

	var judged []uint64
	retired := func(_ context.Context, runs []provider.RunRef) ([]provider.Verdict, error) {
		out := make([]provider.Verdict, len(runs))
		for i, r := range runs {
			judged = append(judged, r.Stream)
			out[i] = provider.RunRetired
		}
		return out, nil
	}
	rep, err := p.Reclaim(ctx, retired, provider.ReclaimOptions{Now: time.Now()})
	if err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if !slices.Equal(judged, []uint64{3}) || rep.Deleted != 1 {
		t.Fatalf("reclaim judged streams %v and deleted %d; want stream 3's segment judged and deleted", judged, rep.Deleted)
	}
	checkKept := func(rep provider.ReclaimReport) {
		t.Helper()
		unreadable := 0
		for _, u := range rep.Pending {
			if strings.Contains(u.Reason, "unreadable, kept") {
				unreadable++
			}
		}
		if unreadable != 2 {
			t.Fatalf("pending %+v: want both unreadable segments reported", rep.Pending)
		}
		for _, f := range files[:2] {
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("unreadable segment %s: %v (it must be kept)", f, err)
			}
		}
	}
	checkKept(rep)
	if n := counted("reclaim"); n != 2 {
		t.Fatalf("reclaim counted %d unreadable segments, want 2", n)
	}
	// A pass without a relisting still reports them.
	rep, err = p.Reclaim(ctx, retired, provider.ReclaimOptions{Now: time.Now()})
	if err != nil || rep.Deleted != 0 {
		t.Fatalf("second pass: %v, %d deleted", err, rep.Deleted)
	}
	checkKept(rep)
}

// TestUnreadableSegmentInGCStatus: through the core, a corrupt segment of
// an earlier incarnation shows up in the GC status (nereus gc status, GET
// /admin/gc) as a pending segment with the reason, and the pass reports
// no error for it.
func TestUnreadableSegmentInGCStatus(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	objs, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	meta := metamem.New()
	c1, p1 := openCore(t, ctx, objs, meta, "b1")
	info, err := c1.Create(ctx, "s", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c1.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte("x"), RecordCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // until truncation moved the segment out of the manifest (retained)
		rep, err := p1.Reclaim(ctx, needed, provider.ReclaimOptions{Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Units == 1 {
			break
		}
		if i == 2000 {
			t.Fatalf("the segment never left the manifest: %+v", rep)
		}
		time.Sleep(time.Millisecond)
	}
	c1.Close()
	var seg string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(path, "seg") {
			seg = path
		}
		return nil
	})
	if seg == "" {
		t.Fatal("no segment file")
	}
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	_, _ = f.ReadAt(b, 20)
	b[0] ^= 0xff
	_, _ = f.WriteAt(b, 20) // its header: the listing fails for it
	_ = f.Close()

	c2, _ := openCore(t, ctx, objs, meta, "b1")
	defer c2.Close()
	st, err := c2.CollectGarbage(ctx)
	if err != nil {
		t.Fatalf("GC pass: %v", err)
	}
	found := false
	for _, p := range st.Pending {
		if p.Kind == "segment" && strings.Contains(p.Reason, "unreadable, kept") {
			found = true
		}
	}
	if !found {
		t.Fatalf("GC status pending %+v: want the unreadable segment", st.Pending)
	}
	if _, err := os.Stat(seg); err != nil {
		t.Fatalf("unreadable segment: %v (it must be kept)", err)
	}
}
