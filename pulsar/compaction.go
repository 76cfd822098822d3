package pulsar

// Topic compaction (pulsar-admin topics compact) and compacted reads
// (readCompacted), on the core's compacted views (stream/view.go) through
// managedledger.Ledger.Compact / ReadCompacted.
//
// What a pass keeps, as Apache Pulsar 4.x's compactor does:
//   - per key (the message's partition key), only its latest message; a
//     latest message with an empty payload deletes the key (all its
//     messages go);
//   - messages without a key are dropped (Pulsar 4.x's default,
//     topicCompactionRetainNullKey=false, PIP-318);
//   - in an uncompressed batch, removed messages become "compacted out"
//     placeholders (SingleMessageMetadata.compacted_out, empty payload), so
//     batch indexes — message ids — do not change; a batch with nothing
//     left, and a single message that is not kept, become gaps (their
//     offsets are skipped; the dispatcher acknowledges them for a
//     readCompacted subscription, as Pulsar moves the cursor past them).
//     The Java client skips compacted-out placeholders; pulsar-client-go
//     (0.19) does not know the flag and hands them to the application as
//     empty messages without a key — as it does with Apache Pulsar;
//   - NOT like Pulsar: a compressed batch is kept whole and its keys are
//     not considered (Nereus does not decompress Pulsar batches on the
//     broker yet), so its messages are never compacted away.
//
// Memory: a key map like Kafka's (16-byte MD5 of the key + a position per
// distinct key, MaxCompactionKeys); a full map ends the pass early and the
// next pass continues from there.

import (
	"context"
	"crypto/md5"
	"net/http"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
	"github.com/nereusstream/nereus-go/stream"
)

// MaxCompactionKeys bounds one pass's key map.
const MaxCompactionKeys = 1 << 20

type msgPos struct {
	off int64 // the entry's offset
	idx int   // the message's batch index (0 for a single message)
}

func (p msgPos) after(q msgPos) bool { return p.off > q.off || p.off == q.off && p.idx > q.idx }

// pulsarCompactor is one pass (a stream.Compactor).
type pulsarCompactor struct {
	latest  map[[16]byte]msgPos
	maxKeys int
}

func newPulsarCompactor(maxKeys int) *pulsarCompactor {
	if maxKeys <= 0 {
		maxKeys = MaxCompactionKeys
	}
	return &pulsarCompactor{latest: map[[16]byte]msgPos{}, maxKeys: maxKeys}
}

// entryMessage is one message of an entry as compaction sees it.
type entryMessage struct {
	key   []byte
	empty bool
}

// messages returns an entry's messages; ok is false when they cannot be
// looked into (compressed batch, unparsable entry): such an entry is kept.
func entryMessages(payload []byte) (wire.Payload, []wire.SingleMessage, []entryMessage, bool) {
	pl, err := wire.ParsePayload(payload)
	if err != nil {
		return pl, nil, nil, false
	}
	if !pl.Batched() {
		md := pl.Metadata
		var key []byte
		if md.PartitionKey != nil {
			key = []byte(md.GetPartitionKey())
		}
		return pl, nil, []entryMessage{{key: key, empty: len(pl.Body) == 0}}, true
	}
	if pl.Metadata.GetCompression() != pb.CompressionType_NONE {
		return pl, nil, nil, false
	}
	sms, err := wire.ParseBatch(pl.Body, pl.NumMessages())
	if err != nil {
		return pl, nil, nil, false
	}
	out := make([]entryMessage, len(sms))
	for i, sm := range sms {
		if sm.Metadata.PartitionKey != nil {
			out[i].key = []byte(sm.Metadata.GetPartitionKey())
		}
		out[i].empty = sm.Metadata.GetCompactedOut() || len(sm.Payload) == 0
	}
	return pl, sms, out, true
}

func (c *pulsarCompactor) Scan(e stream.ReadEntry) (bool, error) {
	_, _, ms, ok := entryMessages(e.Payload)
	if !ok {
		return true, nil
	}
	if n := len(c.latest); n > 0 && n+len(ms) > c.maxKeys {
		return false, nil
	}
	for i, m := range ms {
		if m.key != nil {
			c.latest[md5.Sum(m.key)] = msgPos{off: e.Offset, idx: i}
		}
	}
	return true, nil
}

func (c *pulsarCompactor) SafeEnd(scanned int64) int64 { return scanned }

