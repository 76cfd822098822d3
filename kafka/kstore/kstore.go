// Package kstore is the Kafka storage boundary: it maps Kafka coordinates
// (topic, partition, group) onto Nereus streams and metadata records.
//
// It owns:
//   - topic metadata (partition count, configs, topic id, storage profile)
//     under the metadata key namespace "kafka/topics/";
//   - the partition -> stream mapping: partition p of topic t is the stream
//     named "kafka/<t>/<p>", labelled with the topic id so that streams left
//     over from a deleted topic of the same name are never reused;
//   - appends to a partition through this broker's append session on its
//     stream, which only the cluster membership takes (Cluster.Writer,
//     *cluster.Node in a server: this broker must own the partition; the
//     session epoch is the Kafka partition leader epoch);
//   - committed consumer-group offsets ("kafka/groups/<g>/o/..."), the
//     persisted group state ("kafka/groups/<g>/state", see groupstate.go)
//     and the producer id allocator ("kafka/producer-ids"), shared by every
//     broker of the cluster.
//   - each partition's transaction index ("kafka/ptxn/...", txnindex.go):
//     open transactions (the last stable offset) and aborted ranges.
//
// Kafka protocol state lives here, separate from stream truth: the stream
// core never sees topic names or group ids as coordinates, and this package
// never stores record bytes anywhere but in streams. It must never decide
// what a produce or fetch means on the wire (that is package kafka), never
// retry an append blindly, and never treat an unknown metadata outcome as a
// failure without re-reading.
//
// Topic lifecycle is a small state machine persisted in the topic record:
//
//	(absent) --create--> creating --streams made--> ready --delete--> deleting --> (absent)
//
// Only "ready" topics are visible to clients. Every step is a single-key CAS;
// a crash between steps leaves a record another broker (or a retry) finishes:
// creating records older than StaleCreate are completed, deleting records
// are finished by the next create or delete of that name.
package kstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// Key namespace in the metadata store.
const (
	keyTopics      = "kafka/topics/"
	keyGroups      = "kafka/groups/"
	keyGroupIndex  = "kafka/groupidx/"
	keyProducerIDs = "kafka/producer-ids"
)

// Stream attributes written on every partition stream.
const (
	AttrTopic     = "kafka.topic"
	AttrTopicID   = "kafka.topic.id"
	AttrPartition = "kafka.partition"
)

// Errors. The wire layer maps them to Kafka codes.
var (
	ErrUnknownTopic      = errors.New("kafka/kstore: unknown topic or partition")
	ErrTopicExists       = errors.New("kafka/kstore: topic already exists")
	ErrInvalidTopic      = errors.New("kafka/kstore: invalid topic name")
	ErrInvalidPartitions = errors.New("kafka/kstore: invalid partition count")
	ErrInvalidConfig     = errors.New("kafka/kstore: invalid config")
	// ErrNotLeader: another broker leads the partition (owns its stream),
	// or its leadership is still moving to this one. Retriable.
	ErrNotLeader = errors.New("kafka/kstore: this broker does not lead the partition")
	// ErrConflict: a concurrent change kept winning; retry the request.
	ErrConflict = errors.New("kafka/kstore: concurrent metadata change, retry")
)

// StaleCreate is how old a "creating" topic record must be before any
// broker completes it (its creator is presumed dead).
const StaleCreate = 30 * time.Second

// Config configures a Store.
type Config struct {
	// Cluster is this broker's cluster membership: it decides who leads a
	// partition and holds the append sessions. Nil makes a read-only store
	// (tools, the console): appends fail with ErrNotLeader, no partition
	// has a leader.
	// A server passes its *cluster.Node; see Cluster (runtime.go).
	Cluster Cluster
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Runtime runs the store's timers and background goroutines (default
	// time.AfterFunc and go; see Runtime in runtime.go).
	Runtime Runtime
	// TxnCheckpointDelay batches transaction-index checkpoint writes
	// (default 1 s: the scan after a restart covers at most about this
	// much of a partition's recent history).
	TxnCheckpointDelay time.Duration
	// Projection, if set, serves the topics it claims (KoP: Pulsar topics
	// named persistent://tenant/ns/topic); see projection.go.
	Projection Projection
}

