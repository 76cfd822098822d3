package server

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// The web console is a static single-page app (server/console/, embedded:
// no CDN, no build step) served on the admin port at /console/, plus two
// read-only JSON endpoints it needs beyond the public admin APIs it also
// calls (/healthz, /v1/streams, Pulsar's /admin/v2):
//
//	GET /console/api/metrics  the process's own metric families (what
//	                          /metrics exports), as JSON, for live charts
//	GET /console/api/kafka    Kafka topics, partitions (stream offsets) and
//	                          consumer-group committed offsets and lag
//
// The console never writes: every endpoint it uses is a GET.

//go:embed console
var consoleFiles embed.FS

func (s *Server) consoleRoutes(mux *http.ServeMux) {
	assets, _ := fs.Sub(consoleFiles, "console")
	files := http.StripPrefix("/console/", http.FileServerFS(assets))
	mux.Handle("GET /console/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		// The page loads nothing from elsewhere; say so to the browser.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusFound)
	})
	mux.HandleFunc("GET /console/api/metrics", s.consoleMetrics)
	mux.HandleFunc("GET /console/api/kafka", s.consoleKafka)
}

// consoleSeries is one metric series: its labels and value (counter and
// gauge value; a histogram's count, with Sum beside it).
type consoleSeries struct {
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
	Sum    *float64          `json:"sum,omitempty"`
}

type consoleFamily struct {
	Type   string          `json:"type"`
	Help   string          `json:"help"`
	Series []consoleSeries `json:"series"`
}

// consoleMetrics answers the nereus_*, pulsar_*, process and Go runtime
// families of the server's registry, keyed by name, with the time of the
// snapshot (the console derives rates by differencing two snapshots).
func (s *Server) consoleMetrics(w http.ResponseWriter, r *http.Request) {
	fams, err := s.reg.Gather()
	if err != nil && len(fams) == 0 {
		writeError(w, adminapi.CodeInternal, "gathering metrics: "+err.Error(), "")
		return
	}
	out := map[string]consoleFamily{}
	for _, f := range fams {
		name := f.GetName()
		if !strings.HasPrefix(name, "nereus_") && !strings.HasPrefix(name, "pulsar_") &&
			!strings.HasPrefix(name, "process_") && name != "go_goroutines" {
			continue
		}
		cf := consoleFamily{Type: strings.ToLower(f.GetType().String()), Help: f.GetHelp()}
		for _, m := range f.GetMetric() {
			cs := consoleSeries{}
			if len(m.GetLabel()) > 0 {
				cs.Labels = map[string]string{}
				for _, lp := range m.GetLabel() {
					cs.Labels[lp.GetName()] = lp.GetValue()
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				cs.Value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				cs.Value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				cs.Value = float64(m.GetHistogram().GetSampleCount())
				sum := m.GetHistogram().GetSampleSum()
				cs.Sum = &sum
			default:
				cs.Value = m.GetUntyped().GetValue()
			}
			cf.Series = append(cf.Series, cs)
		}
		out[name] = cf
	}
	writeJSON(w, http.StatusOK, map[string]any{"timeMs": time.Now().UnixMilli(), "families": out})
}

// consoleKafkaPartition, consoleKafkaTopic and consoleKafkaGroup are the
// JSON of GET /console/api/kafka.
type consoleKafkaPartition struct {
	Partition   int32  `json:"partition"`
	Stream      string `json:"stream"`
	StartOffset int64  `json:"startOffset"`
	EndOffset   int64  `json:"endOffset"`
	Bytes       int64  `json:"committedBytes"`
	Error       string `json:"error,omitempty"`
}

type consoleKafkaTopic struct {
	Name       string                  `json:"name"`
	ID         string                  `json:"id"`
	Profile    string                  `json:"profile"`
	Configs    map[string]string       `json:"configs,omitempty"`
	Partitions []consoleKafkaPartition `json:"partitions"`
	Error      string                  `json:"error,omitempty"`
}

type consoleKafkaOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	EndOffset int64  `json:"endOffset"`
	Lag       int64  `json:"lag"`
}

