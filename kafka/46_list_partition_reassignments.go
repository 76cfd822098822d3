package kafka

// ListPartitionReassignments: v0
//
// Behavior:
//   - Partitions are never reassigned: their bytes live in shared stream
//     storage and a partition moves between brokers by handing over its
//     stream's append session, not by copying replicas. So no reassignment
//     is ever in progress and the answer lists no topics, for all topics
//     (null) as for named ones. AlterPartitionReassignments (45) is not
//     advertised.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	return resp, nil, nil
}
