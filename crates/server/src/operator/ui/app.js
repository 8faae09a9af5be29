// watchkeeper operator page: polls the documented JSON endpoints once a second and renders
// tables and small SVG line charts. No dependencies, nothing fetched from elsewhere.
"use strict";

const WATCHERS_URL = "../debug/watchers?watchers=none&furthestBehind=50";
const TIMELINE_URL = "../debug/timeline";
const WINDOW_MS = 10 * 60 * 1000;
const POLL_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";

const errors = [];
function recordError(message) {
  errors.push(message);
  document.getElementById("errors").textContent = errors.slice(-5).join("\n");
}
window.addEventListener("error", (e) => recordError("error: " + e.message));
window.addEventListener("unhandledrejection", (e) => recordError("error: " + e.reason));

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function num(value, digits) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const abs = Math.abs(value);
  if (abs >= 1e9) return (value / 1e9).toFixed(1) + "G";
  if (abs >= 1e6) return (value / 1e6).toFixed(1) + "M";
  if (abs >= 1e4) return (value / 1e3).toFixed(1) + "k";
  if (digits === undefined) digits = abs > 0 && abs < 10 && !Number.isInteger(value) ? 1 : 0;
  return value.toFixed(digits);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 1) return Math.round(seconds * 1000) + " ms";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.round(seconds % 60) + " s";
  return Math.floor(seconds / 3600) + " h " + Math.round((seconds % 3600) / 60) + " min";
}

// ---- charts -------------------------------------------------------------------------------

const REASON_COLORS = {
  unresponsive: "#c62f2f", resource_expired: "#c77700", resource_expired_initial: "#e0a100",
  initial_no_progress: "#7a4cc2", deadline: "#6b7383", too_large_resource_version: "#2f6fd6",
  shutdown: "#9aa3b2",
};

const CHARTS = [
  { id: "population", title: "Watchers", series: [
    { label: "synced", color: "#1f8a4c", get: (s) => s.watchers.synced },
    { label: "unsynced", color: "#c77700", get: (s) => s.watchers.unsynced },
    { label: "initial", color: "#2f6fd6", get: (s) => s.watchers.initial },
  ] },
  { id: "rates", title: "Events / s", series: [
    { label: "in", color: "#7a4cc2", get: (s) => s.eventsInPerSecond },
    { label: "delivered", color: "#2f6fd6", get: (s) => s.eventsDeliveredPerSecond },
  ] },
  { id: "pass-duration", title: "Catch-up pass duration (µs)", series: [
    { label: "mean", color: "#c77700", get: (s) => s.passDurationMicros },
  ] },
  { id: "pass-period", title: "Catch-up pass period (ms)", series: [
    { label: "measured", color: "#1f8a4c", get: (s) => s.passPeriodMillis },
  ] },
  { id: "pushes", title: "Pushes per pass", series: [
    { label: "pushes", color: "#2f6fd6", get: (s) => s.pushesPerPass },
  ] },
  { id: "serializations", title: "Serializations per event", series: [
    { label: "per event", color: "#7a4cc2", get: (s) => s.serializationsPerEvent },
  ] },
  { id: "transitions", title: "Stalls and resyncs / s", series: [
    { label: "stalls", color: "#c77700", get: (s) => s.stalls / s.intervalSeconds },
    { label: "resyncs", color: "#1f8a4c", get: (s) => s.resyncs / s.intervalSeconds },
  ] },
  { id: "terminations", title: "Terminations / s by reason", series: Object.keys(REASON_COLORS).map(
    (reason) => ({ label: reason === "unresponsive" ? "force-close" : reason.replaceAll("_", " "),
      color: REASON_COLORS[reason], get: (s) => s.terminations[reason] / s.intervalSeconds,
      hideIfZero: true })) },
];

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

function setupCharts() {
  const container = $("charts");
  for (const chart of CHARTS) {
    const now = el("span", { class: "now" });
    const box = el("div", { class: "chart", id: "chart-" + chart.id },
      el("h3", {}, chart.title, now));
    const plot = svg("svg", { viewBox: "0 0 300 84", preserveAspectRatio: "none" });
    box.append(plot);
    const legend = el("div", { class: "legend" });
    box.append(legend);
    container.append(box);
    chart.nodes = { now, plot, legend };
  }
}

