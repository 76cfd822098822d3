package compat

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzTransactionsReadCommitted: a kgo transactional producer commits
// some transactions and aborts others; a read_committed consumer sees
// exactly the committed records, a read_uncommitted consumer sees all,
// and the end offsets include the markers.
func TestFranzTransactionsReadCommitted(t *testing.T) {
	topic := uniqueTopic("franz-txn")
	adm := kadm.NewClient(newKgo(t))
	createTopic(t, adm, topic, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	prod := newKgo(t, kgo.TransactionalID("txn-"+topic), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	want := map[string]bool{}
	const rounds, per = 10, 9
	for round := 0; round < rounds; round++ {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := round%3 != 1
		for i := 0; i < per; i++ {
			v := fmt.Sprintf("r%d-%d", round, i)
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			if commit {
				want[v] = true
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end round %d: %v", round, err)
		}
	}

	read := func(level kgo.IsolationLevel, n int) map[string]int {
		cons := newKgo(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(level))
		got := map[string]int{}
		total := 0
		for total < n {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", total, n)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++; total++ })
		}
		return got
	}
	got := read(kgo.ReadCommitted(), len(want))
	for v, n := range got {
		if !want[v] || n != 1 {
			t.Fatalf("read_committed: %s read %d times (committed: %v)", v, n, want[v])
		}
	}
	all := read(kgo.ReadUncommitted(), rounds*per)
	if len(all) != rounds*per {
		t.Fatalf("read_uncommitted: %d distinct records, want %d", len(all), rounds*per)
	}
	// Every transaction wrote one marker per partition it touched.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != rounds*per+rounds*3 {
		t.Fatalf("end offsets sum to %d, want %d records + %d markers", total, rounds*per, rounds*3)
	}
	// The coordinator describes the transactional id.
	described, err := adm.DescribeTransactions(ctx, "txn-"+topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := described["txn-"+topic]
	if !ok || d.State != "CompleteCommit" {
		t.Fatalf("described %+v", described)
	}
}

// TestFranzTransactionalETL: consume -> produce in a transaction -> commit
// the consumed offsets in the same transaction (kgo GroupTransactSession),
// many rounds, while a member joins and another leaves mid-run (two
// rebalances). Every input record appears exactly once in the committed
// output.
func TestFranzTransactionalETL(t *testing.T) {
	const partitions, records = 6, 3000
	in, out := uniqueTopic("etl-in"), uniqueTopic("etl-out")
	group := uniqueTopic("etl-group")
	adm := kadm.NewClient(newKgo(t))
	createTopic(t, adm, in, partitions, nil)
	createTopic(t, adm, out, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	src := newKgo(t, kgo.DefaultProduceTopic(in))
	for i := 0; i < records; i++ {
		src.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 97)), Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	type member struct {
		stop      chan struct{}
		done      chan error
		committed atomic.Int64 // records this member committed
	}
	startMember := func(name string) *member {
		m := &member{stop: make(chan struct{}), done: make(chan error, 1)}
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(broker.Addr),
			kgo.TransactionalID(group+"-"+name),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DefaultProduceTopic(out),
			kgo.SessionTimeout(10*time.Second),
			kgo.FetchMaxWait(200*time.Millisecond),
		)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer sess.Close()
			for {
				select {
				case <-m.stop:
					m.done <- nil
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := sess.PollRecords(pctx, 25)
				pcancel()
				if ctx.Err() != nil {
					m.done <- ctx.Err()
					return
				}
				if fs.Empty() {
					continue
				}
				if err := sess.Begin(); err != nil {
					m.done <- fmt.Errorf("%s begin: %w", name, err)
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
				})
				committed, err := sess.End(ctx, kgo.TryCommit)
				if err != nil {
					m.done <- fmt.Errorf("%s end: %w", name, err)
					return
				}
				if committed {
					m.committed.Add(int64(fs.NumRecords()))
				}
			}
		}()
		return m
	}

	// Watch the committed output while members come and go.
	cons := newKgo(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	total := 0
	readSome := func(until int) {
		for total < until {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("output has %d of %d records", total, until)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
		}
	}
	a, b := startMember("a"), startMember("b")
	readSome(records / 4)
	c := startMember("c") // rebalance: a third member joins
	readSome(records / 2)
	for c.committed.Load() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // c got partitions and committed
	}
	close(a.stop) // rebalance: a member leaves
	if err := <-a.done; err != nil {
		t.Fatal(err)
	}
	readSome(records)
	for _, m := range []*member{b, c} {
		close(m.stop)
		if err := <-m.done; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("records committed per member: a=%d b=%d c=%d", a.committed.Load(), b.committed.Load(), c.committed.Load())
	if a.committed.Load() == 0 || b.committed.Load()+c.committed.Load() == 0 {
		t.Fatal("the rebalances did not happen mid-run")
	}
	// Nothing beyond the input may show up, and nothing twice.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	pcancel()
	if len(seen) != records || total != records {
		t.Fatalf("output: %d records, %d distinct, want %d exactly once", total, len(seen), records)
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("value %s in the output %d times", v, n)
		}
	}
}
