// Nereus web console: a dependency-free single-page app over this node's
// read-only admin endpoints. Every value inserted into the page goes
// through esc() or textContent: stream, topic and group names are user
// input.
"use strict";

const REFRESH_MS = 2000;
const HISTORY = 90; // points per chart (3 minutes at 2 s)

const $ = (sel) => document.querySelector(sel);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

function fmtBytes(n) {
  if (n === undefined || n === null || isNaN(n)) return "—";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 && Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1)) + " " + u[i];
}
function fmtNum(n) {
  if (n === undefined || n === null || isNaN(n)) return "—";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}
function fmtDur(ms) {
  if (!ms) return "unlimited";
  const s = ms / 1000;
  if (s % 86400 === 0) return s / 86400 + "d";
  if (s % 3600 === 0) return s / 3600 + "h";
  if (s % 60 === 0) return s / 60 + "m";
  return s + "s";
}
// preview shows a payload (base64 in the API) as text when it is UTF-8,
// else as the start of its hex dump.
function preview(b64) {
  const raw = atob(b64 || "");
  const bytes = Uint8Array.from(raw, (c) => c.charCodeAt(0));
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return text.length > 200 ? text.slice(0, 200) + "…" : text;
  } catch (_) {
    const hex = Array.from(bytes.slice(0, 48), (x) => x.toString(16).padStart(2, "0")).join(" ");
    return "(" + bytes.length + " bytes) " + hex + (bytes.length > 48 ? " …" : "");
  }
}
function retention(r) {
  r = r || {};
  return "time " + fmtDur(r.timeMs) + ", bytes " + (r.bytes ? fmtBytes(r.bytes) : "unlimited");
}

async function getJSON(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" } });
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { const b = await resp.json(); if (b && b.message) msg += ": " + b.message; } catch (_) { /* not JSON */ }
    throw new Error(path + ": " + msg);
  }
  return resp.json();
}

// ---- metrics history (for live charts) ----

const history = { points: [], last: null };

function famSum(fams, name, filter) {
  const f = fams[name];
  if (!f) return undefined;
  let sum = 0;
  for (const s of f.series || []) {
    if (filter && !filter(s.labels || {})) continue;
    sum += s.value;
  }
  return sum;
}

// Rates derived from counters (per second), one entry per chart line.
const RATES = {
  committedBytes: (f) => famSum(f, "nereus_stream_committed_bytes_total"),
  appends: (f) => famSum(f, "nereus_stream_appends_committed_total"),
  reads: (f) => famSum(f, "nereus_stream_reads_total"),
  kafkaIn: (f) => famSum(f, "nereus_kafka_produced_bytes_total"),
  kafkaOut: (f) => famSum(f, "nereus_kafka_fetched_bytes_total"),
  pulsarIn: (f) => famSum(f, "pulsar_in_bytes_total"),
  pulsarOut: (f) => famSum(f, "pulsar_out_bytes_total"),
  walSegments: (f) => famSum(f, "nereus_wal_producer_segments_total"),
  walBytes: (f) => famSum(f, "nereus_wal_producer_segment_bytes_total"),
  puts: (f) => famSum(f, "nereus_objectstore_operations_total", (l) => l.operation === "put"),
  gets: (f) => famSum(f, "nereus_objectstore_operations_total", (l) => l.operation === "get" || l.operation === "get_range"),
  deletes: (f) => famSum(f, "nereus_objectstore_operations_total", (l) => l.operation === "delete"),
  bkAdds: (f) => famSum(f, "nereus_bkwal_adds_total"),
};

async function sampleMetrics() {
  const m = await getJSON("/console/api/metrics");
  const now = { t: m.timeMs, v: {} };
  for (const [k, fn] of Object.entries(RATES)) now.v[k] = fn(m.families);
  if (history.last) {
    const dt = (now.t - history.last.t) / 1000;
    if (dt > 0) {
      const p = { t: now.t };
      for (const k of Object.keys(RATES)) {
        const a = history.last.v[k], b = now.v[k];
        p[k] = a === undefined || b === undefined ? undefined : Math.max(0, (b - a) / dt);
      }
      history.points.push(p);
      if (history.points.length > HISTORY) history.points.shift();
    }
  }
  history.last = now;
  history.families = m.families;
  return m.families;
}

