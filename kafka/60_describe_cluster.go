package kafka

// DescribeCluster: v0-2
//
// Behavior:
//   - The same cluster view as Metadata: cluster id, this broker as the
//     controller, and this broker with the address advertised on the
//     listener the client connected to. endpoint_type 2 (controllers, v1+)
//     gets the same node, which is also the controller. No broker is ever
//     fenced (v2 is_fenced false).
//   - cluster_authorized_operations is "all" when asked for (no ACLs),
//     INT32_MIN otherwise.
//
// Version notes:
//   - v1: endpoint_type. v2: include_fenced_brokers, is_fenced.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(60, 0, 2, handleDescribeCluster) }

// allClusterOps is the authorized-operations bitfield of everything a
// cluster supports: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
const allClusterOps = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

func handleDescribeCluster(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 && req.EndpointType != 2 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp, nil, nil
	}
	resp.EndpointType = req.EndpointType
	resp.ClusterID = r.s.cfg.ClusterID
	resp.ControllerID = r.s.cfg.NodeID
	host, port := r.advertised()
	b := kmsg.NewDescribeClusterResponseBroker()
	b.NodeID, b.Host, b.Port = r.s.cfg.NodeID, host, port
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	resp.ClusterAuthorizedOperations = math.MinInt32
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = allClusterOps
	}
	return resp, nil, nil
}
