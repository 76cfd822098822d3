package opstest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families lists every metric family /metrics must expose, by layer. A
// layer that lands metrics adds its families here (and, if operators
// should see them, a panel to docs/grafana/nereus-dashboard.json).
var families = map[string][]string{
	"health": {"nereus_storage_degraded", "nereus_storage_degraded_seconds", "nereus_storage_recoveries_total"},
	"process": {"go_goroutines", "process_resident_memory_bytes", "nereus_build_info", "nereus_storage_durable",
		"nereus_storage_backend_info", "nereus_draining", "nereus_frontend_up"},
	"admin http": {"nereus_admin_http_requests_total", "nereus_admin_http_request_duration_seconds",
		"nereus_rest_append_entries_total", "nereus_rest_append_bytes_total", "nereus_rest_read_entries_total", "nereus_rest_read_bytes_total"},
	"stream core": {"nereus_stream_appends_committed_total", "nereus_stream_appends_failed_total",
		"nereus_stream_appends_duplicate_total", "nereus_stream_committed_bytes_total", "nereus_stream_metadata_round_trips_total",
		"nereus_stream_metadata_ops_total", "nereus_stream_cas_conflicts_total", "nereus_stream_cas_unknown_total",
		"nereus_stream_fenced_total", "nereus_stream_sessions_acquired_total", "nereus_stream_reads_total",
		"nereus_stream_tail_cache_hits_total", "nereus_stream_wal_reads_total", "nereus_stream_owned_streams",
		"nereus_stream_commit_round_seconds", "nereus_stream_generation_reads_total", "nereus_stream_read_retries_total",
		"nereus_stream_append_stage_seconds"},
	"wal log store": {"nereus_walstore_files", "nereus_walstore_file_bytes", "nereus_walstore_live_bytes", "nereus_walstore_objects",
		"nereus_walstore_puts_total", "nereus_walstore_deletes_total", "nereus_walstore_flushes_total",
		"nereus_walstore_copies_total", "nereus_walstore_files_deleted_total"},
	"lifecycle": {"nereus_lifecycle_generations_published_total", "nereus_lifecycle_materialized_bytes_total",
		"nereus_lifecycle_materialize_failures_total", "nereus_lifecycle_materialize_seconds_total",
		"nereus_lifecycle_materialize_lag_bytes", "nereus_lifecycle_materialize_lag_seconds", "nereus_lifecycle_retention_trims_total",
		"nereus_lifecycle_materialize_backpressure_total", "nereus_lifecycle_merges_total", "nereus_lifecycle_merged_sources_total", "nereus_lifecycle_merged_bytes_total",
		"nereus_lifecycle_merge_failures_total", "nereus_lifecycle_merge_seconds_total",
		"nereus_gc_passes_total", "nereus_gc_due_passes_total", "nereus_gc_errors_total", "nereus_gc_deleted_total", "nereus_gc_deleted_bytes_total",
		"nereus_gc_pending_units", "nereus_gc_pending_bytes", "nereus_gc_unreadable_objects_total", "nereus_gc_adoptions_total", "nereus_gc_adopting_writers"},
	"per stream": {"nereus_streams", "nereus_stream_metrics_truncated", "nereus_stream_start_offset",
		"nereus_stream_end_offset", "nereus_stream_retained_offsets", "nereus_stream_size_bytes", "nereus_stream_retained_bytes",
		"nereus_stream_materialized_through_offset"},
	"object wal": {"nereus_wal_producer_records_total", "nereus_wal_producer_bytes_total",
		"nereus_wal_producer_segments_total", "nereus_wal_producer_segment_bytes_total", "nereus_wal_producer_commits_total",
		"nereus_wal_producer_commit_conflicts_total", "nereus_wal_producer_commit_retries_total",
		"nereus_wal_producer_commit_unknown_total", "nereus_wal_producer_upload_retries_total",
		"nereus_wal_producer_blocked_appends_total", "nereus_wal_producer_fenced_total", "nereus_wal_producer_halts_total",
		"nereus_wal_producer_commit_duration_seconds", "nereus_wal_producer_commit_segments",
		"nereus_wal_producer_append_stage_seconds"},
	"object store": {"nereus_objectstore_operations_total", "nereus_objectstore_operation_duration_seconds",
		"nereus_objectstore_read_bytes_total", "nereus_objectstore_written_bytes_total"},
	"kafka": {"nereus_kafka_requests_total", "nereus_kafka_request_duration_seconds", "nereus_kafka_produced_records_total",
		"nereus_kafka_produced_bytes_total", "nereus_kafka_fetched_bytes_total", "nereus_kafka_offset_commits_total",
		"nereus_kafka_connections_opened_total", "nereus_kafka_consumergroup_lag", "nereus_kafka_consumergroup_current_offset",
		"nereus_kafka_consumergroup_lag_sum"},
	"pulsar": {"pulsar_in_messages_total", "pulsar_in_bytes_total", "pulsar_out_messages_total", "pulsar_msg_backlog",
		"pulsar_storage_size", "pulsar_subscription_back_log", "pulsar_producers_count", "pulsar_subscriptions_count",
		"nereus_pulsar_publish_stage_seconds"},
}

