package securitytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaPrincipalWithoutACLs: eve authenticates but holds no ACL: every
// data and admin path answers Kafka's authorization errors and no data.
func TestKafkaPrincipalWithoutACLs(t *testing.T) {
	topic := unique("private")
	owner := saslClient(t, scramMech("SCRAM-SHA-256", "alice", users["alice"]))
	if err := owner.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte("secret")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	eve := saslClient(t, scramMech("SCRAM-SHA-512", "eve", users["eve"]), kgo.RequestRetries(1))
	ctx := ctxT(t, 60*time.Second)
	if err := eve.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	adm := kadm.NewClient(eve)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, unique("eve")); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if names, err := adm.ListTopics(ctx); err != nil || len(names) != 0 {
		t.Fatalf("eve lists topics %v (%v)", names.Names(), err)
	}
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		if o, ok := offs.Lookup(topic, 0); ok && !errors.Is(o.Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("list offsets: %+v", o)
		}
	}
	res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err == nil && (len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("describe ACLs: %+v", res)
	}

	// Direct partition consumption: an error, no records.
	direct := saslClient(t, scramMech("SCRAM-SHA-512", "eve", users["eve"]),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := direct.PollFetches(pctx)
	if fs.NumRecords() != 0 {
		t.Fatalf("eve read %d records", fs.NumRecords())
	}
	if err := fs.Err0(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("fetch: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Group consumption: the join is refused.
	grp := saslClient(t, scramMech("SCRAM-SHA-512", "eve", users["eve"]), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(unique("eve-group")))
	gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer gcancel()
	gfs := grp.PollFetches(gctx)
	if gfs.NumRecords() != 0 {
		t.Fatalf("eve's group read %d records", gfs.NumRecords())
	}
	if err := gfs.Err0(); !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("group consume: %v, want an authorization failure", err)
	}
}

// TestJavaKafkaACLs: ACLs created with the Java AdminClient (createAcls)
// are enforced for produce, fetch, group join and topic creation, and
// describeAcls / deleteAcls round-trip.
func TestJavaKafkaACLs(t *testing.T) {
	runJava(t, "KafkaSecure", "acls", addr(t, "kafka:SASL_SSL"), tlsCA.CAFile, "admin", users["admin"], unique("javaacl"), unique("javaacl-group"))
}
