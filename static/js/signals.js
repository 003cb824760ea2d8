// Any signal: a searchable picker of GET /api/signals; the picked signals stream over the Lab's WS /ws
// ({"type": "signals"}, lab/web/signals.py) and plot live in a sliding window on one canvas, one panel
// per unit. A canvas of our own, not Plotly: with 8 traces at 25 Hz Plotly's SVG redraw costs tens of
// milliseconds in a software-rendered browser, the canvas about one (experiments/bench_signals.py).
// Memory is bounded: one ring buffer of CAPACITY samples for the pick; the DOM changes only when the
// pick or the catalog does.
//
// The page's socket is window.labSocket (static/js/socket.js): this module takes its own message types
// from it (on) and sends the pick again at every new connection (onOpen: a reconnect, a new server).
import { $, fmtValue } from './util.js';

const WINDOW_S = 10; // [s] of simulation time shown
const CAPACITY = 1024; // samples kept: the window at up to 100 Hz
const CHART_H = 400; // [CSS px] the chart's height, shared by the panels (each PLOT_MIN..PLOT_MAX high)
const PLOT_MIN = 60, PLOT_MAX = 170; // [CSS px] plot area of one unit's panel (its legend rows come on top)
const LEGEND_ROW = 15; // [CSS px]
const AXIS_H = 20; // [CSS px] the time axis under the last panel
const LEFT = 62; // [CSS px] room for the y tick labels
const FONT = '11px ui-monospace, "DejaVu Sans Mono", Menlo, monospace';
const COLORS = ['#5fb3ff', '#f39a2e', '#7ee081', '#ff6b81', '#c792ea', '#ffd166', '#4dd0e1', '#ff8a65',
  '#aed581', '#f48fb1', '#b0bec5', '#ba68c8', '#4db6ac', '#e57373', '#9fa8da', '#fff176'];
const MIN_SPAN = 0.005; // the y axis spans at least this fraction of the values' magnitude
const MARK = 'signals-redraw';

// Samples of n signals in a fixed circular buffer: t (cap,), values (cap, n) row-major, NaN for null.
class Ring {
  constructor(n, cap = CAPACITY) {
    Object.assign(this, { n, cap, head: 0, count: 0 });
    this.t = new Float64Array(cap);
    this.v = new Float64Array(cap * n);
  }

  push(t, values) {
    const i = this.head;
    this.t[i] = t;
    for (let k = 0; k < this.n; k++) {
      const x = values[k];
      this.v[i * this.n + k] = x === null || x === undefined ? NaN : x;
    }
    this.head = (i + 1) % this.cap;
    this.count = Math.min(this.count + 1, this.cap);
  }

  at(j) { return (this.head - this.count + j + this.cap) % this.cap; } // slot of the j-th oldest sample
  lastT() { return this.count ? this.t[this.at(this.count - 1)] : -Infinity; }
}

// Step and ticks for an axis from lo to hi with about n intervals.
function ticks(lo, hi, n) {
  const raw = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  const step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-6; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return { step, out };
}

function tickLabel(v, step) {
  if (Math.abs(v) >= 1e5 || step < 1e-6) return v.toExponential(2);
  return v.toFixed(Math.max(0, -Math.floor(Math.log10(step))));
}