// Store is the Kafka storage boundary over a stream.Storage and a
// metadata.Store. It is safe for concurrent use.
type Store struct {
	streams stream.Storage
	meta    metadata.Store
	cfg     Config
	log     *slog.Logger

	mu     sync.Mutex
	topics map[string]*Topic // ready topics, by name
	gen    uint64            // bumped on every invalidation; guards stale loads

	pidMu         sync.Mutex
	pidNext, pidE int64

	txns txnIndexes // per-partition transaction indexes (txnindex.go)

	// rt runs timers and background work; coop: it was supplied
	// (Config.Runtime), so nothing may block outside it.
	rt   Runtime
	coop bool

	stopWatch context.CancelFunc
	watchDone chan struct{}
	// markersDone is closed when serveMarkers (markers.go) returns; nil
	// for a store without a cluster or with a supplied runtime.
	markersDone chan struct{}
}

// New returns a Store and starts watching topic records so that changes by
// other brokers invalidate the cache.
func New(streams stream.Storage, meta metadata.Store, cfg Config) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if n, ok := cfg.Cluster.(*cluster.Node); ok && n == nil {
		cfg.Cluster = nil // a nil *cluster.Node is no cluster, not a broken one
	}
	rt, coop := cfg.Runtime, cfg.Runtime != nil
	if !coop {
		rt = realRuntime{}
	}
	if cfg.TxnCheckpointDelay <= 0 {
		cfg.TxnCheckpointDelay = txnFlushDelay
	}
	s := &Store{streams: streams, meta: meta, cfg: cfg, log: cfg.Logger, topics: map[string]*Topic{}, rt: rt, coop: coop}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := meta.Watch(ctx, keyTopics)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kafka/kstore: watch topics: %w", err)
	}
	s.stopWatch = cancel
	s.watchDone = make(chan struct{})
	rt.Go(func() { s.watch(ch) })
	if cfg.Cluster != nil && !coop {
		// (Not under a supplied runtime: see Runtime.)
		s.markersDone = make(chan struct{})
		go s.serveMarkers(ctx)
	}
	return s, nil
}

// Close stops the watch. Append sessions belong to the cluster node, which
// hands them over (Leave) or lets them be taken over.
func (s *Store) Close(ctx context.Context) error {
	s.stopWatch()
	<-s.watchDone
	if s.markersDone != nil {
		<-s.markersDone
	}
	s.closeTxnIndexes(ctx)
	s.mu.Lock()
	s.topics = map[string]*Topic{}
	s.gen++
	s.mu.Unlock()
	if c, ok := s.cfg.Projection.(interface{ Close(context.Context) error }); ok {
		return c.Close(ctx)
	}
	return nil
}

func (s *Store) watch(ch <-chan metadata.Event) {
	defer close(s.watchDone)
	for ev := range ch {
		s.mu.Lock()
		s.gen++
		if ev.Key == "" {
			s.topics = map[string]*Topic{}
		} else {
			delete(s.topics, ev.Key[len(keyTopics):])
		}
		s.mu.Unlock()
	}
}

func (s *Store) invalidate(name string) {
	s.mu.Lock()
	s.gen++
	delete(s.topics, name)
	s.mu.Unlock()
}

// TopicState is the persisted lifecycle state of a topic record.
type TopicState string

const (
	StateCreating TopicState = "creating"
	StateReady    TopicState = "ready"
	StateDeleting TopicState = "deleting"
)

// TopicID is a Kafka topic UUID.
type TopicID [16]byte

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText implements encoding.TextMarshaler.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *TopicID) UnmarshalText(b []byte) error {
	if len(b) != 32 {
		return fmt.Errorf("topic id: want 32 hex digits, got %d", len(b))
	}
	_, err := hex.Decode(id[:], b)
	return err
}

