// Package lifecycletest checks the physical lifecycle (issue 9) the way a
// user meets it: one real `nereus serve` with small generations, fast GC
// and fast retention, driven by franz-go and pulsar-client-go.
//
//   - every storage profile: records produced through Kafka are
//     materialized into generation objects and read back byte for byte from
//     offset 0;
//   - retention (retention.ms, retention.bytes) trims topics and GC
//     reclaims their generation objects, WAL segments and BookKeeper
//     ledgers; a deleted topic's objects go away;
//   - SIGKILL while materialization runs loses nothing acknowledged
//     (internal/testenv/acklog);
//   - a Pulsar produce/consume round on a topic of every profile;
//   - read-back (every profile), retention, deletion, Pulsar and SIGKILL
//     again with the object store on versitygw (TestLifecycleOnS3, a
//     second server).
//
// The BookKeeper profiles need real bookies (bookkeeper/bktest: the
// NEREUS_BOOKKEEPER_ZK cluster in CI, else one started here); without them
// those subtests skip, or fail under NEREUS_REQUIRE_EXTERNAL=1.
//
// It owns no product code and must never reach into the server: it talks
// to the process over its ports and looks at its data dir from outside.
package lifecycletest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/acklog"
	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/internal/testenv/zkledgers"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/objectstore/s3store"
)

var bk bktest.Env

func TestMain(m *testing.M) { os.Exit(bk.Main(m)) }

// Lifecycle settings of the shared server: generations of 64 KiB (a few
// hundred KB of records make several), materialized after 1 s at the
// latest, GC every 500 ms with a 1 s grace, retention every second.
var lifecycleArgs = []string{
	"--generation-bytes", "64KiB", "--generation-max-age", "1s",
	"--gc-interval", "500ms", "--gc-grace", "1s", "--retention-interval", "1s",
}

// bkArgs keep the default ledger size (512 MiB: every stream here fits in
// one ledger) and seal an idle ledger after 1 s, so a stream whose writes
// stopped has its last ledger sealed and reclaimed once it is all trimmed
// (or its stream deleted).
var bkArgs = []string{"--bookkeeper-ledger-idle-seal", "1s"}

var profiles = []string{
	"OBJECT_WAL_ASYNC_OBJECT", "OBJECT_WAL_SYNC_OBJECT",
	"BOOKKEEPER_WAL_ONLY", "BOOKKEEPER_WAL_ASYNC_OBJECT", "BOOKKEEPER_WAL_SYNC_OBJECT",
}

func usesBK(profile string) bool { return strings.HasPrefix(profile, "BOOKKEEPER") }

func materializes(profile string) bool { return profile != "BOOKKEEPER_WAL_ONLY" }

// lc is the shared server and what the subtests need of it.
type lc struct {
	srv   *testserver.Server
	c     *adminapi.Client
	hasBK bool
	// objects counts the objects (and their bytes) with a key prefix in
	// the server's object store.
	objects func(t *testing.T, prefix string) (int, int64)
}

// TestLifecycleThroughServe runs every scenario against one server on the
// filesystem object store, in order (the kill subtest restarts it; the
// space checks want no other writer running).
func TestLifecycleThroughServe(t *testing.T) {
	e := &lc{}
	e.srv = testserver.Start(t, testserver.Options{Args: e.args(nil)})
	e.c = e.srv.Client()
	e.objects = fsObjects(e.srv.DataDir())

	t.Run("ProfilesReadBackThroughGenerations", func(t *testing.T) { e.profilesReadBack(t, profiles) })
	walKinds := []string{"OBJECT_WAL_ASYNC_OBJECT", "BOOKKEEPER_WAL_ASYNC_OBJECT"}
	t.Run("RetentionReclaims", func(t *testing.T) { e.retentionReclaims(t, walKinds) })
	t.Run("DeletedTopicReclaimed", func(t *testing.T) { e.deletedTopicReclaimed(t, walKinds) })
	t.Run("IdleLedgerReclaimed", e.idleLedgerReclaimed)
	t.Run("Kill9DuringMaterialization", func(t *testing.T) {
		e.kill9DuringMaterialization(t, []string{"OBJECT_WAL_ASYNC_OBJECT", "OBJECT_WAL_SYNC_OBJECT", "BOOKKEEPER_WAL_ASYNC_OBJECT", "BOOKKEEPER_WAL_SYNC_OBJECT"}, 150)
	})
	t.Run("PulsarOnMaterializedTopic", func(t *testing.T) { e.pulsarRounds(t, profiles) })
	t.Run("Metrics", e.metrics)
}

