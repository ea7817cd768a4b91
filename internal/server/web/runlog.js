// nekro web UI: the run log (GET /api/runs, every chat the token sees)
// and the operator's dashboard (GET /api/stats), its charts drawn here as
// SVG. It uses app.js's helpers ($, api, el, runView, fmtMS, fmtTime).
"use strict";

const runLogPage = 50;

const runLog = {
  gen: 0, // bumped on every search: answers of an older one are dropped
  next: null, // next_before of the list shown
  query: "", // the query string of the list shown
  byID: new Map(), // run id -> run, of the rows shown
};

// runQuery reads the filters into the query string of GET /api/runs.
function runQuery() {
  const q = new URLSearchParams();
  const add = (name, v) => { if (v) q.set(name, v); };
  add("q", $("rf-q").value.trim());
  add("chat", $("rf-chat").value.trim());
  add("stop_type", $("rf-stop").value);
  add("method", $("rf-method").value.trim());
  for (const [name, id] of [["since", "rf-since"], ["until", "rf-until"]]) {
    const v = $(id).value; // local time, without a zone
    if (v) {
      const d = new Date(v);
      if (!isNaN(d)) q.set(name, d.toISOString().replace(/\.\d+Z$/, "Z"));
    }
  }
  return q;
}

function clearRunLog() {
  runLog.gen++;
  runLog.next = null;
  runLog.byID.clear();
  $("run-rows").replaceChildren();
  $("runs-more").hidden = true;
  $("runs-empty").hidden = true;
  $("runs-error").hidden = true;
  $("run-detail").hidden = true;
  $("run-detail").replaceChildren();
}

// loadRunLog shows the first page of the runs the filters select; more
// appends the next (older) page.
async function loadRunLog({ more = false } = {}) {
  if (!more) {
    clearRunLog();
    runLog.query = runQuery().toString();
  }
  const gen = runLog.gen;
  const q = new URLSearchParams(runLog.query);
  q.set("limit", String(runLogPage));
  if (more && runLog.next) q.set("before", runLog.next);
  let page;
  try {
    page = await api("/api/runs?" + q.toString());
  } catch (e) {
    if (gen !== runLog.gen) return;
    if (e.status === 401) throw e;
    $("runs-error").textContent = "Cannot search the runs: " + e.message;
    $("runs-error").hidden = false;
    return;
  }
  if (gen !== runLog.gen) return;
  for (const r of page.runs) {
    runLog.byID.set(r.run_id, r);
    $("run-rows").append(runRow(r));
  }
  runLog.next = page.next_before;
  $("runs-more").hidden = !page.next_before;
  $("runs-empty").hidden = runLog.byID.size > 0;
}

function runRow(r) {
  let preview = (r.output || "").replace(/\s+/g, " ").trim();
  if (preview.length > 120) preview = preview.slice(0, 120) + "…";
  const calls = Array.isArray(r.calls) ? r.calls : [];
  const open = el("button", { type: "button", className: "run-link", title: "Show run " + r.run_id }, fmtTime(r.time));
  open.addEventListener("click", () => showRun(r.run_id));
  return el("tr", { "data-run": r.run_id, "data-chat": r.chat_key },
    el("td", {}, open),
    el("td", {}, el("code", {}, r.chat_key)),
    el("td", {}, el("span", { className: "stop " + r.stop_type }, r.stop_type)),
    el("td", {}, fmtMS(r.duration_ms || 0)),
    el("td", {}, String(calls.length) + (calls.some((c) => c.error) ? " (errors)" : "")),
    el("td", { className: "run-preview" }, preview));
}

// promptContext says how the turn's prompt fit the model's window: its
// estimated tokens, the window, and what older history was summarized or
// left out ("" for records without one).
function promptContext(c) {
  if (!c || !c.window) return "";
  let s = "about " + c.tokens + " of the " + (c.window - c.reserve) + " tokens the window of " +
    (c.group || "the model") + " leaves (" + c.window + ", " + c.reserve + " kept for the answer); " +
    c.shown + " messages shown";
  if (c.summary) {
    s += "; a summary of " + c.summary_covered + " older messages (through #" + c.summary_through + ", about " +
      c.summary_tokens + " tokens)" + (c.summarized ? ", written by this turn for " + c.summarized + " of them" : ", kept from before");
  }
  if (c.omitted) s += "; " + c.omitted + " older messages left out";
  if (c.note) s += " (" + c.note + ")";
  return s;
}

