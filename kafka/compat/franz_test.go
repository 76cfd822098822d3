package compat

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newKgo(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(broker.Addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, 1, configs, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
}

// TestFranzProduceConsume: kadm creates a topic, an idempotent kgo producer
// writes to 16 partitions, a direct consumer reads everything back in
// order per partition, and kadm's offsets agree.
func TestFranzProduceConsume(t *testing.T) {
	const partitions, perPartition = 16, 200
	topic := uniqueTopic("franz-basic")
	adm := kadm.NewClient(newKgo(t))
	createTopic(t, adm, topic, partitions, nil)

	prod := newKgo(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < partitions; p++ {
			wg.Add(1)
			r := &kgo.Record{Partition: p, Key: []byte(fmt.Sprint(p)), Value: []byte(fmt.Sprintf("%d-%d", p, i))}
			prod.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					failed.Store(err)
				}
			})
		}
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// kgo's default producer is idempotent: it must have asked for a
	// producer id and sent sequenced batches.
	if n, ok := broker.RequestCount(22); ok && n == 0 {
		t.Fatal("no InitProducerId request: the producer did not run idempotently")
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != perPartition {
			t.Errorf("partition %d: end offset %d err %v, want %d", o.Partition, o.Offset, o.Err, perPartition)
		}
	})

	cons := newKgo(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int{}
	total := 0
	for total < partitions*perPartition {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, partitions*perPartition, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("%d-%d", r.Partition, next[r.Partition])
			if string(r.Value) != want || r.Offset != int64(next[r.Partition]) {
				t.Fatalf("partition %d offset %d: got %q, want %q at offset %d", r.Partition, r.Offset, r.Value, want, next[r.Partition])
			}
			next[r.Partition]++
			total++
		})
	}
	t.Logf("consumed %d records from %d partitions in order", total, len(next))
}

// TestFranzGroupRebalance: three group members join one after another and
// one leaves while a producer keeps writing; every record is consumed at
// least once, the committed offsets reach the end, and a new member resumes
// from them and sees only new records.
func TestFranzGroupRebalance(t *testing.T) {
	const partitions = 6
	topic := uniqueTopic("franz-group")
	group := uniqueTopic("group")
	adm := kadm.NewClient(newKgo(t))
	createTopic(t, adm, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	prod := newKgo(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	var produced atomic.Int64
	stopProducing := make(chan struct{})
	prodDone := make(chan error, 1)
	go func() {
		i := 0
		for {
			select {
			case <-stopProducing:
				prodDone <- prod.Flush(ctx)
				return
			default:
			}
			r := &kgo.Record{Key: []byte(fmt.Sprint(i % 97)), Value: []byte(fmt.Sprint(i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				prodDone <- err
				return
			}
			produced.Add(1)
			i++
			time.Sleep(2 * time.Millisecond)
		}
	}()

	var mu sync.Mutex
	seen := map[[2]int64]bool{}
	member := func(name string, stop <-chan struct{}, done chan<- error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.ClientID(name),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(10*time.Second),
			kgo.AutoCommitInterval(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			done <- err
			return
		}
		defer cl.Close()
		for {
			select {
			case <-stop:
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				err := cl.CommitUncommittedOffsets(cctx)
				ccancel()
				done <- err
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[[2]int64{int64(r.Partition), r.Offset}] = true
				mu.Unlock()
			})
		}
	}
	stops := make([]chan struct{}, 3)
	dones := make([]chan error, 3)
	for i := range stops {
		stops[i], dones[i] = make(chan struct{}), make(chan error, 1)
		go member(fmt.Sprintf("member-%d", i), stops[i], dones[i])
		time.Sleep(700 * time.Millisecond) // let records flow between joins
	}
	// One member leaves mid-stream; the other two take its partitions.
	close(stops[0])
	if err := <-dones[0]; err != nil {
		t.Fatalf("member-0: %v", err)
	}
	time.Sleep(700 * time.Millisecond)
	close(stopProducing)
	if err := <-prodDone; err != nil {
		t.Fatalf("producer: %v", err)
	}
	total := produced.Load()
	if total == 0 {
		t.Fatal("nothing produced")
	}
	// Wait (bounded) until the remaining members have seen every record.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if int64(n) >= total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d distinct records of %d", n, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := 1; i < 3; i++ {
		close(stops[i])
		if err := <-dones[i]; err != nil {
			t.Fatalf("member-%d: %v", i, err)
		}
	}
	t.Logf("produced %d records while members joined and left; all consumed", total)
	if int64(len(seen)) != total {
		t.Fatalf("seen %d distinct (partition, offset) pairs, produced %d", len(seen), total)
	}

	// Committed offsets cover everything.
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var sumCommitted, sumEnd int64
	ends.Each(func(o kadm.ListedOffset) {
		sumEnd += o.Offset
		c, ok := committed.Lookup(topic, o.Partition)
		if !ok || c.At != o.Offset {
			t.Errorf("partition %d: committed %+v, end %d", o.Partition, c, o.Offset)
		}
		sumCommitted += c.At
	})
	if sumEnd != total {
		t.Fatalf("end offsets sum to %d, produced %d", sumEnd, total)
	}

	// A new member resumes from the committed offsets.
	const more = 50
	for i := 0; i < more; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := newKgo(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(100*time.Millisecond))
	got := 0
	for got < more {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("resumed consumer got %d of %d", got, more)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != "late" {
				t.Fatalf("resumed consumer re-read an old record at %d/%d", r.Partition, r.Offset)
			}
			got++
		})
	}
	// Group shows up in admin listings.
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lg[group]; !ok {
		t.Fatalf("group %s not listed: %v", group, lg.Groups())
	}
}
