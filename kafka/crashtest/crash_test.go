// Package crashtest kills and restarts a real Nereus server under an
// idempotent Kafka producer and checks that a consumer then reads every
// acknowledged record exactly once, in order, per partition.
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
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

	const partitions = 4
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
	var mu sync.Mutex
	acked := make([][]int, partitions)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := &kgo.Record{Partition: int32(p), Value: []byte(strconv.Itoa(i))}
				if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Logf("partition %d record %d not acknowledged: %v", p, i, err)
					continue
				}
				mu.Lock()
				acked[p] = append(acked[p], i)
				mu.Unlock()
			}
		}(p)
	}
	for round := 0; round < 3; round++ {
		time.Sleep(2 * time.Second)
		t.Logf("round %d: SIGKILL and restart", round)
		kill()
		time.Sleep(500 * time.Millisecond)
		start()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	prod.Close()

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
	got := make([][]int, partitions)
	next := make([]int64, partitions)
	done := func() bool {
		for p := 0; p < partitions; p++ {
			if e, ok := ends.Lookup(topic, int32(p)); ok && next[p] < e.Offset {
				return false
			}
		}
		return true
	}
	want := 0
	for p := range acked {
		want += len(acked[p])
	}
	for !done() {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume did not reach the end offsets: at %v", next)
		}
		fs.EachRecord(func(r *kgo.Record) {
			v, _ := strconv.Atoi(string(r.Value))
			got[r.Partition] = append(got[r.Partition], v)
			next[r.Partition] = r.Offset + 1
		})
	}
	for p := 0; p < partitions; p++ {
		// In order, each value at most once (idempotence), and every
		// acknowledged value present. Unacknowledged values may appear.
		idx := map[int]bool{}
		for i, v := range got[p] {
			if idx[v] {
				t.Fatalf("partition %d: value %d read twice", p, v)
			}
			idx[v] = true
			if i > 0 && v <= got[p][i-1] {
				t.Fatalf("partition %d: %d after %d (reordered)", p, v, got[p][i-1])
			}
		}
		var missing []string
		for _, v := range acked[p] {
			if !idx[v] {
				missing = append(missing, strconv.Itoa(v))
			}
		}
		if len(missing) > 0 {
			t.Fatalf("partition %d: acknowledged records lost: %s", p, strings.Join(missing, ","))
		}
	}
	t.Logf("%d acknowledged records across %d partitions survived 3 SIGKILL restarts exactly once, in order", want, partitions)
}