// topicRecord is the persisted topic metadata (JSON, versioned).
type topicRecord struct {
	V          int          `json:"v"` // format version, 1
	Name       string       `json:"name"`
	ID         TopicID      `json:"id"`
	Partitions int32        `json:"partitions"`
	Configs    TopicConfigs `json:"configs,omitempty"`
	State      TopicState   `json:"state"`
	CreatedMs  int64        `json:"createdMs"`
}

const topicRecordVersion = 1

func decodeTopic(b []byte) (topicRecord, error) {
	var r topicRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("kafka/kstore: corrupt topic record: %w", err)
	}
	if r.V != topicRecordVersion {
		return r, fmt.Errorf("kafka/kstore: topic record version %d not supported", r.V)
	}
	return r, nil
}

// Topic is a ready topic as this broker sees it.
type Topic struct {
	Name       string
	ID         TopicID
	Configs    TopicConfigs
	Partitions []*Partition
	CreatedMs  int64
	version    metadata.Version
}

// Partition is one partition: a stream. Its leader is the cluster node
// that owns the stream (by its name, StreamName).
type Partition struct {
	Topic    string
	Index    int32
	StreamID stream.ID // zero for a projected partition
	proj     ProjectedPartition
	// compacted: the topic's cleanup.policy includes compact, so reads go
	// through the partition's compacted view (compaction.go).
	compacted bool
}

// StreamName is the name of the partition's stream (its ownership key).
func (p *Partition) StreamName() string {
	if p.proj != nil {
		return p.proj.StreamName()
	}
	return StreamName(p.Topic, p.Index)
}

