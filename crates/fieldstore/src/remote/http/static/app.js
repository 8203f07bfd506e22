// The fieldstore web view: plain JavaScript, no build step, nothing fetched but from this
// server. Facets from /api/v1/axes, fields from /api/v1/list, live arrivals from
// /api/v1/events (Server-Sent Events), the map from /api/v1/field (binary: points row by row),
// a point's values across steps from /api/v1/series. docs/http.md describes the API.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  chosen: {},        // keyword -> value chosen in the facets
  axes: {},
  fields: [],        // listed fields (element JSON), newest arrivals first
  current: null,     // the field on the map
  data: null,        // its decoded points
  coast: null,       // Int16Array of the outlines
  events: null,      // the EventSource
  cursor: { lat: 0, lon: 0 },
  live: 0,
};
window.fieldstore = state; // for tests and the curious

function requestText(obj) {
  return Object.entries(obj).map(([k, v]) => `${k}=${v}`).join(",");
}

function setStatus(text) { $("status").textContent = text; }

async function api(path, params, as) {
  const q = new URLSearchParams(params || {}).toString();
  const r = await fetch(path + (q ? "?" + q : ""), { credentials: "same-origin" });
  if (r.status === 401) {
    $("login").hidden = false;
    setStatus("This server needs a token: type it above.");
    throw new Error("unauthorized");
  }
  if (!r.ok) {
    let msg = `${r.status}`;
    try { const e = await r.json(); msg = `${e.kind}: ${e.message}`; } catch (_) { /* not JSON */ }
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  if (as === "bytes") return r.arrayBuffer();
  return r.json();
}

// ---- facets -------------------------------------------------------------------------------

async function refreshFacets(gen) {
  let axes = {};
  try {
    axes = await api("/api/v1/axes", { request: requestText(state.chosen) });
  } catch (e) {
    if (e.status !== 404) throw e;
  }
  if (gen !== state.generation) return;
  state.axes = axes;
  const box = $("facets");
  box.replaceChildren();
  const keywords = Object.keys(axes);
  for (const kw of keywords) {
    const values = axes[kw];
    if (!values.length) continue;
    const row = document.createElement("div");
    row.className = "facet";
    const id = "facet-" + kw;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = kw;
    const sel = document.createElement("select");
    sel.id = id;
    sel.dataset.keyword = kw;
    const any = document.createElement("option");
    any.value = "";
    any.textContent = values.length === 1 ? values[0] : `any of ${values.length}`;
    sel.append(any);
    for (const v of values) {
      const o = document.createElement("option");
      o.value = v;
      o.textContent = v;
      if (state.chosen[kw] === v) o.selected = true;
      sel.append(o);
    }
    sel.addEventListener("change", () => choose(kw, sel.value));
    row.append(label, sel);
    box.append(row);
  }
  if (!keywords.length) box.textContent = "Nothing matches these choices.";
}

async function choose(kw, value) {
  if (value) state.chosen[kw] = value; else delete state.chosen[kw];
  await refresh();
  const sel = $("facet-" + kw);
  if (sel) sel.focus();
}

// ---- fields -------------------------------------------------------------------------------

function varying(fields) {
  const seen = {};
  for (const f of fields) for (const [k, v] of Object.entries(f.key)) {
    (seen[k] = seen[k] || new Set()).add(v);
  }
  const keys = Object.keys(seen).filter((k) => seen[k].size > 1);
  return keys.length ? keys : ["param", "levelist", "step"].filter((k) => k in seen);
}

const MAX_SHOWN = 500;

async function refreshFields(gen) {
  let fields = [];
  try {
    fields = await api("/api/v1/list", { request: requestText(state.chosen) });
  } catch (e) {
    if (e.status !== 404) throw e;
  }
  if (gen !== state.generation) return;
  // In the order of the keys that differ, numbers as numbers (step 6 before step 12).
  const keys = varying(fields);
  const cmp = (a, b) => {
    const x = Number(a), y = Number(b);
    return Number.isFinite(x) && Number.isFinite(y) ? x - y : String(a).localeCompare(String(b));
  };
  fields.sort((f, g) => {
    for (const k of keys) {
      const c = cmp(f.key[k] ?? "", g.key[k] ?? "");
      if (c) return c;
    }
    return 0;
  });
  state.fields = fields;
  renderFields();
}

function renderFields(fresh) {
  const ul = $("fields");
  ul.replaceChildren();
  const keys = varying(state.fields);
  for (const f of state.fields.slice(0, MAX_SHOWN)) {
    const li = document.createElement("li");
    if (fresh && fresh.has(f.request)) li.className = "new";
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.request = f.request;
    b.textContent = keys.map((k) => `${k}=${f.key[k] ?? "–"}`).join("  ");
    b.title = f.request;
    b.setAttribute("aria-pressed", String(state.current && state.current.request === f.request));
    b.addEventListener("click", () => plot(f));
    li.append(b);
    ul.append(li);
  }
  const n = state.fields.length;
  $("field-count").textContent = n > MAX_SHOWN
    ? `${n} fields match; the first ${MAX_SHOWN} are shown. Choose facets to narrow.`
    : `${n} field${n === 1 ? "" : "s"} match.`;
}

// ---- live arrivals ------------------------------------------------------------------------

function subscribe() {
  if (state.events) state.events.close();
  const q = new URLSearchParams({ request: requestText(state.chosen) });
  const es = new EventSource("/api/v1/events?" + q.toString());
  state.events = es;
  const fresh = new Set();
  es.addEventListener("start", () => $("live").classList.add("on"));
  es.addEventListener("field", (ev) => {
    const f = JSON.parse(ev.data);
    state.live += 1;
    fresh.add(f.request);
    state.fields = [f, ...state.fields.filter((g) => g.request !== f.request)];
    renderFields(fresh);
    setStatus(`${state.live} new field${state.live === 1 ? "" : "s"} arrived live; the newest: ${f.request}`);
    if (state.current && state.current.request === f.request) plot(f);
  });
  es.onerror = () => $("live").classList.remove("on");
}

// Choices made while an earlier refresh is under way win: each refresh has a generation, and
// answers of an older one are dropped.
async function refresh() {
  const gen = (state.generation = (state.generation || 0) + 1);
  setStatus("Loading…");
  await Promise.all([refreshFacets(gen), refreshFields(gen)]);
  if (gen !== state.generation) return;
  subscribe();
  setStatus(`${state.fields.length} field${state.fields.length === 1 ? "" : "s"} match ${requestText(state.chosen) || "(everything)"}.`);
}

// ---- the map ------------------------------------------------------------------------------

function parseField(buf) {
  const dv = new DataView(buf);
  const mlen = dv.getUint32(0, true);
  const meta = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, mlen)));
  const n = meta.n, off = 4 + mlen;
  return {
    meta,
    lat: new Float32Array(buf, off, n),
    lon: new Float32Array(buf, off + 4 * n, n),
    val: new Float32Array(buf, off + 8 * n, n),
    // Rotated grids: each point's box in degrees.
    w: meta.sizes ? new Float32Array(buf, off + 12 * n, n) : null,
    h: meta.sizes ? new Float32Array(buf, off + 16 * n, n) : null,
  };
}

