package objectwal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/provider"
	"github.com/nereusstream/nereus-go/wal"
)

var _ provider.Scanner = (*Provider)(nil)

// ScanRuns implements provider.Scanner: it reads every segment under the
// scan prefix (all writers' logs, not only this one's), verifies it, and
// reports each run it holds with the target a read would use. It reads whole
// segments and is meant for repair, not for serving.
//
// A segment that cannot be read — the listing or the read fails for it
// alone, or its frames fail their checksums — is skipped (logged, counted
// in nereus.objectwal.unreadable_segments, never deleted) and the scan goes
// on; once done, ScanRuns returns an error wrapping
// provider.ErrIncompleteScan that names them. A failure of the listing as
// a whole, or of ctx, ends the scan with that error.
func (p *Provider) ScanRuns(ctx context.Context, fn func(provider.Run, provider.Target) error) error {
	root := p.cfg.ScanPrefix
	if root == "" {
		root = path.Dir(strings.TrimSuffix(p.cfg.Prefix, "/")) + "/"
	}
	var skipped []string
	skip := func(key string, err error) {
		p.noteUnreadable(ctx, "scan", key, 0, err)
		skipped = append(skipped, key)
	}
	for info, err := range p.cfg.Store.List(ctx, root) {
		if err != nil {
			if info.Key == "" || ctx.Err() != nil {
				return err
			}
			if strings.Contains(info.Key, "/seg/") {
				skip(info.Key, err)
			}
			continue
		}
		if !strings.Contains(info.Key, "/seg/") {
			continue
		}
		data, _, err := p.cfg.Store.Get(ctx, info.Key)
		if errors.Is(err, objectstore.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			skip(info.Key, err)
			continue
		}
		records, spans, ok, err := wal.SegmentFrames(data)
		if err != nil {
			skip(info.Key, err)
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
	if len(skipped) > 0 {
		shown := skipped[:min(len(skipped), 10)]
		return fmt.Errorf("objectwal: %w: %d segments skipped (kept), e.g. %s", provider.ErrIncompleteScan, len(skipped), strings.Join(shown, ", "))
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