// The picked signals on one canvas: a panel per unit (traces of one unit share a y axis), a shared
// time axis, a legend with each trace's latest value. Redraws once per animation frame with new data.
class SignalChart {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.names = [];
    this.ring = new Ring(0);
    this.panels = [];
    this.pending = false;
    this.redrawMs = new Float64Array(256); // the last redraw durations, a ring too
    this.redraws = 0;
    this.samples = 0;
    new ResizeObserver(() => this.layout()).observe(canvas.parentElement);
  }

  // new signals (names, units: the server's confirmation); samples of signals kept are carried over
  setSignals(names, units) {
    const old = this.ring;
    const from = names.map((n) => this.names.indexOf(n));
    const ring = new Ring(names.length);
    const row = new Array(names.length);
    for (let j = 0; j < old.count; j++) {
      const s = old.at(j);
      for (let k = 0; k < names.length; k++) row[k] = from[k] < 0 ? NaN : old.v[s * old.n + from[k]];
      ring.push(old.t[s], row);
    }
    this.names = names;
    this.ring = ring;
    const byUnit = new Map();
    names.forEach((n, k) => {
      if (!byUnit.has(units[k])) byUnit.set(units[k], []);
      byUnit.get(units[k]).push(k);
    });
    this.panels = [...byUnit].map(([unit, traces]) => ({ unit, traces }));
    this.layout();
  }

  add(t, values) {
    if (t < this.ring.lastT() - 1e-9) this.ring = new Ring(this.names.length); // a reset: time went back
    this.ring.push(t, values);
    this.samples += 1;
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }

  // canvas size from its box and the legend rows each panel needs
  layout() {
    const ctx = this.ctx;
    const w = this.canvas.parentElement.clientWidth;
    ctx.font = FONT;
    const valueW = ctx.measureText(' -0.00000e+0').width;
    let legendH = 0;
    for (const p of this.panels) {
      let x = LEFT, rows = 1;
      p.legend = p.traces.map((k) => {
        const width = 14 + ctx.measureText(this.names[k]).width + valueW;
        if (x + width > w - 8 && x > LEFT) { x = LEFT; rows += 1; }
        const at = { k, x, row: rows - 1 };
        x += width + 10;
        return at;
      });
      p.rows = rows;
      legendH += rows * LEGEND_ROW + 10;
    }
    const n = this.panels.length;
    this.plotH = Math.max(PLOT_MIN, Math.min(PLOT_MAX, Math.floor((CHART_H - AXIS_H - 6 - legendH) / Math.max(1, n))));
    let y = 6;
    for (const p of this.panels) {
      p.top = y;
      p.plotTop = y + p.rows * LEGEND_ROW + 2;
      y = p.plotTop + this.plotH + 8;
    }
    const h = this.panels.length ? y - 8 + AXIS_H : 0;
    const dpr = window.devicePixelRatio || 1;
    this.cssW = w;
    this.cssH = h;
    this.dpr = dpr;
    this.canvas.style.height = `${h}px`;
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    this.schedule();
  }

  draw() {
    performance.mark(MARK);
    const { ctx, ring } = this;
    const W = this.cssW, right = W - 10, pw = right - LEFT;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.clearRect(0, 0, W, this.cssH);
    if (this.panels.length && ring.count) {
      ctx.font = FONT;
      ctx.lineWidth = 1;
      const t1 = Math.max(ring.lastT(), WINDOW_S), t0 = t1 - WINDOW_S;
      let j0 = 0;
      while (j0 < ring.count - 1 && ring.t[ring.at(j0 + 1)] < t0) j0++; // the one just before the window too
      const xOf = (t) => LEFT + ((t - t0) / WINDOW_S) * pw;
      const bottom = this.cssH - AXIS_H;
      const tt = ticks(t0, t1, 5);
      ctx.strokeStyle = '#1f2735';
      ctx.fillStyle = '#8b96a8';
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      ctx.beginPath();
      for (const t of tt.out) {
        const x = Math.round(xOf(t)) + 0.5;
        ctx.moveTo(x, this.panels[0].plotTop);
        ctx.lineTo(x, bottom);
        ctx.fillText(tickLabel(t, tt.step), x, bottom + 4);
      }
      ctx.stroke();
      ctx.textAlign = 'left';
      ctx.fillText('t [s]', 4, bottom + 4);
      for (const p of this.panels) this.drawPanel(p, j0, xOf, right);
    }
    const m = performance.measure(MARK, MARK);
    this.redrawMs[this.redraws % this.redrawMs.length] = m.duration;
    this.redraws += 1;
    performance.clearMarks(MARK);
    performance.clearMeasures(MARK);
  }

  drawPanel(p, j0, xOf, right) {
    const { ctx, ring } = this;
    const n = ring.n, v = ring.v;
    let lo = Infinity, hi = -Infinity;
    for (let j = j0; j < ring.count; j++) {
      const base = ring.at(j) * n;
      for (const k of p.traces) {
        const x = v[base + k];
        if (x < lo) lo = x;
        if (x > hi) hi = x;
      }
    }
    if (!(lo <= hi)) { lo = -1; hi = 1; } // nothing finite in view
    // at least 0.5 % of the magnitude (1e-3 around zero): solver noise on a steady value stays flat
    const span = Math.max(hi - lo, Math.max(Math.abs(hi), Math.abs(lo)) * MIN_SPAN || 1e-3);
    const mid = (hi + lo) / 2;
    lo = mid - span * 0.54;
    hi = mid + span * 0.54;
    const top = p.plotTop, h = this.plotH;
    const yOf = (x) => top + h - ((x - lo) / (hi - lo)) * h;
    // frame, horizontal grid, y labels, unit
    ctx.strokeStyle = '#273041';
    ctx.strokeRect(LEFT + 0.5, top + 0.5, right - LEFT, h);
    const yt = ticks(lo, hi, 3);
    ctx.strokeStyle = '#1f2735';
    ctx.fillStyle = '#8b96a8';
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    ctx.beginPath();
    for (const y of yt.out) {
      const py = Math.round(yOf(y)) + 0.5;
      ctx.moveTo(LEFT, py);
      ctx.lineTo(right, py);
      if (py > top + 6 && py < top + h - 6) ctx.fillText(tickLabel(y, yt.step), LEFT - 5, py); // not on the edges
    }
    ctx.stroke();
    ctx.textAlign = 'left';
    ctx.fillText(`[${p.unit}]`, 4, p.top + LEGEND_ROW / 2);
    // traces, clipped to the plot area; a gap (null) lifts the pen
    ctx.save();
    ctx.beginPath();
    ctx.rect(LEFT, top, right - LEFT, h);
    ctx.clip();
    ctx.lineWidth = 1.5;
    for (const k of p.traces) {
      ctx.strokeStyle = COLORS[k % COLORS.length];
      ctx.beginPath();
      let pen = false;
      for (let j = j0; j < ring.count; j++) {
        const s = ring.at(j);
        const x = v[s * n + k];
        if (Number.isNaN(x)) { pen = false; continue; }
        const px = xOf(ring.t[s]), py = yOf(x);
        if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
        pen = true;
      }
      ctx.stroke();
    }
    ctx.restore();
    // legend: name and latest value of each trace
    const last = ring.at(ring.count - 1) * n;
    ctx.textBaseline = 'middle';
    for (const { k, x, row } of p.legend) {
      const y = p.top + row * LEGEND_ROW + LEGEND_ROW / 2;
      ctx.fillStyle = COLORS[k % COLORS.length];
      ctx.fillRect(x, y - 4, 9, 9);
      ctx.fillStyle = '#d7dee8';
      ctx.fillText(this.names[k], x + 14, y);
      const w = ctx.measureText(this.names[k]).width;
      ctx.fillStyle = '#8b96a8';
      ctx.fillText(fmtValue(Number.isNaN(v[last + k]) ? null : v[last + k], 5), x + 20 + w, y);
    }
  }

  stats() {
    const k = Math.min(this.redraws, this.redrawMs.length);
    const ms = Array.from(this.redrawMs.subarray(0, k)).sort((a, b) => a - b);
    const q = (f) => (k ? ms[Math.min(k - 1, Math.floor(f * k))] : null);
    return {
      redraws: this.redraws, samples: this.samples, buffered: this.ring.count, traces: this.names.length,
      redraw_ms: { mean: k ? ms.reduce((a, b) => a + b, 0) / k : null, p50: q(0.5), p95: q(0.95), max: k ? ms[k - 1] : null },
    };
  }
}