function drawChart(canvas, lines, unitFmt) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const pts = history.points;
  let max = 0;
  for (const p of pts) for (const l of lines) if (p[l.key] > max) max = p[l.key];
  if (max === 0) max = 1;
  const left = 56, bottom = h - 16;
  g.strokeStyle = "#d9dde5"; g.fillStyle = "#667085"; g.font = "11px system-ui, sans-serif";
  for (let i = 0; i <= 2; i++) {
    const y = 6 + ((bottom - 6) * i) / 2;
    g.beginPath(); g.moveTo(left, y); g.lineTo(w - 4, y); g.stroke();
    g.fillText(unitFmt(max * (1 - i / 2)), 2, y + 4);
  }
  g.fillText("last " + Math.round((HISTORY * REFRESH_MS) / 60000) + " min", left, h - 3);
  const colors = ["#1f6feb", "#d4a72c", "#1a7f37", "#cf222e"];
  lines.forEach((l, i) => {
    g.strokeStyle = colors[i % colors.length]; g.lineWidth = 1.6; g.beginPath();
    let started = false;
    pts.forEach((p, j) => {
      if (p[l.key] === undefined) return;
      const x = left + ((w - 4 - left) * (j + HISTORY - pts.length)) / (HISTORY - 1);
      const y = bottom - ((bottom - 6) * p[l.key]) / max;
      if (!started) { g.moveTo(x, y); started = true; } else g.lineTo(x, y);
    });
    g.stroke();
  });
}

const CHARTS = [
  { id: "c-commit", title: "Stream commits", unit: fmtBytes, suffix: "/s", lines: [{ key: "committedBytes", name: "committed bytes/s" }] },
  { id: "c-appends", title: "Appends and reads", unit: fmtNum, suffix: "/s", lines: [{ key: "appends", name: "appends/s" }, { key: "reads", name: "reads/s" }] },
  { id: "c-kafka", title: "Kafka", unit: fmtBytes, suffix: "/s", lines: [{ key: "kafkaIn", name: "produced" }, { key: "kafkaOut", name: "fetched" }] },
  { id: "c-pulsar", title: "Pulsar", unit: fmtBytes, suffix: "/s", lines: [{ key: "pulsarIn", name: "published" }, { key: "pulsarOut", name: "dispatched" }] },
  { id: "c-wal", title: "Object WAL segments", unit: fmtBytes, suffix: "/s", lines: [{ key: "walBytes", name: "segment bytes/s" }] },
  { id: "c-objects", title: "Object store calls", unit: fmtNum, suffix: "/s", lines: [{ key: "puts", name: "PUT" }, { key: "gets", name: "GET" }, { key: "deletes", name: "DELETE" }] },
];

function chartsHTML(ids) {
  return '<div class="charts">' + CHARTS.filter((c) => ids.includes(c.id)).map((c) =>
    `<div class="chart" id="${c.id}"><span class="now"></span><div class="title">${esc(c.title)}</div>` +
    `<div class="muted">${c.lines.map((l, i) => `<span class="legend${i}">${esc(l.name)}</span>`).join(" · ")}</div><canvas></canvas></div>`).join("") + "</div>";
}

function renderCharts() {
  const last = history.points[history.points.length - 1] || {};
  for (const c of CHARTS) {
    const el = document.getElementById(c.id);
    if (!el) continue;
    drawChart(el.querySelector("canvas"), c.lines, c.unit);
    el.querySelector(".now").textContent = c.lines.map((l) => (last[l.key] === undefined ? "—" : c.unit(last[l.key]) + c.suffix)).join(" / ");
  }
}

// ---- pages ----

function table(headers, rows, numeric) {
  numeric = numeric || [];
  const th = headers.map((h, i) => `<th${numeric.includes(i) ? ' class="num"' : ""}>${esc(h)}</th>`).join("");
  const tr = rows.map((r) => "<tr>" + r.map((c, i) => `<td${numeric.includes(i) ? ' class="num"' : ""}>${c}</td>`).join("") + "</tr>").join("");
  return `<table><thead><tr>${th}</tr></thead><tbody>${tr || `<tr><td colspan="${headers.length}" class="muted">none</td></tr>`}</tbody></table>`;
}