function spanLabel(ms) {
  const seconds = Math.round(ms / 1000);
  return seconds >= 120 ? "−" + Math.round(seconds / 60) + " min" : "−" + seconds + " s";
}

function drawChart(chart, samples, nowMs) {
  const { now, plot, legend } = chart.nodes;
  // The last ten minutes, or less while the server is young (at least one minute).
  const span = Math.min(WINDOW_MS, Math.max(60 * 1000, samples.length ? nowMs - samples[0].time : 0));
  const W = 300, H = 84, top = 10, bottom = 12;
  const series = chart.series.filter((s) => !s.hideIfZero || samples.some((x) => s.get(x) > 0));
  let max = 0;
  for (const s of series) for (const x of samples) {
    const v = s.get(x);
    if (v !== null && v !== undefined && Number.isFinite(v)) max = Math.max(max, v);
  }
  max = niceMax(max);
  plot.replaceChildren();
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  const x = (t) => W * (1 - (nowMs - t) / span);
  plot.append(svg("line", { x1: 0, x2: W, y1: y(0), y2: y(0), class: "grid" }));
  plot.append(svg("line", { x1: 0, x2: W, y1: y(max), y2: y(max), class: "grid", "stroke-dasharray": "3 3" }));
  const label = svg("text", { x: 2, y: top - 2, class: "axis" });
  label.textContent = num(max);
  plot.append(label);
  const age = svg("text", { x: 2, y: H - 2, class: "axis" });
  age.textContent = spanLabel(span);
  plot.append(age);
  const nowLabel = svg("text", { x: W - 2, y: H - 2, class: "axis", "text-anchor": "end" });
  nowLabel.textContent = "now";
  plot.append(nowLabel);
  for (const s of series) {
    let d = "";
    let pen = false;
    for (const sample of samples) {
      const v = s.get(sample);
      if (v === null || v === undefined || !Number.isFinite(v)) { pen = false; continue; }
      d += (pen ? "L" : "M") + x(sample.time).toFixed(1) + " " + y(v).toFixed(1);
      pen = true;
    }
    if (d) plot.append(svg("path", { d, fill: "none", stroke: s.color, "stroke-width": 1.6,
      "vector-effect": "non-scaling-stroke", "stroke-linejoin": "round" }));
  }
  legend.replaceChildren(...series.map((s) => el("span", {},
    (() => { const i = el("i"); i.style.background = s.color; return i; })(), s.label)));
  const last = samples[samples.length - 1];
  now.textContent = last ? series.map((s) => num(s.get(last))).join(" / ") : "";
}

// ---- tables -------------------------------------------------------------------------------

function isActive(r) {
  const states = r.watchersByState;
  return states.synced + states.unsynced + states.initial + states.pending > 0 || r.history.length > 0;
}

function renderResources(data) {
  const body = $("resources").querySelector("tbody");
  const active = data.resources.filter(isActive);
  const idle = data.resources.length - active.length;
  $("idle-resources").textContent = idle > 0
    ? idle + " resource" + (idle === 1 ? "" : "s") + " with no watchers and no history not shown."
    : "";
  body.replaceChildren(...active.map((r) => {
    const states = r.watchersByState;
    return el("tr", { "data-resource": r.resource },
      el("td", {}, r.resource),
      el("td", { class: "n" }, num(states.synced)),
      el("td", { class: "n" }, num(states.unsynced)),
      el("td", { class: "n" }, num(states.initial)),
      el("td", { class: "n" }, num(r.eventsInPerSecond)),
      el("td", { class: "n" }, num(r.eventsDeliveredPerSecond)),
      el("td", { class: "n" }, r.history.oldest),
      el("td", { class: "n" }, r.history.newest),
      el("td", { class: "n" }, num(r.history.length) + " / " + num(r.history.capacity)),
      el("td", { class: "n" }, duration(r.history.spanSeconds)),
      el("td", { class: "n" }, num(r.reflectorLagRevisions)),
      el("td", { class: "n" }, num(r.totals.stalls)),
      el("td", { class: "n" }, num(r.totals.resyncs)),
      el("td", { class: "n" + (r.forceCloses > 0 ? " bad" : "") }, num(r.forceCloses)));
  }));
}