// TestLifecycleOnS3 is the same story with the Object WAL and the
// generations in a versitygw bucket (a second server: the object store is
// fixed at start): read-back for every profile, retention and deletion on
// the Object WAL, Pulsar and SIGKILL on one Object WAL and one BookKeeper
// profile.
func TestLifecycleOnS3(t *testing.T) {
	bin, err := s3test.FindBinary()
	if err != nil {
		testenv.SkipOrFail(t, "versitygw: %v", err)
	}
	gw, err := s3test.Start(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Stop() })
	cfg := gw.Config(gw.NewBucket(t))
	e := &lc{}
	e.srv = testserver.Start(t, testserver.Options{
		Args: e.args([]string{"--object-store", "s3://" + cfg.Bucket + "/cluster-1", "--s3-endpoint", cfg.Endpoint, "--s3-path-style"}),
		Env:  []string{"NEREUS_S3_ACCESS_KEY=" + cfg.AccessKeyID, "NEREUS_S3_SECRET_KEY=" + cfg.SecretAccessKey}})
	e.c = e.srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s3c, err := s3store.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.objects = s3Objects(s3c.Client(), cfg.Bucket, "cluster-1/")

	t.Run("ProfilesReadBackThroughGenerations", func(t *testing.T) { e.profilesReadBack(t, profiles) })
	// The BookKeeper side of retention and deletion does not depend on
	// the object store beyond the generations (covered above): Object WAL
	// only, to keep CI time down.
	t.Run("RetentionReclaims", func(t *testing.T) { e.retentionReclaims(t, []string{"OBJECT_WAL_ASYNC_OBJECT"}) })
	t.Run("DeletedTopicReclaimed", func(t *testing.T) { e.deletedTopicReclaimed(t, []string{"OBJECT_WAL_ASYNC_OBJECT"}) })
	t.Run("PulsarOnMaterializedTopic", func(t *testing.T) {
		e.pulsarRounds(t, []string{"OBJECT_WAL_ASYNC_OBJECT", "BOOKKEEPER_WAL_SYNC_OBJECT"})
	})
	// SIGKILL with the Object WAL and the generations in the bucket (S3
	// flushes on an interval, not by group commit): the default profile
	// and the one whose acknowledgement waits for a generation PUT.
	t.Run("Kill9DuringMaterialization", func(t *testing.T) {
		e.kill9DuringMaterialization(t, []string{"OBJECT_WAL_ASYNC_OBJECT", "BOOKKEEPER_WAL_SYNC_OBJECT"}, 60)
	})
}

// args are the server flags: the lifecycle settings, the BookKeeper
// cluster when there is one, then extra.
func (e *lc) args(extra []string) []string {
	args := append([]string(nil), lifecycleArgs...)
	if bk.ZK != "" {
		args = append(args, "--bookkeeper-zk", bk.ZK, "--bookkeeper-root", bk.Root)
		args = append(args, bkArgs...)
		e.hasBK = true
	}
	return append(args, extra...)
}

func (e *lc) requireProfile(t *testing.T, profile string) {
	t.Helper()
	if usesBK(profile) {
		bk.Require(t)
	}
}

func (e *lc) kafka(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.srv.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

var topicSeq int

func newTopic(prefix string) string {
	topicSeq++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq)
}

func (e *lc) createTopic(t *testing.T, ctx context.Context, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := kadm.NewClient(e.kafka(t)).CreateTopics(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s %v: %v", topic, configs, err)
	}
}

// sent is one acknowledged Kafka record.
type sent struct {
	key, value []byte
	header     kgo.RecordHeader
	offset     int64
}

