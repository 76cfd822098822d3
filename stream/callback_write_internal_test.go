package stream

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// gatedStore holds every segment PUT of the Object WAL until open is
// closed, so the test decides when the first write becomes durable.
type gatedStore struct {
	objectstore.ObjectStore
	open chan struct{}
}

func (s *gatedStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if strings.Contains(key, "/seg/") {
		select {
		case <-s.open:
		case <-ctx.Done():
			return objectstore.UpdateVersion{}, ctx.Err()
		}
	}
	return s.ObjectStore.Put(ctx, key, data, opts)
}

// TestProviderCallbackNeverWritesOnTheWaiter: the Object WAL resolves
// durable writes on one goroutine (its waiter), which calls the core's
// completion callback; that goroutine may find itself the stream's executor
// with the WAL write of an append admitted meanwhile. Calling
// provider.Write there blocked on the Object WAL's write queue when it was
// full — and the waiter is the only goroutine that drains it: every write
// of the process hung (found in session 13). The interleaving is forced
// through the real core and the real Object WAL with a one-slot queue:
//
//  1. a1 on stream A is written (the waiter takes it off the queue and
//     waits for its segment, whose PUT the store holds);
//  2. the PUT goes through; the waiter's callback for a1 becomes A's
//     executor, and before its first batch (testHookExecuting) a2 is
//     admitted on A (its write is left to the executor) and b1 on stream B
//     fills the queue;
//  3. the executor's next batch carries a2's write.
//
// Every append must resolve. With the hand-off in flushFromProviderLocked
// switched off (the callback calling flushLocked), a2 and b1 never do.
// The test then fails after a timeout and leaves the core and the provider
// open (closing them would wait for the stuck goroutine): it never hangs
// the test binary.
func TestProviderCallbackNeverWritesOnTheWaiter(t *testing.T) {
	ctx := context.Background()
	objs := &gatedStore{ObjectStore: objmem.New(), open: make(chan struct{})}
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/x", WriteQueue: 1,
		GroupCommitMinWait: -1, GroupCommitMinBytes: -1, TruncateInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, Config{Metadata: memstore.New(), ObjectWAL: w, WriterID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	hung := false
	defer func() {
		if !hung {
			c.Close()
		}
	}()
	infoA, _ := c.Create(ctx, "a", CreateOptions{})
	infoB, _ := c.Create(ctx, "b", CreateOptions{})
	sa, err := c.AcquireSession(ctx, infoA.ID, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.AcquireSession(ctx, infoB.ID, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}}}

	a1 := c.AppendAsync(sa, req) // returns once a1 is on the queue
	oa := c.owner(infoA.ID)
	var (
		once   sync.Once
		a2, b1 *AppendFuture
		fired  = make(chan struct{})
	)
	testHookExecuting = func(o *owner) {
		if o != oa {
			return
		}
		once.Do(func() {
			// On the waiter, inside a1's callback: A's executor is this
			// goroutine, so a2's write waits for it. Both appends come from
			// other goroutines, as from clients.
			done := make(chan struct{})
			go func() { a2 = c.AppendAsync(sa, req); close(done) }()
			<-done
			done = make(chan struct{})
			go func() { b1 = c.AppendAsync(sb, req); close(done) }() // B's own executor queues b1: the queue is full
			<-done
			close(fired)
		})
	}
	defer func() { testHookExecuting = nil }()
	close(objs.open)

	deadline := time.After(10 * time.Second)
	select {
	case <-fired:
	case <-deadline:
		t.Fatal("a1's callback never ran")
	}
	for name, f := range map[string]*AppendFuture{"a1": a1, "a2": a2, "b1": b1} {
		select {
		case <-f.Done():
			if _, err := f.Wait(ctx); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-deadline:
			hung = true
			t.Fatalf("%s never resolved: the Object WAL's waiter is blocked in provider.Write on its own full queue", name)
		}
	}
}
