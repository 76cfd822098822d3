package objectwal

import (
	"context"
	"encoding/binary"
	"fmt"
	"path"
	"strings"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/stream/provider"
	"github.com/nereusstream/nereus-go/wal"
)

var _ provider.Scanner = (*Provider)(nil)

// ScanRuns implements provider.Scanner: it reads every segment under the
// scan prefix (all writers' logs, not only this one's), verifies it, and
// reports each run it holds with the target a read would use. It reads whole
// segments and is meant for repair, not for serving.
func (p *Provider) ScanRuns(ctx context.Context, fn func(provider.Run, provider.Target) error) error {
	root := p.cfg.ScanPrefix
	if root == "" {
		root = path.Dir(strings.TrimSuffix(p.cfg.Prefix, "/")) + "/"
	}
	for info, err := range p.cfg.Store.List(ctx, root) {
		if err != nil {
			return err
		}
		if !strings.Contains(info.Key, "/seg/") {
			continue
		}
		data, _, err := p.cfg.Store.Get(ctx, info.Key)
		if err != nil {
			return fmt.Errorf("objectwal: scanning %s: %w", info.Key, err)
		}
		records, spans, ok, err := wal.SegmentFrames(data)
		if err != nil {
			p.log.Warn("skipping corrupt segment while scanning", "segment", info.Key, "err", err)
			continue
		}
		if !ok {
			continue
		}
		for i := 0; i < len(records); {
			run, ok := parseRunHeader(records[i])
			if !ok {
				i++ // not a run header: not ours, skip
				continue
			}
			j := i + 1
			for j < len(records) {
				if _, hdr := parseRunHeader(records[j]); hdr {
					break
				}
				j++
			}
			off := run.Start
			entries := make([]provider.Entry, 0, j-i-1)
			valid := true
			for _, rec := range records[i+1 : j] {
				n, k := binary.Uvarint(rec)
				ts, k2 := binary.Varint(rec[max(k, 0):])
				if k <= 0 || k2 <= 0 || n == 0 {
					valid = false
					break
				}
				entries = append(entries, provider.Entry{RecordCount: uint32(n), Timestamp: ts, Payload: rec[k+k2:]})
				off += int64(n)
			}
			end := spans[j-1].Offset + spans[j-1].Length
			if valid && off == run.end {
				run.Entries = entries
				t := encodeTarget(wal.Placement{Location: info.Key, FirstIndex: i, Offset: spans[i].Offset, Length: end - spans[i].Offset}, len(entries))
				if err := fn(run.Run, t); err != nil {
					return err
				}
			}
			i = j
		}
	}
	return nil
}

type scannedRun struct {
	provider.Run
	end int64
}

func parseRunHeader(rec []byte) (scannedRun, bool) {
	if len(rec) < len(runHeaderMagic) || string(rec[:len(runHeaderMagic)]) != runHeaderMagic {
		return scannedRun{}, false
	}
	r := bin.Reader{B: rec[len(runHeaderMagic):]}
	run := scannedRun{Run: provider.Run{Stream: r.U64(), Epoch: r.Uvarint(), Token: r.U64(), Commit: r.Uvarint(), Start: r.Varint()}}
	run.end = r.Varint()
	if r.Done() != nil || run.end <= run.Start {
		return scannedRun{}, false
	}
	return run, true
}