// produce sends n records of random sizes (64 B .. 4 KiB, incompressible)
// to partition p and returns them as acknowledged.
func produce(t *testing.T, ctx context.Context, cl *kgo.Client, rnd *rand.Rand, topic string, p int32, n int) []sent {
	t.Helper()
	out := make([]sent, 0, n)
	for len(out) < n {
		batch := make([]*kgo.Record, 0, 50)
		for i := 0; i < 50 && len(out)+len(batch) < n; i++ {
			v := make([]byte, 64+rnd.Intn(4096-64))
			rnd.Read(v)
			seq := len(out) + len(batch)
			batch = append(batch, &kgo.Record{Topic: topic, Partition: p, Key: []byte("k" + strconv.Itoa(seq)), Value: v,
				Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(seq))}}})
		}
		res := cl.ProduceSync(ctx, batch...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, p, err)
		}
		for _, r := range res {
			out = append(out, sent{key: r.Record.Key, value: r.Record.Value, header: r.Record.Headers[0], offset: r.Record.Offset})
		}
	}
	return out
}

func streamName(topic string, p int32) string { return "kafka/" + topic + "/" + strconv.Itoa(int(p)) }

// waitStream polls the stream's description until ok accepts it.
func (e *lc) waitStream(t *testing.T, ctx context.Context, name, what string, ok func(adminapi.StreamInfo) bool) adminapi.StreamInfo {
	t.Helper()
	var last adminapi.StreamInfo
	var lastErr error
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		info, err := e.c.DescribeStream(ctx, name)
		if err == nil && ok(info) {
			return info
		}
		last, lastErr = info, err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("stream %s: not %s within 2m: last %+v (err %v)", name, what, last, lastErr)
	return last
}

func (e *lc) waitMaterialized(t *testing.T, ctx context.Context, name string) adminapi.StreamInfo {
	t.Helper()
	return e.waitStream(t, ctx, name, "materialized", func(i adminapi.StreamInfo) bool {
		return i.EndOffset > 0 && i.MaterializedThrough >= i.EndOffset
	})
}

// consume reads partitions [0, parts) of topic from offset 0 with a fresh
// client until each reached ends[p].
func (e *lc) consume(t *testing.T, ctx context.Context, topic string, ends []int64) [][]*kgo.Record {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := range ends {
		offs[int32(p)] = kgo.NewOffset().At(0)
	}
	cl := e.kafka(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxBytes(1<<20))
	got := make([][]*kgo.Record, len(ends))
	done := func() bool {
		for p, end := range ends {
			if n := len(got[p]); end > 0 && (n == 0 || got[p][n-1].Offset < end-1) {
				return false
			}
		}
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consume %s: timed out; read %v of ends %v", topic, lens(got), ends)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("consume %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	}
	return got
}

func lens(rs [][]*kgo.Record) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = len(r)
	}
	return out
}

// same checks that got is exactly want, record by record, offset by
// offset, byte for byte.
func same(t *testing.T, what string, want []sent, got []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: read %d records, produced %d", what, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Offset != w.offset || !bytes.Equal(g.Key, w.key) || !bytes.Equal(g.Value, w.value) ||
			len(g.Headers) != 1 || g.Headers[0].Key != w.header.Key || !bytes.Equal(g.Headers[0].Value, w.header.Value) {
			t.Fatalf("%s: record %d differs: read offset %d key %q (%d value bytes), produced offset %d key %q (%d value bytes)",
				what, i, g.Offset, g.Key, len(g.Value), w.offset, w.key, len(w.value))
		}
	}
}

// profilesReadBack: per profile, two partitions of ~600 KB each (about
// ten 64 KiB generations), materialized, then read back from offset 0
// by a fresh consumer.
func (e *lc) profilesReadBack(t *testing.T, profiles []string) {
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			e.requireProfile(t, profile)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			topic := newTopic("lc-" + strings.ToLower(strings.ReplaceAll(profile, "_", "")))
			e.createTopic(t, ctx, topic, 2, map[string]string{"nereus.storage.profile": profile})
			cl := e.kafka(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			rnd := rand.New(rand.NewSource(int64(len(profile))))
			want := make([][]sent, 2)
			ends := make([]int64, 2)
			for p := int32(0); p < 2; p++ {
				want[p] = produce(t, ctx, cl, rnd, topic, p, 300)
				ends[p] = want[p][len(want[p])-1].offset + 1
			}
			for p := int32(0); p < 2; p++ {
				info, err := e.c.DescribeStream(ctx, streamName(topic, p))
				if err != nil {
					t.Fatal(err)
				}
				if info.Profile != profile {
					t.Fatalf("stream %s has profile %s, want %s", info.Name, info.Profile, profile)
				}
				if materializes(profile) {
					info = e.waitMaterialized(t, ctx, streamName(topic, p))
					if n := e.genObjects(t, info.ID); n < 2 {
						t.Fatalf("%s: %d generation objects for %d bytes, want at least 2 (64 KiB target; a generation holds whole commits, so under load fewer, larger ones)", info.Name, n, info.CommittedBytes)
					}
				} else if info.MaterializedThrough != 0 {
					t.Fatalf("%s: BOOKKEEPER_WAL_ONLY stream materialized through %d", info.Name, info.MaterializedThrough)
				}
			}
			got := e.consume(t, ctx, topic, ends)
			for p := range want {
				same(t, fmt.Sprintf("%s/%d", topic, p), want[p], got[p])
			}
		})
	}
}

