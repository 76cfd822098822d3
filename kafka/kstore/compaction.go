package kstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kcompact"
	"github.com/nereusstream/nereus-go/stream"
)

// CompactViewKind is the view kind of compacted Kafka partitions.
const CompactViewKind = "kafka-compact"

// Compaction of topics with cleanup.policy=compact (or compact,delete):
// the core keeps a compacted view of each partition stream (stream/view.go)
// that Fetch serves below the view's cleaned point; kcompact decides which
// records stay. Passes run from the core's retention pass, only where the
// partition stream is owned (its leader), and only when
//   - something is older than max(min.compaction.lag.ms, segment.ms): the
//     newest segment.ms of the partition is its active, never compacted
//     head (Kafka never cleans the active segment; Nereus has no segments,
//     so the bound is by time only — segment.bytes does not roll it; and
//     as the active segment holds the last batch, that batch is never
//     compacted either: kcompact's LogEnd), and
//   - the dirty ratio (payload not yet compacted / view + that payload)
//     reaches min.cleanable.dirty.ratio, or max.compaction.lag.ms has
//     passed since the last pass;
//   - or the view holds a tombstone or marker whose delete horizon
//     (delete.retention.ms after it was first cleaned) has passed.
//
// On a compact-only topic the view replaces the log below the cleaned
// point (stream.LosslessReplacer): once a pass's view is published the
// core trims the partition stream to the cleaned point and GC reclaims the
// lossless log there, so disk use follows the compacted size. The
// partition's log start offset (ListOffsets earliest, Fetch's
// log_start_offset) is then the view's start (Bounds), DeleteRecords is
// refused as Kafka refuses it there, and Fetch below the lossless start is
// served from the view. A compact,delete topic keeps its lossless log
// until retention.ms / retention.bytes trim it (the view then follows the
// trim).

// views is the storage's view API, if it has one.
func (s *Store) views() (stream.Views, bool) {
	v, ok := s.streams.(stream.Views)
	return v, ok
}

// CompactionPolicy is the stream.CompactionPolicy of compacted topics; the
// Kafka server registers it with the core for streams IsCompactedStream accepts.
func (s *Store) CompactionPolicy() stream.CompactionPolicy { return compactionPolicy{s} }

// IsCompactedStream reports whether a stream is a partition of a topic
// whose cleanup.policy includes compact, from the topic cache (a topic not
// cached yet is loaded once). The core asks it for every owned stream on
// every retention pass, so other streams cost no metadata read.
func (s *Store) IsCompactedStream(in stream.Info) bool {
	topic, part, ok := parseStreamName(in.Name)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, p, err := s.Partition(ctx, topic, part)
	return err == nil && p.StreamID == in.ID && p.compacted
}

func parseStreamName(name string) (topic string, p int32, ok bool) {
	rest, ok := strings.CutPrefix(name, "kafka/")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rest[:i], int32(n), true
}

type compactionPolicy struct{ s *Store }

func (p compactionPolicy) PlanCompaction(ctx context.Context, in stream.Info, v stream.ViewInfo) (int64, stream.Compactor, error) {
	topic, part, ok := parseStreamName(in.Name)
	if !ok {
		return 0, nil, nil
	}
	t, pp, err := p.s.Partition(ctx, topic, part)
	if err != nil || pp.StreamID != in.ID || !t.Configs.Compacted() {
		return 0, nil, nil // not (or no longer) a compacted topic's partition
	}
	c := t.Configs
	now := p.s.cfg.Now().UnixMilli()
	lag := max(c.int64("min.compaction.lag.ms"), c.int64("segment.ms"))
	upTo, err := p.s.streams.OffsetForTimestamp(ctx, in.ID, now-lag)
	if err != nil {
		return 0, nil, err
	}
	// A view whose tombstones or markers reached their delete horizon is
	// due a pass even with nothing new (Kafka's cleaner picks such logs
	// too); the core then rewrites the view alone.
	reclean := !v.RecleanAt.IsZero() && now >= v.RecleanAt.UnixMilli()
	if upTo <= max(v.Through, in.StartOffset) && !reclean {
		return 0, nil, nil
	}
	dirty := in.CommittedBytes - v.ThroughBytes
	ratio, _ := strconv.ParseFloat(c.str("min.cleanable.dirty.ratio"), 64)
	overdue := v.Exists && now-v.CompactedAt.UnixMilli() >= c.int64("max.compaction.lag.ms")
	if v.Exists && dirty > 0 && float64(dirty)/float64(dirty+v.Bytes) < ratio && !overdue && !reclean {
		return 0, nil, nil
	}
	upTo = max(upTo, v.Through)
	del, _ := c.cleanupPolicies()
	return upTo, kcompact.New(kcompact.Options{NowMs: now, DeleteRetentionMs: c.int64("delete.retention.ms"),
		ReplacesLog: !del, LogEnd: in.EndOffset}), nil
}

func (c TopicConfigs) str(name string) string {
	v, _ := c.Get(name)
	return v
}

// reclaimedBelowView reports whether any partition of topic name has a
// covering view (its lossless log below the cleaned point was reclaimed):
// such a topic cannot stop being compacted, since reads would then go to
// the lossless log alone and lose that prefix.
func (s *Store) reclaimedBelowView(ctx context.Context, name string) (bool, error) {
	v, ok := s.views()
	if !ok {
		return false, nil
	}
	t, err := s.Topic(ctx, name)
	if err != nil {
		return false, err
	}
	for _, p := range t.Partitions {
		if p.proj != nil {
			continue
		}
		vi, err := v.DescribeView(ctx, p.StreamID, CompactViewKind)
		if err != nil {
			return false, err
		}
		if vi.Covers {
			return true, nil
		}
	}
	return false, nil
}
