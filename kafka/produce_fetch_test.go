package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

func recs(n int, ts int64) []kbatch.Record {
	out := make([]kbatch.Record, n)
	for i := range out {
		out[i] = kbatch.Record{Value: []byte{byte('a' + i%26)}, TimestampDelta: int64(i)}
	}
	return out
}

func produce1(t *testing.T, c *rawClient, version int16, topic string, p int32, b []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := c.do(produceReq(version, -1, topic, p, b)).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0]
}

func TestIdempotentProduce(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "idem", 1, nil)
	ip := c.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if ip.ErrorCode != 0 || ip.ProducerID < 0 {
		t.Fatalf("init producer id: %+v", ip)
	}
	pid := ip.ProducerID
	batch := func(seq int32, n int) []byte {
		return kbatch.Build(kbatch.BuildOptions{ProducerID: pid, ProducerEpoch: ip.ProducerEpoch, BaseSequence: seq, BaseTimestamp: 1}, recs(n, 0))
	}
	if r := produce1(t, c, 9, "idem", 0, batch(0, 3)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("first: %+v", r)
	}
	if r := produce1(t, c, 9, "idem", 0, batch(3, 2)); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("second: %+v", r)
	}
	// A retry of the first batch is a duplicate: original offset, no error.
	if r := produce1(t, c, 9, "idem", 0, batch(0, 3)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("duplicate: %+v", r)
	}
	// A gap is out of order.
	if r := produce1(t, c, 9, "idem", 0, batch(9, 1)); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %+v", r)
	}
	// An older epoch is fenced.
	old := kbatch.Build(kbatch.BuildOptions{ProducerID: pid, ProducerEpoch: -1 + ip.ProducerEpoch, BaseSequence: 5}, recs(1, 0))
	if ip.ProducerEpoch == 0 {
		// Bump: epoch 1 starting at 0 is accepted, then epoch 0 is fenced.
		b1 := kbatch.Build(kbatch.BuildOptions{ProducerID: pid, ProducerEpoch: 1, BaseSequence: 0}, recs(1, 0))
		if r := produce1(t, c, 9, "idem", 0, b1); r.ErrorCode != 0 {
			t.Fatalf("epoch bump: %+v", r)
		}
		old = batch(5, 1)
	}
	if r := produce1(t, c, 9, "idem", 0, old); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced epoch: %+v", r)
	}
	// An unknown producer with a non-zero sequence.
	unk := kbatch.Build(kbatch.BuildOptions{ProducerID: pid + 500, BaseSequence: 7}, recs(1, 0))
	if r := produce1(t, c, 9, "idem", 0, unk); r.ErrorCode != kerr.UnknownProducerID.Code {
		t.Fatalf("unknown producer: %+v", r)
	}
	if n := s.Stats().DuplicateBatches.Load(); n != 1 {
		t.Fatalf("duplicates counted %d", n)
	}
	// Producer ids are unique.
	ip2 := c.do(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if ip2.ProducerID == pid {
		t.Fatal("producer id reused")
	}
}

func TestProduceValidation(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "val", 1, map[string]string{"max.message.bytes": "200"})
	good := kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs(2, 0))
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	big := kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, []kbatch.Record{{Value: make([]byte, 300)}})
	txn := kbatch.Build(kbatch.BuildOptions{ProducerID: 5, BaseSequence: 0, Attributes: kbatch.AttrTransactional}, recs(1, 0))
	cases := []struct {
		name    string
		version int16
		topic   string
		b       []byte
		want    int16
	}{
		{"ok", 9, "val", good, 0},
		{"crc", 9, "val", corrupt, kerr.CorruptMessage.Code},
		{"too large", 9, "val", big, kerr.MessageTooLarge.Code},
		{"two batches", 9, "val", append(append([]byte(nil), good...), good...), kerr.InvalidRecord.Code},
		{"transactional", 9, "val", txn, kerr.InvalidTxnState.Code},
		{"v2 refused", 2, "val", good, kerr.UnsupportedVersion.Code},
		{"unknown topic", 9, "nope", good, kerr.UnknownTopicOrPartition.Code},
		{"empty", 9, "val", nil, kerr.InvalidRecord.Code},
	}
	for _, tc := range cases {
		if r := produce1(t, c, tc.version, tc.topic, 0, tc.b); r.ErrorCode != tc.want {
			t.Errorf("%s: error %d, want %d (%s)", tc.name, r.ErrorCode, tc.want, derefStr(r.ErrorMessage))
		}
	}
	// Bad acks value.
	resp := c.do(produceReq(9, 2, "val", 0, good)).(*kmsg.ProduceResponse)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: %d", ec)
	}
}

