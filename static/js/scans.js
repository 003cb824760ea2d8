// The scans page: launch form, list of scans, live detail (progress + ETA, heatmap, per-point drill-down).
// Field names match lab/scans/manager.py (describe) and lab/web/scans_page.py.
import { $, api, fmtValue as fmt, toast } from './util.js';

const KINDS = Object.fromEntries(JSON.parse($('kinds-data').textContent).map((k) => [k.name, k]));
const MAX_POINTS = 10000;
const STATUS_PILL = {
  done: 'ok', running: 'warn', queued: 'warn', cancelled: 'muted', interrupted: 'warn', failed: 'bad',
};

let selected = null;       // id of the scan shown
let scan = null;           // its last GET /api/scans/<id>
let selectedPoint = null;  // index of the drilled-down point
let slice = {};            // axis beyond the first two -> chosen value
let metricKey = null;

// ---------------------------------------------------------------- helpers

// "queued (#2)": a queued scan's place in the queue (1 = the next to start)
function statusText(s) {
  return s.status === 'queued' && s.queue_position ? `queued (#${s.queue_position})` : s.status;
}

function duration(s) {
  if (s === null || s === undefined) return '–';
  if (s < 90) return `${s.toFixed(0)} s`;
  if (s < 5400) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function clock(t) {
  if (!t) return '–';
  const d = new Date(t * 1000);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

function isChoice(kind, name) {
  return !!KINDS[kind]?.params.find((q) => q.name === name)?.choices;
}

function unitOf(kind, name) {
  const p = KINDS[kind]?.params.find((q) => q.name === name);
  return p && p.unit ? ` [${p.unit}]` : '';
}

function setConn(ok) {
  const el = $('conn');
  if (!el) return;
  el.dataset.state = ok ? 'live' : 'disconnected';
  el.querySelector('.label').textContent = ok ? 'live' : 'Lab not reachable — retrying';
}

async function get(path) {
  try {
    const data = await api(path, undefined, 'GET');
    setConn(true);
    return data;
  } catch (e) {
    if (e.status === undefined) setConn(false);
    throw e;
  }
}

// ---------------------------------------------------------------- the form

function countValues(text) {
  const t = text.trim();
  if (!t) return 1;
  const parts = t.split(':');
  if (parts.length === 3) {
    const [a, b, s] = parts.map(Number);
    if (![a, b, s].every(Number.isFinite) || s <= 0 || b < a) return NaN;
    return Math.floor((b - a) / s + 1e-9) + 1;
  }
  const items = t.split(/[,;]/).map((x) => x.trim()).filter(Boolean);
  return items.every((x) => Number.isFinite(Number(x))) ? new Set(items.map(Number)).size : NaN;
}

// a choice parameter (e.g. controller: feedback, pd): one checkbox per choice; none ticked = its default
function choiceField(kind, p) {
  const field = document.createElement('fieldset');
  field.className = 'choices';
  field.dataset.param = p.name;
  const picked = new Set((kind.example?.[p.name] ?? '').split(',').map((x) => x.trim()).filter(Boolean));
  field.innerHTML = '<legend></legend><div class="opts"></div><small></small>';
  field.querySelector('legend').textContent = `${p.name} — ${p.description}`;
  const opts = field.querySelector('.opts');
  for (const c of p.choices) {
    const l = document.createElement('label');
    l.innerHTML = '<input type="checkbox"><span></span>';
    const box = l.querySelector('input');
    box.value = c;
    box.dataset.choiceOf = p.name;
    box.checked = picked.has(c);
    l.querySelector('span').textContent = c;
    box.addEventListener('change', updateCount);
    opts.appendChild(l);
  }
  field.querySelector('small').textContent = `one or more; none ticked: ${p.default}`;
  return field;
}

function choiceValues(name) {
  return [...document.querySelectorAll(`#params input[data-choice-of="${name}"]:checked`)].map((b) => b.value);
}

function renderForm() {
  const kind = KINDS[$('kind').value];
  $('kind-help').textContent = kind ? kind.description : '';
  const box = $('params');
  box.innerHTML = '';
  for (const p of kind?.params || []) {
    if (p.choices) { box.appendChild(choiceField(kind, p)); continue; }
    const label = document.createElement('label');
    const unit = p.unit ? ` [${p.unit}]` : '';
    label.innerHTML = `<span></span><input type="text"><small></small>`;
    label.querySelector('span').textContent = `${p.name}${unit} — ${p.description}`;
    const input = label.querySelector('input');
    input.name = p.name;
    input.dataset.param = p.name;
    input.placeholder = `default ${p.default}`;
    input.value = kind.example?.[p.name] ?? '';
    label.querySelector('small').textContent = `${p.integer ? 'integer' : 'number'} in [${p.min}, ${p.max}]`;
    input.addEventListener('input', updateCount);
    box.appendChild(label);
  }
  updateCount();
}

function updateCount() {
  const inputs = [...document.querySelectorAll('#params input[data-param]')];
  const sizes = inputs.map((i) => countValues(i.value));
  for (const f of document.querySelectorAll('#params fieldset.choices')) sizes.push(Math.max(1, choiceValues(f.dataset.param).length));
  const el = $('count');
  if (sizes.some((n) => Number.isNaN(n))) {
    el.textContent = 'not numbers: use "0.02, 0.04" or "0.02:0.06:0.01"';
    el.className = 'count bad';
    return;
  }
  const total = sizes.reduce((a, b) => a * b, 1);
  const shape = sizes.filter((n) => n > 1).join(' × ') || '1';
  el.textContent = `${total.toLocaleString()} point${total === 1 ? '' : 's'} (${shape})`;
  el.className = total > MAX_POINTS ? 'count bad' : 'count';
}

async function launch(ev) {
  ev.preventDefault();
  const grid = {};
  for (const i of document.querySelectorAll('#params input[data-param]')) if (i.value.trim()) grid[i.dataset.param] = i.value.trim();
  for (const f of document.querySelectorAll('#params fieldset.choices')) {
    const picked = choiceValues(f.dataset.param);
    if (picked.length) grid[f.dataset.param] = picked;
  }
  const body = { kind: $('kind').value, grid, executor: $('executor').value };
  if ($('workers').value) body.workers = Number($('workers').value);
  if (body.executor === 'ray' && $('address').value.trim()) body.address = $('address').value.trim();
  const err = $('form-error');
  err.hidden = true;
  $('launch').disabled = true;
  try {
    const s = await api('/api/scans', body);
    toast(`scan ${s.id} launched: ${s.total} points`);
    await refreshList();
    select(s.id);
  } catch (e) {
    err.innerHTML = '<b></b><span></span>';
    err.querySelector('b').textContent = e.message;
    err.querySelector('span').textContent = e.hint || '';
    err.hidden = false;
  } finally {
    $('launch').disabled = false;
  }
}

// ---------------------------------------------------------------- the list

async function refreshList() {
  let data;
  try { data = await get('/api/scans'); } catch (e) { return; }
  const body = $('scan-list').querySelector('tbody');
  body.innerHTML = '';
  if (!data.scans.length) body.innerHTML = '<tr><td colspan="4" class="meta">no scans yet</td></tr>';
  for (const s of data.scans) {
    const tr = document.createElement('tr');
    tr.dataset.id = s.id;
    tr.className = s.id === selected ? 'sel' : '';
    const errs = s.counts.error ? ` <span class="pill bad">${s.counts.error} err</span>` : '';
    tr.innerHTML = `<td>${clock(s.created_at)}</td><td>${s.kind}</td><td><span class="pill ${STATUS_PILL[s.status] || 'muted'}">${statusText(s)}</span></td><td>${s.done}/${s.total}${errs}</td>`;
    tr.title = s.id;
    tr.addEventListener('click', () => select(s.id));
    body.appendChild(tr);
  }
}

// ---------------------------------------------------------------- the detail

function select(id) {
  if (id !== selected) {
    selected = id;
    scan = null;
    selectedPoint = null;
    slice = {};
    metricKey = null;
    $('point').hidden = true;
    Plotly.purge($('heatmap'));
    history.replaceState(null, '', `#scan=${encodeURIComponent(id)}`);
  }
  for (const tr of document.querySelectorAll('#scan-list tbody tr')) tr.className = tr.dataset.id === id ? 'sel' : '';
  refreshDetail();
}

async function refreshDetail() {
  if (!selected) return;
  const id = selected;
  let s;
  try { s = await get(`/api/scans/${encodeURIComponent(id)}`); } catch (e) {
    if (e.status === 404) { toast(e.message, 'error', e.hint); selected = null; $('scan-view').hidden = true; $('no-scan').hidden = false; }
    return;
  }
  if (id !== selected) return;
  scan = s;
  $('no-scan').hidden = true;
  $('scan-view').hidden = false;
  $('d-title').textContent = `${s.title} · ${s.id}`;
  const pill = $('d-status');
  pill.textContent = s.status;
  pill.title = s.status === 'queued' ? statusText(s) : '';
  pill.className = `pill ${STATUS_PILL[s.status] || 'muted'}`;
  const nerr = s.counts.error;
  $('d-errors').hidden = !nerr;
  $('d-errors').textContent = `${nerr} point${nerr === 1 ? '' : 's'} in error`;
  $('cancel').disabled = !['running', 'queued'].includes(s.status);
  $('resume').disabled = ['running', 'queued', 'done'].includes(s.status) && !(s.status === 'done' && nerr);
  $('resume').textContent = s.status === 'done' && nerr ? 'Retry errors' : 'Resume';
  $('dl-csv').href = `/api/scans/${s.id}/results.csv`;
  $('dl-json').href = `/api/scans/${s.id}/results.json`;
  const grid = Object.entries(s.grid).map(([k, v]) => `${k}${unitOf(s.kind, k)} × ${v.length}`).join(', ');
  const fixed = Object.entries(s.fixed).map(([k, v]) => `${k}=${v}`).join(', ');
  $('d-meta').textContent = `${grid}${fixed ? ` · fixed ${fixed}` : ''} · executor ${s.executor}, ${s.workers || 'one per core'} workers · timeout ${s.timeout_s} s per point`
    + (s.error ? ` · ERROR: ${s.error}` : '');
  renderProgress(s);
  renderSummary(s);
  renderMetricChoice(s);
  renderSlices(s);
  renderHeatmap(s);
  if (selectedPoint !== null) {
    const p = s.points[selectedPoint];
    if (p && p.status !== $('point').dataset.status) showPoint(selectedPoint);
  }
}

function renderProgress(s) {
  const pct = s.total ? (100 * s.done) / s.total : 100;
  const bar = $('d-bar');
  bar.style.width = `${pct.toFixed(1)}%`;
  bar.className = s.counts.error ? 'bar err' : 'bar';
  let label = `${s.done} / ${s.total} points (${pct.toFixed(0)} %)`;
  if (s.counts.running) label += ` · ${s.counts.running} running`;
  if (s.status === 'queued' && s.queue_position) label += ` · ${statusText(s)}: starts when the running scan${s.max_running > 1 ? 's' : ''} end${s.max_running > 1 ? '' : 's'}`;
  if (s.status === 'running') label += s.eta_s === null ? ' · ETA after the first point' : ` · ETA ${duration(s.eta_s)}`;
  else if (s.finished_at && s.started_at) label += ` · ${s.status} after ${duration(s.finished_at - s.started_at)}`;
  if (s.counts.cancelled) label += ` · ${s.counts.cancelled} cancelled`;
  if (s.counts.interrupted) label += ` · ${s.counts.interrupted} interrupted`;
  $('d-progress').textContent = label;
}

const esc = (x) => String(x).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

// push_threshold: situation (x duration) rows x direction columns; each cell threshold impulse, Δv and force
function thresholdTable(sm) {
  const rows = sm.push_thresholds;
  const dirs = [...new Set(rows.map((r) => r.direction))];
  const durs = new Set(rows.map((r) => r.duration_s));
  const key = (r) => (durs.size > 1 ? `${r.situation} · ${fmt(r.duration_s)} s` : r.situation);
  const lines = [...new Set(rows.map(key))];
  const cell = (r) => {
    if (!r) return '<td class="meta">–</td>';
    if (r.impulse_ns === null) return `<td class="meta" title="${esc(r.note)}">not measured</td>`;
    const above = r.outcome === 'above_max' ? '≥ ' : '';
    const flag = r.outcome === 'falls_unpushed' ? ' <span class="pill bad">falls unpushed</span>'
      : r.monotonic === false ? ' <span class="pill warn" title="a force above the first fall was recovered from">not monotonic</span>' : '';
    const force = r.outcome === 'bracketed' ? `${fmt(r.threshold_force_n)}–${fmt(r.first_fall_force_n)} N` : `${above}${fmt(r.threshold_force_n)} N`;
    return `<td title="${esc(r.note || `${r.trials} trials`)}"><b>${above}${fmt(r.impulse_ns, 3)}</b> N·s · Δv ${above}${fmt(r.delta_v_mps, 3)} m/s<br><span class="meta">${force}</span>${flag}</td>`;
  };
  const body = lines.map((l) => `<tr><th>${esc(l)}</th>${dirs.map((d) => cell(rows.find((r) => key(r) === l && r.direction === d))).join('')}</tr>`).join('');
  const notes = [...new Set(rows.filter((r) => r.note).map((r) => `${r.situation}: ${r.note}`))];
  const mass = sm.total_mass_kg ? ` · robot mass ${fmt(sm.total_mass_kg)} kg (Δv = impulse / mass)` : '';
  return `<table class="data thresholds"><thead><tr><th>threshold impulse · Δv<br><span class="meta">largest recovered – first fall</span></th>${dirs.map((d) => `<th>${esc(d)}</th>`).join('')}</tr></thead><tbody>${body}</tbody></table>`
    + `<div class="meta">${rows.length} point${rows.length === 1 ? '' : 's'} done${mass}${notes.length ? `<br>${notes.map(esc).join('<br>')}` : ''}</div>`;
}

function renderSummary(s) {
  const box = $('d-summary');
  const sm = s.summary || {};
  if (Array.isArray(sm.push_thresholds) && sm.push_thresholds.length) {
    box.innerHTML = thresholdTable(sm);
    return;
  }
  if (Array.isArray(sm.thresholds) && sm.thresholds.length) {
    const rows = sm.thresholds.map((t) => `<tr><td>${fmt(t.duration_s)}</td><td>${fmt(t.max_recovered_n)}</td><td>${fmt(t.min_fell_n)}</td><td><b>${t.threshold_n === null ? '–' : fmt(t.threshold_n)}</b></td><td>${t.monotonic ? '' : 'not monotonic'}</td></tr>`).join('');
    box.innerHTML = `<table class="data"><thead><tr><th>push duration [s]</th><th>max recovered [N]</th><th>min fell [N]</th><th>threshold force [N]</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
    return;
  }
  const items = Object.entries(sm).filter(([, v]) => typeof v !== 'object' || v === null);
  if (Array.isArray(sm.pitch_max_deg_range)) items.push(['peak pitch range [deg]', sm.pitch_max_deg_range.map((x) => fmt(x)).join(' – ')]);
  box.textContent = items.map(([k, v]) => `${k.replaceAll('_', ' ')}: ${fmt(v)}`).join(' · ');
}

function metricChoices(s) {
  const keys = s.metrics.map((m) => m.key);
  const seen = new Set();
  for (const p of s.points) for (const [k, v] of Object.entries(p.metrics || {})) if (typeof v === 'number' || typeof v === 'boolean') seen.add(k);
  const labels = Object.fromEntries(s.metrics.map((m) => [m.key, `${m.label}${m.unit ? ` [${m.unit}]` : ''}`]));
  const extra = [...seen].filter((k) => !keys.includes(k) && !s.axes.includes(k)).sort();
  return [...keys, ...extra].map((k) => [k, labels[k] || k]);
}

function renderMetricChoice(s) {
  const sel = $('metric');
  const choices = metricChoices(s);
  if (!metricKey) metricKey = s.heat_metric || choices[0]?.[0];
  const sig = choices.map((c) => c[0]).join(',');
  if (sel.dataset.sig !== sig) {
    sel.innerHTML = '';
    for (const [k, label] of choices) sel.add(new Option(label, k, false, k === metricKey));
    sel.dataset.sig = sig;
  }
  sel.value = metricKey;
}

function renderSlices(s) {
  const box = $('slices');
  const extra = s.axes.slice(2).filter((a) => s.grid[a].length > 1);
  if (box.dataset.id === s.id) return;
  box.dataset.id = s.id;
  box.innerHTML = '';
  for (const a of extra) {
    slice[a] = slice[a] ?? s.grid[a][0];
    const label = document.createElement('label');
    label.className = 'inline';
    label.textContent = `${a}${unitOf(s.kind, a)}`;
    const sel = document.createElement('select');
    for (const v of s.grid[a]) sel.add(new Option(String(v), String(v), false, v === slice[a]));
    sel.addEventListener('change', () => { slice[a] = s.grid[a].find((v) => String(v) === sel.value); renderHeatmap(scan); });
    label.appendChild(sel);
    box.appendChild(label);
  }
}

function cellText(p, s, v) {
  if (p.status === 'done') {
    const verdict = s.pass_key && s.pass_key in p.metrics ? (p.metrics[s.pass_key] ? 'PASS' : 'FAIL') : '';
    return `${fmt(v, 3)}${verdict ? `<br><b>${verdict}</b>` : ''}`;
  }
  const idle = ['running', 'queued'].includes(s.status) ? '' : 'not run';
  return { error: '<b>ERROR</b>', running: 'running…', cancelled: 'cancelled', interrupted: 'interrupted', pending: idle }[p.status] ?? p.status;
}

function renderHeatmap(s) {
  const [xName, yName] = s.axes;
  const xs = s.grid[xName];
  const ys = yName ? s.grid[yName] : [null];
  const xl = xs.map(String);
  const yl = ys.map((v) => (v === null ? '' : String(v)));
  const z = ys.map(() => xs.map(() => null));
  const status = ys.map(() => xs.map(() => null));  // 0 running, 1 error, 2 cancelled
  const tx = [], ty = [], tt = [], cells = [];
  for (const p of s.points) {
    if (Object.entries(slice).some(([a, v]) => p.params[a] !== v)) continue;
    const xi = xs.indexOf(p.params[xName]);
    const yi = yName ? ys.indexOf(p.params[yName]) : 0;
    if (xi < 0 || yi < 0) continue;
    let v = p.metrics?.[metricKey];
    if (typeof v === 'boolean') v = v ? 1 : 0;
    if (p.status === 'done' && typeof v === 'number') z[yi][xi] = v;
    status[yi][xi] = { running: 0, error: 1, cancelled: 2, interrupted: 2 }[p.status] ?? null;
    tx.push(xl[xi]); ty.push(yl[yi]);
    tt.push(cellText(p, s, v));
    const verdict = p.status === 'error' ? false : p.status === 'done' && s.pass_key && s.pass_key in p.metrics ? !!p.metrics[s.pass_key] : null;
    cells.push({ xi, yi, v: p.status === 'done' && typeof v === 'number' ? v : null, verdict });
  }
  const vals = cells.map((c) => c.v).filter((v) => v !== null);
  const lo = Math.min(...vals), hi = Math.max(...vals);
  // YlOrRd runs dark red (0) to light yellow (1): reversed, low values are light; for a metric where high is
  // good (better: "high") it is not reversed, so the bad end stays red. Light cells get dark text.
  const highGood = s.metrics.find((m) => m.key === metricKey)?.better === 'high';
  const light = (f) => (highGood ? f > 0.55 : f < 0.45);
  const tc = cells.map((c) => (c.v !== null && hi > lo && light((c.v - lo) / (hi - lo)) ? '#1a1205' : '#ffffff'));
  const shapes = cells.filter((c) => c.verdict !== null).map((c) => ({
    type: 'rect', xref: 'x', yref: 'y', x0: c.xi - 0.47, x1: c.xi + 0.47, y0: c.yi - 0.47, y1: c.yi + 0.47,
    line: { color: c.verdict ? '#44d17a' : '#ff5c6c', width: 3 },
  }));
  const label = metricChoices(s).find((c) => c[0] === metricKey)?.[1] || metricKey;
  const traces = [
    { type: 'heatmap', x: xl, y: yl, z, colorscale: 'YlOrRd', reversescale: !highGood, colorbar: { title: { text: label, side: 'right' }, thickness: 12 },
      hovertemplate: `${xName}=%{x}<br>${yName || ''}${yName ? '=%{y}<br>' : ''}${metricKey}=%{z}<extra></extra>`, xgap: 2, ygap: 2 },
    { type: 'heatmap', x: xl, y: yl, z: status, zmin: 0, zmax: 2, showscale: false, hoverinfo: 'skip', xgap: 2, ygap: 2,
      colorscale: [[0, '#8a6d1d'], [0.5, '#6b1f5c'], [1, '#3a4457']] },
    { type: 'scatter', mode: 'text', x: tx, y: ty, text: tt, textfont: { color: tc, size: 12 }, hoverinfo: 'skip', showlegend: false },
  ];
  const layout = {
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: '#1c2230', font: { color: '#c9d1dc', size: 12 },
    margin: { l: 70, r: 20, t: 34, b: 50 },
    title: { text: `colour: ${label}${s.pass_key ? ` · frame: green PASS (${s.pass_key}), red FAIL or error` : ''}`, font: { size: 13 }, x: 0.01, xanchor: 'left' },
    shapes,
    xaxis: { title: { text: `${xName}${unitOf(s.kind, xName)}` }, type: 'category', gridcolor: 'rgba(0,0,0,0)' },
    // a choice axis reads top to bottom in the kind's order; a numeric one grows upwards
    yaxis: { title: { text: yName ? `${yName}${unitOf(s.kind, yName)}` : '' }, type: 'category', gridcolor: 'rgba(0,0,0,0)',
      autorange: isChoice(s.kind, yName) ? 'reversed' : true },
  };
  const el = $('heatmap');
  Plotly.react(el, traces, layout, { displayModeBar: false, responsive: true });
  el.dataset.filled = String(s.points.filter((p) => ['done', 'error'].includes(p.status)).length);
  if (!el.dataset.bound) {
    el.dataset.bound = '1';
    el.on('plotly_click', (ev) => {
      const d = ev.points?.[0];
      if (!d || !scan) return;
      const [xa, ya] = scan.axes;
      const p = scan.points.find((q) => String(q.params[xa]) === String(d.x)
        && (!ya || String(q.params[ya]) === String(d.y))
        && Object.entries(slice).every(([a, v]) => q.params[a] === v));
      if (p) showPoint(p.index);
    });
  }
}

async function showPoint(i) {
  if (!scan) return;
  selectedPoint = i;
  let p;
  try { p = await get(`/api/scans/${scan.id}/points/${i}`); } catch (e) { toast(e.message, 'error', e.hint); return; }
  const box = $('point');
  box.hidden = false;
  box.dataset.status = p.status;
  box.dataset.index = String(i);
  const kind = scan.kind;
  $('p-title').textContent = `Point ${i}: ` + Object.entries(p.params).map(([k, v]) => `${k}=${v}${unitOf(kind, k).replace(/[[\]]/g, '')}`).join(', ');
  const st = $('p-status');
  const verdict = p.status === 'done' && scan.pass_key in p.metrics ? (p.metrics[scan.pass_key] ? 'PASS' : 'FAIL') : '';
  st.innerHTML = `<span class="pill ${p.status === 'done' ? (verdict === 'FAIL' ? 'bad' : 'ok') : p.status === 'error' ? 'bad' : 'warn'}">${p.status}${verdict ? ` · ${verdict}` : ''}</span>`
    + ` <span class="meta">wall ${fmt(p.wall_s, 3)} s · attempt ${p.attempts}</span>`;
  const tbody = $('p-metrics').querySelector('tbody');
  tbody.innerHTML = '';
  const first = scan.metrics.map((m) => m.key);
  const keys = [...first.filter((k) => k in (p.metrics || {})), ...Object.keys(p.metrics || {}).filter((k) => !first.includes(k))];
  for (const k of keys) {
    const tr = document.createElement('tr');
    tr.innerHTML = '<th></th><td></td>';
    tr.children[0].textContent = scan.metrics.find((m) => m.key === k)?.label || k;
    const val = fmt(p.metrics[k]);
    const text = typeof p.metrics[k] === 'string' && /\s/.test(val) && val.length <= 240;  // a note, not a hash
    tr.children[1].textContent = val.length > 24 && !text ? `${val.slice(0, 12)}…` : val;
    if (text && val.length > 24) tr.children[1].className = 'wrap';
    tr.children[1].title = val;
    tbody.appendChild(tr);
  }
  if (p.error) {
    const tr = document.createElement('tr');
    tr.innerHTML = '<th>error</th><td class="bad"></td>';
    tr.children[1].textContent = p.error;
    tbody.appendChild(tr);
  }
  const base = `/api/scans/${scan.id}/points/${i}`;
  $('p-files').innerHTML = '';
  for (const f of p.files) {
    const a = document.createElement('a');
    a.href = `${base}/${f}`;
    a.target = '_blank';
    a.textContent = f;
    $('p-files').appendChild(a);
  }
  const img = $('p-figure');
  img.hidden = !p.figure;
  if (p.figure) img.src = `${base}/${p.figure}?t=${p.finished_at || ''}`;
  const out = $('p-output');
  out.hidden = !p.output_tail;
  out.textContent = p.output_tail || '';
}

async function act(what) {
  if (!scan) return;
  try {
    const s = await api(`/api/scans/${scan.id}/${what}`, what === 'resume' && scan.status === 'done' ? { retry_errors: true } : {});
    toast(`scan ${s.id}: ${s.status}`);
  } catch (e) {
    toast(e.message, 'error', e.hint);
  }
  refreshDetail();
  refreshList();
}

// ---------------------------------------------------------------- wiring

$('kind').addEventListener('change', renderForm);
$('executor').addEventListener('change', () => { $('address-row').hidden = $('executor').value !== 'ray'; });
$('scan-form').addEventListener('submit', launch);
$('cancel').addEventListener('click', () => act('cancel'));
$('resume').addEventListener('click', () => act('resume'));
$('metric').addEventListener('change', () => { metricKey = $('metric').value; if (scan) renderHeatmap(scan); });
renderForm();

const fromHash = new URLSearchParams(location.hash.slice(1)).get('scan');
refreshList().then(() => { if (fromHash) select(fromHash); });

let ticks = 0;
setInterval(() => {
  ticks += 1;
  const live = scan && ['running', 'queued'].includes(scan.status);
  if (live || ticks % 5 === 0) refreshDetail();
  if (ticks % (live ? 2 : 5) === 0) refreshList();
}, 1000);