// session returns this broker's append session on the partition stream,
// taking it through the cluster if this broker leads the partition.
// ErrNotLeader (wrapping the cluster's NotOwnerError, which names the
// leader) means another broker leads it, or ownership is still moving here.
func (p *Partition) session(ctx context.Context, s *Store) (stream.Session, error) {
	if s.cfg.Cluster == nil {
		return stream.Session{}, fmt.Errorf("%w: read-only store", ErrNotLeader)
	}
	sess, err := s.cfg.Cluster.Writer(ctx, p.StreamID, p.StreamName())
	if err != nil {
		if errors.Is(err, cluster.ErrNotOwner) || errors.Is(err, cluster.ErrHandoffPending) ||
			errors.Is(err, stream.ErrSessionBusy) || errors.Is(err, stream.ErrFenced) {
			return stream.Session{}, fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return stream.Session{}, err
	}
	return sess, nil
}

// StreamName is the stream backing partition p of topic.
func StreamName(topic string, p int32) string {
	return "kafka/" + topic + "/" + strconv.Itoa(int(p))
}

var topicNameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// ValidateTopicName applies Kafka's topic naming rules.
func ValidateTopicName(name string) error {
	if !topicNameRE.MatchString(name) || name == "." || name == ".." {
		return fmt.Errorf("%w: %q (want 1-249 of [a-zA-Z0-9._-], not . or ..)", ErrInvalidTopic, name)
	}
	return nil
}

// Topic returns the ready topic named name, loading it into the cache.
func (s *Store) Topic(ctx context.Context, name string) (*Topic, error) {
	if s.projects(name) {
		return s.projectedTopic(ctx, name, false)
	}
	s.mu.Lock()
	t, ok := s.topics[name]
	gen := s.gen
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	rec, err := s.meta.Get(ctx, keyTopics+name)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if err != nil {
		return nil, err
	}
	tr, err := decodeTopic(rec.Value)
	if err != nil {
		return nil, err
	}
	if tr.State == StateCreating && s.cfg.Now().Sub(time.UnixMilli(tr.CreatedMs)) > StaleCreate {
		// Its creator died mid-way; finish the job.
		if err := s.finishCreate(ctx, tr, rec.Version); err != nil {
			return nil, err
		}
		return s.Topic(ctx, name)
	}
	if tr.State != StateReady {
		return nil, fmt.Errorf("%w: %q is %s", ErrUnknownTopic, name, tr.State)
	}
	t, err = s.open(ctx, tr, rec.Version)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if cur, ok := s.topics[name]; ok {
		t = cur
	} else if s.gen == gen {
		s.topics[name] = t
	}
	s.mu.Unlock()
	return t, nil
}

// open builds the in-memory view of a ready topic: it looks up each
// partition stream (checking the topic id label) and reconciles stream
// retention with the topic configs.
func (s *Store) open(ctx context.Context, tr topicRecord, v metadata.Version) (*Topic, error) {
	t := &Topic{Name: tr.Name, ID: tr.ID, Configs: tr.Configs, CreatedMs: tr.CreatedMs, version: v}
	if t.Configs == nil {
		t.Configs = TopicConfigs{}
	}
	want := t.Configs.Retention()
	for p := int32(0); p < tr.Partitions; p++ {
		info, err := s.streams.Lookup(ctx, StreamName(tr.Name, p))
		if err != nil {
			return nil, fmt.Errorf("kafka/kstore: topic %q partition %d: %w", tr.Name, p, err)
		}
		if info.Attributes[AttrTopicID] != tr.ID.String() {
			return nil, fmt.Errorf("kafka/kstore: topic %q partition %d: stream %v belongs to topic id %s, want %s",
				tr.Name, p, info.ID, info.Attributes[AttrTopicID], tr.ID)
		}
		if info.Retention != want {
			if err := s.streams.SetRetention(ctx, info.ID, want); err != nil {
				return nil, err
			}
		}
		t.Partitions = append(t.Partitions, &Partition{Topic: tr.Name, Index: p, StreamID: info.ID, compacted: t.Configs.Compacted()})
	}
	return t, nil
}

// Partition returns partition p of a ready topic.
func (s *Store) Partition(ctx context.Context, topic string, p int32) (*Topic, *Partition, error) {
	t, err := s.Topic(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	if p < 0 || int(p) >= len(t.Partitions) {
		return t, nil, fmt.Errorf("%w: %s/%d", ErrUnknownTopic, topic, p)
	}
	return t, t.Partitions[p], nil
}

// TopicByID finds a ready topic by id.
func (s *Store) TopicByID(ctx context.Context, id TopicID) (*Topic, error) {
	names, err := s.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		t, err := s.Topic(ctx, n)
		if err == nil && t.ID == id {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%w: id %s", ErrUnknownTopic, id)
}

// ListTopics returns the names of all ready topics in name order.
func (s *Store) ListTopics(ctx context.Context) ([]string, error) {
	recs, err := s.meta.RangeScan(ctx, keyTopics, prefixEnd(keyTopics), 0)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range recs {
		tr, err := decodeTopic(r.Value)
		if err != nil {
			s.log.Warn("kafka/kstore: skipping undecodable topic record", "key", r.Key, "err", err)
			continue
		}
		if tr.State == StateReady {
			out = append(out, tr.Name)
		}
	}
	return out, nil
}

func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }

func newTopicID() TopicID {
	var id TopicID
	for id == (TopicID{}) {
		_, _ = rand.Read(id[:])
	}
	id[6] = id[6]&0x0f | 0x40 // UUID v4 shape
	id[8] = id[8]&0x3f | 0x80
	return id
}

// CreateTopic creates a topic with n partitions and the given explicit
// configs. With validateOnly it only checks the request.
func (s *Store) CreateTopic(ctx context.Context, name string, n int32, configs TopicConfigs, validateOnly bool) (*Topic, error) {
	if s.projects(name) {
		if len(configs) > 0 {
			return nil, notOnProjected("topic configs (Pulsar topics take namespace and topic policies)")
		}
		if err := s.cfg.Projection.CreateTopic(ctx, name, n, validateOnly); err != nil || validateOnly {
			return &Topic{Name: name, Configs: TopicConfigs{}}, err
		}
		return s.projectedTopic(ctx, name, false)
	}
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if n < 1 || n > 100000 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidPartitions, n)
	}
	for k, v := range configs {
		if err := ValidateConfig(k, v); err != nil {
			return nil, err
		}
	}
	if validateOnly {
		if _, err := s.meta.Get(ctx, keyTopics+name); err == nil {
			return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
		}
		return &Topic{Name: name, Configs: configs}, nil
	}
	tr := topicRecord{V: topicRecordVersion, Name: name, ID: newTopicID(), Partitions: n, Configs: configs.clone(),
		State: StateCreating, CreatedMs: s.cfg.Now().UnixMilli()}
	val, _ := json.Marshal(tr)
	key := keyTopics + name
	var ver metadata.Version
	for attempt := 0; ; attempt++ {
		v, err := s.meta.Put(ctx, key, val, metadata.NotExists)
		if err == nil {
			ver = v
			break
		}
		switch metadata.Classify(err) {
		case metadata.Conflict:
			rec, gerr := s.meta.Get(ctx, key)
			if gerr != nil {
				if errors.Is(gerr, metadata.ErrKeyNotFound) && attempt < 3 {
					continue
				}
				return nil, gerr
			}
			cur, derr := decodeTopic(rec.Value)
			if derr != nil {
				return nil, derr
			}
			if cur.State == StateDeleting && attempt < 3 {
				if err := s.finishDelete(ctx, cur, rec.Version); err != nil {
					return nil, err
				}
				continue
			}
			return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
		case metadata.Unknown:
			// Settle by re-reading: our record carries our fresh topic id.
			rec, gerr := s.meta.Get(ctx, key)
			if gerr == nil {
				if cur, derr := decodeTopic(rec.Value); derr == nil && cur.ID == tr.ID {
					ver = rec.Version
					break
				}
				return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
			}
			if errors.Is(gerr, metadata.ErrKeyNotFound) && attempt < 3 {
				continue
			}
			return nil, err
		default:
			return nil, err
		}
		if ver != 0 {
			break
		}
	}
	if err := s.finishCreate(ctx, tr, ver); err != nil {
		return nil, err
	}
	return s.Topic(ctx, name)
}