// genObjects counts the generation objects of stream id.
func (e *lc) genObjects(t *testing.T, id string) int {
	t.Helper()
	n, _ := e.objects(t, "gen/"+id+"/")
	return n
}

// genBytes is the size of the generation objects of stream id.
func (e *lc) genBytes(t *testing.T, id string) int64 {
	t.Helper()
	_, b := e.objects(t, "gen/"+id+"/")
	return b
}

// objectBytes is the size of everything in the object store.
func (e *lc) objectBytes(t *testing.T) int64 {
	t.Helper()
	_, b := e.objects(t, "")
	return b
}

// fsObjects counts the objects with a key prefix (a "/"-terminated path or
// "") in the filesystem object store of dataDir, from outside:
// objectstore/fsstore keeps key a/b/c at objects/objects/a.d/b.d/c.o.
func fsObjects(dataDir string) func(t *testing.T, prefix string) (int, int64) {
	return func(t *testing.T, prefix string) (int, int64) {
		dir := filepath.Join(dataDir, "objects", "objects")
		for _, seg := range strings.Split(strings.TrimSuffix(prefix, "/"), "/") {
			if seg != "" {
				dir = filepath.Join(dir, seg+".d")
			}
		}
		n, b := 0, int64(0)
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".o") {
				if fi, err := d.Info(); err == nil {
					n, b = n+1, b+fi.Size()
				}
			}
			return nil
		})
		return n, b
	}
}

// s3Objects lists the objects with a key prefix under the server's bucket
// prefix in versitygw.
func s3Objects(cl *s3.Client, bucket, root string) func(t *testing.T, prefix string) (int, int64) {
	return func(t *testing.T, prefix string) (int, int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, b := 0, int64(0)
		pg := s3.NewListObjectsV2Paginator(cl, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(root + prefix)})
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				t.Fatalf("list s3://%s/%s%s: %v", bucket, root, prefix, err)
			}
			for _, o := range out.Contents {
				n, b = n+1, b+aws.ToInt64(o.Size)
			}
		}
		return n, b
	}
}

func (e *lc) gcStats(t *testing.T, ctx context.Context) adminapi.GCStats {
	t.Helper()
	st, err := e.c.GCStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Stats
}

// waitGC polls GET /v1/gc until ok accepts the stats.
func (e *lc) waitGC(t *testing.T, ctx context.Context, what string, ok func(adminapi.GCStats) bool) adminapi.GCStats {
	t.Helper()
	var last adminapi.GCStatus
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := e.c.GCStatus(ctx)
		if err == nil && ok(st.Stats) {
			return st.Stats
		}
		last = st
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("GC: not %s within 2m: last %+v, pending %+v", what, last.Stats, last.Pending)
	return last.Stats
}

