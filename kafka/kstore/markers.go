package kstore

// Marker requests: how a transaction coordinator gets a commit/abort marker
// into a partition another broker leads. Only the partition's leader may
// append to its stream, so the coordinator posts a request record
//
//	kafka/markers/<stream id>/<producer id, 20 digits>
//
// and waits until it is gone; the leader watches the prefix (and rescans it
// every second and after every cluster change, for requests posted while
// it did not lead yet), appends the marker through AppendMarker and deletes
// the request with a version-CAS, so it never deletes a newer one. A marker
// appended twice is harmless (the second closes nothing), so a leader that
// dies between append and delete is simply repeated by the next one.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

const keyMarkers = "kafka/markers/"

type markerRequest struct {
	V          int       `json:"v"` // 1
	Topic      string    `json:"topic"`
	Partition  int32     `json:"partition"`
	StreamID   stream.ID `json:"stream"`
	ProducerID int64     `json:"pid"`
	Epoch      int16     `json:"epoch"`
	Commit     bool      `json:"commit"`
	CoordEpoch int32     `json:"coordEpoch"`
	Nonce      uint64    `json:"nonce"`
}

func markerKey(id stream.ID, pid int64) string {
	return fmt.Sprintf("%s%s/%020d", keyMarkers, id, pid)
}

// RequestMarker asks the partition's leader to append a marker and waits
// until it did (the request record is gone) or ctx ends.
func (s *Store) RequestMarker(ctx context.Context, p *Partition, pid int64, epoch int16, commit bool, coordEpoch int32, nonce uint64) error {
	req := markerRequest{V: 1, Topic: p.Topic, Partition: p.Index, StreamID: p.StreamID, ProducerID: pid,
		Epoch: epoch, Commit: commit, CoordEpoch: coordEpoch, Nonce: nonce}
	val, _ := json.Marshal(req)
	key := markerKey(p.StreamID, pid)
	if _, err := s.meta.Put(ctx, key, val, metadata.AnyVersion); err != nil && metadata.Classify(err) != metadata.Unknown {
		return err
	} // unknown: the poll below settles it (gone or still ours)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		rec, err := s.meta.Get(ctx, key)
		if errors.Is(err, metadata.ErrKeyNotFound) {
			return nil
		}
		if err == nil {
			var cur markerRequest
			if json.Unmarshal(rec.Value, &cur) == nil && cur.Nonce != nonce {
				return nil // ours was served and another posted since
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka/kstore: partition %s/%d leader did not write the marker: %w", p.Topic, p.Index, ctx.Err())
		case <-t.C:
		}
	}
}

// serveMarkers runs on every broker with a cluster: it appends the markers
// requested for partitions this broker leads.
func (s *Store) serveMarkers(ctx context.Context) {
	defer close(s.markersDone)
	ch, err := s.meta.Watch(ctx, keyMarkers)
	if err != nil {
		s.log.Warn("kafka/kstore: cannot watch marker requests; rescanning only", "err", err)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.serveMarkerScan(ctx)
		var changes <-chan struct{}
		if s.cfg.Cluster != nil {
			changes = s.cfg.Cluster.Changes()
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				ch = nil
			}
		case <-tick.C:
		case <-changes:
		}
	}
}

func (s *Store) serveMarkerScan(ctx context.Context) {
	recs, err := s.meta.RangeScan(ctx, keyMarkers, prefixEnd(keyMarkers), 0)
	if err != nil {
		return
	}
	for _, r := range recs {
		var req markerRequest
		if err := json.Unmarshal(r.Value, &req); err != nil || req.V != 1 {
			continue
		}
		if s.cfg.Cluster == nil || !s.cfg.Cluster.OwnsStream(StreamName(req.Topic, req.Partition)) {
			continue
		}
		_, p, err := s.Partition(ctx, req.Topic, req.Partition)
		switch {
		case errors.Is(err, ErrUnknownTopic) || (err == nil && p.StreamID != req.StreamID):
			// The topic is gone (or recreated): nothing to mark.
			_ = s.meta.Delete(ctx, r.Key, r.Version)
			continue
		case err != nil:
			continue
		}
		if _, err := s.AppendMarker(ctx, p, req.ProducerID, req.Epoch, req.Commit, req.CoordEpoch); err != nil {
			s.log.Warn("kafka/kstore: requested marker not written; will retry", "partition", StreamName(req.Topic, req.Partition), "err", err)
			continue
		}
		if err := s.meta.Delete(ctx, r.Key, r.Version); err != nil && !strings.Contains(err.Error(), "not found") &&
			metadata.Classify(err) != metadata.Conflict {
			s.log.Warn("kafka/kstore: marker request not deleted", "key", r.Key, "err", err)
		}
	}
}