func (c *pulsarCompactor) keep(m entryMessage, at msgPos) bool {
	if m.key == nil || m.empty {
		return false
	}
	l, ok := c.latest[md5.Sum(m.key)]
	return !ok || !l.after(at)
}

func (c *pulsarCompactor) Rewrite(e stream.ReadEntry, _ bool) ([]byte, error) {
	pl, sms, ms, ok := entryMessages(e.Payload)
	if !ok {
		return e.Payload, nil
	}
	kept := 0
	for i, m := range ms {
		if c.keep(m, msgPos{off: e.Offset, idx: i}) {
			kept++
		}
	}
	switch {
	case kept == 0:
		return nil, nil
	case kept == len(ms):
		return e.Payload, nil
	}
	var body []byte
	for i, sm := range sms {
		smm, payload := sm.Metadata, sm.Payload
		if !c.keep(ms[i], msgPos{off: e.Offset, idx: i}) {
			smm, payload = &pb.SingleMessageMetadata{CompactedOut: proto.Bool(true), PayloadSize: proto.Int32(0)}, nil
		}
		mb, err := proto.Marshal(smm)
		if err != nil {
			return nil, err
		}
		body = append(body, byte(len(mb)>>24), byte(len(mb)>>16), byte(len(mb)>>8), byte(len(mb)))
		body = append(body, mb...)
		body = append(body, payload...)
	}
	md := proto.Clone(pl.Metadata).(*pb.MessageMetadata)
	if md.UncompressedSize != nil {
		md.UncompressedSize = proto.Uint32(uint32(len(body)))
	}
	msg, err := wire.BuildMessage(md, body)
	if err != nil {
		return nil, err
	}
	prefix := e.Payload[:len(e.Payload)-len(pl.Message)] // broker entry metadata, if any
	return append(append([]byte(nil), prefix...), msg...), nil
}

// compactions tracks the last pass per topic for the status endpoint
// (Pulsar's LongRunningProcessStatus).
type compactions struct {
	mu sync.Mutex
	st map[string]compactionStatus
}

type compactionStatus struct {
	Status    string `json:"status"` // NOT_RUN, RUNNING, SUCCESS, ERROR
	LastError string `json:"lastError"`
}

func (cs *compactions) get(topic string) compactionStatus {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if s, ok := cs.st[topic]; ok {
		return s
	}
	return compactionStatus{Status: "NOT_RUN"}
}

// start marks topic RUNNING; false if a pass is running already.
func (cs *compactions) start(topic string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.st == nil {
		cs.st = map[string]compactionStatus{}
	}
	if cs.st[topic].Status == "RUNNING" {
		return false
	}
	cs.st[topic] = compactionStatus{Status: "RUNNING"}
	return true
}

func (cs *compactions) finish(topic string, err error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if err != nil {
		cs.st[topic] = compactionStatus{Status: "ERROR", LastError: err.Error()}
		return
	}
	cs.st[topic] = compactionStatus{Status: "SUCCESS"}
}

// triggerCompaction: PUT .../compaction. Pulsar answers 204 at once and
// compacts in the background; 409 while a pass runs.
func (a *httpAPI) triggerCompaction(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.topicMustExist(ctx, n); err != nil {
		writeErr(w, err)
		return
	}
	t, err := a.s.getTopic(ctx, n, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	if !a.s.compactions.start(n.String()) {
		writeJSON(w, http.StatusConflict, map[string]string{"reason": "Compaction already in progress"})
		return
	}
	a.s.compactInBackground(n, t.ledger)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) compactInBackground(n managedledger.TopicName, l *managedledger.Ledger) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
		defer cancel()
		start := time.Now()
		st, err := l.Compact(ctx, newPulsarCompactor(0))
		s.compactions.finish(n.String(), err)
		if err != nil {
			s.log.Warn("pulsar topic compaction failed", "topic", n.String(), "err", err)
			return
		}
		s.log.Info("pulsar topic compacted", "topic", n.String(), "published", st.Published, "horizon", st.View.Through,
			"kept_bytes", st.KeptBytes, "source_bytes", st.SourceBytes, "took", time.Since(start), "why", st.Why)
	}()
}

// compactionStatus: GET .../compaction.
func (a *httpAPI) compactionStatus(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.topicMustExist(ctx, n); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.s.compactions.get(n.String()))
}
