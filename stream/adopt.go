package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// Adoption of a dead writer's physical sources.
//
// Physical GC reclaims the sources of this process's own writer identity
// (its Object WAL log, its ledgers). A node that never comes back would
// leave its sources forever, so when the AdoptionPolicy (the cluster: the
// writer's node has been gone from the registry for longer than a grace,
// and this node is the deterministic owner of that writer's adoption) says
// so, the core asks each WAL provider that is a provider.Adopter to open
// the writer's sources and then treats them exactly like its own:
//
//  1. Adopt takes over the writer's claim through the provider's normal
//     fencing path (a new log epoch; ledgers recovery-opened);
//  2. Recover settles every run the writer left unsettled with
//     settleIntent, which fences the run's session on the head when it
//     could still commit — the same proof a restart of the writer uses;
//  3. every GC pass then runs the adopted sources' Reclaim with judgeRuns
//     and the grace period: a segment or ledger is deleted only once every
//     run in it is proven retired.
//
// An adoption ends when the policy stops asking for it (the writer came
// back, or another node is now the adopter) or when two passes in a row
// found nothing left; an emptied writer is looked at again only after
// adoptRecheck. Streams are never touched here: the dead writer's streams
// are owned, and their sessions taken over, by the cluster as usual.

// AdoptionPolicy says whether this process should adopt the physical
// sources of another writer identity now. Nil (a single node) adopts
// nothing.
type AdoptionPolicy interface {
	ShouldAdopt(writer string) bool
}

// adoptRecheck is how long an adopted writer found empty is left alone.
const adoptRecheck = 10 * time.Minute

type adoptionState struct {
	mu       sync.Mutex // serializes adoption passes
	lastScan time.Time
	active   map[string]*adoption // provider name + "/" + writer
	done     map[string]time.Time
}

type adoption struct {
	provider, writer string
	ap               provider.Adopted
	since            time.Time
	empty            int
}

// adoptionPass discovers writers to adopt (every AdoptScanInterval) and
// runs one Reclaim pass over every adopted writer's sources.
func (c *Core) adoptionPass(ctx context.Context, opts provider.ReclaimOptions, pend *gcPending, passN int) error {
	pol := c.cfg.Adoption
	if pol == nil {
		return nil
	}
	st := &c.adopt
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.active == nil {
		st.active, st.done = map[string]*adoption{}, map[string]time.Time{}
	}
	now := c.rt.now()
	var errs []error
	if st.lastScan.IsZero() || now.Sub(st.lastScan) >= c.cfg.Lifecycle.AdoptScanInterval {
		st.lastScan = now
		for _, p := range c.providers() {
			ad, ok := p.(provider.Adopter)
			if !ok {
				continue
			}
			writers, err := ad.Writers(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
				continue
			}
			for _, w := range writers {
				key := p.Name() + "/" + w
				if w == c.cfg.WriterID || st.active[key] != nil {
					continue
				}
				if t, ok := st.done[key]; ok && now.Sub(t) < adoptRecheck {
					continue
				}
				if !pol.ShouldAdopt(w) {
					continue
				}
				if err := c.startAdoption(ctx, ad, p.Name(), w); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	keys := make([]string, 0, len(st.active))
	for k := range st.active {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	defer func() {
		// GCStatus shows the adoptions as of this pass (without waiting
		// for a pass in progress).
		now := make([]string, 0, len(st.active))
		for k := range st.active {
			now = append(now, k)
		}
		sort.Strings(now)
		c.gc.mu.Lock()
		c.gc.status.Adopting = now
		c.gc.mu.Unlock()
	}()
	for _, key := range keys {
		a := st.active[key]
		if !pol.ShouldAdopt(a.writer) {
			c.endAdoption(key, "the policy no longer asks for it (writer back, or adopted elsewhere)")
			continue
		}
		rep, err := a.ap.Reclaim(ctx, c.judgeRuns, opts)
		c.accountReclaim(a.provider, rep, pend)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s of writer %s: %w", a.provider, a.writer, err))
			a.empty = 0
			continue
		}
		if rep.Units == 0 && rep.PendingCount == 0 && rep.Errors == 0 {
			a.empty++
		} else {
			a.empty = 0
		}
		if a.empty >= 2 {
			st.done[key] = now
			c.endAdoption(key, "nothing of it is left")
		}
	}
	return errors.Join(errs...)
}

// startAdoption opens and recovers one writer's sources. Called with
// c.adopt.mu held.
func (c *Core) startAdoption(ctx context.Context, ad provider.Adopter, name, writer string) error {
	ap, err := ad.Adopt(ctx, writer)
	if err != nil {
		return fmt.Errorf("%s: adopting writer %s: %w", name, writer, err)
	}
	if err := ap.Recover(ctx, c.settleIntent); err != nil {
		_ = ap.Close(ctx)
		return fmt.Errorf("%s: recovering writer %s's sources: %w", name, writer, err)
	}
	c.adopt.active[name+"/"+writer] = &adoption{provider: name, writer: writer, ap: ap, since: c.rt.now()}
	c.lc.adoptions.Add(1)
	c.log.Info("gc adopted a dead writer's sources", "provider", name, "writer", writer)
	return nil
}

// endAdoption closes an adoption. Called with c.adopt.mu held.
func (c *Core) endAdoption(key, why string) {
	a := c.adopt.active[key]
	if a == nil {
		return
	}
	delete(c.adopt.active, key)
	ctx, cancel := c.rt.withTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.ap.Close(ctx); err != nil {
		c.log.Warn("closing an adoption failed", "provider", a.provider, "writer", a.writer, "err", err)
	}
	c.log.Info("gc adoption ended", "provider", a.provider, "writer", a.writer, "why", why,
		"after", c.rt.now().Sub(a.since).Round(time.Millisecond))
}

// closeAdoptions ends every adoption (Close).
func (c *Core) closeAdoptions() {
	c.adopt.mu.Lock()
	defer c.adopt.mu.Unlock()
	// In key order (map order is random; a simulated Close replays).
	for _, key := range slices.Sorted(maps.Keys(c.adopt.active)) {
		c.endAdoption(key, "core closed")
	}
}

// Adopting lists the writers whose sources this process has adopted now
// (provider/writer), for status and tests.
func (c *Core) Adopting() []string {
	c.adopt.mu.Lock()
	defer c.adopt.mu.Unlock()
	out := make([]string, 0, len(c.adopt.active))
	for k := range c.adopt.active {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
