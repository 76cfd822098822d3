package compacttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactOnlyReclaimsLog: a compact-only topic gives its disk back.
// franz-go produces ~3 MiB of 1 KiB records over 24 keys with compaction
// held off (segment.ms of a day) until the partition is materialized, so
// the lossless log is on disk as generation objects; then segment.ms drops
// to 100 ms, after one more record (the partition's last batch is never
// compacted, as Kafka never cleans its active segment). The compaction
// pass publishes a covering view and trims the lossless log below the
// cleaned point (that last record), and GC deletes it: the bytes the
// partition's stream holds in the object store (its generation and view
// objects) go down to a few percent, DescribeLogDirs agrees, and still
//   - ListOffsets earliest is 0 (the view's start), the end is unchanged;
//   - a fresh consumer from 0 (and one from inside the reclaimed range)
//     sees exactly the last record per key at its original offset;
//   - DeleteRecords is refused with POLICY_VIOLATION, as Kafka does;
//   - a second round of the same keys is compacted over the carried-over
//     view (the old values go, the start stays 0);
//   - after a restart of the server the same holds (and the Java consumer,
//     seekToBeginning, reads the same records).
//
// It restarts the package's server at its end, so it runs after the other
// Kafka tests of the package (file order) and leaves the server running.
func TestCompactOnlyReclaimsLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := uniqueName("reclaim")
	adm := kadm.NewClient(newClient(t))
	resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.ms": str("86400000"), "min.compaction.lag.ms": str("0"),
		"min.cleanable.dirty.ratio": str("0.01"),
	}, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]produced{}
	produceRound := func(round int) int64 {
		p := newClient(t, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(256<<10))
		var recs []*kgo.Record
		for i := 0; i < 3000; i++ {
			v := make([]byte, 512)
			_, _ = rand.Read(v) // incompressible: bytes on disk are the payload
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%02d", i%24)),
				Value: []byte(fmt.Sprintf("r%d-%d-%s", round, i, hex.EncodeToString(v)))})
		}
		res := p.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		var end int64
		for _, r := range res {
			last[string(r.Record.Key)] = produced{value: r.Record.Value, offset: r.Record.Offset}
			end = max(end, r.Record.Offset+1)
		}
		return end
	}
	// sentinel appends one record: the partition's last batch is never
	// compacted (Kafka's active segment), so it is what stays lossless.
	sentinel := func(round int) int64 {
		r := newClient(t).ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("sentinel"), Value: []byte(fmt.Sprint(round))})
		if err := r.FirstErr(); err != nil {
			t.Fatal(err)
		}
		rec := r[0].Record
		last["sentinel"] = produced{value: rec.Value, offset: rec.Offset}
		return rec.Offset + 1
	}
	end := produceRound(0)

	name := "kafka/" + topic + "/0"
	admin := srv.Client()
	info, err := admin.DescribeStream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the lossless log to be in generation objects (before the
	// sentinel, which then lands in a generation of its own).
	var before int64
	materialized := func(end int64) {
		waitFor(t, ctx, "materialization", func() (bool, string) {
			in, err := admin.DescribeStream(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			before = streamObjectBytes(t, info.ID)
			return in.MaterializedThrough >= end && before > 2<<20, fmt.Sprintf("materialized through %d of %d, %d bytes", in.MaterializedThrough, end, before)
		})
	}
	materialized(end)
	logDirsBefore := logDirSize(t, ctx, adm, topic)
	end = sentinel(0)

	// Now let compaction run.
	alter := func(k, v string) {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: k, Value: &v}}, topic)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = res.On(topic, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	alter("segment.ms", "100")
	reclaimed := func(end int64) {
		t.Helper()
		var after int64
		waitFor(t, ctx, "reclaim", func() (bool, string) {
			in, err := admin.DescribeStream(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			after = streamObjectBytes(t, info.ID)
			return in.StartOffset == end-1 && after < before/10,
				fmt.Sprintf("lossless start %d (end %d), %d bytes (before %d)", in.StartOffset, end, after, before)
		})
		t.Logf("stream objects: %d bytes before compaction, %d after the reclaim (lossless start %d)", before, after, end-1)
	}
	reclaimed(end)
	if ld := logDirSize(t, ctx, adm, topic); ld >= logDirsBefore/10 {
		t.Fatalf("DescribeLogDirs size %d after the reclaim, %d before", ld, logDirsBefore)
	}
	checkCompactedContent(t, ctx, adm, topic, last, end)

	// DeleteRecords: refused on a compact-only topic, as Kafka does.
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: kadm.Offset{Topic: topic, Partition: 0, At: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup(topic, 0); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("DeleteRecords on a compact-only topic: %v, want POLICY_VIOLATION", r.Err)
	}

	// Dropping compact would leave reads to the reclaimed lossless log
	// alone: refused (not supported yet) rather than losing the prefix.
	pol := "delete"
	ac, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &pol}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = ac.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("cleanup.policy=delete on a reclaimed compact-only topic: %v, want INVALID_CONFIG", err)
	}

	// A second round over the same keys: compacted over the view carried
	// below the lossless start.
	alter("segment.ms", "86400000")
	materialized(produceRound(1))
	end = sentinel(1)
	alter("segment.ms", "100")
	reclaimed(end)
	checkCompactedContent(t, ctx, adm, topic, last, end)

	// Restart: the view record, the trimmed head and the objects are what
	// the next process finds.
	srv.Restart()
	checkCompactedContent(t, ctx, adm, topic, last, end)
	if after := streamObjectBytes(t, info.ID); after >= before/10 {
		t.Fatalf("after the restart the stream holds %d bytes (%d before compaction)", after, before)
	}
	if os.Getenv("NEREUS_SKIP_JAVA") == "" {
		jgot, jn := javaCompactedRead(t, topic, 1, "read_uncommitted")
		if jn != len(last) || !equal(jgot, map[int32]map[string]produced{0: last}) {
			t.Fatalf("Java consumer saw %d records, want the %d last per key", jn, len(last))
		}
	}
}