// finishCreate makes the partition streams of a "creating" record and flips
// it to ready. It is idempotent and may run on any broker. If the storage
// profile is unavailable it rolls the topic back and returns
// stream.ErrUnsupportedProfile.
func (s *Store) finishCreate(ctx context.Context, tr topicRecord, ver metadata.Version) error {
	if err := s.ensureStreams(ctx, tr, 0, tr.Partitions); err != nil {
		if errors.Is(err, stream.ErrUnsupportedProfile) {
			tr.State = StateDeleting
			if derr := s.finishDelete(ctx, tr, ver); derr != nil {
				s.log.Warn("kafka/kstore: rollback of topic with unavailable profile failed", "topic", tr.Name, "err", derr)
			}
		}
		return err
	}
	tr.State = StateReady
	val, _ := json.Marshal(tr)
	if _, err := s.meta.Put(ctx, keyTopics+tr.Name, val, ver); err != nil {
		if metadata.Classify(err) == metadata.Unknown {
			rec, gerr := s.meta.Get(ctx, keyTopics+tr.Name)
			if gerr == nil {
				if cur, derr := decodeTopic(rec.Value); derr == nil && cur.ID == tr.ID && cur.State == StateReady {
					return nil
				}
			}
		}
		return fmt.Errorf("kafka/kstore: mark topic %q ready: %w", tr.Name, err)
	}
	s.invalidate(tr.Name)
	return nil
}