function card(k, v, cls) { return `<div class="card"><div class="k">${esc(k)}</div><div class="v${cls ? " " + cls : ""}">${v}</div></div>`; }

const pages = {
  async overview() {
    const [h, fams] = [await getJSON("/healthz"), history.families || (await sampleMetrics())];
    const up = (fams.nereus_frontend_up || { series: [] }).series.map((s) =>
      `<span class="pill ${s.value ? "ok" : "bad"}">${esc(s.labels.frontend)} ${s.value ? "serving" : "down"}</span>`).join(" ");
    const listeners = Object.entries(h.listeners || {}).map(([k, v]) => `${esc(k)} <code>${esc(v)}</code>`).join("<br>");
    const streams = famSum(fams, "nereus_streams");
    const owned = famSum(fams, "nereus_stream_owned_streams");
    return `<h1>Overview</h1>
      <div class="cards">
        ${card("status", `<span class="pill ${h.status === "ok" ? "ok" : "bad"}">${esc(h.status)}</span>`)}
        ${card("node", esc(h.nodeId))}
        ${card("version", esc(h.version))}
        ${card("durable", h.durable ? "yes" : '<span class="err">no (in-memory)</span>')}
        ${card("object store", esc(h.objectStore ? h.objectStore.kind + " " + h.objectStore.location : h.backend))}
        ${card("metadata store", esc(h.metadata ? h.metadata.kind + " " + h.metadata.location : h.backend))}
        ${card("streams", streams === undefined ? "—" : fmtNum(streams))}
        ${card("owned streams (append sessions here)", owned === undefined ? "—" : fmtNum(owned))}
        ${card("started", esc(new Date(h.startedAt).toLocaleString()))}
      </div>
      ${(h.degraded || []).length ? `<h2 class="err">Degraded storage components</h2>
        <p class="muted">Appends fail with a retriable error until the component recovers by itself; reads keep working.</p>
        ${table(["component", "since", "last error"], h.degraded.map((d) => [esc(d.component), esc(new Date(d.since).toLocaleString()), esc(d.reason)]))}` : ""}
      <h2>This node</h2>
      ${table(["node", "status", "front ends", "listeners"], [[esc(h.nodeId),
        `<span class="pill ${h.status === "ok" ? "ok" : "bad"}">${esc(h.status)}</span>`, up || '<span class="muted">none</span>', listeners]])}
      ${await clusterHTML()}
      <h2>Live throughput</h2>
      ${chartsHTML(["c-commit", "c-appends", "c-kafka", "c-pulsar"])}`;
  },

  async streams() {
    let all = [], after = "";
    for (let i = 0; i < 10; i++) {
      const q = "/v1/streams?limit=500" + (after ? "&after=" + encodeURIComponent(after) : "");
      const r = await getJSON(q);
      all = all.concat(r.streams || []);
      if (!r.next) break;
      after = r.next;
    }
    const rows = all.map((s) => [
      `<a href="#/stream/${encodeURIComponent(s.name)}">${esc(s.name)}</a>`, esc(s.profile), esc(s.state),
      fmtNum(s.startOffset), fmtNum(s.endOffset), fmtNum(s.endOffset - s.startOffset), esc(fmtBytes(s.retainedBytes)),
      fmtNum(s.materializedThrough || 0), esc(retention(s.retention)),
      s.session ? esc(s.session.writerId) + " e" + esc(s.session.epoch) : '<span class="muted">—</span>']);
    return `<h1>Streams <span class="muted">(${all.length})</span></h1>
      ${table(["name", "profile", "state", "start", "end (head)", "readable", "size (retained)", "in generations below", "retention", "owner (append session)"], rows, [3, 4, 5, 6, 7])}`;
  },

  async stream(name) {
    const s = await getJSON("/v1/streams/" + encodeURIComponent(name));
    const from = Math.max(s.startOffset, s.endOffset - 10);
    let recent = "";
    if (s.endOffset > s.startOffset) {
      const r = await getJSON(`/v1/streams/${encodeURIComponent(name)}/entries?from=${from}&limit=10`);
      recent = table(["offset", "records", "timestamp", "payload"], (r.entries || []).map((e) => [
        fmtNum(e.offset), fmtNum(e.recordCount), esc(new Date(e.timestamp).toLocaleString()),
        "<code>" + esc(preview(e.payload)) + "</code>"]), [0, 1]);
    }
    const attrs = Object.entries(s.attributes || {}).map(([k, v]) => esc(k) + "=" + esc(v)).join("<br>") || '<span class="muted">none</span>';
    return `<h1>Stream ${esc(s.name)}</h1>
      <dl class="kv">
        <dt>id</dt><dd>${esc(s.id)}</dd>
        <dt>profile</dt><dd>${esc(s.profile)}</dd>
        <dt>state</dt><dd>${esc(s.state)}</dd>
        <dt>head (committed end)</dt><dd>${fmtNum(s.endOffset)}</dd>
        <dt>start (trim point)</dt><dd>${fmtNum(s.startOffset)}</dd>
        <dt>readable offsets</dt><dd>${fmtNum(s.endOffset - s.startOffset)}</dd>
        <dt>size (retained bytes)</dt><dd>${esc(fmtBytes(s.retainedBytes))}</dd>
        <dt>committed bytes (ever)</dt><dd>${esc(fmtBytes(s.committedBytes))}</dd>
        <dt>generations</dt><dd>${s.materializedThrough > s.startOffset ? "offsets [" + fmtNum(s.startOffset) + ", " + fmtNum(s.materializedThrough) + ") served by generations (read-optimized objects); the rest by the WAL" : "none yet: every offset is served by the WAL"}</dd>
        <dt>retention</dt><dd>${esc(retention(s.retention))}</dd>
        <dt>session</dt><dd>${s.session ? "epoch " + esc(s.session.epoch) + ", writer " + esc(s.session.writerId) + ", expires " + esc(new Date(s.session.expires).toLocaleString()) : "none"}</dd>
        <dt>created</dt><dd>${esc(new Date(s.createdAt).toLocaleString())}</dd>
        <dt>attributes</dt><dd>${attrs}</dd>
      </dl>
      <h2>Latest entries</h2>${recent || '<p class="muted">empty</p>'}
      <p><a href="#/streams">← all streams</a></p>`;
  },

  async kafka() {
    const k = await getJSON("/console/api/kafka");
    const topics = k.topics.map((t) => {
      const end = t.partitions.reduce((a, p) => a + p.endOffset, 0);
      const bytes = t.partitions.reduce((a, p) => a + p.committedBytes, 0);
      return [esc(t.name), fmtNum(t.partitions.length), esc(t.profile || ""), fmtNum(end), esc(fmtBytes(bytes)),
        t.error ? `<span class="err">${esc(t.error)}</span>` : ""];
    });
    const parts = [];
    for (const t of k.topics) for (const p of t.partitions) parts.push([esc(t.name), fmtNum(p.partition),
      `<a href="#/stream/${encodeURIComponent(p.stream)}">${esc(p.stream)}</a>`, fmtNum(p.startOffset), fmtNum(p.endOffset), esc(fmtBytes(p.committedBytes))]);
    const groups = k.groups.map((g) => [esc(g.group), fmtNum(g.offsets.length), fmtNum(g.totalLag), g.error ? `<span class="err">${esc(g.error)}</span>` : ""]);
    const lags = [];
    for (const g of k.groups) for (const o of g.offsets) lags.push([esc(g.group), esc(o.topic), fmtNum(o.partition), fmtNum(o.committed), fmtNum(o.endOffset), fmtNum(o.lag)]);
    return `<h1>Kafka</h1>
      <h2>Topics <span class="muted">(${k.topics.length})</span></h2>
      ${table(["topic", "partitions", "profile", "records (sum of ends)", "committed bytes", ""], topics, [1, 3, 4])}
      <h2>Partitions</h2>
      ${table(["topic", "partition", "stream", "start", "end", "committed bytes"], parts, [1, 3, 4, 5])}
      <h2>Consumer groups <span class="muted">(${k.groups.length})</span></h2>
      ${table(["group", "partitions with offsets", "total lag", ""], groups, [1, 2])}
      <h2>Consumer group lag</h2>
      ${table(["group", "topic", "partition", "committed offset", "end offset", "lag"], lags, [2, 3, 4, 5])}`;
  },

  async pulsar() {
    let tenants;
    try {
      tenants = await getJSON("/admin/v2/tenants");
    } catch (e) {
      return `<h1>Pulsar</h1><p class="muted">The Pulsar front end does not answer on this node (started with --pulsar-addr ""?): ${esc(e.message)}</p>`;
    }
    const rows = [], subs = [];
    for (const tenant of tenants) {
      const nss = await getJSON("/admin/v2/namespaces/" + encodeURIComponent(tenant));
      for (const ns of nss) {
        const [, nsName] = ns.split("/");
        for (const domain of ["persistent", "non-persistent"]) {
          let topics = [];
          try { topics = await getJSON(`/admin/v2/${domain}/${encodeURIComponent(tenant)}/${encodeURIComponent(nsName)}`); } catch (_) { continue; }
          for (const full of topics) {
            const local = full.slice(full.lastIndexOf("/") + 1);
            let st;
            try { st = await getJSON(`/admin/v2/${domain}/${encodeURIComponent(tenant)}/${encodeURIComponent(nsName)}/${encodeURIComponent(local)}/stats`); } catch (e) {
              rows.push([esc(full), "", "", "", "", "", "", `<span class="err">${esc(e.message)}</span>`]); continue;
            }
            const sb = Object.entries(st.subscriptions || {});
            const backlog = sb.reduce((a, [, s]) => a + (s.msgBacklog || 0), 0);
            rows.push([esc(full), fmtNum(st.msgInCounter), fmtNum(st.msgRateIn), esc(fmtBytes(st.storageSize)),
              fmtNum((st.publishers || []).length), fmtNum(sb.length), fmtNum(backlog), ""]);
            for (const [name, s] of sb) subs.push([esc(full), esc(name), esc(s.type), fmtNum((s.consumers || []).length),
              fmtNum(s.msgBacklog), fmtNum(s.unackedMessages), fmtNum(s.msgRateOut)]);
          }
        }
      }
    }
    return `<h1>Pulsar</h1>
      <h2>Topics <span class="muted">(${rows.length})</span></h2>
      ${table(["topic", "messages in", "msg/s in", "storage", "producers", "subscriptions", "backlog", ""], rows, [1, 2, 3, 4, 5, 6])}
      <h2>Subscriptions <span class="muted">(${subs.length})</span></h2>
      ${table(["topic", "subscription", "type", "consumers", "backlog", "unacked", "msg/s out"], subs, [3, 4, 5, 6])}`;
  },

  async wal() {
    const f = history.families || (await sampleMetrics());
    const v = (name, filter) => famSum(f, name, filter);
    const ops = {};
    for (const s of (f.nereus_objectstore_operations_total || { series: [] }).series) {
      const k = s.labels.operation;
      ops[k] = ops[k] || { ok: 0, other: 0 };
      if (s.labels.result === "ok") ops[k].ok += s.value; else ops[k].other += s.value;
    }
    const lat = {};
    for (const s of (f.nereus_objectstore_operation_duration_seconds || { series: [] }).series)
      lat[s.labels.operation] = s.value ? (s.sum / s.value) * 1000 : 0;
    const opRows = Object.keys(ops).sort().map((k) => [esc(k), fmtNum(ops[k].ok), fmtNum(ops[k].other), lat[k] === undefined ? "—" : lat[k].toFixed(2)]);
    const commit = f.nereus_wal_producer_commit_duration_seconds;
    const commitAvg = commit && commit.series[0] && commit.series[0].value ? (commit.series[0].sum / commit.series[0].value) * 1000 : undefined;
    const bk = f.nereus_bkwal_adds_total !== undefined;
    const bkRun = f.nereus_bkwal_run_write_duration_seconds;
    const bkAvg = bkRun && bkRun.series[0] && bkRun.series[0].value ? (bkRun.series[0].sum / bkRun.series[0].value) * 1000 : undefined;
    let gc;
    try { gc = await getJSON("/v1/gc"); } catch (e) { gc = { error: e.message }; }
    const bySum = (name, label) => (f[name] || { series: [] }).series.filter((s) => s.value > 0).map((s) => esc(s.labels[label]) + " " + fmtNum(s.value)).join(", ") || "none";
    return `<h1>WAL, generations &amp; GC</h1>
      <h2>Object WAL</h2>
      <div class="cards">
        ${card("records committed", fmtNum(v("nereus_wal_producer_records_total")))}
        ${card("segments uploaded", fmtNum(v("nereus_wal_producer_segments_total")))}
        ${card("segment bytes", esc(fmtBytes(v("nereus_wal_producer_segment_bytes_total"))))}
        ${card("manifest commits", fmtNum(v("nereus_wal_producer_commits_total")))}
        ${card("manifest CAS conflicts", fmtNum(v("nereus_wal_producer_commit_conflicts_total")))}
        ${card("unknown outcomes (settled)", fmtNum(v("nereus_wal_producer_commit_unknown_total")))}
        ${card("avg manifest commit", commitAvg === undefined ? "—" : commitAvg.toFixed(2) + " ms")}
        ${card("appends blocked (backpressure)", fmtNum(v("nereus_wal_producer_blocked_appends_total")))}
        ${card("fenced / halted", fmtNum(v("nereus_wal_producer_fenced_total")) + " / " + fmtNum(v("nereus_wal_producer_halts_total")))}
      </div>
      <h2>Object store calls</h2>
      ${table(["operation", "ok", "refused or failed", "avg latency ms"], opRows, [1, 2, 3])}
      <h2>BookKeeper WAL</h2>
      ${bk ? `<div class="cards">
        ${card("entries added", fmtNum(v("nereus_bkwal_adds_total")))}
        ${card("bytes added", esc(fmtBytes(v("nereus_bkwal_add_bytes_total"))))}
        ${card("avg run write", bkAvg === undefined ? "—" : bkAvg.toFixed(2) + " ms")}
        ${card("failed runs", fmtNum(v("nereus_bkwal_failed_runs_total")))}
        ${card("ledgers created", fmtNum(v("nereus_bkwal_ledgers_created_total")))}
        ${card("ledgers finalized / deleted", fmtNum(v("nereus_bkwal_ledgers_finalized_total")) + " / " + fmtNum(v("nereus_bkwal_ledgers_deleted_total")))}
        ${card("rollovers", esc(bySum("nereus_bkwal_rollovers_total", "reason")))}
        ${card("taints", esc(bySum("nereus_bkwal_taints_total", "cause")))}
      </div>` : '<p class="muted">not enabled on this node (start with --bookkeeper-zk)</p>'}
      <h2>Generations and GC</h2>
      ${gcHTML(gc)}
      <h2>Live</h2>
      ${chartsHTML(["c-wal", "c-objects"])}`;
  },
};