// checkCompactedContent: earliest is 0 and end is end; a consumer from 0
// sees exactly last (the last record per key, original offsets), and one
// starting at offset 7 sees the kept records at or above 7.
func checkCompactedContent(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, last map[string]produced, end int64) {
	t.Helper()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if s, e := starts[topic][0].Offset, ends[topic][0].Offset; s != 0 || e != end {
		t.Fatalf("ListOffsets: earliest %d, latest %d; want 0 and %d", s, e, end)
	}
	for _, from := range []int64{0, 7} {
		got := map[string]produced{}
		n := 0
		cl := newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for done := false; !done; {
			fs := cl.PollFetches(pctx)
			if pctx.Err() != nil {
				t.Fatalf("consuming %s from %d: %v (%d records)", topic, from, pctx.Err(), n)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch from %d: %v", from, err) })
			fs.EachRecord(func(r *kgo.Record) {
				n++
				got[string(r.Key)] = produced{value: r.Value, offset: r.Offset}
				done = done || r.Offset == end-1
			})
		}
		cancel()
		cl.Close()
		want := map[string]produced{}
		for k, v := range last {
			if v.offset >= from {
				want[k] = v
			}
		}
		if n != len(want) || !equal(map[int32]map[string]produced{0: got}, map[int32]map[string]produced{0: want}) {
			t.Fatalf("consumer from %d saw %d records (%d keys), want the %d last per key", from, n, len(got), len(want))
		}
	}
}

// streamObjectBytes is the size of the stream's objects on disk: its
// generation and view objects in the file object store (the node's WAL
// objects are shared by all streams and not counted).
func streamObjectBytes(t *testing.T, id string) int64 {
	t.Helper()
	var n int64
	root := filepath.Join(srv.DataDir(), "objects")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while walking
			}
			return err
		}
		if d.IsDir() || !(strings.Contains(p, "/gen.d/"+id+".d/") || strings.Contains(p, "/view.d/"+id+".d/")) {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func logDirSize(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int64 {
	t.Helper()
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) { size += p.Size })
	})
	return size
}

// waitFor polls cond (every 200 ms, the retention interval) until it holds.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	var state string
	for i := 0; i < 400; i++ {
		var ok bool
		if ok, state = cond(); ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (%s)", what, ctx.Err(), state)
		case <-time.After(200 * time.Millisecond):
		}
	}
	logCompaction(t)
	t.Fatalf("%s never happened: %s", what, state)
}
