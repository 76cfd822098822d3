package kstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

func newStore(t *testing.T, streams stream.Storage, meta metadata.Store, writer string, now func() time.Time) *Store {
	t.Helper()
	s, err := New(streams, meta, Config{WriterID: writer, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
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
// streams and metadata: the one holding a partition's append session is its
// leader, the other gets ErrNotLeader; topic changes by one invalidate the
// other's cache through the metadata watch.
func TestSecondBrokerIsNotLeaderAndSeesChanges(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), memstore.New()
	a := newStore(t, streams, meta, "a", nil)
	b := newStore(t, streams, meta, "b", nil)
	if _, err := a.CreateTopic(ctx, "shared", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	_, pa, _ := a.Partition(ctx, "shared", 0)
	epoch, err := a.LeaderEpoch(ctx, pa)
	if err != nil || epoch < 1 {
		t.Fatalf("epoch %d err %v", epoch, err)
	}
	_, pb, err := b.Partition(ctx, "shared", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LeaderEpoch(ctx, pb); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("second broker: %v", err)
	}
	if _, err := a.DeleteTopic(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
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
