package kstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/nereusstream/nereus-go/metadata"
)

// Committed offsets are stored one record per partition:
//
//	kafka/groups/<url-escaped group>/o/<topic>/<partition, 10 digits>
//
// The value carries the topic id, so offsets committed for a deleted topic
// are never returned for a new topic of the same name. A marker record
// kafka/groupidx/<escaped group> lets ListGroups find groups that only have
// offsets.
//
// On a projected topic (projection.go) the offset itself lives with the
// projection (KoP: the group's Pulsar subscription), which is the truth;
// the record here is only an index entry ("projected": true, no offset)
// so that a fetch of all the group's offsets knows where to look. The
// projection's write comes first: an index entry never names an offset
// that was not committed.

func groupPrefix(group string) string { return keyGroups + url.PathEscape(group) + "/o/" }

func offsetKey(group, topic string, p int32) string {
	return fmt.Sprintf("%s%s/%010d", groupPrefix(group), topic, p)
}

type offsetRecord struct {
	V           int     `json:"v"` // format version, 1
	TopicID     TopicID `json:"topicId"`
	Offset      int64   `json:"offset"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	Metadata    string  `json:"metadata,omitempty"`
	CommitMs    int64   `json:"commitMs"`
	Projected   bool    `json:"projected,omitempty"` // the offset lives with the projection
}

// OffsetCommit is one partition's offset to commit.
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommittedOffset is one stored offset.
type CommittedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// CommitOffsets stores the commits in one metadata round trip. The result
// has one error per commit (nil: stored). Commits for topics or partitions
// that do not exist fail with ErrUnknownTopic.
func (s *Store) CommitOffsets(ctx context.Context, group string, commits []OffsetCommit) []error {
	errs := make([]error, len(commits))
	ops := make([]metadata.Op, 0, len(commits)+1)
	idx := make([]int, 0, len(commits))
	now := s.cfg.Now().UnixMilli()
	for i, c := range commits {
		t, p, err := s.Partition(ctx, c.Topic, c.Partition)
		if err != nil {
			errs[i] = err
			continue
		}
		rec := offsetRecord{V: 1, TopicID: t.ID, Offset: c.Offset, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata, CommitMs: now}
		if p.Projected() {
			if err := s.cfg.Projection.CommitOffset(ctx, group, c.Topic, c.Partition, c.Offset); err != nil {
				errs[i] = err
				continue
			}
			rec.Offset, rec.Projected = -1, true
		}
		val, _ := json.Marshal(rec)
		ops = append(ops, metadata.Op{Kind: metadata.OpPut, Key: offsetKey(group, c.Topic, c.Partition), Value: val, Expected: metadata.AnyVersion})
		idx = append(idx, i)
	}
	if len(ops) == 0 {
		return errs
	}
	ops = append(ops, metadata.Op{Kind: metadata.OpPut, Key: keyGroupIndex + url.PathEscape(group), Value: []byte(`{"v":1}`), Expected: metadata.AnyVersion})
	res, err := s.meta.Batch(ctx, ops)
	for j, i := range idx {
		switch {
		case err != nil:
			errs[i] = err
		default:
			errs[i] = res[j].Err
		}
	}
	return errs
}

// FetchOffsets returns every offset the group committed for topics that
// still exist with the same topic id.
func (s *Store) FetchOffsets(ctx context.Context, group string) (map[TopicPartition]CommittedOffset, error) {
	prefix := groupPrefix(group)
	recs, err := s.meta.RangeScan(ctx, prefix, prefixEnd(prefix), 0)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]CommittedOffset, len(recs))
	ids := map[string]TopicID{}
	for _, r := range recs {
		rest := r.Key[len(prefix):]
		slash := strings.LastIndexByte(rest, '/')
		if slash < 0 {
			continue
		}
		topic := rest[:slash]
		p, err := strconv.ParseInt(rest[slash+1:], 10, 32)
		if err != nil {
			continue
		}
		var or offsetRecord
		if err := json.Unmarshal(r.Value, &or); err != nil || or.V != 1 {
			s.log.Warn("kafka/kstore: skipping undecodable offset record", "key", r.Key)
			continue
		}
		id, ok := ids[topic]
		if !ok {
			// Only a topic that is gone drops its offsets. Any other
			// failure (a metadata outage) is the caller's error: dropping
			// them would answer "no committed offset" and the consumer
			// would reset to auto.offset.reset (found by the kstore
			// simulation, seed 57).
			t, err := s.Topic(ctx, topic)
			if err == nil {
				id = t.ID
			} else if !errors.Is(err, ErrUnknownTopic) && PlantedBug != BugOffsetsDroppedOnError {
				return nil, err
			}
			ids[topic] = id
		}
		if id != or.TopicID {
			continue // committed for an earlier topic of the same name
		}
		if or.Projected {
			if !s.projects(topic) {
				continue
			}
			off, ok, err := s.cfg.Projection.FetchOffset(ctx, group, topic, int32(p))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // the subscription was deleted on the projection's side
			}
			or.Offset = off
		}
		out[TopicPartition{topic, int32(p)}] = CommittedOffset{Topic: topic, Partition: int32(p), Offset: or.Offset,
			LeaderEpoch: or.LeaderEpoch, Metadata: or.Metadata}
	}
	return out, nil
}

// FetchOffsetsFor is FetchOffsets, completed with the projection's offsets
// of requested projected partitions that have no index entry here (a
// Pulsar subscription the group never committed to through Kafka).
func (s *Store) FetchOffsetsFor(ctx context.Context, group string, want map[string][]int32) (map[TopicPartition]CommittedOffset, error) {
	out, err := s.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	for topic, ps := range want {
		if !s.projects(topic) {
			continue
		}
		for _, p := range ps {
			tp := TopicPartition{topic, p}
			if _, ok := out[tp]; ok {
				continue
			}
			off, ok, err := s.cfg.Projection.FetchOffset(ctx, group, topic, p)
			if errors.Is(err, ErrUnknownTopic) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if ok {
				out[tp] = CommittedOffset{Topic: topic, Partition: p, Offset: off, LeaderEpoch: -1}
			}
		}
	}
	return out, nil
}

// DeleteGroupOffsets removes every committed offset of the group and its
// index marker.
func (s *Store) DeleteGroupOffsets(ctx context.Context, group string) error {
	prefix := groupPrefix(group)
	recs, err := s.meta.RangeScan(ctx, prefix, prefixEnd(prefix), 0)
	if err != nil {
		return err
	}
	ops := make([]metadata.Op, 0, len(recs)+1)
	for _, r := range recs {
		var or offsetRecord
		if json.Unmarshal(r.Value, &or) == nil && or.Projected {
			rest := r.Key[len(prefix):]
			if slash := strings.LastIndexByte(rest, '/'); slash > 0 && s.projects(rest[:slash]) {
				p, _ := strconv.ParseInt(rest[slash+1:], 10, 32)
				if err := s.cfg.Projection.DeleteOffset(ctx, group, rest[:slash], int32(p)); err != nil && !errors.Is(err, ErrUnknownTopic) {
					return err
				}
			}
		}
		ops = append(ops, metadata.Op{Kind: metadata.OpDelete, Key: r.Key, Expected: metadata.AnyVersion})
	}
	ops = append(ops, metadata.Op{Kind: metadata.OpDelete, Key: keyGroupIndex + url.PathEscape(group), Expected: metadata.AnyVersion})
	res, err := s.meta.Batch(ctx, ops)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, metadata.ErrKeyNotFound) {
			return r.Err
		}
	}
	return nil
}

// GroupsWithOffsets lists groups that have committed offsets.
func (s *Store) GroupsWithOffsets(ctx context.Context) ([]string, error) {
	recs, err := s.meta.RangeScan(ctx, keyGroupIndex, prefixEnd(keyGroupIndex), 0)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		g, err := url.PathUnescape(r.Key[len(keyGroupIndex):])
		if err == nil {
			out = append(out, g)
		}
	}
	return out, nil
}

// producerIDBlock is how many producer ids one metadata CAS reserves.
const producerIDBlock = 1000

// AllocateProducerID returns a producer id never handed out before by any
// broker sharing the metadata store. Ids come from blocks reserved by CAS on
// kafka/producer-ids; a block whose reservation outcome was unknown is
// skipped, never reused.
func (s *Store) AllocateProducerID(ctx context.Context) (int64, error) {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	if s.pidNext < s.pidE {
		id := s.pidNext
		s.pidNext++
		return id, nil
	}
	for attempt := 0; attempt < 10; attempt++ {
		var next int64 = 1000 // ids below 1000 are never handed out
		expected := metadata.NotExists
		rec, err := s.meta.Get(ctx, keyProducerIDs)
		switch {
		case err == nil:
			if next, err = strconv.ParseInt(string(rec.Value), 10, 64); err != nil {
				return 0, fmt.Errorf("kafka/kstore: corrupt producer id counter: %w", err)
			}
			expected = rec.Version
		case !errors.Is(err, metadata.ErrKeyNotFound):
			return 0, err
		}
		_, err = s.meta.Put(ctx, keyProducerIDs, []byte(strconv.FormatInt(next+producerIDBlock, 10)), expected)
		if err == nil {
			s.pidNext, s.pidE = next+1, next+producerIDBlock
			return next, nil
		}
		if o := metadata.Classify(err); o != metadata.Conflict && o != metadata.Unknown {
			return 0, err
		}
		// Conflict: someone else reserved; Unknown: ours may have applied,
		// so that block is abandoned. Either way re-read and try again.
	}
	return 0, ErrConflict
}