// ensureStreams creates partition streams [from, to) labelled with the
// topic id. A stream of that name left over from a deleted topic (another
// id) is deleted first.
func (s *Store) ensureStreams(ctx context.Context, tr topicRecord, from, to int32) error {
	cfgs := tr.Configs
	if cfgs == nil {
		cfgs = TopicConfigs{}
	}
	opts := stream.CreateOptions{Profile: cfgs.Profile(), Retention: cfgs.Retention()}
	for p := from; p < to; p++ {
		name := StreamName(tr.Name, p)
		o := opts
		o.Attributes = map[string]string{AttrTopic: tr.Name, AttrTopicID: tr.ID.String(), AttrPartition: strconv.Itoa(int(p))}
		for attempt := 0; ; attempt++ {
			info, err := s.streams.Create(ctx, name, o)
			if err == nil {
				break
			}
			if !errors.Is(err, stream.ErrStreamExists) {
				return fmt.Errorf("kafka/kstore: create stream %s: %w", name, err)
			}
			if info.Attributes[AttrTopicID] == tr.ID.String() {
				break
			}
			if attempt > 2 {
				return fmt.Errorf("kafka/kstore: stream %s keeps reappearing: %w", name, ErrConflict)
			}
			s.log.Info("kafka/kstore: deleting stream left over from an earlier topic", "stream", name, "oldTopicID", info.Attributes[AttrTopicID])
			if err := s.streams.Delete(ctx, info.ID); err != nil && !errors.Is(err, stream.ErrStreamNotFound) {
				return err
			}
		}
	}
	return nil
}

// DeleteTopic deletes a ready topic and its streams.
func (s *Store) DeleteTopic(ctx context.Context, name string) (TopicID, error) {
	if s.projects(name) {
		t, err := s.projectedTopic(ctx, name, false)
		if err != nil {
			return TopicID{}, err
		}
		return t.ID, s.cfg.Projection.DeleteTopic(ctx, name)
	}
	key := keyTopics + name
	for attempt := 0; attempt < 5; attempt++ {
		rec, err := s.meta.Get(ctx, key)
		if errors.Is(err, metadata.ErrKeyNotFound) {
			return TopicID{}, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
		}
		if err != nil {
			return TopicID{}, err
		}
		tr, err := decodeTopic(rec.Value)
		if err != nil {
			return TopicID{}, err
		}
		ver := rec.Version
		if tr.State == StateCreating {
			return TopicID{}, fmt.Errorf("%w: %q is still being created", ErrUnknownTopic, name)
		}
		if tr.State == StateReady {
			tr.State = StateDeleting
			val, _ := json.Marshal(tr)
			v, err := s.meta.Put(ctx, key, val, ver)
			if err != nil {
				if o := metadata.Classify(err); o == metadata.Conflict || o == metadata.Unknown {
					continue // re-read and re-plan
				}
				return TopicID{}, err
			}
			ver = v
		}
		s.invalidate(name)
		return tr.ID, s.finishDelete(ctx, tr, ver)
	}
	return TopicID{}, ErrConflict
}

// finishDelete deletes the streams of a "deleting" record (only those
// labelled with its topic id) and then the record. Idempotent.
func (s *Store) finishDelete(ctx context.Context, tr topicRecord, ver metadata.Version) error {
	s.mu.Lock()
	if _, ok := s.topics[tr.Name]; ok {
		delete(s.topics, tr.Name)
		s.gen++
	}
	s.mu.Unlock()
	// Partitions beyond the recorded count may exist from an interrupted
	// CreatePartitions; sweep by listing the topic's stream prefix.
	infos, err := s.streams.List(ctx, "kafka/"+tr.Name+"/", "", 0)
	if err != nil {
		return err
	}
	for _, info := range infos {
		if info.Attributes[AttrTopicID] != tr.ID.String() {
			continue
		}
		if s.cfg.Cluster != nil {
			_ = s.cfg.Cluster.Release(ctx, info.ID)
		}
		if err := s.streams.Delete(ctx, info.ID); err != nil && !errors.Is(err, stream.ErrStreamNotFound) {
			return fmt.Errorf("kafka/kstore: delete stream %s: %w", info.Name, err)
		}
	}
	if err := s.meta.Delete(ctx, keyTopics+tr.Name, ver); err != nil {
		if errors.Is(err, metadata.ErrKeyNotFound) {
			return nil
		}
		if metadata.Classify(err) == metadata.Unknown {
			if _, gerr := s.meta.Get(ctx, keyTopics+tr.Name); errors.Is(gerr, metadata.ErrKeyNotFound) {
				return nil
			}
		}
		return fmt.Errorf("kafka/kstore: delete topic record %q: %w", tr.Name, err)
	}
	return nil
}

