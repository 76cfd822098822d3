package bkwal

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// Recover implements provider.Provider: every ledger an earlier incarnation
// with this writer identity left unsettled is recovery-opened (fencing any
// writer still appending to it), read back, and each complete run in it is
// settled with the core; then the ledger is kept (SETTLED) if a run was
// committed and deleted if none was.
func (p *Provider) Recover(ctx context.Context, settle func(context.Context, provider.Intent) (bool, error)) error {
	prefix := p.writerPrefix(p.cfg.WriterID)
	recs, err := p.cfg.Meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return fmt.Errorf("nereus/bkwal: listing ledgers of writer %q: %w", p.cfg.WriterID, err)
	}
	settledRuns, ledgers := 0, 0
	for _, kv := range recs {
		rec, err := decodeLedgerRecord(kv.Value)
		if err != nil {
			return fmt.Errorf("nereus/bkwal: ledger record %s: %w", kv.Key, err)
		}
		if rec.incarnation == p.incarnation || rec.state == stateSettled {
			continue
		}
		n, err := p.recoverLedger(ctx, kv, rec, settle)
		if err != nil {
			return err
		}
		settledRuns += n
		ledgers++
	}
	if ledgers > 0 {
		p.log.Info("bkwal: took over earlier incarnations' ledgers", "writer", p.cfg.WriterID, "ledgers", ledgers, "runs", settledRuns)
	}
	return nil
}

func (p *Provider) recoverLedger(ctx context.Context, kv metadata.Record, rec ledgerRecord,
	settle func(context.Context, provider.Intent) (bool, error)) (int, error) {
	info, err := p.cfg.Ledgers.ReadLedgerMetadata(ctx, rec.ledger)
	if errors.Is(err, bookkeeper.ErrNoSuchLedger) {
		// Never created (an ALLOCATED record) or already deleted.
		return 0, p.deleteSettled(ctx, kv.Key)
	}
	if err != nil {
		return 0, fmt.Errorf("nereus/bkwal: ledger %d: %w", rec.ledger, err)
	}
	tags := ledgerTags(rec.stream, rec.epoch, rec.token)
	md := info.Metadata
	if string(md.Custom[namespace.OwnerKey]) != p.cfg.Ledgers.Reservation().DeploymentID ||
		string(md.Custom[StreamKey]) != string(tags[StreamKey]) || string(md.Custom[SessionKey]) != string(tags[SessionKey]) {
		// The ID holds a ledger that is not the one recorded (a collision
		// after an unknown create): not ours to recover.
		p.log.Warn("bkwal: recorded ledger ID holds a foreign ledger; dropping the record", "ledger", rec.ledger)
		return 0, p.deleteSettled(ctx, kv.Key)
	}
	open := p.cfg.Ledgers.RecoverLedger
	if PlantedBug == BugRecoverWithoutFence {
		// Planted bug: the ledger is opened without recovery — no fence,
		// no tail recovery, read to the piggybacked LAC only.
		open = p.cfg.Ledgers.OpenLedger
	}
	r, err := open(ctx, rec.ledger, bookkeeper.OpenOptions{Password: p.cfg.Password})
	if err != nil {
		return 0, fmt.Errorf("nereus/bkwal: recovering ledger %d: %w", rec.ledger, err)
	}
	intents, err := p.scanRuns(ctx, r, rec)
	if err != nil {
		return 0, err
	}
	committed := false
	committedEnd := int64(0)
	for _, in := range intents {
		c, err := settle(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("nereus/bkwal: settling a run in ledger %d: %w", rec.ledger, err)
		}
		if c {
			committedEnd = max(committedEnd, in.Run.End())
		}
		committed = committed || c
	}
	info = r.Info()
	if committed {
		next := rec
		next.state, next.lastEntry, next.committed, next.committedEnd = stateSettled, info.Metadata.LastEntryID, true, committedEnd
		if _, err := p.putSettled(ctx, kv.Key, next.encode(), kv.Version); err != nil {
			return 0, fmt.Errorf("nereus/bkwal: ledger record %d: %w", rec.ledger, err)
		}
		return len(intents), nil
	}
	if err := p.deleteLedger(ctx, rec.ledger, info.Version); err != nil {
		// Garbage stays until the next Recover; nothing depends on it.
		p.log.Warn("bkwal: deleting an uncommitted ledger failed", "ledger", rec.ledger, "err", err)
	}
	return len(intents), nil
}

// scanRuns reads a closed ledger and returns its complete runs as intents.
// A run missing entries was never reported durable, so never committed.
func (p *Provider) scanRuns(ctx context.Context, r LedgerReader, rec ledgerRecord) ([]provider.Intent, error) {
	last := r.LastAddConfirmed()
	var out []provider.Intent
	var cur *provider.Intent
	var curFirst int64
	var crc uint32
	var flags uint8
	for e := int64(0); e <= last; e += 64 {
		ents, err := r.Read(ctx, e, min(e+63, last))
		if err != nil {
			return nil, fmt.Errorf("nereus/bkwal: reading ledger %d: %w", rec.ledger, err)
		}
		for _, ent := range ents {
			h, _, err := parseEntryFrame(ent.Payload)
			if err != nil || h.stream != rec.stream {
				return nil, fmt.Errorf("nereus/bkwal: ledger %d entry %d is not this stream's: %v", rec.ledger, ent.EntryID, err)
			}
			if h.index == 0 {
				cur = &provider.Intent{Run: provider.Run{Stream: h.stream, Epoch: h.epoch, Token: h.token, Commit: h.commit, Start: h.offset}}
				curFirst, crc, flags = ent.EntryID, 0, flagUnitRecords
			} else if cur == nil || h.commit != cur.Run.Commit || h.epoch != cur.Run.Epoch || h.token != cur.Run.Token ||
				h.index != uint64(len(cur.Run.Entries)) {
				cur = nil // a run with a gap (its failed tail was abandoned)
				continue
			}
			cur.Run.Entries = append(cur.Run.Entries, provider.Entry{RecordCount: h.recordCount, Timestamp: h.timestamp})
			crc = crc32Update(crc, ent.Payload)
			if h.recordCount != 1 {
				flags = 0
			}
			if h.index == h.count-1 {
				cur.Target = target{alias: p.cfg.Alias, ledger: rec.ledger, first: curFirst, count: int64(h.count), flags: flags,
					stream: h.stream, epoch: h.epoch, token: h.token, commit: h.commit, rangeCRC: crc}.encode()
				out = append(out, *cur)
				cur = nil
			}
		}
	}
	return out, nil
}

// Ledgers lists this writer's ledger records (for tests and operators):
// ledger ID -> state.
func (p *Provider) Ledgers(ctx context.Context) (map[int64]string, error) {
	prefix := p.writerPrefix(p.cfg.WriterID)
	recs, err := p.cfg.Meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for _, kv := range recs {
		rec, err := decodeLedgerRecord(kv.Value)
		if err != nil {
			return nil, err
		}
		out[rec.ledger] = strings.ToLower(rec.state.String())
	}
	return out, nil
}
