package kafka

// DescribeLogDirs: v0-4
//
// Behavior:
//   - Nereus has no log directories: all partitions live in the shared
//     stream storage, reported as one directory named
//     "nereus://streams". Each partition's size is its stream's retained
//     payload bytes (the stream head's committed bytes minus those trimmed,
//     at run granularity), plus its compacted view's payload on a
//     compacted topic; offset_lag is 0 and is_future false (there are
//     no replicas or moves). A null topic list means all topics; unknown
//     topics and partitions are left out, as Kafka does.
//   - total_bytes / usable_bytes (v4+) are -1: object and BookKeeper
//     storage have no fixed capacity to report.
//
// Version notes:
//   - v1: same as v0. v2: flexible. v3: top-level error code.
//   - v4: total/usable bytes. v5 (is_cordoned) is not advertised.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(35, 0, 4, handleDescribeLogDirs) }

const logDirName = "nereus://streams"

func handleDescribeLogDirs(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	return nil, func() kmsg.Response {
		s := r.s
		want := map[string][]int32{}
		if req.Topics == nil {
			names, err := s.store.ListTopics(r.ctx)
			if err != nil {
				resp.ErrorCode = errorCode(err)
				return resp
			}
			for _, n := range names {
				want[n] = nil
			}
		} else {
			for _, t := range req.Topics {
				want[t.Topic] = append(want[t.Topic], t.Partitions...)
			}
		}
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir = logDirName
		dir.TotalBytes, dir.UsableBytes = -1, -1
		names := make([]string, 0, len(want))
		for n := range want {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			t, err := s.store.Topic(r.ctx, n)
			if err != nil {
				continue
			}
			dt := kmsg.NewDescribeLogDirsResponseDirTopic()
			dt.Topic = n
			parts := want[n]
			if parts == nil {
				for _, p := range t.Partitions {
					parts = append(parts, p.Index)
				}
			}
			for _, pi := range parts {
				_, p, err := s.store.Partition(r.ctx, n, pi)
				if err != nil {
					continue
				}
				size, err := s.store.Size(r.ctx, p)
				if err != nil {
					continue
				}
				dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
				dp.Partition, dp.Size = pi, size
				dt.Partitions = append(dt.Partitions, dp)
			}
			dir.Topics = append(dir.Topics, dt)
		}
		resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
		return resp
	}, nil
}
