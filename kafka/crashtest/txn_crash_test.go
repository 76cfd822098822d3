package crashtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

// TestCrashMidTransaction SIGKILLs a real `nereus serve` again and again
// while a transactional producer commits and aborts transactions of
// several records across partitions. Afterwards a read_committed consumer
// must see every transaction whole or not at all: all of an acknowledged
// commit, nothing of an acknowledged abort, and for a transaction whose
// EndTxn answer was lost in a crash either all or nothing (the restarted
// coordinator completes a decided outcome and aborts an undecided one).
func TestCrashMidTransaction(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{DisablePulsar: true})
	addr := ts.KafkaAddr()
	const partitions, perTxn = 3, 6
	topic := fmt.Sprintf("txn-crash-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := kadm.NewClient(admCl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	admCl.Close()
	if err != nil {
		t.Fatal(err)
	}

	type outcome int
	const (
		unknown outcome = iota
		committed
		aborted
	)
	var mu sync.Mutex
	outcomes := map[int]outcome{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var cl *kgo.Client
		defer func() {
			if cl != nil {
				cl.Close()
			}
		}()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if cl == nil {
				cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("crash-"+topic),
					kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
					kgo.TransactionTimeout(20*time.Second), kgo.RetryTimeout(20*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
			}
			commit := i%4 != 3
			err := func() error {
				tctx, tcancel := context.WithTimeout(ctx, 20*time.Second)
				defer tcancel()
				if err := cl.BeginTransaction(); err != nil {
					return err
				}
				var perr error
				var pmu sync.Mutex
				for j := 0; j < perTxn; j++ {
					cl.Produce(tctx, &kgo.Record{Value: []byte(fmt.Sprintf("%d-%d", i, j))}, func(_ *kgo.Record, err error) {
						if err != nil {
							pmu.Lock()
							perr = err
							pmu.Unlock()
						}
					})
				}
				if err := cl.Flush(tctx); err != nil {
					return err
				}
				if perr != nil {
					return perr
				}
				return cl.EndTransaction(tctx, kgo.TransactionEndTry(commit))
			}()
			mu.Lock()
			switch {
			case err == nil && commit:
				outcomes[i] = committed
			case err == nil:
				outcomes[i] = aborted
			default:
				outcomes[i] = unknown
			}
			mu.Unlock()
			if err != nil {
				// A crash: start over with a new instance of the same
				// transactional id (InitProducerId fences and aborts
				// whatever the old one left open).
				cl.Close()
				cl = nil
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	const kills = 5
	for round := 0; round < kills; round++ {
		time.Sleep(1500 * time.Millisecond)
		t.Logf("round %d: SIGKILL and restart", round)
		ts.Kill()
		time.Sleep(300 * time.Millisecond)
		ts.Restart()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	// Read everything committed.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	adm := kadm.NewClient(cons)
	var ends kadm.ListedOffsets
	for {
		// Once every transaction is finished the last stable offset
		// reaches the end; the restarted coordinator aborts the last one
		// on its timeout at the latest.
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		same := true
		ends.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(topic, o.Partition); !ok || l.Offset != o.Offset {
				same = false
			}
		})
		if same {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("open transactions never finished")
		}
		time.Sleep(500 * time.Millisecond)
	}
	got := map[int]map[int]bool{}
	idle := time.Now()
	for time.Since(idle) < 3*time.Second {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			idle = time.Now()
			parts := strings.SplitN(string(r.Value), "-", 2)
			i, _ := strconv.Atoi(parts[0])
			j, _ := strconv.Atoi(parts[1])
			if got[i] == nil {
				got[i] = map[int]bool{}
			}
			if got[i][j] {
				t.Errorf("transaction %d record %d read twice", i, j)
			}
			got[i][j] = true
		})
	}
	var nCommitted, nAborted, nUnknown, nUnknownVisible int
	for i, o := range outcomes {
		n := len(got[i])
		if n != 0 && n != perTxn {
			t.Errorf("transaction %d (outcome %d) partially visible: %d of %d records", i, o, n, perTxn)
		}
		switch o {
		case committed:
			nCommitted++
			if n != perTxn {
				t.Errorf("acknowledged commit %d: %d of %d records visible", i, n, perTxn)
			}
		case aborted:
			nAborted++
			if n != 0 {
				t.Errorf("acknowledged abort %d: %d records visible", i, n)
			}
		default:
			nUnknown++
			if n == perTxn {
				nUnknownVisible++
			}
		}
	}
	for i := range got {
		if _, ok := outcomes[i]; !ok {
			t.Errorf("records of transaction %d that was never attempted", i)
		}
	}
	if nCommitted == 0 || nAborted == 0 {
		t.Fatalf("too little happened: %d commits, %d aborts", nCommitted, nAborted)
	}
	t.Logf("%d kills: %d committed, %d aborted, %d interrupted (%d of them completed as commits); none partially visible",
		kills, nCommitted, nAborted, nUnknown, nUnknownVisible)
}