type consoleKafkaGroup struct {
	Group    string               `json:"group"`
	Offsets  []consoleKafkaOffset `json:"offsets"`
	TotalLag int64                `json:"totalLag"`
	Error    string               `json:"error,omitempty"`
}

// consoleKafka reads the Kafka storage boundary's records (topics and group
// offsets under kafka/ in the metadata store) through a read-only
// kstore.Store of its own, and the partition streams' offsets from the
// core. Lag is the partition's committed end minus the group's committed
// offset. Group membership lives in the serving broker's coordinator and
// is not shown.
func (s *Server) consoleKafka(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	topics, groups, err := kafkaView(ctx, s.storage, s.storage.Metadata, s.nodeID, s.logger)
	if err != nil {
		writeError(w, adminapi.CodeInternal, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": topics, "groups": groups})
}

// kafkaView reads the Kafka topics, their partitions' stream offsets and
// every group's committed offsets and lag (shared by the console and the
// consumer-lag metrics).
func kafkaView(ctx context.Context, streams stream.Storage, meta metadata.Store, nodeID string, logger *slog.Logger) ([]consoleKafkaTopic, []consoleKafkaGroup, error) {
	ks, err := kstore.New(streams, meta, kstore.Config{Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	defer ks.Close(context.WithoutCancel(ctx))
	names, err := ks.ListTopics(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing Kafka topics: %w", err)
	}
	sort.Strings(names)
	ends := map[kstore.TopicPartition]int64{}
	topics := make([]consoleKafkaTopic, 0, len(names))
	for _, name := range names {
		ct := consoleKafkaTopic{Name: name, Partitions: []consoleKafkaPartition{}}
		t, err := ks.Topic(ctx, name)
		if err != nil {
			ct.Error = err.Error()
			topics = append(topics, ct)
			continue
		}
		ct.ID, ct.Profile, ct.Configs = t.ID.String(), t.Configs.Profile().String(), t.Configs
		for _, p := range t.Partitions {
			cp := consoleKafkaPartition{Partition: p.Index, Stream: kstore.StreamName(name, p.Index)}
			if info, err := streams.Describe(ctx, p.StreamID); err != nil {
				cp.Error = err.Error()
			} else {
				cp.StartOffset, cp.EndOffset, cp.Bytes = info.StartOffset, info.EndOffset, info.CommittedBytes
				ends[kstore.TopicPartition{Topic: name, Partition: p.Index}] = info.EndOffset
			}
			ct.Partitions = append(ct.Partitions, cp)
		}
		topics = append(topics, ct)
	}
	groupNames, err := ks.GroupsWithOffsets(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing Kafka groups: %w", err)
	}
	sort.Strings(groupNames)
	groups := make([]consoleKafkaGroup, 0, len(groupNames))
	for _, g := range groupNames {
		cg := consoleKafkaGroup{Group: g, Offsets: []consoleKafkaOffset{}}
		offs, err := ks.FetchOffsets(ctx, g)
		if err != nil {
			cg.Error = err.Error()
			groups = append(groups, cg)
			continue
		}
		for tp, co := range offs {
			end, ok := ends[tp]
			if !ok {
				continue // a deleted topic's offsets
			}
			lag := max(end-co.Offset, 0)
			cg.Offsets = append(cg.Offsets, consoleKafkaOffset{Topic: tp.Topic, Partition: tp.Partition,
				Committed: co.Offset, EndOffset: end, Lag: lag})
			cg.TotalLag += lag
		}
		sort.Slice(cg.Offsets, func(i, j int) bool {
			a, b := cg.Offsets[i], cg.Offsets[j]
			return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
		})
		groups = append(groups, cg)
	}
	return topics, groups, nil
}