// retentionReclaims: a retention.ms topic and a retention.bytes topic per
// WAL kind; the first is trimmed to empty once its data is older than
// retention.ms, the second keeps about retention.bytes; GC deletes their
// generation objects (and ledgers, for BookKeeper) and the space under
// objects/ comes back.
func (e *lc) retentionReclaims(t *testing.T, profiles []string) {
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			e.requireProfile(t, profile)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			before := e.gcStats(t, ctx)
			timeTopic, sizeTopic := newTopic("lc-rms"), newTopic("lc-rbytes")
			const retainBytes = 256 << 10
			e.createTopic(t, ctx, timeTopic, 1, map[string]string{"nereus.storage.profile": profile, "retention.ms": "4000"})
			e.createTopic(t, ctx, sizeTopic, 1, map[string]string{"nereus.storage.profile": profile, "retention.bytes": strconv.Itoa(retainBytes)})
			cl := e.kafka(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			rnd := rand.New(rand.NewSource(7))
			produced := int64(0)
			for _, topic := range []string{timeTopic, sizeTopic} {
				for _, r := range produce(t, ctx, cl, rnd, topic, 0, 800) { // ~1.6 MB
					produced += int64(len(r.value))
				}
			}
			var zkl *zkledgers.Counter
			ledgersBefore := 0
			if usesBK(profile) {
				zkl = zkledgers.Dial(t, bk.ZK, bk.Root)
				id := e.waitStream(t, ctx, streamName(timeTopic, 0), "created", func(adminapi.StreamInfo) bool { return true }).ID
				ledgersBefore = zkl.Count(t, id)[id]
				if ledgersBefore == 0 {
					t.Fatalf("no ledger of %s in ZooKeeper after producing", id)
				}
			}
			writesStopped := time.Now()
			timeInfo := e.waitStream(t, ctx, streamName(timeTopic, 0), "trimmed to empty by retention.ms", func(i adminapi.StreamInfo) bool {
				return i.EndOffset > 0 && i.StartOffset == i.EndOffset
			})
			trimmed := time.Since(writesStopped)
			if usesBK(profile) {
				// Writes stopped and everything is trimmed: the stream's
				// last ledger (never full, never rolled over) is sealed
				// by the idle seal and deleted, gone from ZooKeeper.
				deadline := time.Now().Add(2 * time.Minute)
				for zkl.Count(t, timeInfo.ID)[timeInfo.ID] > 0 {
					if time.Now().After(deadline) {
						st, _ := e.c.GCStatus(ctx)
						t.Fatalf("%s: %d ledgers still in ZooKeeper 2m after the trim; pending %+v", timeInfo.ID,
							zkl.Count(t, timeInfo.ID)[timeInfo.ID], st.Pending)
					}
					time.Sleep(250 * time.Millisecond)
				}
				t.Logf("%s: %d ledger(s) of the retention.ms topic in ZooKeeper after the writes, 0 after %s (trimmed to empty after %s)",
					profile, ledgersBefore, time.Since(writesStopped).Round(100*time.Millisecond), trimmed.Round(100*time.Millisecond))
			}
			sizeInfo := e.waitStream(t, ctx, streamName(sizeTopic, 0), "trimmed by retention.bytes", func(i adminapi.StreamInfo) bool {
				return i.StartOffset > 0 && i.RetainedBytes <= 2*retainBytes+(64<<10)
			})
			// Generation objects of the trimmed ranges are deleted: none
			// left for the emptied topic, a bounded number for the other.
			deadline := time.Now().Add(2 * time.Minute)
			for e.genObjects(t, timeInfo.ID) > 0 || e.genBytes(t, sizeInfo.ID) > 4*retainBytes {
				if time.Now().After(deadline) {
					t.Fatalf("generation objects not reclaimed within 2m: %d left of %s, %d bytes of %s",
						e.genObjects(t, timeInfo.ID), timeInfo.Name, e.genBytes(t, sizeInfo.ID), sizeInfo.Name)
				}
				time.Sleep(250 * time.Millisecond)
			}
			after := e.waitGC(t, ctx, "deleting the trimmed sources", func(s adminapi.GCStats) bool {
				if s.RetentionTrims <= before.RetentionTrims || s.DeletedObjects <= before.DeletedObjects {
					return false
				}
				if usesBK(profile) {
					return s.DeletedLedgers > before.DeletedLedgers
				}
				return s.DeletedSegments > before.DeletedSegments
			})
			t.Logf("%s: produced %d bytes; retention trims +%d, deleted: %d generation objects, %d segments, %d ledgers, %d bytes; objects/ now %d bytes",
				profile, produced, after.RetentionTrims-before.RetentionTrims, after.DeletedObjects-before.DeletedObjects,
				after.DeletedSegments-before.DeletedSegments, after.DeletedLedgers-before.DeletedLedgers,
				after.DeletedBytes-before.DeletedBytes, e.objectBytes(t))
		})
	}
}

