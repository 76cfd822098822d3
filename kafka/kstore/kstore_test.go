package kstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

func newStore(t *testing.T, streams stream.Storage, meta metadata.Store, writer string, now func() time.Time) *Store {
	t.Helper()
	ctx := context.Background()
	id, err := cluster.ClaimKafkaBrokerID(ctx, meta, writer, 0)
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.Join(ctx, cluster.Config{Metadata: meta, Storage: streams, NodeID: writer, KafkaBrokerID: id,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(streams, meta, Config{Cluster: node, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()); _ = node.Close() })
	return s
}

func TestTopicLifecycleAndLeftovers(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), memstore.New()
	s := newStore(t, streams, meta, "b1", nil)
	// A stream left over from an earlier topic of the same name (another id).
	if _, err := streams.Create(ctx, StreamName("t", 0), stream.CreateOptions{Attributes: map[string]string{AttrTopicID: "old"}}); err != nil {
		t.Fatal(err)
	}
	tp, err := s.CreateTopic(ctx, "t", 2, TopicConfigs{ConfigRetentionMs: "1000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	info, err := streams.Lookup(ctx, StreamName("t", 0))
	if err != nil || info.Attributes[AttrTopicID] != tp.ID.String() || info.Retention.Time != time.Second {
		t.Fatalf("partition stream %+v err %v", info, err)
	}
	if _, err := s.CreateTopic(ctx, "t", 1, nil, false); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate: %v", err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", string(make([]byte, 250))} {
		if _, err := s.CreateTopic(ctx, bad, 1, nil, false); !errors.Is(err, ErrInvalidTopic) {
			t.Fatalf("name %q: %v", bad, err)
		}
	}
	names, _ := s.ListTopics(ctx)
	if len(names) != 1 || names[0] != "t" {
		t.Fatalf("list %v", names)
	}
	if err := s.CreatePartitions(ctx, "t", 3, false); err != nil {
		t.Fatal(err)
	}
	if tp, _ := s.Topic(ctx, "t"); len(tp.Partitions) != 3 {
		t.Fatalf("partitions %d", len(tp.Partitions))
	}
	// Commit an offset, delete, recreate: the old offset is not returned.
	if errs := s.CommitOffsets(ctx, "g", []OffsetCommit{{Topic: "t", Partition: 1, Offset: 5}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if offs, _ := s.FetchOffsets(ctx, "g"); len(offs) != 1 {
		t.Fatalf("offsets %v", offs)
	}
	if _, err := s.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := streams.Lookup(ctx, StreamName("t", 2)); !errors.Is(err, stream.ErrStreamNotFound) {
		t.Fatalf("stream survived delete: %v", err)
	}
	if _, err := s.CreateTopic(ctx, "t", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	if offs, _ := s.FetchOffsets(ctx, "g"); len(offs) != 0 {
		t.Fatalf("offsets of the deleted topic returned for the new one: %v", offs)
	}
	if gs, _ := s.GroupsWithOffsets(ctx); len(gs) != 1 || gs[0] != "g" {
		t.Fatalf("groups %v", gs)
	}
	if err := s.DeleteGroupOffsets(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if gs, _ := s.GroupsWithOffsets(ctx); len(gs) != 0 {
		t.Fatalf("groups after delete %v", gs)
	}
}

// TestStaleCreatingTopicIsCompleted: a broker died between writing the
// "creating" record and making the streams; once the record is stale, the
// next load finishes the creation.
func TestStaleCreatingTopicIsCompleted(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(10000, 0)
	clock := func() time.Time { return now }
	streams, meta := streammem.New(), memstore.New()
	rec := topicRecord{V: topicRecordVersion, Name: "half", ID: newTopicID(), Partitions: 2, State: StateCreating, CreatedMs: now.UnixMilli()}
	val, _ := json.Marshal(rec)
	if _, err := meta.Put(ctx, keyTopics+"half", val, metadata.NotExists); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, streams, meta, "b1", clock)
	if _, err := s.Topic(ctx, "half"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("fresh creating record should be invisible: %v", err)
	}
	now = now.Add(StaleCreate + time.Second)
	tp, err := s.Topic(ctx, "half")
	if err != nil || len(tp.Partitions) != 2 || tp.ID != rec.ID {
		t.Fatalf("topic %+v err %v", tp, err)
	}
}

func TestProducerIDsUniqueAcrossBrokers(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), memstore.New()
	a := newStore(t, streams, meta, "a", nil)
	b := newStore(t, streams, meta, "b", nil)
	seen := map[int64]bool{}
	for i := 0; i < 2500; i++ {
		st := a
		if i%3 == 0 {
			st = b
		}
		id, err := st.AllocateProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("producer id %d handed out twice", id)
		}
		seen[id] = true
	}
}

// TestSecondBrokerIsNotLeaderAndSeesChanges: two stores over the same
// streams and metadata: the broker whose cluster node owns a partition's
// stream leads it and appends; the other gets ErrNotLeader naming the
// leader; both report the same leader epoch without taking a session;
// topic changes by one invalidate the other's cache through the metadata
// watch.
func TestSecondBrokerIsNotLeaderAndSeesChanges(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), memstore.New()
	a := newStore(t, streams, meta, "a", nil)
	b := newStore(t, streams, meta, "b", nil)
	deadline := time.Now().Add(10 * time.Second)
	for len(a.Cluster().(*cluster.Node).View().Brokers) < 2 || len(b.Cluster().(*cluster.Node).View().Brokers) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("views never saw both brokers")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := a.CreateTopic(ctx, "shared", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	_, pa, _ := a.Partition(ctx, "shared", 0)
	_, pb, err := b.Partition(ctx, "shared", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader, ok := a.Leader(pa)
	if lb, _ := b.Leader(pb); !ok || lb.NodeID != leader.NodeID {
		t.Fatalf("leaders disagree: %v / %v", leader, lb)
	}
	lead, follow, pl, pf := a, b, pa, pb
	if leader.NodeID == "b" {
		lead, follow, pl, pf = b, a, pb, pa
	}
	if e, err := follow.LeaderEpoch(ctx, pf); err != nil || e != 0 {
		t.Fatalf("epoch before any leader: %d %v", e, err)
	}
	build := func(int32) stream.AppendRequest {
		return stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("x"), RecordCount: 1}}, ExpectedStart: -1}
	}
	app, err := lead.AppendAsync(ctx, pl, build)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Settle(ctx); err != nil || app.Epoch < 1 {
		t.Fatalf("leader append: epoch %d, %v", app.Epoch, err)
	}
	if _, err := follow.AppendAsync(ctx, pf, build); !errors.Is(err, ErrNotLeader) || !errors.Is(err, cluster.ErrNotOwner) {
		t.Fatalf("second broker: %v", err)
	}
	for _, st := range []*Store{a, b} {
		p := pa
		if st == b {
			p = pb
		}
		if e, err := st.LeaderEpoch(ctx, p); err != nil || e != app.Epoch {
			t.Fatalf("epoch %d %v, want %d", e, err, app.Epoch)
		}
	}
	if _, err := a.DeleteTopic(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, err := b.Topic(ctx, "shared"); errors.Is(err, ErrUnknownTopic) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second broker still sees the deleted topic")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGroupStateCompareAndSet: the group store persists snapshots under a
// checksum and refuses a stale coordinator's write.
func TestGroupStateCompareAndSet(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), memstore.New()
	gs := newStore(t, streams, meta, "a", nil).GroupStore()
	if _, _, found, err := gs.LoadGroup(ctx, "g/1"); err != nil || found {
		t.Fatalf("absent group: %v %v", found, err)
	}
	v1, err := gs.SaveGroup(ctx, "g/1", []byte(`{"v":1}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gs.SaveGroup(ctx, "g/1", []byte(`{"v":1,"x":1}`), 0); !errors.Is(err, kgroup.ErrStale) {
		t.Fatalf("second create: %v", err)
	}
	v2, err := gs.SaveGroup(ctx, "g/1", []byte(`{"v":1,"x":2}`), v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gs.SaveGroup(ctx, "g/1", []byte(`{"v":1,"x":3}`), v1); !errors.Is(err, kgroup.ErrStale) {
		t.Fatalf("stale save: %v", err)
	}
	raw, v, found, err := gs.LoadGroup(ctx, "g/1")
	if err != nil || !found || v != v2 || string(raw) != `{"v":1,"x":2}` {
		t.Fatalf("load: %q %d %v %v", raw, v, found, err)
	}
	rec, _ := meta.Get(ctx, groupStateKey("g/1"))
	rec.Value[len(rec.Value)-1] ^= 1
	if _, err := meta.Put(ctx, rec.Key, rec.Value, rec.Version); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := gs.LoadGroup(ctx, "g/1"); err == nil {
		t.Fatal("corrupt group state loaded")
	}
	if err := gs.DeleteGroup(ctx, "g/1"); err != nil {
		t.Fatal(err)
	}
	if err := gs.DeleteGroup(ctx, "g/1"); err != nil {
		t.Fatalf("deleting an absent group: %v", err)
	}
}

func TestConfigs(t *testing.T) {
	c := TopicConfigs{ConfigRetentionMs: "-1", ConfigRetentionBytes: "2048", ConfigTimestampType: "LogAppendTime"}
	if r := c.Retention(); r.Time != 0 || r.Bytes != 2048 {
		t.Fatalf("%+v", r)
	}
	if !c.LogAppendTime() || c.Profile() != stream.DefaultProfile || c.MaxMessageBytes() != 1048588 {
		t.Fatal("effective values")
	}
	for _, bad := range [][2]string{{"nope", "1"}, {ConfigCleanupPolicy, "compact,shrink"}, {ConfigStorageProfile, "FLOPPY"}, {ConfigRetentionMs, "-2"}} {
		if err := ValidateConfig(bad[0], bad[1]); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}