// A perceptually ordered scale (dark blue, cyan, yellow, red), as 256 RGBA words.
const STOPS = [[48, 18, 59], [50, 130, 245], [27, 207, 212], [97, 252, 108], [210, 233, 53], [254, 155, 45], [217, 56, 6], [122, 4, 3]];
const PALETTE = (() => {
  const p = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    const t = i / 255 * (STOPS.length - 1), a = Math.floor(t), b = Math.min(a + 1, STOPS.length - 1), f = t - a;
    const c = STOPS[a].map((x, k) => Math.round(x + (STOPS[b][k] - x) * f));
    p[i] = (255 << 24) | (c[2] << 16) | (c[1] << 8) | c[0];
  }
  return p;
})();
function cssColour(i) { const w = PALETTE[i]; return `rgb(${w & 255},${(w >> 8) & 255},${(w >> 16) & 255})`; }

function project(canvas, lat, lon) {
  return [(lon + 180) / 360 * canvas.width, (90 - lat) / 180 * canvas.height];
}

function drawField(d) {
  const cv = $("map"), W = cv.width, H = cv.height, ctx = cv.getContext("2d");
  const img = ctx.createImageData(W, H);
  const px = new Uint32Array(img.data.buffer);
  px.fill(0xfff8f6f4);
  const { min, max } = d.meta;
  const span = (max - min) || 1;
  let i = 0;
  for (const [count, dlat, dlon] of d.meta.rows) {
    // One pixel more than the spacing, so neighbouring boxes leave no gaps between them.
    let hh = Math.ceil(dlat / 180 * H) + 1;
    let ww = Math.ceil(dlon / 360 * W) + 1;
    for (let j = 0; j < count; j++, i++) {
      const v = d.val[i];
      if (!Number.isFinite(v)) continue;
      if (d.w) {
        ww = Math.ceil(d.w[i] / 360 * W) + 1;
        hh = Math.ceil(d.h[i] / 180 * H) + 1;
      }
      const c = PALETTE[Math.max(0, Math.min(255, Math.round((v - min) / span * 255)))];
      let lon = d.lon[i];
      if (lon >= 180) lon -= 360;
      const x0 = Math.floor((lon + 180) / 360 * W - ww / 2);
      const y0 = Math.floor((90 - d.lat[i]) / 180 * H - hh / 2);
      for (let y = Math.max(0, y0), ye = Math.min(H, y0 + hh); y < ye; y++) {
        const row = y * W;
        for (let x = x0, xe = x0 + ww; x < xe; x++) px[row + ((x % W) + W) % W] = c;
      }
    }
  }
  ctx.putImageData(img, 0, 0);
  drawCoast(ctx, W, H);
  drawCursor(ctx);
}