// ---- the picker ------------------------------------------------------------------------------
const chart = new SignalChart($('sig-chart'));
const items = new Map(); // signal name -> its button in the list
let maxPick = 16;
let picked = []; // what the person picked, in order
let confirmed = []; // what the server streams (its last signals_picked)
let sock = null; // the page's StreamSocket, once lab.js has made it
let lastData = 0; // performance.now() of the last sample

async function loadCatalog() {
  try {
    const res = await fetch('/api/signals');
    const cat = await res.json();
    if (!res.ok) throw Object.assign(new Error(cat.error || `HTTP ${res.status}`), { hint: cat.hint });
    renderList(cat);
  } catch (e) {
    showError(`the signal catalog did not load: ${e.message}`, e.hint || 'reload the page');
  }
}

function renderList(cat) {
  maxPick = cat.max_pick;
  items.clear();
  const groups = cat.groups.map((g) => {
    const sec = document.createElement('div');
    sec.className = 'sig-group';
    const h = document.createElement('h4');
    h.title = g.doc;
    h.append(g.label, Object.assign(document.createElement('small'), { textContent: `${g.signals.length}` }));
    sec.append(h);
    for (const s of g.signals) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'sig-item';
      b.dataset.name = s.name;
      b.dataset.search = `${s.name} ${g.label} ${s.unit}`.toLowerCase();
      b.title = `${s.name} [${s.unit}] — ${g.doc}`;
      b.append(Object.assign(document.createElement('span'), { textContent: s.name }),
        Object.assign(document.createElement('span'), { className: 'u', textContent: s.unit }));
      items.set(s.name, b);
      sec.append(b);
    }
    return sec;
  });
  $('sig-list').replaceChildren(...groups);
  filter();
  showPicked();
}

// show the items whose text has every word of the search; the first one shown is what Enter picks
function filter() {
  const words = $('sig-search').value.toLowerCase().split(/\s+/).filter(Boolean);
  let first = null, shown = 0;
  for (const sec of $('sig-list').querySelectorAll('.sig-group')) {
    let any = false;
    for (const b of sec.querySelectorAll('.sig-item')) {
      const ok = words.every((w) => b.dataset.search.includes(w));
      b.hidden = !ok;
      b.classList.remove('first');
      if (ok) { any = true; shown += 1; first = first || b; }
    }
    sec.hidden = !any;
  }
  if (first && words.length) first.classList.add('first');
  $('sig-count').textContent = `${shown} of ${items.size} signals shown · ${picked.length} / ${maxPick} picked`;
  return first;
}