// clusterHTML renders GET /v1/cluster: every registered broker, its state,
// session, Kafka broker id, endpoints and the streams it is assigned and
// holds (ownership), over up to 1000 scanned streams.
async function clusterHTML() {
  let c;
  try { c = await getJSON("/v1/cluster?limit=1000"); } catch (e) {
    return `<h2>Brokers</h2><p class="muted">cluster status unavailable: ${esc(e.message)}</p>`;
  }
  const flags = (c.isolated ? ' <span class="pill bad">this node is isolated from the metadata store</span>' : "") +
    (c.leaving ? ' <span class="pill">this node is leaving</span>' : "");
  const rows = (c.brokers || []).map((b) => [
    esc(b.nodeId) + (b.self ? ' <span class="muted">(this node)</span>' : ""), fmtNum(b.kafkaBrokerId),
    `<span class="pill ${b.state === "active" ? "ok" : ""}">${esc(b.state)}</span>`, esc(b.rack || ""),
    fmtNum(Math.round(b.sessionAgeSeconds)) + " s / ttl " + fmtNum(b.sessionTtlSeconds) + " s",
    fmtNum(b.assignedStreams), fmtNum(b.heldStreams),
    (b.endpoints || []).map((e) => esc(e.protocol + (e.listener ? ":" + e.listener : "")) + " <code>" + esc(e.address) + "</code>" + (e.tls ? " (TLS)" : "")).join("<br>")]);
  return `<h2>Brokers <span class="muted">(${(c.brokers || []).length})</span>${flags}</h2>
    ${table(["node", "Kafka broker id", "state", "rack", "session age", "assigned streams", "held streams", "endpoints"], rows, [1, 5, 6])}
    <p class="muted">Ownership over ${fmtNum(c.streams)} scanned streams${c.truncated ? " (more exist)" : ""}; ${fmtNum(c.unowned)} without a live append session.</p>`;
}

