package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMixedRequestsAnswerEachDeniedItem: a request naming a resource the
// principal may use and one it may not gets the first served and the
// second answered with its own authorization error, in one response (as
// KafkaApis answers them). One request per API whose rule splits items.
func TestMixedRequestsAnswerEachDeniedItem(t *testing.T) {
	addr := aclServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadm.NewClient(aclClient(t, addr, "admin"))
	for _, topic := range []string{"open", "closed"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	grant := kadm.NewACLs().Allow("User:alice").Topics("open").Groups("gopen").TransactionalIDs("topen").Operations(kadm.OpAll)
	if res, err := admin.CreateACLs(ctx, grant); err != nil || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	var alice *kgo.Client = aclClient(t, addr, "alice")

	// codes maps each named resource to the error code the answer gave it.
	type codes map[string]int16
	check := func(api string, got codes, want codes) {
		t.Helper()
		for name, code := range want {
			if c, ok := got[name]; !ok || c != code {
				t.Errorf("%s: %s answered %d (present %v), want %d", api, name, c, ok, code)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: answer names %v, want exactly %v", api, got, want)
		}
	}
	issue := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := alice.SeedBrokers()[0].Request(ctx, req) // direct: no sharding, no metadata lookups
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		return resp
	}
	const ok, topicNo, groupNo, txnNo = 0, topicDenied, groupDenied, txnDenied

	{
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		for _, n := range []string{"open", "closed"} {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = n
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		got := codes{}
		for _, rt := range issue(req).(*kmsg.ListOffsetsResponse).Topics {
			got[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		check("ListOffsets", got, codes{"open": ok, "closed": topicNo})
	}
	{
		req := kmsg.NewPtrDeleteRecordsRequest()
		for _, n := range []string{"open", "closed"} {
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = n
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		got := codes{}
		for _, rt := range issue(req).(*kmsg.DeleteRecordsResponse).Topics {
			got[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		check("DeleteRecords", got, codes{"open": ok, "closed": topicNo})
	}
	{
		req := kmsg.NewPtrDescribeConfigsRequest()
		for _, n := range []string{"open", "closed"} {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, n
			req.Resources = append(req.Resources, r)
		}
		got := codes{}
		for _, r := range issue(req).(*kmsg.DescribeConfigsResponse).Resources {
			got[r.ResourceName] = r.ErrorCode
		}
		check("DescribeConfigs", got, codes{"open": ok, "closed": topicNo})
	}
	{
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = true
		for _, n := range []string{"open", "closed"} {
			r := kmsg.NewIncrementalAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, n
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", kmsg.StringPtr("60000")
			r.Configs = append(r.Configs, c)
			req.Resources = append(req.Resources, r)
		}
		got := codes{}
		for _, r := range issue(req).(*kmsg.IncrementalAlterConfigsResponse).Resources {
			got[r.ResourceName] = r.ErrorCode
		}
		check("IncrementalAlterConfigs", got, codes{"open": ok, "closed": topicNo})
	}
	{
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = true
		for _, n := range []string{"open", "closed"} {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = n, 2
			req.Topics = append(req.Topics, rt)
		}
		got := codes{}
		for _, rt := range issue(req).(*kmsg.CreatePartitionsResponse).Topics {
			got[rt.Topic] = rt.ErrorCode
		}
		check("CreatePartitions", got, codes{"open": ok, "closed": topicNo})
	}
	{
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKeys = 4, []string{"gopen", "gclosed"}
		got := codes{}
		for _, c := range issue(req).(*kmsg.FindCoordinatorResponse).Coordinators {
			got[c.Key] = c.ErrorCode
		}
		check("FindCoordinator", got, codes{"gopen": ok, "gclosed": groupNo})
	}
	{
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"gopen", "gclosed"}
		got := codes{}
		for _, g := range issue(req).(*kmsg.DescribeGroupsResponse).Groups {
			got[g.Group] = g.ErrorCode
		}
		check("DescribeGroups", got, codes{"gopen": ok, "gclosed": groupNo})
	}
	{
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{"topen", "tclosed"}
		got := codes{}
		for _, s := range issue(req).(*kmsg.DescribeTransactionsResponse).TransactionStates {
			got[s.TransactionalID] = s.ErrorCode
		}
		if got["topen"] == txnNo || got["tclosed"] != txnNo || len(got) != 2 {
			t.Errorf("DescribeTransactions: %v (topen may be unknown, never denied; tclosed denied)", got)
		}
	}
	{
		// Group allowed, one topic denied: the topic answers TOPIC_AUTHORIZATION_FAILED.
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "gopen", -1
		for _, n := range []string{"open", "closed"} {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = n
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		got := codes{}
		for _, rt := range issue(req).(*kmsg.OffsetCommitResponse).Topics {
			got[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		check("OffsetCommit", got, codes{"open": ok, "closed": topicNo})

		// A denied group denies every topic with GROUP_AUTHORIZATION_FAILED.
		req.Group = "gclosed"
		got = codes{}
		for _, rt := range issue(req).(*kmsg.OffsetCommitResponse).Topics {
			got[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		check("OffsetCommit (denied group)", got, codes{"open": groupNo, "closed": groupNo})
	}
	{
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"gclosed"}
		got := codes{}
		for _, g := range issue(req).(*kmsg.DeleteGroupsResponse).Groups {
			got[g.Group] = g.ErrorCode
		}
		check("DeleteGroups", got, codes{"gclosed": groupNo})
	}
}
