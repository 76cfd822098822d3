// Package crashtest kills and restarts a real Nereus server while an
// idempotent Kafka producer has records in flight, and checks that a
// consumer then reads every acknowledged record exactly once, at the offset
// it was acknowledged at, in order, per partition (internal/testenv/acklog).
//
// By default it runs a real `nereus serve` through internal/testserver. To
// point it at another durable server it can start and SIGKILL, set:
//
//	NEREUS_KAFKA_SERVE_CMD   shell command that starts the server in the
//	                         foreground (e.g. "nereus serve --data-dir D
//	                         --kafka-addr 127.0.0.1:19092"); state must
//	                         survive a restart of the same command
//	NEREUS_KAFKA_SERVE_ADDR  the Kafka address that command listens on
package crashtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/acklog"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

type server struct {
	t    *testing.T
	cmd  string
	addr string
	proc *exec.Cmd
}

func (s *server) start() {
	s.t.Helper()
	c := exec.Command("bash", "-c", "exec "+s.cmd)
	c.SysProcAttr = testenv.ChildProcAttr() // own process group; dies with the test binary
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	if err := c.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.proc = c
	deadline := time.Now().Add(60 * time.Second)
	for {
		if nc, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			s.kill()
			s.t.Fatalf("server did not listen on %s within 60s", s.addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill SIGKILLs the server's process group (the process we started).
func (s *server) kill() {
	if s.proc == nil {
		return
	}
	_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGKILL)
	_ = s.proc.Wait()
	s.proc = nil
}

// TestCrashRestartIdempotentProduce: one idempotent franz-go producer per
// partition produces without pause; the server is SIGKILLed as soon as each
// cycle made its minimum progress and a record is in flight, and restarted
// while the producers keep retrying. Every acknowledged (partition, offset,
// value) must then be read back exactly there, every value at most once,
// and each partition's values in production order.
func TestCrashRestartIdempotentProduce(t *testing.T) {
	cmd, addr := os.Getenv("NEREUS_KAFKA_SERVE_CMD"), os.Getenv("NEREUS_KAFKA_SERVE_ADDR")
	var kill, start func()
	if cmd != "" && addr != "" {
		srv := &server{t: t, cmd: cmd, addr: addr}
		srv.start()
		defer srv.kill()
		kill, start = srv.kill, srv.start
	} else {
		// A real `nereus serve` on loopback; restarts keep its data dir and
		// ports, so clients reconnect to the same address.
		ts := testserver.Start(t, testserver.Options{DisablePulsar: true})
		addr = ts.KafkaAddr()
		kill, start = ts.Kill, ts.Restart
	}

	const partitions, cycles = 4, 3
	topic := fmt.Sprintf("crash-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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

	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	acks := acklog.New()
	var fatalMu sync.Mutex
	var fatal error
	failed := func() error { fatalMu.Lock(); defer fatalMu.Unlock(); return fatal }
	pctx, stopProducers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			part := strconv.Itoa(p)
			for i := 0; pctx.Err() == nil; i++ {
				r := &kgo.Record{Partition: int32(p), Value: []byte(acklog.Payload("p"+part, i))}
				acks.Begin()
				err := prod.ProduceSync(pctx, r).FirstErr()
				acks.End()
				if err != nil {
					if pctx.Err() == nil {
						t.Logf("partition %d record %d not acknowledged: %v", p, i, err)
					}
					continue // bounded: the loop ends with pctx
				}
				if err := acks.Ack(part, acklog.Pos{Offset: r.Offset}, string(r.Value)); err != nil {
					fatalMu.Lock()
					fatal = err
					fatalMu.Unlock()
					return
				}
			}
		}(p)
	}
	for cycle := 0; cycle < cycles; cycle++ {
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
		err := acks.WaitKillPoint(wctx, acks.Count(), 40+20*cycle, failed)
		wcancel()
		if err != nil {
			stopProducers()
			wg.Wait()
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		t.Logf("cycle %d: SIGKILL with a produce in flight (%d acknowledged so far), then restart", cycle, acks.Count())
		kill()
		start()
	}
	// The producers must get going again after the last restart.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	err = acks.WaitKillPoint(wctx, acks.Count(), 40, failed)
	wcancel()
	stopProducers()
	wg.Wait()
	prod.Close()
	if err == nil {
		err = failed()
	}
	if err != nil {
		t.Fatalf("after the last restart: %v", err)
	}

	admCl, err = kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	admCl.Close()
	if err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := make([][]acklog.Entry, partitions)
	next := make([]int64, partitions)
	done := func() bool {
		for p := 0; p < partitions; p++ {
			if e, ok := ends.Lookup(topic, int32(p)); ok && next[p] < e.Offset {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume did not reach the end offsets: at %v", next)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], acklog.Entry{Pos: acklog.Pos{Offset: r.Offset}, Payload: string(r.Value)})
			next[r.Partition] = r.Offset + 1
		})
	}
	var bad []string
	for p := 0; p < partitions; p++ {
		if err := acks.Verify(strconv.Itoa(p), got[p]); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
	t.Logf("%d acknowledged records across %d partitions survived %d SIGKILLs mid-produce exactly once, in order", acks.Count(), partitions, cycles)
}