// CreatePartitions raises a topic's partition count to n.
func (s *Store) CreatePartitions(ctx context.Context, name string, n int32, validateOnly bool) error {
	if s.projects(name) {
		return s.cfg.Projection.CreatePartitions(ctx, name, n, validateOnly)
	}
	key := keyTopics + name
	for attempt := 0; attempt < 5; attempt++ {
		rec, err := s.meta.Get(ctx, key)
		if errors.Is(err, metadata.ErrKeyNotFound) {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
		}
		if err != nil {
			return err
		}
		tr, err := decodeTopic(rec.Value)
		if err != nil {
			return err
		}
		if tr.State != StateReady {
			return fmt.Errorf("%w: %q is %s", ErrUnknownTopic, name, tr.State)
		}
		if n <= tr.Partitions || n > 100000 {
			return fmt.Errorf("%w: topic %q has %d partitions, requested %d (can only grow)", ErrInvalidPartitions, name, tr.Partitions, n)
		}
		if validateOnly {
			return nil
		}
		if err := s.ensureStreams(ctx, tr, tr.Partitions, n); err != nil {
			return err
		}
		tr.Partitions = n
		val, _ := json.Marshal(tr)
		if _, err := s.meta.Put(ctx, key, val, rec.Version); err != nil {
			if o := metadata.Classify(err); o == metadata.Conflict || o == metadata.Unknown {
				continue
			}
			return err
		}
		s.invalidate(name)
		return nil
	}
	return ErrConflict
}

// AlterConfigs rewrites a topic's explicit configs with fn (which receives
// a copy it may modify) and applies retention to the partition streams.
func (s *Store) AlterConfigs(ctx context.Context, name string, validateOnly bool, fn func(TopicConfigs) error) error {
	if s.projects(name) {
		return notOnProjected("topic configs (Pulsar topics take namespace and topic policies)")
	}
	key := keyTopics + name
	for attempt := 0; attempt < 5; attempt++ {
		rec, err := s.meta.Get(ctx, key)
		if errors.Is(err, metadata.ErrKeyNotFound) {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
		}
		if err != nil {
			return err
		}
		tr, err := decodeTopic(rec.Value)
		if err != nil {
			return err
		}
		if tr.State != StateReady {
			return fmt.Errorf("%w: %q is %s", ErrUnknownTopic, name, tr.State)
		}
		old := tr.Configs
		if old == nil {
			old = TopicConfigs{}
		}
		next := old.clone()
		if err := fn(next); err != nil {
			return err
		}
		for k, v := range next {
			if err := ValidateConfig(k, v); err != nil {
				return err
			}
		}
		if old.Profile() != next.Profile() {
			return fmt.Errorf("%w: %s is fixed at topic creation", ErrInvalidConfig, ConfigStorageProfile)
		}
		if old.Compacted() && !next.Compacted() {
			if covered, err := s.reclaimedBelowView(ctx, name); err != nil {
				return err
			} else if covered {
				return fmt.Errorf("%w: %s cannot drop compact on %q: its log below the cleaned point was reclaimed and exists only as the compacted view (not supported yet)",
					ErrInvalidConfig, ConfigCleanupPolicy, name)
			}
		}
		if validateOnly {
			return nil
		}
		tr.Configs = next
		val, _ := json.Marshal(tr)
		if _, err := s.meta.Put(ctx, key, val, rec.Version); err != nil {
			if o := metadata.Classify(err); o == metadata.Conflict || o == metadata.Unknown {
				continue
			}
			return err
		}
		s.invalidate(name)
		// Apply retention now; open() also reconciles it on every load, so
		// a failure here is repaired by the next load.
		if next.Retention() != old.Retention() {
			if _, err := s.Topic(ctx, name); err != nil {
				return err
			}
		}
		return nil
	}
	return ErrConflict
}
