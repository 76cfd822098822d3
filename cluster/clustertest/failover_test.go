package clustertest

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

// TestFailoverFigures measures failover with default settings over many
// kills: 3 nodes, a franz-go producer on 12 partitions; each round
// SIGKILLs one node, measures SIGKILL → first acknowledged produce on each
// partition it led, restarts it on its data dir and waits for it to
// rejoin. It is a measurement, not a CI test: it runs only with
// NEREUS_FAILOVER_KILLS=N (N ≥ 1) and reports percentiles, asserting only
// that every partition fails over and every acknowledged record is kept.
//
//	NEREUS_FAILOVER_KILLS=10 go test -run TestFailoverFigures -v ./cluster/clustertest
//
// The producer runs with franz-go's defaults; NEREUS_FAILOVER_METADATA_MIN_AGE
// (a Go duration) lowers its MetadataMinAge (default 5s), the client-side
// floor on how soon it re-reads metadata after a broker failed.
func TestFailoverFigures(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv("NEREUS_FAILOVER_KILLS"))
	if kills < 1 {
		t.Skip("set NEREUS_FAILOVER_KILLS=N to measure failover over N kills") // skip-ok: a measurement, not a CI test
	}
	e := newEnv(t)
	n := []*testserver.Server{e.start(), e.start(), e.start()}
	waitBrokers(t, n[0], 3)
	seeds := []string{n[0].KafkaAddr(), n[1].KafkaAddr(), n[2].KafkaAddr()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(kills)*2*time.Minute+2*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	const topic = "failover"
	if _, err := adm.CreateTopic(ctx, 12, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(2 * time.Minute), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}
	if v := os.Getenv("NEREUS_FAILOVER_METADATA_MIN_AGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NEREUS_FAILOVER_METADATA_MIN_AGE: %v", err)
		}
		opts = append(opts, kgo.MetadataMinAge(d))
	}
	prod, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	var acks []ack
	failed := 0
	stop := make(chan struct{})
	pad := make([]byte, 1000)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sem := make(chan struct{}, 64)
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				for i := 0; i < cap(sem); i++ {
					sem <- struct{}{}
				}
				return
			case sem <- struct{}{}:
			}
			// 1 KiB values, so the streams a takeover inherits hold
			// megabytes and the bytes it reads can be compared to them.
			val := append([]byte(strconv.Itoa(seq)+":"), pad...)
			prod.Produce(ctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
				defer func() { <-sem }()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					return
				}
				acks = append(acks, ack{partition: r.Partition, offset: r.Offset, at: time.Now()})
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(10 * time.Second) // let the streams grow before the first kill
	var all []time.Duration
	for round := 0; round < kills; round++ {
		victim := n[round%3]
		time.Sleep(2 * time.Second)
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		id := brokerID(t, victim)
		var led []int32
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader == id {
				led = append(led, p.Partition)
			}
		}
		var survivors []*testserver.Server
		for _, o := range n {
			if o != victim {
				survivors = append(survivors, o)
			}
		}
		// Baseline: what the survivors read in a window of the same kind
		// without a kill (each node polls its own WAL manifest).
		baseStart := objectBytesRead(t, survivors)
		baseAt := time.Now()
		time.Sleep(4 * time.Second)
		readBefore := objectBytesRead(t, survivors)
		baseline := (readBefore - baseStart) / time.Since(baseAt).Seconds()
		killAt := time.Now()
		victim.Kill()
		first := map[int32]time.Time{}
		deadline := time.Now().Add(60 * time.Second)
		for len(first) < len(led) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: only %d of %d partitions failed over", round, len(first), len(led))
			}
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			for _, a := range acks {
				if !a.at.After(killAt) {
					continue
				}
				for _, p := range led {
					if a.partition == p {
						if f, ok := first[p]; !ok || a.at.Before(f) {
							first[p] = a.at
						}
					}
				}
			}
			mu.Unlock()
		}
		var roundMoves []time.Duration
		for _, at := range first {
			roundMoves = append(roundMoves, at.Sub(killAt))
		}
		sort.Slice(roundMoves, func(i, j int) bool { return roundMoves[i] < roundMoves[j] })
		readDuring := objectBytesRead(t, survivors) - readBefore
		window := time.Since(killAt).Seconds()
		var movedBytes int64
		for _, p := range led {
			ictx, icancel := context.WithTimeout(ctx, 10*time.Second)
			info, err := survivors[0].Client().DescribeStream(ictx, "kafka/"+topic+"/"+strconv.Itoa(int(p)))
			icancel()
			if err == nil {
				movedBytes += info.CommittedBytes
			}
		}
		t.Logf("round %d: killed broker %d, %d partitions: %v; survivors read %d object-store bytes in the %.1fs takeover window vs %d in an equal window without a kill (the moved streams hold %d committed bytes)",
			round, id, len(led), roundMoves, int64(readDuring), window, int64(baseline*window), movedBytes)
		all = append(all, roundMoves...)
		victim.Restart()
		waitBrokers(t, n[(round+1)%3], 3)
	}
	close(stop)
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	t.Logf("FIGURE failover over %d kills, %d partition moves: p50 %v, p99 %v, max %v", kills, len(all),
		pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond))
	if failed > 0 {
		t.Errorf("%d produces failed after all retries", failed)
	}
}

// objectBytesRead sums the object-store bytes the nodes have read
// (nereus_objectstore_read_bytes* on their /metrics).
func objectBytesRead(t *testing.T, nodes []*testserver.Server) float64 {
	t.Helper()
	var sum float64
	hc := &http.Client{Timeout: 30 * time.Second}
	for _, s := range nodes {
		resp, err := hc.Get(s.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "nereus_objectstore_read_bytes") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sum += v
			}
		}
		resp.Body.Close()
	}
	return sum
}
