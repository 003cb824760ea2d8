// The scans page: launch form (a sweep or a search), list of scans, live detail (progress + ETA, threshold
// curve, heatmap, refine, per-point drill-down). The detail comes without points: the heatmap is drawn from
// its point table (columns, lab/scans/points.py point_table), so a 10,000-point scan stays cheap to poll.
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
let cellIndex = [];        // heatmap cell [yi][xi] -> point index (-1: not sampled)
// per detail update [ms]: fetch (request to parsed JSON), render (everything drawn), and its parts;
// the bench (experiments/bench_scans_page.py) reads window.scanTimings
const timings = { fetch: [], render: [], heatmap: [], plot: [], bytes: [] };
window.scanTimings = timings;

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
  renderSearchForm(kind);
  const records = !!kind?.artifacts?.includes('recording.mcap');  // lab/scans/recording.py RECORDING
  $('record').disabled = !records;
  if (!records) $('record').checked = false;
  $('record-row').title = records ? '' : `${kind?.name || 'this kind'} keeps no recording of its points`;
  updateCount();
}

// the search fields: the kind's number parameters (a kind without a PASS/FAIL result cannot search)
function renderSearchForm(kind) {
  const numbers = (kind?.params || []).filter((p) => !p.choices);
  $('search-box').hidden = !kind?.pass_key || !numbers.length;
  if ($('search-box').hidden) $('search-on').checked = false;
  const sel = $('search-param');
  sel.innerHTML = '';
  for (const p of numbers) sel.add(new Option(`${p.name}${p.unit ? ` [${p.unit}]` : ''}`, p.name));
  const force = numbers.find((p) => p.name === 'force_n');
  if (force) sel.value = 'force_n';
  searchParamChanged();
}

function searchParamChanged() {
  const kind = KINDS[$('kind').value];
  const p = kind?.params.find((q) => q.name === $('search-param').value);
  if (p) { $('search-lo').value = p.min; $('search-hi').value = p.max; }
  searchToggled();
}

function searchToggled() {
  const on = $('search-on').checked;
  $('search-fields').hidden = !on;
  for (const i of document.querySelectorAll('#params input[data-param]')) {
    const searched = on && i.dataset.param === $('search-param').value;
    i.disabled = searched;
    i.closest('label').style.opacity = searched ? 0.45 : '';
  }
  updateCount();
}

// ≤ points per search line: ceil(log2((hi - lo) / tol)) + 1 (lab/scans/search.py Search.max_points)
function searchMaxPoints() {
  const [lo, hi, tol] = ['search-lo', 'search-hi', 'search-tol'].map((k) => Number($(k).value));
  if (![lo, hi, tol].every(Number.isFinite) || tol <= 0 || hi <= lo) return NaN;
  return Math.max(1, Math.ceil(Math.log2((hi - lo) / tol))) + 1;
}

function updateCount() {
  const inputs = [...document.querySelectorAll('#params input[data-param]')].filter((i) => !i.disabled);
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
  if ($('search-on').checked) {
    const per = searchMaxPoints();
    $('search-max').textContent = Number.isNaN(per) ? '–' : String(per);
    el.textContent = Number.isNaN(per) ? 'search: from < to and a tolerance > 0'
      : `${total.toLocaleString()} line${total === 1 ? '' : 's'} × ≤ ${per} points (search)`;
    el.className = Number.isNaN(per) || total * per > MAX_POINTS ? 'count bad' : 'count';
    return;
  }
  el.textContent = `${total.toLocaleString()} point${total === 1 ? '' : 's'} (${shape})`;
  el.className = total > MAX_POINTS ? 'count bad' : 'count';
}