function gcHTML(gc) {
  if (gc.error) return `<p class="muted">GC status unavailable: ${esc(gc.error)}</p>`;
  const st = gc.stats || {};
  const mode = gc.disabled ? '<span class="pill bad">disabled</span>' : gc.dryRun ? '<span class="pill">dry run</span>' : '<span class="pill ok">on</span>';
  const last = gc.lastPass && !gc.lastPass.startsWith("0001") ? new Date(gc.lastPass).toLocaleString() + " (" + fmtNum(gc.durationMs) + " ms)" : "not yet";
  return `<div class="cards">
      ${card("GC", mode)}
      ${card("last pass", esc(last))}
      ${card("passes / errors", fmtNum(st.passes) + " / " + fmtNum(st.errors))}
      ${card("kept for now", fmtNum(gc.pendingCount) + " (" + esc(fmtBytes(gc.pendingBytes)) + ")")}
      ${card("deleted", esc(fmtBytes(st.deletedBytes)) + " · " + fmtNum(st.deletedSegments) + " segments, " + fmtNum(st.deletedLedgers) + " ledgers, " + fmtNum(st.deletedGenerationObjects) + " generations")}
      ${card("generations published", fmtNum(st.generationsPublished) + " (" + esc(fmtBytes(st.materializedBytes)) + ")")}
      ${card("materialization lag", esc(fmtBytes(st.materializeLagBytes)) + " · " + fmtNum(st.materializeLagSeconds) + " s")}
      ${card("retention trims", fmtNum(st.retentionTrims))}
    </div>
    <h2>Kept by GC, and why <span class="muted">(sample)</span></h2>
    ${table(["kind", "unit", "bytes", "reason"], (gc.pending || []).slice(0, 20).map((p) => [esc(p.kind), "<code>" + esc(p.unit) + "</code>", esc(fmtBytes(p.bytes || 0)), esc(p.reason)]), [2])}
    <h2>Recent deletions</h2>
    ${table(["time", "kind", "unit", "bytes", "reason"], (gc.recent || []).slice(-20).reverse().map((e) => [esc(new Date(e.time).toLocaleString()), esc(e.kind) + (e.dryRun ? " (dry run)" : ""), "<code>" + esc(e.unit) + "</code>", esc(fmtBytes(e.bytes || 0)), esc(e.reason)]), [3])}`;
}

// ---- router ----

let current = { page: "", arg: "" };
let inFlight = false;

function route() {
  const h = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
  if (h.startsWith("stream/")) return { page: "stream", arg: h.slice(7) };
  return { page: pages[h] ? h : "overview", arg: "" };
}

async function refresh(force) {
  if (inFlight && !force) return;
  inFlight = true;
  const r = route();
  const status = $("#status");
  try {
    await sampleMetrics();
    const html = await pages[r.page](r.arg);
    // Re-render only if the user is still on the same page.
    const now = route();
    if (now.page === r.page && now.arg === r.arg) {
      $("#main").innerHTML = html;
      $("#main").dataset.page = r.page;
      renderCharts();
    }
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.classList.remove("bad");
  } catch (e) {
    status.textContent = "error: " + e.message;
    status.classList.add("bad");
    if (force) $("#main").innerHTML = `<p class="err">${esc(e.message)}</p>`;
  } finally {
    inFlight = false;
  }
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === r.page || (r.page === "stream" && a.dataset.page === "streams"));
  }
  document.title = "Nereus · " + r.page;
}

window.addEventListener("hashchange", () => refresh(true));
window.addEventListener("resize", renderCharts);
refresh(true);
setInterval(() => refresh(false), REFRESH_MS);
