package compat

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
)

// kcatPath finds kcat (Debian's kcat 1.7.1 with librdkafka 2.0.2, installed by
// scripts/install-kafka-test-deps.sh). Its feature detection needs exact old
// versions in our advertised ranges (Produce 7, Fetch 10 for zstd;
// FindCoordinator 0 for groups), which is what this test guards.
func kcatPath(t *testing.T) string {
	p, err := exec.LookPath("kcat")
	if err != nil {
		p, err = exec.LookPath("kafkacat")
	}
	requireExternal(t, err == nil, "kcat (apt-get install kcat; scripts/install-kafka-test-deps.sh)")
	return p
}

func runKcat(t *testing.T, ctx context.Context, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\nstderr: %s", args, err, errb.String())
	}
	if s := errb.String(); strings.Contains(s, "not compressing") || strings.Contains(s, "does not support") {
		t.Fatalf("kcat %v reported a feature problem: %s", args, s)
	}
	return out.String()
}

// TestKcatZstdProduceConsume: kcat produces zstd-compressed records, consumes
// them back directly and through a balanced consumer group (-G), and
// the broker stored zstd batches (librdkafka 2.0.2 silently sends
// uncompressed batches when its feature detection fails).
func TestKcatZstdProduceConsume(t *testing.T) {
	kcatPath(t)
	topic := uniqueTopic("kcat")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTopic(t, kadm.NewClient(newKgo(t)), topic, 3, nil)
	const n = 200
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "k%d:value-%d\n", i%7, i)
	}
	runKcat(t, ctx, in.String(), "-b", broker.Addr, "-P", "-t", topic, "-K:", "-z", "zstd",
		"-X", "linger.ms=5", "-X", "topic.partitioner=murmur2_random")

	out := runKcat(t, ctx, "", "-b", broker.Addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k:%s\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Fatalf("kcat consumed %d lines, want %d:\n%s", len(lines), n, out)
	}
	sort.Strings(lines)
	want := strings.Split(strings.TrimSpace(in.String()), "\n")
	sort.Strings(want)
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("line %d: got %q want %q", i, lines[i], want[i])
		}
	}

	group := uniqueTopic("kcat-group")
	out = runKcat(t, ctx, "", "-b", broker.Addr, "-G", group, "-c", fmt.Sprint(n), "-f", "%s\n",
		"-X", "auto.offset.reset=earliest", topic)
	if got := len(strings.Split(strings.TrimSpace(out), "\n")); got != n {
		t.Fatalf("kcat -G consumed %d records, want %d", got, n)
	}

	// The stored batches are zstd: librdkafka's feature detection worked.
	// A raw Fetch (v4+, no decompression by the client) returns the stored
	// batches byte for byte; their attributes carry the codec.
	cl := newKgo(t)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 4
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 64 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.PartitionMaxBytes = 64 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	batches := 0
	for _, tr := range resp.Topics {
		for _, pr := range tr.Partitions {
			if pr.ErrorCode != 0 {
				t.Fatalf("raw fetch: error code %d", pr.ErrorCode)
			}
			for b := pr.RecordBatches; len(b) > 0; {
				h, err := kbatch.ParseHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				if h.Codec() != kbatch.CodecZstd {
					t.Fatalf("stored batch has codec %d, want zstd (4)", h.Codec())
				}
				batches++
				size := 12 + int(int32(b[8])<<24|int32(b[9])<<16|int32(b[10])<<8|int32(b[11]))
				if size > len(b) {
					break
				}
				b = b[size:]
			}
		}
	}
	if batches == 0 {
		t.Fatal("raw fetch returned no batches")
	}
	t.Logf("kcat: %d records in %d zstd batches, consumed directly and via -G", n, batches)
}