function drawCoast(ctx, W, H) {
  const c = state.coast;
  if (!c) return;
  ctx.save();
  ctx.strokeStyle = "#111";
  ctx.lineWidth = 0.8;
  ctx.beginPath();
  let k = 0;
  while (k < c.length) {
    const n = c[k++];
    let px = null;
    for (let j = 0; j < n; j++, k += 2) {
      const x = (c[k] / 100 + 180) / 360 * W, y = (90 - c[k + 1] / 100) / 180 * H;
      if (px === null || Math.abs(x - px) > W / 2) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      px = x;
    }
  }
  ctx.stroke();
  ctx.restore();
}

function drawCursor(ctx) {
  if (!state.cursorShown) return;
  const [x, y] = project(ctx.canvas, state.cursor.lat, state.cursor.lon);
  ctx.save();
  ctx.strokeStyle = "#fff";
  ctx.lineWidth = 3;
  ctx.strokeRect(x - 6, y - 6, 12, 12);
  ctx.strokeStyle = "#000";
  ctx.lineWidth = 1.5;
  ctx.strokeRect(x - 6, y - 6, 12, 12);
  ctx.restore();
}

function drawLegend(meta) {
  const cv = $("legend"), ctx = cv.getContext("2d");
  for (let x = 0; x < cv.width; x++) {
    ctx.fillStyle = cssColour(Math.round(x / (cv.width - 1) * 255));
    ctx.fillRect(x, 0, 1, cv.height);
  }
  const labels = $("legend-labels");
  labels.replaceChildren();
  const units = meta.units ? ` ${meta.units}` : "";
  for (let k = 0; k <= 4; k++) {
    const s = document.createElement("span");
    s.textContent = fmt(meta.min + (meta.max - meta.min) * k / 4) + units;
    labels.append(s);
  }
}

function fmt(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "missing";
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(3) : v.toFixed(a >= 100 ? 1 : 3);
}

// A coarse index of the drawn points by whole degrees, for hovering.
function buildIndex(d) {
  const cells = new Map();
  for (let i = 0; i < d.meta.n; i++) {
    const key = Math.floor(d.lat[i] + 90) * 400 + Math.floor(((d.lon[i] + 540) % 360));
    let a = cells.get(key);
    if (!a) cells.set(key, (a = []));
    a.push(i);
  }
  d.cells = cells;
}

function nearestDrawn(d, lat, lon) {
  let best = -1, bd = Infinity;
  const cl = Math.cos(lat * Math.PI / 180);
  for (let r = 1; r <= 8 && best < 0; r *= 2) {
    for (let a = -r; a <= r; a++) for (let b = -r; b <= r; b++) {
      const key = (Math.floor(lat + 90) + a) * 400 + ((Math.floor(((lon + 540) % 360)) + b + 360) % 360);
      for (const i of d.cells.get(key) || []) {
        let dx = Math.abs(d.lon[i] - lon) % 360; dx = Math.min(dx, 360 - dx) * cl;
        const dy = d.lat[i] - lat, dd = dx * dx + dy * dy;
        if (dd < bd) { bd = dd; best = i; }
      }
    }
  }
  return best;
}