// deletedTopicReclaimed: ~3 MB into a topic per WAL kind, materialized,
// then the topic is deleted: its generation objects go, GC counts the
// deleted streams, and objects/ returns to about where it was before the
// topic was written.
func (e *lc) deletedTopicReclaimed(t *testing.T, profiles []string) {
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			e.requireProfile(t, profile)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			before := e.gcStats(t, ctx)
			base := e.objectBytes(t)
			topic := newTopic("lc-del")
			e.createTopic(t, ctx, topic, 2, map[string]string{"nereus.storage.profile": profile})
			cl := e.kafka(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			rnd := rand.New(rand.NewSource(11))
			var ids []string
			for p := int32(0); p < 2; p++ {
				produce(t, ctx, cl, rnd, topic, p, 700)
				ids = append(ids, e.waitMaterialized(t, ctx, streamName(topic, p)).ID)
			}
			full := e.objectBytes(t)
			resp, err := kadm.NewClient(e.kafka(t)).DeleteTopics(ctx, topic)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			e.waitGC(t, ctx, "deleting the topic's streams", func(s adminapi.GCStats) bool {
				return s.DeletedStreams >= before.DeletedStreams+2
			})
			// Objects: the generations are gone; what remains is about
			// what was there before (other topics' retained data, the
			// WAL's open segment).
			const slack = 512 << 10
			deadline := time.Now().Add(2 * time.Minute)
			for {
				left := 0
				for _, id := range ids {
					left += e.genObjects(t, id)
				}
				now := e.objectBytes(t)
				if left == 0 && now <= base+slack {
					t.Logf("%s: objects/ %d bytes before, %d with the topic, %d after deleting it", profile, base, full, now)
					break
				}
				if time.Now().After(deadline) {
					st, _ := e.c.GCStatus(ctx)
					t.Fatalf("deleted topic not reclaimed within 2m: %d generation objects left, objects/ %d bytes (before the topic %d, with it %d); GC pending %+v",
						left, now, base, full, st.Pending)
				}
				time.Sleep(250 * time.Millisecond)
			}
			if usesBK(profile) {
				// The deleted streams' last (open) ledgers are sealed
				// by the idle seal and deleted too.
				zkl := zkledgers.Dial(t, bk.ZK, bk.Root)
				for {
					left := zkl.Count(t, ids...)
					n := left[ids[0]] + left[ids[1]]
					if n == 0 {
						t.Logf("%s: deleted topic's ledgers gone from ZooKeeper", profile)
						break
					}
					if time.Now().After(deadline) {
						st, _ := e.c.GCStatus(ctx)
						t.Fatalf("deleted topic: %d ledgers still in ZooKeeper; GC pending %+v", n, st.Pending)
					}
					time.Sleep(250 * time.Millisecond)
				}
			}
		})
	}
}

