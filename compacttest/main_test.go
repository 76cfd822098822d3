// Package compacttest runs Kafka and Pulsar clients against one real
// `nereus serve` on compacted topics: Kafka topics with
// cleanup.policy=compact (keyed records, tombstones and transactions are
// produced, the server's compaction passes run — the retention pass runs
// every 200 ms here — and a fresh consumer from offset 0 must see the last
// record per key at its original offset) and Pulsar topics compacted by
// the admin REST API and read with readCompacted.
package compacttest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	s, err := testserver.Launch(testserver.Options{Args: []string{
		"--retention-interval", "200ms", "--gc-interval", "500ms", "--gc-grace", "1s",
		"--generation-max-age", "1s"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start nereus serve:", err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	s.Close()
	os.Exit(code)
}

var seq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
}