async function plot(f) {
  const t0 = performance.now();
  state.current = f;
  for (const b of document.querySelectorAll("#fields button")) {
    b.setAttribute("aria-pressed", String(b.dataset.request === f.request));
  }
  setStatus(`Loading ${f.request}…`);
  try {
    const buf = await api("/api/v1/field", { request: f.request }, "bytes");
    const d = parseField(buf);
    state.data = d;
    drawField(d);
    drawLegend(d.meta);
    const ms = performance.now() - t0;
    state.lastDrawMs = ms;
    buildIndex(d);
    const m = d.meta;
    $("field-title").textContent = `${m.name || m.shortName || "field"}${m.units ? " (" + m.units + ")" : ""}`;
    $("field-info").textContent = `${f.request} · ${m.gridType} grid, ${m.total} points` +
      (m.stride > 1 ? `, every ${m.stride}th row and point drawn` : "") +
      ` · min ${fmt(m.min)}, max ${fmt(m.max)}`;
    $("draw-ms").textContent = `drawn in ${ms.toFixed(0)} ms`;
    $("draw-ms").dataset.ms = ms.toFixed(1);
    const a = $("download");
    a.href = "/api/v1/retrieve?" + new URLSearchParams({ request: f.request, download: "1" });
    a.hidden = false;
    $("map").dataset.drawn = f.request;
    setStatus(`Showing ${f.request}.`);
  } catch (e) {
    setStatus(`Cannot show ${f.request}: ${e.message}`);
  }
}

function eventLatLon(ev) {
  const cv = $("map"), r = cv.getBoundingClientRect();
  const x = (ev.clientX - r.left) / r.width, y = (ev.clientY - r.top) / r.height;
  return { lat: 90 - y * 180, lon: x * 360 - 180 };
}

function showHover(lat, lon) {
  const d = state.data;
  if (!d) return;
  const i = nearestDrawn(d, lat, lon);
  const pos = `${Math.abs(lat).toFixed(2)}°${lat >= 0 ? "N" : "S"} ${Math.abs(lon).toFixed(2)}°${lon >= 0 ? "E" : "W"}`;
  $("hover").textContent = i < 0 ? `${pos}: no point here`
    : `${pos}: ${fmt(d.val[i])}${d.meta.units ? " " + d.meta.units : ""} (nearest drawn point ${d.lat[i].toFixed(2)}, ${d.lon[i].toFixed(2)})`;
}

async function showPoint(lat, lon) {
  const f = state.current;
  if (!f) return;
  state.cursor = { lat, lon };
  state.cursorShown = true;
  if (state.data) drawField(state.data);
  // Every step of this field: its key without the step.
  const key = { ...f.key };
  delete key.step;
  const request = requestText(key);
  $("point-value").textContent = "Loading…";
  try {
    const s = await api("/api/v1/series", { request, lat: lat.toFixed(4), lon: lon.toFixed(4) });
    const here = s.points.find((p) => p.request === f.request);
    const units = s.units ? " " + s.units : "";
    const pv = $("point-value");
    pv.textContent = `${s.name || "value"} at the grid point ${s.lat.toFixed(3)}, ${s.lon.toFixed(3)}: ` +
      `${fmt(here ? here.value : null)}${units}`;
    pv.dataset.value = here && here.value !== null ? String(here.value) : "";
    pv.dataset.lat = String(s.lat);
    pv.dataset.lon = String(s.lon);
    const pts = s.points.map((p) => ({ step: p.key.step ?? "", value: p.value, current: p.request === f.request }))
      .sort((a, b) => stepHours(a.step) - stepHours(b.step));
    const tb = $("series").tBodies[0];
    tb.replaceChildren();
    for (const p of pts) {
      const tr = document.createElement("tr");
      if (p.current) tr.className = "current";
      tr.dataset.value = p.value === null ? "" : String(p.value);
      tr.innerHTML = `<td></td><td></td>`;
      tr.cells[0].textContent = p.step;
      tr.cells[1].textContent = fmt(p.value) + units;
      tb.append(tr);
    }
    drawSeries(pts, s.units);
  } catch (e) {
    $("point-value").textContent = `No values here: ${e.message}`;
  }
}

