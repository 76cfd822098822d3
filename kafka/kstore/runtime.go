package kstore

import (
	"context"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/stream"
)

// Cluster is what the store needs of this broker's cluster membership:
// who leads a partition (owns its stream) and this broker's append
// sessions on the streams it leads. *cluster.Node implements it; the
// deterministic simulation (stream/sim_kstore_test.go) supplies a
// placement on its own clock. Only what kstore calls is declared here, so
// a fake cannot silently diverge from a method kstore never uses.
type Cluster interface {
	// Writer returns this broker's append session on the stream (id,
	// named name), taking it if this broker owns the stream. Not owning
	// it is a *cluster.NotOwnerError (matching cluster.ErrNotOwner);
	// cluster.ErrHandoffPending, stream.ErrSessionBusy and
	// stream.ErrFenced mean ownership is still moving here.
	Writer(ctx context.Context, id stream.ID, name string) (stream.Session, error)
	// Lost forgets sess after an append under it failed as fenced, so
	// the next Writer call takes a new session (a new leader epoch).
	Lost(sess stream.Session)
	// Release gives up this broker's session on the stream (topic
	// deletion); a no-op when none is held.
	Release(ctx context.Context, id stream.ID) error
	// OwnsStream reports whether this broker owns the stream named name
	// in its current view.
	OwnsStream(name string) bool
	// OwnerOf is the broker owning the stream named name in this
	// broker's view; false when no broker is active.
	OwnerOf(name string) (cluster.Broker, bool)
	// Changes is closed at the next change of the view (the marker
	// service rescans then). A nil channel never fires.
	Changes() <-chan struct{}
}

var _ Cluster = (*cluster.Node)(nil)

// Runtime is what the store takes from the outside world besides its
// stores and Config.Now: timers and background goroutines. Nil
// (Config.Runtime) is time.AfterFunc and the go statement, behaviour
// unchanged. A deterministic simulator supplies its own, so that nothing
// the store starts runs outside its event queue:
//   - Go runs the topic-record watch (its loop ends when the metadata
//     store closes the watch channel; a simulated store returns a closed
//     one);
//   - AfterFunc schedules the transaction-index checkpoints;
//   - with a supplied runtime the marker service (serveMarkers,
//     markers.go) does not run: its loop blocks on watches, a ticker and
//     the commit of every marker it writes, and a cooperative runtime has
//     nowhere to park it. Such a store writes markers only when asked
//     directly (IssueMarker / AppendMarker on the partition's leader);
//     RequestMarker from another broker would wait for ever.
type Runtime interface {
	// AfterFunc runs f once d has passed; stop cancels it if it has not
	// run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	// Go runs f asynchronously.
	Go(f func())
}

type realRuntime struct{}

func (realRuntime) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
func (realRuntime) Go(f func())                                     { go f() }
