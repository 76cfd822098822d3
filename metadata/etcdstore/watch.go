package etcdstore

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/internal/watchhub"
)

// Watch implements metadata.Store. It reads the current revision first and
// watches from the next one, so every change committed after Watch returns
// is delivered. etcd's own client buffers without bound; the bridge moves
// events into a bounded buffer, so a slow consumer gets the contract's
// resync event instead of unbounded memory. A watch that etcd cancels
// (e.g. compaction) is restarted from the current revision after a resync
// event.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan metadata.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, metadata.ErrClosed
	}
	// Bounded even when ctx is not: etcd's client waits for a connection, so
	// a Watch opened while etcd is down would otherwise never return (a
	// /metrics scrape that builds a watcher hung for the whole outage).
	rctx, cancel := context.WithTimeout(ctx, watchStartTimeout)
	rev, err := s.currentRevision(rctx)
	cancel()
	if err != nil {
		return nil, err
	}
	hub := watchhub.New(s.opts.WatchBuffer)
	out, err := hub.Watch(ctx, "")
	if err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, wcancel)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer hub.Close()
		defer stop()
		defer wcancel()
		s.bridge(wctx, hub, prefix, rev+1)
	}()
	return out, nil
}

// watchStartTimeout bounds the revision read that opens a Watch.
const watchStartTimeout = 5 * time.Second

func (s *Store) currentRevision(ctx context.Context) (int64, error) {
	resp, err := s.client.Get(ctx, s.key("\x00"), clientv3.WithCountOnly())
	if err != nil {
		return 0, s.mapErr(err)
	}
	return resp.Header.Revision, nil
}

func (s *Store) bridge(ctx context.Context, hub *watchhub.Hub, prefix string, next int64) {
	for {
		wch := s.client.Watch(clientv3.WithRequireLeader(ctx), s.key(prefix), clientv3.WithPrefix(), clientv3.WithRev(next))
		for resp := range wch {
			if err := resp.Err(); err != nil || resp.Canceled {
				break
			}
			evs := make([]metadata.Event, 0, len(resp.Events))
			for _, ev := range resp.Events {
				k := string(ev.Kv.Key[len(s.opts.Prefix):])
				switch ev.Type {
				case mvccpb.PUT:
					evs = append(evs, metadata.Event{Kind: metadata.EventPut, Key: k, Version: metadata.Version(ev.Kv.ModRevision)})
				case mvccpb.DELETE:
					evs = append(evs, metadata.Event{Kind: metadata.EventDelete, Key: k})
				}
				next = ev.Kv.ModRevision + 1
			}
			hub.Publish(evs...)
		}
		if ctx.Err() != nil {
			return
		}
		// The watch ended without us asking: events may be missing. Tell
		// the consumer to re-read, then continue from now.
		hub.Publish(metadata.Event{})
		rev, err := s.currentRevision(ctx)
		if err != nil {
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue // retry from where we were
		}
		next = rev + 1
	}
}
