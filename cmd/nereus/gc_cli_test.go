package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/server"
)

// TestCLIGCDryRun: a server with --gc-dry-run materializes a stream and
// then trims most of it, so GC has generation objects, WAL segments and
// index records to delete. `nereus gc run` and `nereus gc status` report
// the dry run and what it would delete, the counters stay at zero, and no
// object of the store goes: every byte below the trim point is still
// there, and every entry from the trim point reads back.
func TestCLIGCDryRun(t *testing.T) {
	dir := t.TempDir()
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.KafkaAddr, cfg.PulsarAddr = "", ""
	cfg.Lifecycle.GCDryRun = true
	cfg.Lifecycle.GenerationBytes = 4 << 10
	cfg.Lifecycle.GenerationMaxAge = 200 * time.Millisecond
	cfg.Lifecycle.GCInterval = 100 * time.Millisecond
	cfg.Lifecycle.GCGrace = 100 * time.Millisecond
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(s) })
	ac, err := adminapi.NewClient("http://"+s.HTTPAddr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := ac.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "dry"}); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]byte{}
	for i := 0; i < 40; i++ {
		var es []adminapi.AppendEntry
		for j := 0; j < 10; j++ {
			es = append(es, adminapi.AppendEntry{Payload: bytes.Repeat([]byte(fmt.Sprintf("d%04d-", i*10+j)), 1+j*7)})
		}
		r, err := ac.Append(ctx, "dry", adminapi.AppendRequest{Entries: es})
		if err != nil {
			t.Fatal(err)
		}
		for k, off := range r.Offsets {
			want[off] = es[k].Payload
		}
	}
	// Materialization is not GC: it runs in a dry run too.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		in, err := ac.DescribeStream(ctx, "dry")
		if err == nil && in.MaterializedThrough == 400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not materialized: %+v %v", in, err)
		}
	}
	if _, err := ac.Trim(ctx, "dry", 350); err != nil {
		t.Fatal(err)
	}
	// Generation objects are files of the filesystem object store; the
	// Object WAL's segments are objects of its log store, counted by its
	// gauge (less the node's one manifest).
	objects := func() (segs, gens int) {
		root := filepath.Join(dir, "objects", "objects")
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".o") {
				return nil
			}
			switch {
			case strings.Contains(p, "/seg.d/"):
				segs++
			case strings.Contains(p, "/gen.d/"):
				gens++
			}
			return nil
		})
		return segs + int(metric(t, s.HTTPAddr(), "nereus_walstore_objects")) - 1, gens
	}
	segs0, gens0 := objects()
	if gens0 < 2 || segs0 == 0 {
		t.Fatalf("%d generation objects and %d WAL segments on disk: the test needs both", gens0, segs0)
	}

	// Passes with everything retired and the grace long past.
	time.Sleep(300 * time.Millisecond)
	cl := &cli{t: t, server: "http://" + s.HTTPAddr(), sigCtx: ctx}
	var out string
	for i := 0; i < 5; i++ {
		out = cl.ok("", "gc", "run")
	}
	for _, want := range []string{"gc:  dry run (--gc-dry-run): reports, deletes nothing",
		"deleted:  0 segments, 0 ledgers, 0 generation objects, 0 records, 0 streams"} {
		if !strings.Contains(regexp.MustCompile(` {2,}`).ReplaceAllString(out, "  "), want) {
			t.Fatalf("nereus gc run output lacks %q:\n%s", want, out)
		}
	}
	var st adminapi.GCStatus
	if err := json.Unmarshal([]byte(cl.ok("", "gc", "status", "--format", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.DryRun {
		t.Fatal("gc status does not report the dry run")
	}
	if d := st.Stats; d.DeletedSegments+d.DeletedLedgers+d.DeletedObjects+d.DeletedRecords+d.DeletedStreams+d.DeletedBytes != 0 {
		t.Fatalf("a dry run counted deletions: %+v", d)
	}
	kinds := map[string]int{}
	for _, ev := range st.Recent {
		if !ev.DryRun {
			t.Fatalf("audit event without the dry-run mark: %+v", ev)
		}
		kinds[ev.Kind]++
	}
	if kinds["generation"] == 0 {
		t.Fatalf("the dry run reports no generation it would delete: recent %v, pending %+v", kinds, st.Pending)
	}
	keptSegs := 0
	for _, p := range st.Pending {
		if strings.Contains(p.Reason, "dry run") {
			keptSegs++
		}
	}
	if keptSegs == 0 {
		t.Fatalf("no pending unit kept because of the dry run: %+v", st.Pending)
	}
	if segs, gens := objects(); segs < segs0 || gens < gens0 {
		t.Fatalf("a dry run deleted objects: WAL segments %d -> %d, generation objects %d -> %d", segs0, segs, gens0, gens)
	}
	if n := metric(t, s.HTTPAddr(), "nereus_walstore_deletes_total"); n != 0 {
		t.Fatalf("a dry run deleted %v Object WAL objects", n)
	}
	next := int64(350)
	for next < 400 {
		res, err := ac.Read(ctx, "dry", adminapi.ReadOptions{From: &next, MaxBytes: 2000})
		if err != nil || len(res.Entries) == 0 {
			t.Fatalf("read at %d: %d entries, %v", next, len(res.Entries), err)
		}
		for _, e := range res.Entries {
			if !bytes.Equal(e.Payload, want[e.Offset]) {
				t.Fatalf("offset %d: got %q want %q", e.Offset, e.Payload, want[e.Offset])
			}
		}
		next = res.Next
	}
	t.Logf("dry run: %d WAL segments and %d generation objects kept; would delete %v; %d units pending for the dry run",
		segs0, gens0, kinds, keptSegs)
}

// metric scrapes one unlabelled sample from the server's /metrics.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no sample %s", name)
	return 0
}
