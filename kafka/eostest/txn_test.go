package eostest

import (
	"strings"
	"testing"
	"time"
)

// TestJavaTransactionsUnderSIGKILL: the Java transactional producer and
// read_committed consumers (kafka/javaeos Txn.java) while the server is
// SIGKILLed and restarted five times: no transaction partially visible,
// every acknowledged commit whole, no acknowledged abort ever visible.
func TestJavaTransactionsUnderSIGKILL(t *testing.T) {
	topic := uniqueName("java-txn")
	stopKills := make(chan struct{})
	killed := make(chan int, 1)
	go func() {
		n := 0
		defer func() { killed <- n }()
		time.Sleep(4 * time.Second) // let the producer get going
		for n < 5 {
			select {
			case <-stopKills:
				return
			case <-time.After(2 * time.Second):
			}
			srv.Kill()
			time.Sleep(300 * time.Millisecond)
			srv.Restart()
			n++
		}
	}()
	out := javaRun(t, 5*time.Minute, nil, "Txn", srv.KafkaAddr(), topic, "22")
	close(stopKills)
	n := <-killed
	if n < 5 {
		t.Fatalf("only %d kills happened while the producer ran", n)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "txn:") {
			t.Logf("%d SIGKILLs; %s", n, l)
		}
	}
}
