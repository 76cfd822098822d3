package objectwal

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/nereusstream/nereus-go/stream/provider"
)

var _ provider.Adopter = (*Provider)(nil)

// Adoption of a dead writer's log (provider.Adopter).
//
// Every writer identity has its own log under the scan prefix
// (<scan>/<writer>/manifest and .../seg/...). Adopt opens that log exactly
// as the writer's own next incarnation would: a new wal producer claims it
// at a higher epoch (so the old producer, were it still running, is fenced
// and can make nothing durable there any more), Recover settles the
// intents its manifest still holds with the core (which fences the
// sessions that could still commit them) and truncates, and Reclaim
// re-discovers the log's segments from a listing and deletes one only when
// the core judges every run in it retired, for the grace period. The
// adopted provider never takes a run.

func (p *Provider) scanRoot() string {
	if p.cfg.ScanPrefix != "" {
		return p.cfg.ScanPrefix
	}
	return path.Dir(strings.TrimSuffix(p.cfg.Prefix, "/")) + "/"
}

// Writers implements provider.Adopter: the writers with a manifest under
// the scan prefix (one flat listing of it).
func (p *Provider) Writers(ctx context.Context) ([]string, error) {
	root := p.scanRoot()
	seen := map[string]bool{}
	for info, err := range p.cfg.Store.List(ctx, root) {
		if err != nil {
			return nil, fmt.Errorf("objectwal: listing logs: %w", err)
		}
		rest := strings.TrimPrefix(info.Key, root)
		if w, tail, ok := strings.Cut(rest, "/"); ok && tail == "manifest" && w != "" {
			seen[w] = true
		}
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out, nil
}

// Adopt implements provider.Adopter.
func (p *Provider) Adopt(ctx context.Context, writer string) (provider.Adopted, error) {
	if writer == "" || strings.Contains(writer, "/") {
		return nil, fmt.Errorf("objectwal: adopt: bad writer %q", writer)
	}
	cfg := p.cfg
	cfg.ScanPrefix = p.scanRoot()
	cfg.Prefix = cfg.ScanPrefix + writer
	if cfg.Prefix == p.cfg.Prefix {
		return nil, fmt.Errorf("objectwal: adopt: %s is this process's own log", cfg.Prefix)
	}
	cfg.Logger = p.log.With("adopted", cfg.Prefix)
	ap, err := Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("objectwal: adopting %s: %w", cfg.Prefix, err)
	}
	return ap, nil
}