// showRun shows one run's record: where it ran, the model group that
// answered when the record says, its code, output and calls.
function showRun(id) {
  const r = runLog.byID.get(id);
  if (!r) return;
  for (const tr of $("run-rows").children) {
    if (tr.dataset.run === id) tr.setAttribute("aria-selected", "true");
    else tr.removeAttribute("aria-selected");
  }
  const facts = [
    ["run", r.run_id], ["chat", r.chat_key], ["time", r.time ? new Date(r.time).toLocaleString() : ""],
    ["turn", r.turn_id ? r.turn_id + ", run " + r.iteration : "the playground"],
    ["model group", r.model_group || ""], ["stop", r.stop_type], ["exit code", String(r.exit_code)],
    ["duration", fmtMS(r.duration_ms || 0)], ["prompt", promptContext(r.context)],
  ].filter(([, v]) => v);
  const dl = el("dl", { className: "facts" });
  for (const [k, v] of facts) dl.append(el("dt", {}, k), el("dd", {}, v));
  const close = el("button", { type: "button", className: "secondary" }, "Close");
  close.addEventListener("click", () => { $("run-detail").hidden = true; });
  $("run-detail").replaceChildren(el("h2", {}, "Run ", el("code", {}, r.run_id), " ", close), dl, runView(r));
  $("run-detail").hidden = false;
  $("run-detail").scrollIntoView({ block: "nearest" });
}

// ---- The dashboard.

const svgNS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  e.append(...children.filter(Boolean));
  return e;
}

function clearDashboard() {
  for (const id of ["dash-totals", "dash-charts", "dash-ranks"]) $(id).replaceChildren();
  $("dash-error").hidden = true;
}

// niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// chart draws series over the buckets: bars (stacked when several) or,
// with lines, one line each. Every bar and point has a title with its
// value, for a pointer or a screen reader.
function chart(title, buckets, series, { lines = false, unit = "", bucket = "hour" } = {}) {
  const W = 640, H = 180, left = 44, right = 8, top = 10, bottom = 22;
  const n = buckets.length;
  const slot = (W - left - right) / Math.max(n, 1);
  const totals = buckets.map((_, i) => lines ? Math.max(...series.map((s) => s.values[i] || 0)) : series.reduce((a, s) => a + (s.values[i] || 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  const label = (v) => (unit === "ms" ? fmtMS(Math.round(v)) : String(Math.round(v * 100) / 100));
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart", "aria-label": title });
  g.append(svg("title", {}, title));
  // Grid and axis labels.
  for (const f of [0, 0.5, 1]) {
    const v = max * f;
    g.append(svg("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), class: "grid" }),
      svg("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, label(v)));
  }
  const every = Math.max(1, Math.ceil(n / 8));
  buckets.forEach((b, i) => {
    if (i % every) return;
    const d = new Date(b.start);
    const text = bucket === "day" ? d.toLocaleDateString(undefined, { month: "short", day: "numeric" })
      : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
    g.append(svg("text", { x: left + slot * (i + 0.5), y: H - 6, "text-anchor": "middle", class: "axis" }, text));
  });
  if (lines) {
    for (const s of series) {
      // A bucket without a value (nothing to average) breaks the line.
      let run = [];
      const flush = () => {
        if (run.length > 1) g.append(svg("polyline", { points: run.join(" "), fill: "none", stroke: s.color, "stroke-width": 2, class: "series" }));
        run = [];
      };
      buckets.forEach((_, i) => {
        const v = s.values[i];
        if (v === null || v === undefined) return flush();
        const x = left + slot * (i + 0.5);
        run.push(x + "," + y(v));
        g.append(svg("circle", { cx: x, cy: y(v), r: 2.5, fill: s.color, class: "point" }, svg("title", {}, s.name + ": " + label(v))));
      });
      flush();
    }
  } else {
    buckets.forEach((b, i) => {
      let base = 0;
      for (const s of series) {
        const v = s.values[i] || 0;
        if (v > 0) {
          g.append(svg("rect", { x: left + slot * i + slot * 0.15, width: Math.max(slot * 0.7, 1), y: y(base + v), height: y(base) - y(base + v),
            fill: s.color, class: "bar" }, svg("title", {}, s.name + ": " + label(v))));
        }
        base += v;
      }
    });
  }
  const legend = el("p", { className: "legend" }, ...series.map((s) => {
    const key = svg("svg", { width: 10, height: 10, "aria-hidden": "true" }, svg("rect", { width: 10, height: 10, fill: s.color }));
    return el("span", {}, key, " " + s.name);
  }));
  return el("figure", { className: "chart" }, el("figcaption", {}, title), g, legend);
}

function avg(sum, n) {
  return n ? sum / n : null;
}

function rankTable(title, head, rows) {
  const table = el("table", { className: "rank" },
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, c))))));
  return el("section", { className: "rank" }, el("h3", {}, title), rows.length ? table : el("p", { className: "hint" }, "Nothing yet."));
}

async function loadDashboard() {
  const [since, bucket] = $("dash-window").value.split("|");
  let st;
  try {
    st = await api("/api/stats?since=" + encodeURIComponent(since) + "&bucket=" + bucket);
  } catch (e) {
    if (e.status === 401) throw e;
    clearDashboard();
    $("dash-error").textContent = "Cannot load the numbers: " + e.message;
    $("dash-error").hidden = false;
    return;
  }
  clearDashboard();
  const t = st.totals;
  const totals = [
    ["turns", t.turns], ["failed turns", t.failed_turns], ["runs", t.runs], ["run errors", t.run_errors],
    ["model requests", t.model_requests], ["plugin calls", t.calls], ["call errors", t.call_errors],
    ["turn time (avg)", t.finished_turns ? fmtMS(Math.round(t.turn_ms / t.finished_turns)) : "–"],
    ["model latency (avg)", t.model_requests ? fmtMS(Math.round(t.model_ms / t.model_requests)) : "–"],
  ];
  if (t.tokens !== undefined) totals.push(["tokens", t.tokens]);
  for (const [k, v] of totals) $("dash-totals").append(el("div", {}, el("dt", {}, k), el("dd", {}, String(v))));

  const s = st.series;
  const col = (f) => s.map(f);
  const opts = { bucket: st.bucket };
  $("dash-charts").append(
    chart("Turns and runs", s, [
      { name: "turns", color: "#0a66c2", values: col((b) => b.turns) },
      { name: "runs", color: "#78a9db", values: col((b) => b.runs) }], opts),
    chart("Errors", s, [
      { name: "failed turns", color: "#b00020", values: col((b) => b.failed_turns) },
      { name: "run errors", color: "#e07080", values: col((b) => b.run_errors) },
      { name: "call errors", color: "#f0b0b8", values: col((b) => b.call_errors) }], opts),
    chart("Model requests", s, [{ name: "requests", color: "#1b7f3a", values: col((b) => b.model_requests) }], opts));
  if (s.some((b) => b.tokens !== undefined)) {
    $("dash-charts").append(chart("Tokens", s, [{ name: "tokens", color: "#7a5b00", values: col((b) => b.tokens || 0) }], opts));
  }
  $("dash-charts").append(chart("Latency (average)", s, [
    { name: "turn", color: "#0a66c2", values: col((b) => avg(b.turn_ms, b.finished_turns)) },
    { name: "model request", color: "#1b7f3a", values: col((b) => avg(b.model_ms, b.model_requests)) },
    { name: "run", color: "#b281eb", values: col((b) => avg(b.run_ms, b.runs)) }], { ...opts, lines: true, unit: "ms" }));

  const ms = (sum, n) => (n ? fmtMS(Math.round(sum / n)) : "–");
  $("dash-ranks").append(
    rankTable("Chats", ["chat", "turns", "runs", "errors", "model requests"],
      st.chats.map((c) => [el("code", {}, c.chat_key), String(c.turns), String(c.runs),
        String(c.failed_turns + c.run_errors + c.call_errors), String(c.model_requests)])),
    rankTable("Plugins", ["plugin", "calls", "errors", "avg time"],
      st.plugins.map((p) => [p.plugin ? el("code", {}, p.plugin) : "(no plugin now)", String(p.calls), String(p.errors), ms(p.ms, p.calls)])),
    rankTable("Methods", ["method", "calls", "errors", "avg time"],
      st.methods.map((m) => [el("code", {}, m.method), String(m.calls), String(m.errors), ms(m.ms, m.calls)])));
}

document.addEventListener("DOMContentLoaded", () => {
  $("run-filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (state.me) loadRunLog().catch((e) => say(e.message, true));
  });
  $("runs-more").addEventListener("click", () => loadRunLog({ more: true }).catch((e) => say(e.message, true)));
  const reload = () => { if (state.me) loadDashboard().catch((e) => say(e.message, true)); };
  $("dash-window").addEventListener("change", reload);
  $("dash-reload").addEventListener("click", reload);
});
