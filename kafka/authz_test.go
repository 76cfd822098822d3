package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/nereusstream/nereus-go/kafka/kacl"
	"github.com/nereusstream/nereus-go/kafka/ksasl"
)

// TestEveryAPIHasAnAuthorizationRule: a registered API key without a rule
// would be refused to everyone but super users once ACLs are on; whoever
// registers a key adds its rule in authz_rules.go.
func TestEveryAPIHasAnAuthorizationRule(t *testing.T) {
	for key := range apis {
		if _, ok := authzRules[key]; !ok {
			t.Errorf("api key %d (%s) has no authorization rule in authz_rules.go", key, kmsg.NameForKey(key))
		}
	}
}

// aclServer: a SASL_PLAINTEXT listener with the authorizer on, super user
// admin, and users admin/alice/bob (password = name + "-secret").
func aclServer(t *testing.T) string {
	t.Helper()
	s, addr := saslServer(t, Config{Security: SecurityConfig{Authorizer: true, SuperUsers: []string{"User:admin"}}}, nil)
	for _, u := range []string{"admin", "bob"} {
		c, _ := ksasl.NewScramCredentialFromPassword(ksasl.ScramSHA256, u+"-secret", 4096)
		if err := s.auth.UpsertScram(context.Background(), u, c); err != nil {
			t.Fatal(err)
		}
	}
	return addr
}

func aclClient(t *testing.T, addr, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(1),
		kgo.SASL(scram.Auth{User: user, Pass: user + "-secret"}.AsSha256Mechanism())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestACLsEnforced(t *testing.T) {
	addr := aclServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadm.NewClient(aclClient(t, addr, "admin"))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "secret"); err != nil {
		t.Fatal(err)
	}
	alice := aclClient(t, addr, "alice", kgo.DefaultProduceTopic("orders"))
	aliceAdm := kadm.NewClient(alice)

	// No ACLs: alice may do nothing.
	err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without ACLs: %v", err)
	}
	md, err := aliceAdm.Metadata(ctx, "orders")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(md.Topics["orders"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("metadata without ACLs: %v %+v", err, md.Topics["orders"])
	}
	if all, _ := aliceAdm.ListTopics(ctx); len(all) != 0 {
		t.Fatalf("alice lists %v without DESCRIBE", all.Names())
	}
	if _, err := aliceAdm.CreateTopic(ctx, 1, 1, nil, "alice-new"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create topic without ACLs: %v", err)
	}
	if res, err := aliceAdm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny)); err == nil && (len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("describe ACLs as alice: %+v", res)
	} else if err != nil && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe ACLs as alice: %v", err)
	}

	// Grant WRITE on orders, READ on topics prefixed "ord", READ on group g1.
	acls := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite)
	if res, err := admin.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	pref := kadm.NewACLs().Allow("User:alice").Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead).
		Groups("g1").Operations(kadm.OpRead)
	if res, err := admin.CreateACLs(ctx, pref); err != nil || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce with WRITE: %v", err)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to secret: %v", err)
	}
	md, _ = kadm.NewClient(aclClient(t, addr, "alice")).Metadata(ctx) // a fresh client: kadm caches metadata
	if len(md.Topics) != 1 || md.Topics["orders"].Err != nil {
		t.Fatalf("alice's all-topics metadata: %v", md.Topics.Names())
	}

	// Group join and fetch with READ.
	cons := aclClient(t, addr, "alice", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if err := fs.Err0(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("group fetch: %v, %d records", err, fs.NumRecords())
	}
	denied := aclClient(t, addr, "alice", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g2"))
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	if err := denied.PollFetches(dctx).Err0(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("join g2: %v", err)
	}

	// authorized_operations are the truth.
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.IncludeTopicAuthorizedOperations = 12, true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("orders")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.Topics[0].AuthorizedOperations, int32(1<<kacl.OpRead|1<<kacl.OpWrite|1<<kacl.OpDescribe); got != want {
		t.Fatalf("authorized operations %b, want %b", got, want)
	}

	// describeAcls round-trips; deleteAcls removes and access ends.
	got, err := admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(got) != 1 || len(got[0].Described) != 3 {
		t.Fatalf("describe ACLs: %v %+v", err, got)
	}
	del, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpWrite))
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 1 {
		t.Fatalf("delete ACLs: %v %+v", err, del)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce after the ACL was deleted: %v", err)
	}
	// Deny beats allow.
	if _, err := admin.CreateACLs(ctx, kadm.NewACLs().Deny("User:alice").Topics("orders").Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.Version, freq.ReplicaID, freq.MaxWaitMillis, freq.MaxBytes = 12, -1, 100, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch after DENY READ (with a prefixed ALLOW READ): error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	_, addr := saslServer(t, Config{}, nil)
	cl, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls without an authorizer: %v", err)
	}
}
