package bkwal

import (
	"context"
	"fmt"
	"strings"

	"github.com/nereusstream/nereus-go/stream/provider"
)

var _ provider.Adopter = (*Provider)(nil)

// Adoption of a dead writer's ledgers (provider.Adopter).
//
// A writer's ledgers are recorded under its identity. Adopt opens a
// provider with that identity (a new incarnation, as the writer's own
// restart would): its Recover recovery-opens every ledger the writer left
// unsettled — fencing the writer at the bookies — settles the complete
// runs with the core (which fences the sessions that could still commit
// them), and keeps or deletes each ledger; its Reclaim deletes the settled
// ledgers with the usual proof (the core's judge, the grace period, the
// namespace delete conditional on the ledger metadata's version). It never
// takes a run.

// Writers implements provider.Adopter: the writer identities with ledger
// records (one small range read per writer).
func (p *Provider) Writers(ctx context.Context) ([]string, error) {
	root := p.prefix() + "/w/"
	var out []string
	from := root
	for i := 0; i < 1<<16; i++ {
		recs, err := p.cfg.Meta.RangeScan(ctx, from, root+"\xff", 1)
		if err != nil {
			return nil, fmt.Errorf("nereus/bkwal: listing writers: %w", err)
		}
		if len(recs) == 0 {
			return out, nil
		}
		w, _, ok := strings.Cut(strings.TrimPrefix(recs[0].Key, root), "/")
		if !ok || w == "" {
			return out, fmt.Errorf("nereus/bkwal: unexpected ledger record key %q", recs[0].Key)
		}
		out = append(out, w)
		from = root + w + "0" // '0' sorts right after '/': past every key of w
	}
	return out, fmt.Errorf("nereus/bkwal: too many writers")
}

// Adopt implements provider.Adopter.
func (p *Provider) Adopt(ctx context.Context, writer string) (provider.Adopted, error) {
	if writer == "" || strings.Contains(writer, "/") {
		return nil, fmt.Errorf("nereus/bkwal: adopt: bad writer %q", writer)
	}
	if writer == p.cfg.WriterID {
		return nil, fmt.Errorf("nereus/bkwal: adopt: %q is this process's own identity", writer)
	}
	cfg := p.cfg
	cfg.WriterID = writer
	cfg.Logger = p.log.With("adopted", writer)
	ap, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	// An adopted writer's provider creates no ledgers: its (zero) gauges
	// would only overwrite this provider's values.
	ap.unobserve()
	ap.unobserve = func() {}
	return ap, nil
}
