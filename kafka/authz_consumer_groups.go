package kafka

// Authorization rules of the KIP-848 consumer group APIs (as Kafka's
// KafkaApis applies them): ConsumerGroupHeartbeat needs READ on the group;
// ConsumerGroupDescribe DESCRIBE on each group it names.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	regAuthz(68, groupOnly(opRead, func(q kmsg.Request) string { return q.(*kmsg.ConsumerGroupHeartbeatRequest).Group },
		func(p kmsg.Response) {
			r := p.(*kmsg.ConsumerGroupHeartbeatResponse)
			r.ErrorCode, r.MemberEpoch = groupDenied, -1
		}))
	regAuthz(69, authzConsumerGroupDescribe)
}

func authzConsumerGroupDescribe(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	keep, denied := splitAllowed(req.Groups, func(g string) bool { return z.ok(opDescribe, rtGroup, g) })
	req.Groups = keep
	return authzDecision{empty: len(keep) == 0 && len(denied) > 0, patch: func(p kmsg.Response) {
		resp := p.(*kmsg.ConsumerGroupDescribeResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = z.ops(rtGroup, g.Group)
			}
		}
		for _, name := range denied {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode, g.AuthorizedOperations = name, groupDenied, noAuthorizedOps
			resp.Groups = append(resp.Groups, g)
		}
	}}
}