async function launch(ev) {
  ev.preventDefault();
  const grid = {};
  for (const i of document.querySelectorAll('#params input[data-param]')) if (i.value.trim() && !i.disabled) grid[i.dataset.param] = i.value.trim();
  for (const f of document.querySelectorAll('#params fieldset.choices')) {
    const picked = choiceValues(f.dataset.param);
    if (picked.length) grid[f.dataset.param] = picked;
  }
  const body = { kind: $('kind').value, grid, executor: $('executor').value };
  if ($('search-on').checked) {
    body.search = { param: $('search-param').value, bisect: [Number($('search-lo').value), Number($('search-hi').value)], tol: Number($('search-tol').value) };
  }
  if ($('workers').value) body.workers = Number($('workers').value);
  if ($('record').checked) body.record = true;
  if (body.executor === 'ray' && $('address').value.trim()) body.address = $('address').value.trim();
  const err = $('form-error');
  err.hidden = true;
  $('launch').disabled = true;
  try {
    const s = await api('/api/scans', body);
    toast(s.search ? `scan ${s.id} launched: ${s.lines.total} search lines` : `scan ${s.id} launched: ${s.total} points`);
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
  const t0 = performance.now();
  try { s = await get(`/api/scans/${encodeURIComponent(id)}?points=0`); } catch (e) {
    if (e.status === 404) { toast(e.message, 'error', e.hint); selected = null; $('scan-view').hidden = true; $('no-scan').hidden = false; }
    return;
  }
  if (id !== selected) return;
  const t1 = performance.now();
  timings.fetch.push(t1 - t0);
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
  const numberAxes = Object.entries(s.grid).filter(([k, v]) => v.length > 1 && !isChoice(s.kind, k));
  $('refine').hidden = !!s.search || !s.pass_key || !numberAxes.length;
  $('refine').disabled = ['running', 'queued'].includes(s.status) || !s.table.pass.includes('1') || !s.table.pass.includes('0');
  $('dl-csv').href = `/api/scans/${s.id}/results.csv`;
  $('dl-json').href = `/api/scans/${s.id}/results.json`;
  const grid = Object.entries(s.grid).map(([k, v]) => `${k}${unitOf(s.kind, k)} × ${v.length}`).join(', ')
    + (s.search ? ` · search ${s.search.param} in [${s.search.bisect.join(', ')}], tol ${s.search.tol}` : '');
  const fixed = Object.entries(s.fixed).map(([k, v]) => `${k}=${v}`).join(', ');
  $('d-meta').textContent = `${grid}${fixed ? ` · fixed ${fixed}` : ''} · executor ${s.executor}, ${s.workers || 'one per core'} workers · timeout ${s.timeout_s} s per point`
    + (s.error ? ` · ERROR: ${s.error}` : '');
  renderProgress(s);
  renderSummary(s);
  renderThresholdPlot(s);
  renderMetricChoice(s);
  renderSlices(s);
  renderHeatmap(s);
  if (selectedPoint !== null) {
    const st = CODE_STATUS[s.table.status[selectedPoint]];
    if (st && st !== $('point').dataset.status) showPoint(selectedPoint);
  }
  timings.render.push(performance.now() - t1);
}

function renderProgress(s) {
  const pct = s.total ? (100 * s.done) / s.total : 100;
  const bar = $('d-bar');
  bar.style.width = `${pct.toFixed(1)}%`;
  bar.className = s.counts.error ? 'bar err' : 'bar';
  let label = `${s.done} / ${s.total} points (${pct.toFixed(0)} %)`;
  if (s.search) {
    const lp = (100 * s.progress).toFixed(0);
    bar.style.width = `${lp}%`;
    label = `${s.lines.done} / ${s.lines.total} lines bracketed (${lp} %) · ${s.done} points run`;
  }
  if (s.counts.running) label += ` · ${s.counts.running} running`;
  if (s.status === 'queued' && s.queue_position) label += ` · ${statusText(s)}: starts when ${s.max_running > 1 ? 'one of the running scans ends' : 'the running scan ends'}`;
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

// push_recovery's bracket per direction and duration: [last recovered, first fell] and its width, never a midpoint
function bracketTable(rows) {
  const dirs = new Set(rows.map((t) => t.direction));
  const cells = rows.map((t) => {
    const [a, b] = t.bracket || [t.last_pass_n, t.first_fail_n];
    const flag = t.monotonic === false ? ' <span class="pill warn" title="a force above the first fall was recovered from">not monotonic</span>' : '';
    return `<tr>${dirs.size > 1 ? `<td>${esc(t.direction)}</td>` : ''}<td>${fmt(t.duration_s)}</td><td>${a === null ? '<span class="meta">none</span>' : fmt(a)}</td>`
      + `<td>${b === null ? '<span class="meta">none</span>' : fmt(b)}</td><td><b>${bracketText(a, b, 'N')}</b></td>`
      + `<td>${t.tol_n === null || t.tol_n === undefined ? '–' : `${fmt(t.tol_n)} N (grid step)`}</td><td>${t.points}</td><td class="meta">${esc(t.label || '')}${flag}</td></tr>`;
  }).join('');
  return `<table class="data brackets"><thead><tr>${dirs.size > 1 ? '<th>direction</th>' : ''}<th>push duration [s]</th><th>last recovered [N]</th><th>first fell [N]</th>`
    + `<th>threshold bracket</th><th>tolerance</th><th>points</th><th></th></tr></thead><tbody>${cells}</tbody></table>`;
}

// "[43.75, 45.31] N"; an open end says which side the range did not reach
function bracketText(a, b, unit) {
  const u = unit ? ` ${unit}` : '';
  if (a === null && b === null) return '–';
  if (b === null) return `≥ ${fmt(a)}${u} (passes at the top)`;
  if (a === null) return `< ${fmt(b)}${u} (fails at the bottom)`;
  return `[${fmt(a)}, ${fmt(b)}]${u}`;
}

const LINE_PILL = { bracketed: 'ok', passes_at_hi: 'warn', fails_at_lo: 'warn', searching: 'muted', error: 'bad' };
const LINE_WORDS = { bracketed: 'bracketed', passes_at_hi: 'passes at hi', fails_at_lo: 'fails at lo', searching: 'searching…', error: 'error' };

// the varying params of the search lines: [x axis, ...the rest (one curve per combination)]
function lineAxes(rows) {
  if (!rows.length) return [];
  return Object.keys(rows[0].params).filter((k) => new Set(rows.map((r) => String(r.params[k]))).size > 1);
}

// a search scan: one row per line, its bracket [last pass, first fail], tolerance and points
function searchTable(s) {
  const rows = s.thresholds;
  const axes = lineAxes(rows);
  const sr = s.search;
  const unit = unitOf(s.kind, sr.param).replace(/[[\] ]/g, '');
  const body = rows.map((t) => `<tr data-status="${t.status}">${axes.map((a) => `<td>${esc(fmt(t.params[a]))}</td>`).join('')}`
    + `<td>${t.bracket[0] === null ? '<span class="meta">none</span>' : fmt(t.bracket[0])}</td><td>${t.bracket[1] === null ? '<span class="meta">none</span>' : fmt(t.bracket[1])}</td>`
    + `<td><b>${bracketText(t.bracket[0], t.bracket[1], unit)}</b></td><td>tol ${fmt(t.tol)} ${esc(unit)}</td><td>${t.points}</td>`
    + `<td><span class="pill ${LINE_PILL[t.status] || 'muted'}" title="${esc(t.label)}">${LINE_WORDS[t.status] || t.status}</span></td></tr>`).join('');
  const head = axes.map((a) => `<th>${esc(a)}${unitOf(s.kind, a)}</th>`).join('');
  return `<table class="data thresholds search"><thead><tr>${head}<th>last PASS</th><th>first FAIL</th><th>${esc(sr.param)} threshold bracket</th><th>tolerance</th><th>points</th><th></th></tr></thead><tbody>${body}</tbody></table>`
    + `<div class="meta">search: bisect ${esc(sr.param)} on [${fmt(sr.bisect[0])}, ${fmt(sr.bisect[1])}] ${esc(unit)} to a bracket ≤ ${fmt(sr.tol)} ${esc(unit)}, per line of the other parameters · ${s.lines.done}/${s.lines.total} lines done · ${s.total} points run</div>`;
}

function renderSummary(s) {
  const box = $('d-summary');
  const sm = s.summary || {};
  if (s.search && Array.isArray(s.thresholds)) {
    box.innerHTML = searchTable(s);
    return;
  }
  if (Array.isArray(sm.push_thresholds) && sm.push_thresholds.length) {
    box.innerHTML = thresholdTable(sm);
    return;
  }
  if (Array.isArray(sm.thresholds) && sm.thresholds.length) {
    box.innerHTML = bracketTable(sm.thresholds);
    return;
  }
  const items = Object.entries(sm).filter(([, v]) => typeof v !== 'object' || v === null);
  if (Array.isArray(sm.pitch_max_deg_range)) items.push(['peak pitch range [deg]', sm.pitch_max_deg_range.map((x) => fmt(x)).join(' – ')]);
  box.textContent = items.map(([k, v]) => `${k.replaceAll('_', ' ')}: ${fmt(v)}`).join(' · ');
}

// the threshold curve: per line a band from its last PASS to its first FAIL (error bar + shaded band),
// the two ends marked; an open end (passes at hi / fails at lo) is an arrow at the end of the range, labelled
function thresholdRows(s) {
  if (s.search && Array.isArray(s.thresholds)) return { rows: s.thresholds, param: s.search.param, lo: s.search.bisect[0], hi: s.search.bisect[1] };
  const sm = s.summary || {};
  if (!Array.isArray(sm.thresholds) || !sm.thresholds.length || !s.table.values.force_n) return null;
  const forces = s.table.values.force_n;
  const rows = sm.thresholds.map((t) => ({
    params: { direction: t.direction, duration_s: t.duration_s },
    bracket: t.bracket,
    tol: t.tol_n,
    status: t.bracket[0] === null ? 'fails_at_lo' : t.bracket[1] === null ? 'passes_at_hi' : 'bracketed',
    label: t.label,
  }));
  return { rows, param: 'force_n', lo: forces[0], hi: forces[forces.length - 1] };
}

function renderThresholdPlot(s) {
  const el = $('threshold-plot');
  const th = thresholdRows(s);
  el.hidden = !th;
  if (!th) { Plotly.purge(el); return; }
  const t0 = performance.now();
  const axes = lineAxes(th.rows);
  const xa = axes[0] || null;
  const groups = new Map();
  for (const r of th.rows) {
    const g = axes.slice(1).map((a) => `${a}=${r.params[a]}`).join(', ') || 'all';
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(r);
  }
  const colours = ['#4a90d9', '#f4b400', '#9467bd', '#17becf', '#e377c2', '#8c564b'];
  const traces = [];
  const xOf = (r) => (xa ? r.params[xa] : 'all');
  const unit = unitOf(s.kind, th.param);
  [...groups.entries()].forEach(([g, rows], k) => {
    const c = colours[k % colours.length];
    rows.sort((a, b) => (xOf(a) > xOf(b) ? 1 : -1));
    const closed = rows.filter((r) => r.bracket[0] !== null && r.bracket[1] !== null);
    const name = groups.size > 1 ? g : 'threshold';
    // the band between last PASS and first FAIL along the lines that closed
    traces.push({ type: 'scatter', mode: 'lines', x: closed.map(xOf), y: closed.map((r) => r.bracket[1]), line: { width: 0 }, hoverinfo: 'skip', showlegend: false, legendgroup: g });
    traces.push({ type: 'scatter', mode: 'lines', x: closed.map(xOf), y: closed.map((r) => r.bracket[0]), fill: 'tonexty', fillcolor: `${c}33`, line: { width: 0 }, hoverinfo: 'skip', showlegend: false, legendgroup: g });
    traces.push({
      type: 'scatter', mode: 'markers', name: `${name}: bracket [last PASS, first FAIL]`, legendgroup: g,
      x: closed.map(xOf), y: closed.map((r) => r.bracket[0]),
      error_y: { type: 'data', symmetric: false, array: closed.map((r) => r.bracket[1] - r.bracket[0]), arrayminus: closed.map(() => 0), color: c, thickness: 2, width: 8 },
      marker: { color: '#44d17a', size: 8, symbol: 'circle', line: { color: c, width: 2 } },
      text: closed.map((r) => `last PASS ${fmt(r.bracket[0])}, first FAIL ${fmt(r.bracket[1])}${unit} · tol ${fmt(r.tol)}`),
      hovertemplate: '%{text}<extra></extra>',
    });
    traces.push({
      type: 'scatter', mode: 'markers', showlegend: false, legendgroup: g, x: closed.map(xOf), y: closed.map((r) => r.bracket[1]),
      marker: { color: '#ff5c6c', size: 9, symbol: 'x-thin', line: { color: '#ff5c6c', width: 2 } }, hoverinfo: 'skip',
    });
    const open = rows.filter((r) => r.bracket[0] === null || r.bracket[1] === null);
    if (open.length) {
      traces.push({
        type: 'scatter', mode: 'markers+text', name: `${name}: outside the range`, legendgroup: g,
        x: open.map(xOf), y: open.map((r) => (r.bracket[1] === null ? r.bracket[0] : r.bracket[1])),
        marker: { symbol: open.map((r) => (r.bracket[1] === null ? 'triangle-up' : 'triangle-down')), size: 13, color: c },
        text: open.map((r) => (r.bracket[1] === null ? 'passes at hi' : 'fails at lo')),
        textposition: open.map((r) => (r.bracket[1] === null ? 'top center' : 'bottom center')),
        textfont: { color: '#ffcf5c', size: 11 }, hovertemplate: open.map((r) => `${esc(r.label)}<extra></extra>`),
      });
    }
  });
  const layout = {
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: '#1c2230', font: { color: '#c9d1dc', size: 12 },
    margin: { l: 70, r: 20, t: 34, b: 50 }, showlegend: true, legend: { orientation: 'h', y: -0.25, font: { size: 11 } },
    title: { text: `${th.param} threshold: band from the last PASS (●) to the first FAIL (✕), range [${fmt(th.lo)}, ${fmt(th.hi)}]${unit}`, font: { size: 13 }, x: 0.01, xanchor: 'left' },
    xaxis: { title: { text: xa ? `${xa}${unitOf(s.kind, xa)}` : '' }, type: xa && !isChoice(s.kind, xa) ? 'linear' : 'category', gridcolor: '#2a3242' },
    yaxis: { title: { text: `${th.param}${unit}` }, gridcolor: '#2a3242', autorange: true, zeroline: false },
  };
  Plotly.react(el, traces, layout, { displayModeBar: false, responsive: true });
  el.dataset.lines = String(th.rows.length);
  timings.plot.push(performance.now() - t0);
}

// the heatmap's colour choices: the kind's metrics (the point table carries those)
function metricChoices(s) {
  return s.metrics.filter((m) => m.key in s.table.metrics).map((m) => [m.key, `${m.label}${m.unit ? ` [${m.unit}]` : ''}`])
    .concat(s.pass_key && !s.metrics.some((m) => m.key === s.pass_key) ? [[s.pass_key, s.pass_key]] : []);
}

function renderMetricChoice(s) {
  const sel = $('metric');
  const choices = metricChoices(s);
  if (!metricKey || !choices.some((c) => c[0] === metricKey)) metricKey = s.heat_metric || choices[0]?.[0];
  const sig = choices.map((c) => c[0]).join(',');
  if (sel.dataset.sig !== sig) {
    sel.innerHTML = '';
    for (const [k, label] of choices) sel.add(new Option(label, k, false, k === metricKey));
    sel.dataset.sig = sig;
  }
  sel.value = metricKey;
}

// the heatmap's axes: the first two parameters that vary; the others are slices
function heatAxes(s) {
  return s.table.axes;
}

function renderSlices(s) {
  const box = $('slices');
  const extra = heatAxes(s).slice(2);
  const sig = `${s.id}|${extra.map((a) => s.table.values[a].length).join(',')}`;
  if (box.dataset.sig === sig) return;
  box.dataset.sig = sig;
  box.innerHTML = '';
  for (const a of extra) {
    const vals = s.table.values[a];
    if (slice[a] === undefined || !vals.includes(slice[a])) slice[a] = vals[0];
    const label = document.createElement('label');
    label.className = 'inline';
    label.textContent = `${a}${unitOf(s.kind, a)}`;
    const sel = document.createElement('select');
    for (const v of vals) sel.add(new Option(String(v), String(v), false, v === slice[a]));
    sel.addEventListener('change', () => { slice[a] = vals.find((v) => String(v) === sel.value); renderHeatmap(scan); });
    label.appendChild(sel);
    box.appendChild(label);
  }
}

const CODE_STATUS = { p: 'pending', r: 'running', d: 'done', e: 'error', c: 'cancelled', i: 'interrupted' };
const TEXT_CELLS = 400;  // above this many cells the heatmap drops its per-cell text and PASS/FAIL frames

function cellText(st, verdict, s, v) {
  if (st === 'd') return `${fmt(v, 3)}${verdict !== '-' ? `<br><b>${verdict === '1' ? 'PASS' : 'FAIL'}</b>` : ''}`;
  // never '': Plotly does not draw a text that was empty at the previous update (a cell would stay blank)
  const idle = ['running', 'queued'].includes(s.status) ? '·' : 'not run';
  return { e: '<b>ERROR</b>', r: 'running…', c: 'cancelled', i: 'interrupted', p: idle }[st] ?? st;
}

function renderHeatmap(s) {
  const t0 = performance.now();
  const t = s.table;
  const [xName, yName] = heatAxes(s);
  const xs = xName ? t.values[xName] : [null];
  const ys = yName ? t.values[yName] : [null];
  const xl = xs.map((v) => (v === null ? '' : String(v)));
  const yl = ys.map((v) => (v === null ? '' : String(v)));
  const z = ys.map(() => xs.map(() => null));
  const status = ys.map(() => xs.map(() => null));  // 0 running, 1 error, 2 cancelled
  const hover = ys.map(() => xs.map(() => 'not sampled'));
  cellIndex = ys.map(() => xs.map(() => -1));
  const sl = Object.entries(slice).filter(([a]) => t.coords[a]).map(([a, v]) => [t.coords[a], t.values[a].indexOf(v)]);
  const mv = t.metrics[metricKey] || [];
  const cx = xName ? t.coords[xName] : null;
  const cy = yName ? t.coords[yName] : null;
  const cells = [];
  let filled = 0;
  for (let i = 0; i < t.n; i += 1) {
    if (sl.some(([c, k]) => c[i] !== k)) continue;
    const xi = cx ? cx[i] : 0;
    const yi = cy ? cy[i] : 0;
    const st = t.status[i];
    const verdict = t.pass[i];
    const v = mv[i] ?? null;
    if (st === 'd' || st === 'e') filled += 1;
    if (st === 'd' && v !== null) z[yi][xi] = v;
    status[yi][xi] = { r: 0, e: 1, c: 2, i: 2 }[st] ?? null;
    hover[yi][xi] = `${CODE_STATUS[st]}${verdict === '1' ? ' · PASS' : verdict === '0' ? ' · FAIL' : ''}`;
    cellIndex[yi][xi] = i;
    cells.push({ xi, yi, v: st === 'd' ? v : null, st, verdict: st === 'e' ? '0' : verdict });
  }
  const few = cells.length <= TEXT_CELLS && !s.search;  // a search's points sit on a sparse, uneven axis
  let lo = Infinity, hi = -Infinity;
  for (const c of cells) if (c.v !== null) { lo = Math.min(lo, c.v); hi = Math.max(hi, c.v); }
  // YlOrRd runs dark red (0) to light yellow (1): reversed, low values are light; for a metric where high is
  // good (better: "high") it is not reversed, so the bad end stays red. Light cells get dark text.
  const highGood = s.metrics.find((m) => m.key === metricKey)?.better === 'high';
  const light = (f) => (highGood ? f > 0.55 : f < 0.45);
  const label = metricChoices(s).find((c) => c[0] === metricKey)?.[1] || metricKey;
  const gap = few ? 2 : 0;
  const traces = [
    { type: 'heatmap', x: xl, y: yl, z, text: hover, colorscale: 'YlOrRd', reversescale: !highGood, colorbar: { title: { text: label, side: 'right' }, thickness: 12 },
      hovertemplate: `${xName || ''}=%{x}<br>${yName || ''}${yName ? '=%{y}<br>' : ''}${metricKey}=%{z}<br>%{text}<extra></extra>`, xgap: gap, ygap: gap },
    { type: 'heatmap', x: xl, y: yl, z: status, zmin: 0, zmax: 2, showscale: false, hoverinfo: 'skip', xgap: gap, ygap: gap,
      colorscale: [[0, '#8a6d1d'], [0.5, '#6b1f5c'], [1, '#3a4457']] },
  ];
  let shapes = [];
  if (few || (s.search && cells.length <= TEXT_CELLS)) {
    shapes = cells.filter((c) => c.verdict !== '-').map((c) => ({
      type: 'rect', xref: 'x', yref: 'y', x0: c.xi - 0.47, x1: c.xi + 0.47, y0: c.yi - 0.47, y1: c.yi + 0.47,
      line: { color: c.verdict === '1' ? '#44d17a' : '#ff5c6c', width: few ? 3 : 1.5 },
    }));
  }
  if (few) {
    const tc = cells.map((c) => (c.v !== null && hi > lo && light((c.v - lo) / (hi - lo)) ? '#1a1205' : '#ffffff'));
    traces.push({ type: 'scatter', mode: 'text', x: cells.map((c) => xl[c.xi]), y: cells.map((c) => yl[c.yi]), text: cells.map((c) => cellText(c.st, c.verdict, s, c.v)),
      textfont: { color: tc, size: 12 }, hoverinfo: 'skip', showlegend: false });
  }
  const frames = few || (s.search && cells.length <= TEXT_CELLS) ? (s.pass_key ? ` · frame: green PASS (${s.pass_key}), red FAIL or error` : '') : ` · ${cells.length.toLocaleString()} cells: hover a cell for PASS/FAIL`;
  const layout = {
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: '#1c2230', font: { color: '#c9d1dc', size: 12 },
    margin: { l: 70, r: 20, t: 34, b: 50 },
    title: { text: `colour: ${label}${frames}`, font: { size: 13 }, x: 0.01, xanchor: 'left' },
    shapes,
    xaxis: { title: { text: xName ? `${xName}${unitOf(s.kind, xName)}` : '' }, type: 'category', gridcolor: 'rgba(0,0,0,0)' },
    // a choice axis reads top to bottom in the kind's order; a numeric one grows upwards
    yaxis: { title: { text: yName ? `${yName}${unitOf(s.kind, yName)}` : '' }, type: 'category', gridcolor: 'rgba(0,0,0,0)',
      autorange: isChoice(s.kind, yName) ? 'reversed' : true },
  };
  const el = $('heatmap');
  Plotly.react(el, traces, layout, { displayModeBar: false, responsive: true });
  el.dataset.filled = String(filled);
  if (!el.dataset.bound) {
    el.dataset.bound = '1';
    el.on('plotly_click', (ev) => {
      const d = ev.points?.[0];
      if (!d || !scan) return;
      const [xa, ya] = heatAxes(scan);
      const xi = xa ? scan.table.values[xa].findIndex((v) => String(v) === String(d.x)) : 0;
      const yi = ya ? scan.table.values[ya].findIndex((v) => String(v) === String(d.y)) : 0;
      const i = cellIndex[yi]?.[xi] ?? -1;
      if (i >= 0) showPoint(i);
    });
  }
  timings.heatmap.push(performance.now() - t0);
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
  const replay = $('p-replay');  // the point's recording on the replay page (lab/web/scan_recordings.py)
  replay.hidden = !p.files.includes('recording.mcap');
  replay.href = `/replay?scan=${encodeURIComponent(scan.id)}&point=${i}`;
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
    toast(what === 'refine' ? `scan ${s.id}: ${s.added} points added along the PASS/FAIL boundary` : `scan ${s.id}: ${s.status}`);
  } catch (e) {
    toast(e.message, 'error', e.hint);
  }
  refreshDetail();
  refreshList();
}

// ---------------------------------------------------------------- wiring

$('kind').addEventListener('change', renderForm);
$('search-on').addEventListener('change', searchToggled);
$('search-param').addEventListener('change', searchParamChanged);
for (const k of ['search-lo', 'search-hi', 'search-tol']) $(k).addEventListener('input', updateCount);
$('executor').addEventListener('change', () => { $('address-row').hidden = $('executor').value !== 'ray'; });
$('scan-form').addEventListener('submit', launch);
$('cancel').addEventListener('click', () => act('cancel'));
$('resume').addEventListener('click', () => act('resume'));
$('refine').addEventListener('click', () => act('refine'));
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
