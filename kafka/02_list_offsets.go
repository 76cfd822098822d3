package kafka

// ListOffsets: v0-6
//
// Behavior:
//   - timestamp -1 (latest) returns the high watermark (the stream's
//     committed end), or under isolation_level read_committed (v2+) the
//     last stable offset (first offset of the oldest open transaction);
//     -2 (earliest) the log start offset (the trim point); both with
//     timestamp -1.
//   - timestamp >= 0 uses the core's time index (each stored batch is indexed
//     by its max timestamp) to find the first batch whose max timestamp is
//     >= the target; for an uncompressed batch the records are walked to
//     return the exact first record at or after the target with its
//     timestamp. For a compressed batch the batch's base offset and max
//     timestamp are returned (a consumer seeking there reads at most one
//     batch of earlier records). No such record: offset -1, timestamp -1.
//   - -3 (max timestamp, v7+) and -4/-5 (tiered storage) are not
//     advertised.
//   - current_leader_epoch (v4+) is checked like Fetch; leader_epoch in the
//     response is the session epoch.
//
// Version notes:
//   - v0: old_style_offsets array (one offset returned).
//   - v1: single offset + timestamp (kafka-go Conn, Java floor).
//   - v2: isolation_level. v3: same. v4: leader epochs. v5: same.
//   - v6: flexible.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/stream"
)

func init() { regKey(2, 0, 6, handleListOffsets) }

func handleListOffsets(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	s := r.s
	for _, rt := range req.Topics {
		ot := kmsg.NewListOffsetsResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewListOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			op.Timestamp, op.Offset = -1, -1
			off, ts, epoch, err := listOffset(r.ctx, s, rt.Topic, rp, req.Version, req.Version >= 2 && req.IsolationLevel == readCommitted)
			if err != nil {
				op.ErrorCode = errorCode(err)
			} else {
				op.Offset, op.Timestamp, op.LeaderEpoch = off, ts, epoch
				if req.Version == 0 {
					op.OldStyleOffsets = []int64{off}
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}

func listOffset(ctx context.Context, s *Server, topic string, rp kmsg.ListOffsetsRequestTopicPartition, version int16, committed bool) (off, ts int64, epoch int32, err error) {
	_, p, err := s.store.Partition(ctx, topic, rp.Partition)
	if err != nil {
		return -1, -1, -1, err
	}
	if epoch, err = s.store.LeaderEpoch(ctx, p); err != nil {
		return -1, -1, -1, err
	}
	if version >= 4 && rp.CurrentLeaderEpoch >= 0 {
		if err := checkLeaderEpoch(ctx, s, p, rp.CurrentLeaderEpoch); err != nil {
			return -1, -1, -1, err
		}
	}
	start, end, err := s.store.Bounds(ctx, p)
	if err != nil {
		return -1, -1, -1, err
	}
	switch {
	case rp.Timestamp == -1 && committed:
		lso, err := s.store.StableOffset(ctx, p, end)
		return lso, -1, epoch, err
	case rp.Timestamp == -1:
		return end, -1, epoch, nil
	case rp.Timestamp == -2:
		return start, -1, epoch, nil
	case rp.Timestamp < 0:
		return -1, -1, -1, errUnsupportedTimestamp
	}
	off, ts, err = offsetForTimestamp(ctx, s, p, rp.Timestamp)
	return off, ts, epoch, err
}

// offsetForTimestamp finds the first record with timestamp >= target.
func offsetForTimestamp(ctx context.Context, s *Server, p *kstore.Partition, target int64) (int64, int64, error) {
	off, err := s.store.OffsetForTimestamp(ctx, p, target)
	if err != nil {
		return -1, -1, err
	}
	for range 1000 { // bounded scan of batches whose max timestamp qualifies
		res, err := s.store.Read(ctx, p, off, stream.ReadOptions{MaxEntries: 1})
		if err != nil {
			return -1, -1, err
		}
		if len(res.Entries) == 0 {
			return -1, -1, nil
		}
		e := res.Entries[0]
		h, err := kbatch.ParseHeader(e.Payload)
		if err != nil {
			return -1, -1, err
		}
		if h.MaxTimestamp < target {
			off = e.Offset + int64(e.RecordCount)
			continue
		}
		if h.Codec() != kbatch.CodecNone || h.Attributes&kbatch.AttrLogAppendTime != 0 {
			return max(e.Offset, off), h.MaxTimestamp, nil
		}
		foundOff, foundTs := int64(-1), int64(-1)
		_ = kbatch.WalkRecords(e.Payload, func(ri kbatch.RecordInfo) bool {
			o := e.Offset + int64(ri.OffsetDelta)
			ts := h.BaseTimestamp + ri.TimestampDelta
			if o >= off && ts >= target {
				foundOff, foundTs = o, ts
				return false
			}
			return true
		})
		if foundOff >= 0 {
			return foundOff, foundTs, nil
		}
		off = e.Offset + int64(e.RecordCount)
	}
	return -1, -1, nil
}
