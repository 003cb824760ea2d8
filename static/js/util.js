// Helpers every page script shares: element lookup, number formatting, the JSON API call, toasts,
// an action that toasts its failure, and the words for the simulation's own state.

export const $ = (id) => document.getElementById(id);

// v with a fixed number of decimals; '–' for a missing or non-numeric value
export function fmt(v, digits) {
  return v === null || v === undefined || Number.isNaN(Number(v)) ? '–' : Number(v).toFixed(digits);
}

// any value for a table cell: numbers to `digits` significant digits, booleans as yes/no, '–' for nothing
export function fmtValue(v, digits = 4) {
  if (v === null || v === undefined || v === '') return '–';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : Number(v.toPrecision(digits)).toString();
  return String(v);
}

export function authHeader() {
  const t = localStorage.getItem('labToken');
  return t ? { Authorization: `Bearer ${t}` } : {};
}

// POST (or `method`) JSON to this page's service; throws an Error with .hint and .status on a 4xx/5xx
export async function api(path, body, method = 'POST') {
  const res = await fetch(path, {
    method,
    headers: { 'Content-Type': 'application/json', ...authHeader() },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch (e) { data = { error: `HTTP ${res.status}` }; }
  if (!res.ok) throw Object.assign(new Error(data.error || `HTTP ${res.status}`), { hint: data.hint, status: res.status });
  return data;
}

export function toast(message, kind = 'info', hint = '') {
  let box = document.getElementById('toasts');
  if (!box) {
    box = document.createElement('div');
    box.id = 'toasts';
    document.body.appendChild(box);
  }
  const el = document.createElement('div');
  el.className = `toast ${kind}`;
  el.innerHTML = `<b></b><span></span>`;
  el.querySelector('b').textContent = message;
  el.querySelector('span').textContent = hint ? ` — ${hint}` : '';
  box.appendChild(el);
  setTimeout(() => el.remove(), kind === 'error' ? 7000 : 3000);
}

// run fn(); toast okMsg when it succeeds, the error (with its hint) when it fails; its value or null
export async function act(fn, okMsg) {
  try {
    const r = await fn();
    if (okMsg) toast(okMsg);
    return r;
  } catch (e) {
    toast(e.message, 'error', e.hint);
    return null;
  }
}

// The words and kind ("error", "paused" or null: nothing to show) for a service's `sim` object
// ({state: running|paused|error|diverged, error, at, resets}, lab/runtime/realtime.py sim_info).
// `t`: the simulation time now [s], shown with a pause; `who`: whose simulation; `fix`, `resume`:
// what a person does about an error or a pause.
export function simMessage(sim, { t = null, who = 'Simulation', fix = 'press Reset', resume = 'press Resume' } = {}) {
  if (!sim || sim.state === 'running') return { kind: null, text: '' };
  const at = sim.at === null || sim.at === undefined ? '' : ` at t=${fmt(sim.at, 1)} s`;
  if (sim.state === 'paused') {
    return { kind: 'paused', text: `${who} paused${t === null ? '' : ` at t=${fmt(t, 1)} s`}${resume ? ` — ${resume}` : ''}` };
  }
  const what = sim.state === 'diverged' ? 'diverged' : sim.state === 'error' ? 'error' : sim.state;
  return { kind: 'error', text: `${who} ${what}${at}${sim.error ? `: ${sim.error}` : ''}${fix ? ` — ${fix}` : ''}` };
}

// show `sim` on a banner element (hidden while running); data-kind drives its colour (lab.css)
export function showSim(el, sim, opts) {
  const { kind, text } = simMessage(sim, opts);
  el.hidden = !kind;
  el.dataset.kind = kind || '';
  el.dataset.state = sim ? sim.state : '';
  if (kind) el.textContent = text;
}