// TestFetchPatchesOffsetsAndEpoch: batches are stored as produced; fetch
// serves them with absolute base offsets and the leader epoch, CRCs intact,
// starting with the batch containing the fetch offset.
func TestFetchPatchesOffsetsAndEpoch(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "fp", 1, nil)
	sizes := []int{3, 4, 5}
	for _, n := range sizes {
		produce1(t, c, 9, "fp", 0, kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: 10}, recs(n, 0)))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mdr := c.do(md).(*kmsg.MetadataResponse)
	var epoch int32 = -2
	for _, tp := range mdr.Topics {
		if *tp.Topic == "fp" {
			epoch = tp.Partitions[0].LeaderEpoch
		}
	}
	if epoch < 0 {
		t.Fatalf("leader epoch %d", epoch)
	}
	resp := c.do(fetchReq(12, "fp", 0, 5, 0, 0)).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 12 || p.LastStableOffset != 12 || p.LogStartOffset != 0 || p.PreferredReadReplica != -1 {
		t.Fatalf("partition %+v", p)
	}
	b := p.RecordBatches
	var bases []int64
	for len(b) > 0 {
		h, err := kbatch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := kbatch.CheckCRC(b); err != nil {
			t.Fatal(err)
		}
		if h.LeaderEpoch != epoch {
			t.Fatalf("batch epoch %d, want %d", h.LeaderEpoch, epoch)
		}
		bases = append(bases, h.BaseOffset)
		b = b[h.TotalSize():]
	}
	if len(bases) != 2 || bases[0] != 3 || bases[1] != 7 {
		t.Fatalf("base offsets %v, want [3 7] (fetch at 5 starts with the batch containing 5)", bases)
	}
	// Out of range.
	resp = c.do(fetchReq(12, "fp", 0, 99, 0, 0)).(*kmsg.FetchResponse)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 99: %d", ec)
	}
	// Stale leader epoch from the client.
	fr := fetchReq(12, "fp", 0, 0, 0, 0)
	fr.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch - 1
	if ec := c.do(fr).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; ec != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("stale epoch: %d", ec)
	}
	fr.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch + 1
	if ec := c.do(fr).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; ec != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("future epoch: %d", ec)
	}
	// Fetch sessions are refused: a create request gets session id 0, an
	// incremental one FETCH_SESSION_ID_NOT_FOUND.
	fr = fetchReq(12, "fp", 0, 0, 0, 0)
	fr.SessionEpoch = 0
	if r := c.do(fr).(*kmsg.FetchResponse); r.SessionID != 0 || r.ErrorCode != 0 {
		t.Fatalf("session create: id %d err %d", r.SessionID, r.ErrorCode)
	}
	fr.SessionID, fr.SessionEpoch = 42, 1
	if r := c.do(fr).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("incremental: %d", r.ErrorCode)
	}
	// OffsetForLeaderEpoch: nothing ever diverges.
	ofe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofe.Version = 2
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "fp"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 0, epoch, epoch
	ot.Partitions = append(ot.Partitions, op)
	ofe.Topics = append(ofe.Topics, ot)
	or := c.do(ofe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if or.ErrorCode != 0 || or.EndOffset != 12 || or.LeaderEpoch != epoch {
		t.Fatalf("offset for leader epoch: %+v", or)
	}
}

func TestFetchLongPoll(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "lp", 2, nil)
	fr := fetchReq(12, "lp", 0, 0, 10000, 1)
	rp := fr.Topics[0].Partitions[0]
	rp.Partition = 1
	fr.Topics[0].Partitions = append(fr.Topics[0].Partitions, rp)
	corr := c.send(fr)
	start := time.Now()
	time.AfterFunc(100*time.Millisecond, func() {
		c2 := dial(t, s.addr)
		produce1(t, c2, 9, "lp", 1, kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs(2, 0)))
	})
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	c.recv(corr, resp)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("long poll took %v", d)
	}
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || ps[0].Partition != 0 || ps[1].Partition != 1 || len(ps[1].RecordBatches) == 0 || len(ps[0].RecordBatches) != 0 {
		t.Fatalf("response partitions %+v", ps)
	}
	// Empty long poll times out with exactly the requested partitions.
	start = time.Now()
	resp = c.do(fetchReq(12, "lp", 0, 0, 150, 1)).(*kmsg.FetchResponse)
	if d := time.Since(start); d < 140*time.Millisecond {
		t.Fatalf("returned after %v, before max wait", d)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("%+v", resp.Topics)
	}
}