// idleLedgerReclaimed: a BOOKKEEPER_WAL_ONLY topic (never materialized:
// only retention frees its ledger) with retention.ms and the default
// ledger size; once writes stop and retention trims it to empty, its one
// ledger — never full, so never rolled over — is sealed by the idle seal
// and deleted: none of its ledgers is left in ZooKeeper.
func (e *lc) idleLedgerReclaimed(t *testing.T) {
	const profile = "BOOKKEEPER_WAL_ONLY"
	e.requireProfile(t, profile)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := newTopic("lc-idle")
	e.createTopic(t, ctx, topic, 1, map[string]string{"nereus.storage.profile": profile, "retention.ms": "3000"})
	cl := e.kafka(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, ctx, cl, rand.New(rand.NewSource(13)), topic, 0, 300)
	stopped := time.Now()
	zkl := zkledgers.Dial(t, bk.ZK, bk.Root)
	id := e.waitStream(t, ctx, streamName(topic, 0), "created", func(adminapi.StreamInfo) bool { return true }).ID
	before := zkl.Count(t, id)[id]
	if before == 0 {
		t.Fatalf("no ledger of %s in ZooKeeper after producing", id)
	}
	e.waitStream(t, ctx, streamName(topic, 0), "trimmed to empty by retention.ms", func(i adminapi.StreamInfo) bool {
		return i.EndOffset > 0 && i.StartOffset == i.EndOffset
	})
	trimmed := time.Since(stopped)
	deadline := time.Now().Add(2 * time.Minute)
	for zkl.Count(t, id)[id] > 0 {
		if time.Now().After(deadline) {
			st, _ := e.c.GCStatus(ctx)
			t.Fatalf("%s: ledgers still in ZooKeeper 2m after the trim; pending %+v", id, st.Pending)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%s: %d ledger(s) in ZooKeeper when writes stopped; trimmed to empty after %s, 0 ledgers after %s",
		profile, before, trimmed.Round(100*time.Millisecond), time.Since(stopped).Round(100*time.Millisecond))
}

// kill9DuringMaterialization: idempotent producers write without pause
// to topics of the materializing profiles while generations are cut every
// 64 KiB; the server is SIGKILLed with a produce in flight, three times.
// Afterwards every partition is materialized to its end and a fresh
// consumer reads every acknowledged record at its offset, exactly once.
func (e *lc) kill9DuringMaterialization(t *testing.T, profiles []string, progress int) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	topics := []string{}
	needBK := false
	for _, profile := range profiles {
		needBK = needBK || usesBK(profile)
		if usesBK(profile) && !e.hasBK {
			continue
		}
		topic := newTopic("lc-kill-" + strings.ToLower(strings.ReplaceAll(profile, "_", "")))
		e.createTopic(t, ctx, topic, 2, map[string]string{"nereus.storage.profile": profile})
		topics = append(topics, topic)
	}
	if needBK && !e.hasBK {
		defer bk.Require(t) // skips (or fails) after the Object WAL topics ran
	}
	prod := e.kafka(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryTimeout(2*time.Minute))
	acks := acklog.New()
	var fatalMu sync.Mutex
	var fatal error
	failed := func() error { fatalMu.Lock(); defer fatalMu.Unlock(); return fatal }
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, topic := range topics {
		for p := int32(0); p < 2; p++ {
			wg.Add(1)
			go func(topic string, p int32) {
				defer wg.Done()
				part := topic + "/" + strconv.Itoa(int(p))
				pad := bytes.Repeat([]byte{'x'}, 1500) // ~1.5 KB records: a generation every ~40
				for i := 0; pctx.Err() == nil; i++ {
					v := append([]byte(acklog.Payload("w", i)+"|"), pad...)
					r := &kgo.Record{Topic: topic, Partition: p, Value: v}
					acks.Begin()
					err := prod.ProduceSync(pctx, r).FirstErr()
					acks.End()
					if err != nil {
						continue // bounded: the loop ends with pctx
					}
					if err := acks.Ack(part, acklog.Pos{Offset: r.Offset}, string(v[:bytes.IndexByte(v, '|')])); err != nil {
						fatalMu.Lock()
						fatal = err
						fatalMu.Unlock()
						return
					}
				}
			}(topic, p)
		}
	}
	gensBefore := e.gcStats(t, ctx).Materialized
	for cycle := 0; cycle < 3; cycle++ {
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
		err := acks.WaitKillPoint(wctx, acks.Count(), progress, failed)
		wcancel()
		if err != nil {
			stop()
			wg.Wait()
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		if cycle == 0 {
			// Materialization is running before the first kill.
			e.waitGC(t, ctx, "publishing generations under the load", func(s adminapi.GCStats) bool { return s.Materialized > gensBefore })
		}
		t.Logf("cycle %d: SIGKILL with a produce in flight (%d acknowledged)", cycle, acks.Count())
		e.srv.Kill()
		e.srv.Restart()
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	err := acks.WaitKillPoint(wctx, acks.Count(), 50, failed)
	wcancel()
	stop()
	wg.Wait()
	if err == nil {
		err = failed()
	}
	if err != nil {
		t.Fatalf("after the last restart: %v", err)
	}
	for _, topic := range topics {
		ends := make([]int64, 2)
		for p := int32(0); p < 2; p++ {
			ends[p] = e.waitMaterialized(t, ctx, streamName(topic, p)).EndOffset
		}
		got := e.consume(t, ctx, topic, ends)
		for p := range got {
			read := make([]acklog.Entry, 0, len(got[p]))
			for _, r := range got[p] {
				v := string(r.Value)
				if i := strings.IndexByte(v, '|'); i >= 0 {
					v = v[:i]
				}
				read = append(read, acklog.Entry{Pos: acklog.Pos{Offset: r.Offset}, Payload: v})
			}
			part := topic + "/" + strconv.Itoa(p)
			if err := acks.Verify(part, read); err != nil {
				t.Fatalf("%s: %v", part, err)
			}
			t.Logf("%s: %d acknowledged, %d read back through generations after 3 SIGKILLs", part, acks.Acked(part), len(read))
		}
	}
}

// pulsarRounds: per profile, a topic created through the Pulsar admin
// REST API with that profile (topic property nereus.storage.profile);
// pulsar-client-go produces to it, the topic is materialized (all but
// BOOKKEEPER_WAL_ONLY), and a new subscription from the earliest position
// reads every message back in order, byte for byte, with the message id
// it was acknowledged with.
func (e *lc) pulsarRounds(t *testing.T, profiles []string) {
	for _, profile := range profiles {
		t.Run(profile, func(t *testing.T) {
			e.requireProfile(t, profile)
			e.pulsarRound(t, profile)
		})
	}
}

func (e *lc) pulsarRound(t *testing.T, profile string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	local := newTopic("lc-pulsar-" + strings.ToLower(strings.ReplaceAll(profile, "_", "")))
	topic := "persistent://public/default/" + local
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, e.srv.URL()+"/admin/v2/persistent/public/default/"+local,
		strings.NewReader(`{"nereus.storage.profile":"`+profile+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("create %s with profile %s: HTTP %d", topic, profile, resp.StatusCode)
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + e.srv.PulsarAddr(), OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Asynchronous sends (one producer keeps their order): a
	// BOOKKEEPER_WAL_SYNC_OBJECT send is acknowledged only once a
	// generation covers it, so sending one at a time would wait for a
	// materialization per message.
	const n = 400
	rnd := rand.New(rand.NewSource(5))
	want := make([][]byte, n)
	ids := make([]pulsar.MessageID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		v := make([]byte, 100+rnd.Intn(3000))
		rnd.Read(v)
		want[i] = v
		wg.Add(1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: v, Key: strconv.Itoa(i)}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			ids[i], errs[i] = id, err
			wg.Done()
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	p.Close()
	name := "pulsar/persistent/public/default/" + local
	var info adminapi.StreamInfo
	if materializes(profile) {
		// Every message is read from generations (materialized to the
		// end). How many objects: batched asynchronous sends make large
		// commits, and a generation holds whole commits, so possibly one.
		info = e.waitMaterialized(t, ctx, name)
		if n := e.genObjects(t, info.ID); n < 1 {
			t.Fatalf("%s: materialized without a generation object", info.Name)
		}
	} else {
		info = e.waitStream(t, ctx, name, "written", func(i adminapi.StreamInfo) bool { return i.EndOffset > 0 })
		if info.MaterializedThrough != 0 {
			t.Fatalf("%s: BOOKKEEPER_WAL_ONLY stream materialized through %d", info.Name, info.MaterializedThrough)
		}
	}
	if info.Profile != profile {
		t.Fatalf("stream %s has profile %s, want %s", info.Name, info.Profile, profile)
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "catchup",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := range want {
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		m, err := cons.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("receive %d of %d: %v", i, len(want), err)
		}
		if !bytes.Equal(m.Payload(), want[i]) || m.Key() != strconv.Itoa(i) {
			t.Fatalf("message %d differs: key %q, %d bytes; want key %d, %d bytes", i, m.Key(), len(m.Payload()), i, len(want[i]))
		}
		if m.ID().LedgerID() != ids[i].LedgerID() || m.ID().EntryID() != ids[i].EntryID() || m.ID().BatchIdx() != ids[i].BatchIdx() {
			t.Fatalf("message %d: id %v, acknowledged as %v", i, m.ID(), ids[i])
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s (%s): %d messages read back from %d generation objects", topic, profile, len(want), e.genObjects(t, info.ID))
}

// metrics: the lifecycle families on /metrics count what the subtests did.
func (e *lc) metrics(t *testing.T) {
	resp, err := http.Get(e.srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, family := range []string{"nereus_gc_deleted_total", "nereus_lifecycle_"} {
		if !strings.Contains(text, family) {
			t.Errorf("/metrics lacks %s", family)
		}
	}
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "nereus_gc_deleted_total") || strings.HasPrefix(l, "nereus_lifecycle_generations") {
			lines = append(lines, l)
		}
	}
	t.Logf("after the run (counters since the last restart):\n%s", strings.Join(lines, "\n"))
}