function scopeText(w) {
  const parts = [];
  parts.push(w.namespace ? "ns " + w.namespace : "all namespaces");
  if (w.labelSelector) parts.push("labels " + w.labelSelector);
  if (w.fieldSelector) parts.push("fields " + w.fieldSelector);
  return parts.join(" · ");
}

function renderBehind(data) {
  const body = $("behind").querySelector("tbody");
  const rows = data.furthestBehind.map((w) => {
    const fill = w.queueFill || 0;
    const bar = el("span", { class: "bar" + (fill >= 0.9 ? " hot" : "") }, el("span"));
    bar.firstChild.style.width = Math.round(fill * 100) + "%";
    return el("tr", { class: w.state, "data-watch-id": w.id, "data-state": w.state },
      el("td", { class: "n" }, w.id),
      el("td", {}, w.resource),
      el("td", {}, el("span", { class: "state " + w.state }, w.state)),
      el("td", {}, w.client || "–"),
      el("td", { class: "wrap" }, w.userAgent || "–"),
      el("td", { class: "wrap" }, scopeText(w)),
      el("td", { class: "n" }, w.position),
      el("td", { class: "n" }, num(w.behindEvents)),
      el("td", { class: "n" }, duration(w.behindSeconds)),
      el("td", {}, bar, el("span", { class: "fill" }, w.queueLength + "/" + w.queueCapacity)),
      el("td", { class: "n" }, duration(w.unsyncedSeconds)),
      el("td", { class: "n" }, w.unsyncedSeconds === null ? "–" : num(w.passesWaited)));
  });
  body.replaceChildren(...rows);
  $("behind-empty").hidden = rows.length > 0;
}

function renderSummary(data, samples) {
  const mode = $("mode");
  mode.textContent = data.mode;
  mode.className = "badge " + data.mode;
  $("store-revision").textContent = data.storeRevision;
  const sum = (f) => data.resources.reduce((total, r) => total + f(r), 0);
  $("total-synced").textContent = num(sum((r) => r.watchersByState.synced));
  $("total-unsynced").textContent = num(sum((r) => r.watchersByState.unsynced));
  $("total-initial").textContent = num(sum((r) => r.watchersByState.initial));
  $("total-in").textContent = num(sum((r) => r.eventsInPerSecond));
  $("total-delivered").textContent = num(sum((r) => r.eventsDeliveredPerSecond));
  const forceCloses = sum((r) => r.forceCloses);
  $("force-closes").textContent = num(forceCloses);
  $("force-closes").setAttribute("data-value", String(forceCloses));
  $("force-close-card").classList.toggle("dim", data.mode !== "legacy" && forceCloses === 0);
  $("total-terminations").textContent = num(sum((r) =>
    Object.values(r.totals.terminations).reduce((a, b) => a + b, 0)));
}

// ---- polling ------------------------------------------------------------------------------

let samples = [];
let lastSampleTime = 0;
let polls = 0;

async function fetchJson(url) {
  const response = await fetch(url, { cache: "no-store", credentials: "same-origin" });
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).message || message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response.json();
}

async function poll() {
  try {
    const since = lastSampleTime ? "?since=" + lastSampleTime : "";
    const [data, timeline] = await Promise.all([fetchJson(WATCHERS_URL), fetchJson(TIMELINE_URL + since)]);
    for (const sample of timeline.samples) {
      samples.push(sample);
      lastSampleTime = Math.max(lastSampleTime, sample.time);
    }
    const nowMs = lastSampleTime || Date.now();
    samples = samples.filter((s) => s.time > nowMs - WINDOW_MS);
    renderSummary(data, samples);
    renderResources(data);
    renderBehind(data);
    for (const chart of CHARTS) drawChart(chart, samples, nowMs);
    polls += 1;
    document.body.setAttribute("data-polls", String(polls));
    const status = $("status");
    status.textContent = "live · updated " + new Date().toLocaleTimeString();
    status.setAttribute("data-ok", "true");
  } catch (error) {
    const status = $("status");
    status.textContent = "cannot reach the server: " + error.message;
    status.setAttribute("data-ok", "false");
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

setupCharts();
console.info("watchkeeper-ui: loaded");
poll();