func TestLogAppendTimeAndListOffsets(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	s := startServer(t, Config{Now: func() time.Time { return now }}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	r := produce1(t, c, 9, "lat", 0, kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: 5}, recs(2, 0)))
	if r.ErrorCode != 0 || r.LogAppendTime != now.UnixMilli() {
		t.Fatalf("%+v", r)
	}
	b := c.do(fetchReq(12, "lat", 0, 0, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
	h, _ := kbatch.ParseHeader(b)
	if err := kbatch.CheckCRC(b); err != nil || h.Attributes&kbatch.AttrLogAppendTime == 0 || h.MaxTimestamp != now.UnixMilli() {
		t.Fatalf("crc %v header %+v", err, h)
	}

	// Timestamps on a CreateTime topic: three batches at 100.., 200.., 300..
	mustCreateTopic(t, c, "ts", 1, nil)
	for i := int64(1); i <= 3; i++ {
		produce1(t, c, 9, "ts", 0, kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1, BaseTimestamp: 100 * i}, recs(4, 0)))
	}
	for _, tc := range []struct{ ts, off, gotTs int64 }{
		{-2, 0, -1}, {-1, 12, -1}, {0, 0, 100}, {102, 2, 102}, {150, 4, 200}, {303, 11, 303}, {304, -1, -1},
	} {
		p := c.do(listOffsetsReq("ts", 0, tc.ts)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != tc.off || p.Timestamp != tc.gotTs {
			t.Errorf("ts %d: offset %d ts %d err %d, want %d/%d", tc.ts, p.Offset, p.Timestamp, p.ErrorCode, tc.off, tc.gotTs)
		}
	}
	// v0 shape.
	req := listOffsetsReq("ts", 0, -1)
	req.Version = 0
	req.Topics[0].Partitions[0].MaxNumOffsets = 1
	p := c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 12 {
		t.Fatalf("v0: %+v", p)
	}

	// DeleteRecords trims; fetching below the new start is out of range.
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version = 2
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "ts"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 0, 6
	dt.Partitions = append(dt.Partitions, dp)
	dr.Topics = append(dr.Topics, dt)
	drp := c.do(dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	if drp.ErrorCode != 0 || drp.LowWatermark != 6 {
		t.Fatalf("delete records: %+v", drp)
	}
	if p := c.do(listOffsetsReq("ts", 0, -2)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.Offset != 6 {
		t.Fatalf("earliest after trim: %d", p.Offset)
	}
	if ec := c.do(fetchReq(12, "ts", 0, 2, 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; ec != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below start: %d", ec)
	}
	dp.Offset = 100
	dr.Topics[0].Partitions[0] = dp
	if ec := c.do(dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode; ec != kerr.OffsetOutOfRange.Code {
		t.Fatalf("delete beyond end: %d", ec)
	}
}

// noBookKeeper refuses BookKeeper profiles like a core without a BookKeeper
// provider does.
type noBookKeeper struct{ *streammem.Storage }

func (n noBookKeeper) Create(ctx context.Context, name string, opts stream.CreateOptions) (stream.Info, error) {
	if opts.Profile.UsesBookKeeper() {
		return stream.Info{}, stream.ErrUnsupportedProfile
	}
	return n.Storage.Create(ctx, name, opts)
}

func TestTopicConfigsAndProfiles(t *testing.T) {
	st := noBookKeeper{streammem.New()}
	s := startServer(t, Config{}, st)
	c := dial(t, s.addr)
	// Unavailable profile: refused clearly, nothing left behind.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "bk", 2, 1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "nereus.storage.profile", kmsg.StringPtr("BOOKKEEPER_WAL_ONLY")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	r := c.do(req).(*kmsg.CreateTopicsResponse).Topics[0]
	if r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil {
		t.Fatalf("bk profile: %+v", r)
	}
	if _, err := s.Store().Topic(context.Background(), "bk"); err == nil {
		t.Fatal("topic with unavailable profile exists")
	}
	// Unknown configs and values are refused.
	for _, kv := range [][2]string{{"no.such.config", "1"}, {"cleanup.policy", "squash"}, {"retention.ms", "abc"}} {
		cfg.Name, cfg.Value = kv[0], kmsg.StringPtr(kv[1])
		req.Topics[0].Configs = []kmsg.CreateTopicsRequestTopicConfig{cfg}
		req.Topics[0].Topic = "cfg"
		if r := c.do(req).(*kmsg.CreateTopicsResponse).Topics[0]; r.ErrorCode != kerr.InvalidConfig.Code {
			t.Fatalf("%v: %d", kv, r.ErrorCode)
		}
	}
	// Retention configs map onto stream retention.
	mustCreateTopic(t, c, "ret", 2, map[string]string{"retention.ms": "60000", "nereus.storage.profile": "OBJECT_WAL_SYNC_OBJECT"})
	checkRetention := func(want stream.Retention, profile stream.Profile) {
		t.Helper()
		for p := 0; p < 2; p++ {
			info, err := st.Lookup(context.Background(), "kafka/ret/"+string(rune('0'+p)))
			if err != nil {
				t.Fatal(err)
			}
			if info.Retention != want || info.Profile != profile {
				t.Fatalf("partition %d: retention %+v profile %v, want %+v %v", p, info.Retention, info.Profile, want, profile)
			}
		}
	}
	checkRetention(stream.Retention{Time: time.Minute}, stream.ObjectWALSyncObject)
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.Version = 1
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "ret"
	for _, kv := range [][2]string{{"retention.bytes", "1000000"}, {"retention.ms", "-1"}} {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op, op.Value = kv[0], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, op)
	}
	iac.Resources = append(iac.Resources, res)
	if ec := c.do(iac).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; ec != 0 {
		t.Fatalf("incremental alter: %d", ec)
	}
	checkRetention(stream.Retention{Bytes: 1000000}, stream.ObjectWALSyncObject)
	// The profile is fixed.
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Op, op.Value = "nereus.storage.profile", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("OBJECT_WAL_ASYNC_OBJECT")
	iac.Resources[0].Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{op}
	if ec := c.do(iac).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; ec != kerr.InvalidConfig.Code {
		t.Fatalf("profile change: %d", ec)
	}
	// Legacy AlterConfigs replaces the set: retention reverts to defaults.
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.Version = 1
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "ret"
	ac.Resources = append(ac.Resources, ar)
	if ec := c.do(ac).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode; ec != 0 {
		t.Fatalf("alter configs: %d", ec)
	}
	checkRetention(stream.Retention{Time: 7 * 24 * time.Hour}, stream.ObjectWALSyncObject)
	// DescribeConfigs reports sources.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Version = 4
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, "ret", []string{"retention.ms", "nereus.storage.profile"}
	dc.Resources = append(dc.Resources, dr)
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, cfg := range c.do(dc).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		got[cfg.Name] = cfg
	}
	if v := got["nereus.storage.profile"]; *v.Value != "OBJECT_WAL_SYNC_OBJECT" || v.Source != kmsg.ConfigSourceDynamicTopicConfig || !v.ReadOnly {
		t.Fatalf("profile config %+v", v)
	}
	if v := got["retention.ms"]; *v.Value != "604800000" || v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention config %+v", v)
	}
}

func TestTopicLifecycle(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "life", 1, nil)
	produce1(t, c, 9, "life", 0, kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs(3, 0)))
	// Grow to 3 partitions.
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version = 3
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "life", 3
	cp.Topics = append(cp.Topics, ct)
	if ec := c.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("create partitions: %d", ec)
	}
	if ec := c.do(cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode; ec != kerr.InvalidPartitions.Code {
		t.Fatalf("shrink/same: %d", ec)
	}
	if r := produce1(t, c, 9, "life", 2, kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs(1, 0))); r.ErrorCode != 0 {
		t.Fatalf("produce to new partition: %d", r.ErrorCode)
	}
	// Duplicate create.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "life", 1, 1
	req.Topics = append(req.Topics, rt)
	if ec := c.do(req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; ec != kerr.TopicAlreadyExists.Code {
		t.Fatalf("duplicate create: %d", ec)
	}
	// Delete, recreate: the new topic is empty and has a new id.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("life")
	md.Topics = append(md.Topics, mt)
	oldID := c.do(md).(*kmsg.MetadataResponse).Topics[0].TopicID
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 6
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.TopicID = oldID
	dt.Topics = append(dt.Topics, dtt)
	if r := c.do(dt).(*kmsg.DeleteTopicsResponse).Topics[0]; r.ErrorCode != 0 || derefStr(r.Topic) != "life" {
		t.Fatalf("delete by id: %+v", r)
	}
	md.AllowAutoTopicCreation = false
	if ec := c.do(md).(*kmsg.MetadataResponse).Topics[0].ErrorCode; ec != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("deleted topic still in metadata: %d", ec)
	}
	mustCreateTopic(t, c, "life", 1, nil)
	if p := c.do(listOffsetsReq("life", 0, -1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.Offset != 0 {
		t.Fatalf("recreated topic has end offset %d", p.Offset)
	}
	if id := c.do(md).(*kmsg.MetadataResponse).Topics[0].TopicID; id == oldID {
		t.Fatal("recreated topic reused the topic id")
	}
	// Auto-create through Metadata.
	mt.Topic = kmsg.StringPtr("auto-made")
	md.Topics = []kmsg.MetadataRequestTopic{mt}
	md.AllowAutoTopicCreation = true
	r := c.do(md).(*kmsg.MetadataResponse)
	if r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 1 || r.ControllerID != 1 || *r.ClusterID != "nereus-cluster" {
		t.Fatalf("auto-create: %+v", r)
	}
	if _, err := s.Store().Topic(context.Background(), "auto-made"); err != nil {
		t.Fatal(err)
	}
}