// bkFamilies need a server started with --bookkeeper-zk.
var bkFamilies = []string{"nereus_bkwal_runs_total", "nereus_bkwal_adds_total", "nereus_bkwal_add_bytes_total",
	"nereus_bkwal_failed_runs_total", "nereus_bkwal_run_write_duration_seconds", "nereus_bkwal_ledgers_created_total",
	"nereus_bkwal_ledger_create_failures_total", "nereus_bkwal_rollovers_total", "nereus_bkwal_taints_total",
	"nereus_bkwal_ledgers_finalized_total", "nereus_bkwal_ledgers_deleted_total"}

func scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v", err)
	}
	return fams
}

func TestMetricsFamilies(t *testing.T) {
	fams := scrape(t)
	for layer, names := range families {
		for _, n := range names {
			if fams[n] == nil {
				t.Errorf("%s: /metrics lacks %s", layer, n)
			}
		}
	}
	t.Run("bookkeeper", func(t *testing.T) {
		requireBK(t)
		for _, n := range bkFamilies {
			if fams[n] == nil {
				t.Errorf("bookkeeper wal: /metrics lacks %s", n)
			}
		}
		if v := counterSum(fams, "nereus_bkwal_adds_total"); v < 3 {
			t.Errorf("nereus_bkwal_adds_total = %v after 3 BookKeeper appends", v)
		}
		if v := counterSum(fams, "nereus_bkwal_ledgers_created_total"); v < 1 {
			t.Errorf("nereus_bkwal_ledgers_created_total = %v", v)
		}
	})

	// The seeded data is visible in the per-stream and layer families.
	if v := gauge(fams, "nereus_stream_end_offset", map[string]string{"stream": restStream}); v != restEntries {
		t.Errorf("nereus_stream_end_offset{stream=%q} = %v, want %d", restStream, v, restEntries)
	}
	if v := counterSum(fams, "nereus_wal_producer_segments_total"); v < 1 {
		t.Errorf("nereus_wal_producer_segments_total = %v after appends", v)
	}
	if v := counterSum(fams, "nereus_objectstore_operations_total", "operation", "put"); v < 1 {
		t.Errorf("no object store PUT counted after appends (%v)", v)
	}
	if v, want := gauge(fams, "nereus_kafka_consumergroup_lag_sum", map[string]string{"group": kafkaGroup}), kafkaLag(t); v != float64(want) {
		t.Errorf("nereus_kafka_consumergroup_lag_sum{group=%q} = %v, want %d (ListOffsets - OffsetFetch)", kafkaGroup, v, want)
	}
	if v := counterSum(fams, "nereus_kafka_produced_records_total"); v < kafkaRecords {
		t.Errorf("nereus_kafka_produced_records_total = %v, want >= %d", v, kafkaRecords)
	}
	// The ack-path breakdown saw the seeded appends in every stage.
	for _, h := range []struct{ name, stage string }{
		{"nereus_pulsar_publish_stage_seconds", "admit"}, {"nereus_pulsar_publish_stage_seconds", "total"},
		{"nereus_stream_append_stage_seconds", "wal"}, {"nereus_stream_append_stage_seconds", "commit"},
		{"nereus_wal_producer_append_stage_seconds", "seal"}, {"nereus_wal_producer_append_stage_seconds", "commit"},
	} {
		if n := histogramCount(fams, h.name, "stage", h.stage); n < 1 {
			t.Errorf("%s{stage=%q} counted %d observations after seeded appends", h.name, h.stage, n)
		}
	}
	if t.Failed() {
		var names []string
		for n := range fams {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("families on /metrics: %s", strings.Join(names, " "))
	}
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

func gauge(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, m := range fams[name].GetMetric() {
		if labelsMatch(m, labels) {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// counterSum adds a counter family's series, optionally only those whose
// label kv[0] is kv[1].
func counterSum(fams map[string]*dto.MetricFamily, name string, kv ...string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		if len(kv) == 2 && !labelsMatch(m, map[string]string{kv[0]: kv[1]}) {
			continue
		}
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// histogramCount adds a histogram family's sample counts over the series
// whose label k is v.
func histogramCount(fams map[string]*dto.MetricFamily, name, k, v string) uint64 {
	var n uint64
	for _, m := range fams[name].GetMetric() {
		if labelsMatch(m, map[string]string{k: v}) {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// --- the Grafana dashboard ---

// dashboard is the subset of Grafana's dashboard JSON model the repo's
// dashboard may use; decoding is strict, so a misspelt or unsupported key
// fails the test instead of being ignored by Grafana.
type dashboard struct {
	UID           string                    `json:"uid"`
	Title         string                    `json:"title"`
	Description   string                    `json:"description"`
	Tags          []string                  `json:"tags"`
	Timezone      string                    `json:"timezone"`
	SchemaVersion int                       `json:"schemaVersion"`
	Version       int                       `json:"version"`
	Editable      bool                      `json:"editable"`
	Refresh       string                    `json:"refresh"`
	Time          struct{ From, To string } `json:"time"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Label      string          `json:"label"`
			Type       string          `json:"type"`
			Query      string          `json:"query"`
			Datasource *datasource     `json:"datasource"`
			Refresh    int             `json:"refresh"`
			IncludeAll bool            `json:"includeAll"`
			AllValue   string          `json:"allValue"`
			Multi      bool            `json:"multi"`
			Current    json.RawMessage `json:"current"`
			Hide       int             `json:"hide"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []json.RawMessage `json:"list"`
	} `json:"annotations"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int                      `json:"id"`
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	Description string                   `json:"description"`
	Collapsed   bool                     `json:"collapsed"`
	Datasource  *datasource              `json:"datasource"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	FieldConfig *struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []json.RawMessage `json:"overrides"`
	} `json:"fieldConfig"`
	Options json.RawMessage `json:"options"`
	Panels  []panel         `json:"panels"`
	Targets []struct {
		RefID        string      `json:"refId"`
		Datasource   *datasource `json:"datasource"`
		Expr         string      `json:"expr"`
		LegendFormat string      `json:"legendFormat"`
	} `json:"targets"`
}

func dashboardPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs", "grafana", "nereus-dashboard.json")
}

var metricName = regexp.MustCompile(`\b(nereus_[a-z0-9_]+|pulsar_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+)\b`)

// TestDashboard checks docs/grafana/nereus-dashboard.json against Grafana's
// dashboard model (strictly), its layout, and that every metric its
// queries name is a family the server exports.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath())
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 || len(d.Panels) == 0 {
		t.Fatalf("dashboard needs uid, title, schemaVersion >= 36 and panels: %+v", d)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Errorf("dashboard needs a datasource variable (type datasource), has %v", vars)
	}
	fams := scrape(t)
	if withBK {
		for _, n := range bkFamilies {
			if fams[n] == nil {
				t.Errorf("/metrics lacks %s", n)
			}
		}
	}
	known := func(name string) bool {
		if fams[name] != nil {
			return true
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if fams[strings.TrimSuffix(name, suf)] != nil && strings.HasSuffix(name, suf) {
				return true
			}
		}
		if !withBK && strings.HasPrefix(name, "nereus_bkwal_") {
			for _, n := range bkFamilies {
				if strings.HasPrefix(name, n) {
					return true // checked where bookies exist
				}
			}
		}
		return false
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	used := map[cell]int{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := used[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps panel %d at (%d,%d)", p.Title, other, x, y)
				}
				used[cell{x, y}] = p.ID
			}
		}
		switch p.Type {
		case "row":
			continue
		case "timeseries", "stat", "table", "gauge", "bargauge":
		default:
			t.Errorf("panel %q: unsupported type %q", p.Title, p.Type)
		}
		if p.Title == "" || p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q needs a title, the ${datasource} datasource and targets", p.ID, p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] || tg.Expr == "" {
				t.Errorf("panel %q: target needs a unique refId and an expr: %+v", p.Title, tg)
			}
			refs[tg.RefID] = true
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") {
				t.Errorf("panel %q: unbalanced parentheses in %s", p.Title, tg.Expr)
			}
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				if !known(name) {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, name)
				}
			}
		}
	}
}