function toggle(name) {
  if (picked.includes(name)) picked = picked.filter((n) => n !== name);
  else if (picked.length >= maxPick) {
    showError(`at most ${maxPick} signals stream at once`, 'drop one (× on its chip) before picking another');
    return;
  } else picked = [...picked, name];
  sendPick();
  showPicked();
}

function setPick(names) {
  picked = [...names];
  sendPick();
  showPicked();
}

function sendPick() {
  if (sock?.send({ type: 'signals', names: picked })) showState(picked.length ? 'waiting' : 'idle');
}

// chips, the list's marks and the count for the current pick
function showPicked() {
  for (const [name, b] of items) {
    const k = picked.indexOf(name);
    b.classList.toggle('on', k >= 0);
    b.style.setProperty('--sig-color', k >= 0 ? COLORS[k % COLORS.length] : '');
    b.disabled = k < 0 && picked.length >= maxPick;
  }
  $('sig-chips').replaceChildren(...picked.map((name, k) => {
    const chip = document.createElement('span');
    chip.className = 'sig-chip';
    chip.dataset.name = name;
    chip.style.setProperty('--sig-color', COLORS[k % COLORS.length]);
    const x = Object.assign(document.createElement('button'), { type: 'button', textContent: '×', title: `drop ${name}` });
    x.addEventListener('click', () => toggle(name));
    chip.append(document.createElement('i'), name, x);
    return chip;
  }));
  $('sig-clear').disabled = !picked.length;
  $('sig-hint').hidden = picked.length > 0;
  filter();
}

function showState(state) {
  const el = $('sig-state');
  el.dataset.state = state;
  el.textContent = state === 'idle' ? 'nothing picked'
    : state === 'waiting' ? 'waiting for the stream…'
      : state === 'quiet' ? 'no new samples: paused or stopped'
        : `live · ${confirmed.length} signal${confirmed.length === 1 ? '' : 's'}`;
}

function showError(message, hint) {
  const box = $('sig-error');
  box.hidden = !message;
  box.querySelector('b').textContent = message || '';
  box.querySelector('span').textContent = hint ? ` — ${hint}` : '';
}

function onSample(msg) {
  if (msg.names.length !== chart.names.length || msg.names.some((n, k) => n !== chart.names[k])) return; // an older pick
  chart.add(msg.t, msg.values);
  if ($('sig-state').dataset.state !== 'live') showState('live');
  lastData = performance.now();
}

function onPicked(msg) {
  confirmed = msg.names;
  chart.setSignals(msg.names, msg.units);
  showState(confirmed.length ? 'waiting' : 'idle');
  if (msg.dropped) { // the model was switched and lacks some: the server's pick is now the one
    showError(`the new model has no ${msg.dropped.join(', ')}`, 'dropped from the pick');
    picked = [...msg.names];
    loadCatalog();
  } else showError(null);
}

function onRefused(msg) {
  showError(msg.error, msg.hint);
  picked = [...confirmed]; // the server streams on what it had
  showPicked();
}

// the page socket: this module's message types, and the pick sent again at every (re)connect
function attach(s) {
  sock = s;
  sock.on('signals', onSample);
  sock.on('signals_picked', onPicked);
  sock.on('error', (msg) => { if (msg.about === 'signals') onRefused(msg); });
  sock.on('hello', () => { if (items.size) loadCatalog(); }); // a new connection: maybe a new server or model
  sock.onOpen(() => { if (picked.length) sendPick(); });
}

$('sig-list').addEventListener('click', (ev) => {
  const b = ev.target.closest('.sig-item');
  if (b) toggle(b.dataset.name);
});
$('sig-search').addEventListener('input', filter);
$('sig-search').addEventListener('keydown', (ev) => {
  if (ev.key !== 'Enter') return;
  const first = filter();
  if (first && !first.disabled) toggle(first.dataset.name);
});
$('sig-clear').addEventListener('click', () => setPick([]));
// window.labSocket is set by lab.js once its imports (this module among them) have run
const waitSocket = setInterval(() => { if (window.labSocket) { clearInterval(waitSocket); attach(window.labSocket); } }, 50);
setInterval(() => { if (confirmed.length && lastData && performance.now() - lastData > 1500) showState('quiet'); }, 500);
loadCatalog();

// for tests and experiments/bench_signals.py
window.labSignals = { pick: setPick, picked: () => [...picked], stats: () => chart.stats() };