function stepHours(s) {
  const m = /^(\d+)(?:-(\d+))?([mhd]?)$/.exec(String(s));
  if (!m) return 0;
  const v = Number(m[2] ?? m[1]);
  return m[3] === "m" ? v / 60 : m[3] === "d" ? v * 24 : v;
}

function drawSeries(pts, units) {
  const cv = $("series-chart"), ctx = cv.getContext("2d"), W = cv.width, H = cv.height;
  ctx.clearRect(0, 0, W, H);
  const vals = pts.map((p) => p.value).filter((v) => v !== null);
  if (!vals.length) return;
  const lo = Math.min(...vals), hi = Math.max(...vals), span = (hi - lo) || 1;
  const xs = pts.map((p) => stepHours(p.step)), x0 = Math.min(...xs), xspan = (Math.max(...xs) - x0) || 1;
  const X = (x) => 50 + (x - x0) / xspan * (W - 70), Y = (v) => H - 30 - (v - lo) / span * (H - 50);
  ctx.fillStyle = "#1a1a1a";
  ctx.font = "13px system-ui, sans-serif";
  ctx.fillText(fmt(hi) + (units ? " " + units : ""), 4, 14);
  ctx.fillText(fmt(lo), 4, H - 32);
  ctx.fillText("step (h)", W - 60, 14);
  ctx.strokeStyle = "#0b57d0";
  ctx.lineWidth = 2;
  ctx.beginPath();
  pts.forEach((p, k) => { if (p.value !== null) (k ? ctx.lineTo : ctx.moveTo).call(ctx, X(xs[k]), Y(p.value)); });
  ctx.stroke();
  for (let k = 0; k < pts.length; k++) {
    if (pts[k].value === null) continue;
    ctx.fillStyle = pts[k].current ? "#d93025" : "#0b57d0";
    ctx.beginPath();
    ctx.arc(X(xs[k]), Y(pts[k].value), pts[k].current ? 5 : 3.5, 0, 2 * Math.PI);
    ctx.fill();
    ctx.fillStyle = "#1a1a1a";
    ctx.fillText(String(pts[k].step), X(xs[k]) - 6, H - 12);
  }
}

function keyboard(ev) {
  const step = ev.shiftKey ? 10 : 1;
  const c = state.cursor;
  const moves = { ArrowLeft: [0, -step], ArrowRight: [0, step], ArrowUp: [step, 0], ArrowDown: [-step, 0] };
  if (moves[ev.key]) {
    ev.preventDefault();
    c.lat = Math.max(-90, Math.min(90, c.lat + moves[ev.key][0]));
    c.lon = ((c.lon + moves[ev.key][1] + 540) % 360) - 180;
    state.cursorShown = true;
    if (state.data) drawField(state.data);
    showHover(c.lat, c.lon);
  } else if (ev.key === "Enter" || ev.key === " ") {
    ev.preventDefault();
    showPoint(c.lat, c.lon);
  }
}

async function start() {
  const cv = $("map");
  cv.addEventListener("mousemove", (ev) => { const p = eventLatLon(ev); showHover(p.lat, p.lon); });
  cv.addEventListener("click", (ev) => { const p = eventLatLon(ev); showPoint(p.lat, p.lon); });
  cv.addEventListener("keydown", keyboard);
  $("clear").addEventListener("click", () => { state.chosen = {}; refresh(); });
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    document.cookie = "fieldstore_token=" + encodeURIComponent($("token").value) + "; path=/; SameSite=Strict";
    $("login").hidden = true;
    refresh();
  });
  try {
    const buf = await fetch("/coastlines.bin").then((r) => r.arrayBuffer());
    state.coast = new Int16Array(buf);
  } catch (_) { /* the map goes without outlines */ }
  const ctx = cv.getContext("2d");
  ctx.fillStyle = "#f4f6f8";
  ctx.fillRect(0, 0, cv.width, cv.height);
  drawCoast(ctx, cv.width, cv.height);
  try { await refresh(); } catch (e) { setStatus(`Cannot reach the store: ${e.message}`); }
}

start();
