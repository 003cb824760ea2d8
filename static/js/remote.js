// The remote monitor page: frames of the remote robot and the monitor's status over /ws/remote
// (names from lab/web/messages.py), the connect form and the limited command form.
import { StreamSocket, FrameView } from './socket.js';
import { View3d } from './view3d.js';
import { $, api, authHeader, fmt, showSim } from './util.js';
import { installShortcuts, viewKeys } from './keys.js';

const view = new FrameView($('view'));
let lastStatus = null;

const WHY = {
  CONNECTED: (s) => `fresh state ${ms(s.state_age_s)} ago`,
  STALE: (s) => `no fresh state for ${sec(s.state_age_s)} — last frame kept`,
  DISCONNECTED: (s) => (s.sequence === null ? 'no state received' : `no state for ${sec(s.state_age_s)}`),
  MISMATCH: () => 'another model: state not shown as live',
};

function ms(v) { return v === null || v === undefined ? '–' : `${(v * 1000).toFixed(0)} ms`; }
function sec(v) { return v === null || v === undefined ? '–' : `${v.toFixed(1)} s`; }
function text(id, v, cls = '') { const el = $(id); el.textContent = v; el.className = cls; }

function onStatus(s) {
  lastStatus = s;
  const state = s.state;
  $('rstate').dataset.state = state;
  $('rstate-word').textContent = state;
  $('rstate-why').textContent = WHY[state]?.(s) ?? '';
  $('wrap').dataset.state = state;
  $('send').disabled = state === 'MISMATCH'; // the Lab refuses to command another model
  const mark = $('mark');
  mark.hidden = state === 'CONNECTED';
  if (state === 'STALE') mark.textContent = `STALE — last frame, ${sec(s.state_age_s)} old${s.last_error ? ` · ${s.last_error}` : ''}`;
  else if (state === 'DISCONNECTED') mark.textContent = `DISCONNECTED${s.last_error ? ` — ${s.last_error}` : ''}`;
  else if (state === 'MISMATCH') mark.textContent = `MISMATCH — ${s.mismatch}`;
  text('r-sequence', s.sequence ?? '–', s.sequence_flag ? 'bad' : '');
  if (s.sequence_flag) $('r-sequence').textContent += `  ⚠ ${s.sequence_flag}`;
  text('r-simulation_time', s.simulation_time === null ? '–' : `${s.simulation_time.toFixed(3)} s`);
  text('r-age', ms(s.state_age_s), state === 'CONNECTED' ? 'ok' : 'warn');
  text('r-rate', `${s.updates_per_s} states/s over ${s.transport}`);
  $('rate').textContent = `${s.updates_per_s} states/s`;
  text('r-instance', s.server_instance_id ?? '–');
  const m = s.model;
  text('r-model', m ? `${m.file} · ${m.short} · nq=${m.nq}` : '–', state === 'MISMATCH' ? 'bad' : '');
  text('r-mode', s.mode ?? '–');
  showServerSim(s.server_sim);
  const c = s.active_control;
  text('r-control', c ? `${c.actuator} ${c.value} N·m until t=${c.expires_at.toFixed(3)} s` : 'none', c ? 'warn' : '');
  text('r-error', s.last_error ? `${s.last_error}${s.last_error_age_s !== null ? ` (${sec(s.last_error_age_s)} ago)` : ''}` : '–',
    !s.last_error ? '' : state === 'CONNECTED' ? 'warn' : 'bad');
  if (document.activeElement !== $('url') && s.url && !$('url').dataset.edited) $('url').value = s.url;
  renderEvents(s.events || []);
}

// the state server's own simulation, as of its last state: a banner over the view unless it runs
function showServerSim(sim) {
  showSim($('server-sim'), sim, { who: 'State server simulation', fix: 'restart the state server', resume: '' });
  if (!sim) { text('r-sim', '–'); return; }
  const at = sim.at === null || sim.at === undefined ? '' : ` at t=${fmt(sim.at, 1)} s`;
  text('r-sim', `${sim.state}${at}${sim.error ? `: ${sim.error}` : ''}`,
    sim.state === 'running' ? 'ok' : sim.state === 'paused' ? 'warn' : 'bad');
}

function renderEvents(events) {
  const ol = $('events');
  const key = events.map((e) => `${e.t}${e.kind}`).join('|');
  if (ol.dataset.key === key) return;
  ol.dataset.key = key;
  ol.replaceChildren(...events.slice().reverse().map((e) => {
    const li = document.createElement('li');
    li.dataset.kind = e.kind;
    const t = document.createElement('time');
    t.textContent = new Date(e.t * 1000).toLocaleTimeString([], { hour12: false });
    const span = document.createElement('span');
    span.textContent = e.text;
    li.append(t, span);
    return li;
  }));
}

const sock = new StreamSocket({
  path: '/ws/remote',
  onFrame: (v, blob, h, done) => view.push(blob, done), // done(): the flow-control ack
  onMetrics: onStatus, // the monitor status, JSON, STATUS_HZ times a second
});

setInterval(() => { $('fps').textContent = `${view.fps()} fps`; }, 250);

$('url').addEventListener('input', () => { $('url').dataset.edited = '1'; });
$('connect-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  delete $('url').dataset.edited;
  try {
    onStatus(await api('/api/remote/connect', { url: $('url').value }));
    show(`watching ${$('url').value}`, true);
  } catch (e) { show(`${e.message}${e.hint ? `\n${e.hint}` : ''}`, false); }
});

$('control-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = { actuator: f.get('actuator'), value: Number(f.get('value')), duration_s: Number(f.get('duration_s')) };
  const raw = `{"actuator": ${JSON.stringify(body.actuator)}, "value": ${f.get('value') || 'null'}, "duration_s": ${f.get('duration_s') || 'null'}}`;
  const res = await fetch('/api/remote/control', { method: 'POST', headers: { 'Content-Type': 'application/json', ...authHeader() }, body: raw });
  const data = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (res.status === 202) {
    show(`${res.status} accepted: ${data.actuator} ${data.value} N·m for ${data.duration_s} s\n`
      + `model range [${data.model_range}], demo range [${data.demo_range}]\n`
      + `simulation time ${data.start_time.toFixed(3)} → expires at ${data.expires_at.toFixed(3)} s`, true);
  } else {
    show(`${res.status} ${data.status || 'error'}: ${data.error}${data.hint ? `\n${data.hint}` : ''}`, false);
  }
});

$('stop').addEventListener('click', async () => {
  try {
    const r = await api('/api/remote/stop');
    show(r.cancelled ? `stopped command ${r.cancelled.id}` : 'no command was active', true);
  } catch (e) { show(e.message, false); }
});

function show(msg, ok) {
  const el = $('answer');
  el.textContent = msg;
  el.className = `answer ${ok ? 'ok' : 'bad'}`;
}

// the keys (static/js/keys.js): the view's toggles only; this page commands nothing by key
installShortcuts(viewKeys(), { hint: $('fps').parentElement });

// the 3D view: own camera, overlays that kinematics gives (CoM, joint frames), double-click centre
window.labView3d = new View3d(sock, [{ canvas: $('view'), view: 'remote' }], { bar: $('view').parentElement,
  overlays: ['com', 'frames'] });
window.remoteStatus = () => lastStatus;
window.remoteSocket = sock;
window.remoteView = view;

// ---- the remote-control runtime (the state server's, through /api/remote/runtime) -------------------
const RT_WHY = {
  streaming: (r) => `following chunk ${r.chunk?.id ?? ''}`,
  hold: (r) => `protective hold for ${r.hold_for_s.toFixed(1)} s — no valid chunk covers now (e-stop at 8 s)`,
  breaker_open: (r) => `breaker open (${r.counts?.failures ?? 0} failed requests so far) — holding, probing again soon`,
  estop: () => 'latched: damped, zero target; clear needs confirmation',
  stopped: () => 'runtime stopped; the server stands',
  idle: () => 'not following a policy',
};

function plotRuntime(r) {
  if (!window.Plotly) return;
  const dark = { paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)', font: { color: '#cfd6e4', size: 11 },
    margin: { l: 40, r: 8, t: 8, b: 34 } };
  Plotly.react('rt-latency', [{ type: 'histogram', x: r.latency_ms || [], marker: { color: '#5aa9ff' }, nbinsx: 20 }],
    { ...dark, xaxis: { title: 'latency [ms]' }, yaxis: { title: 'replies' },
      shapes: r.latency_p95_ms ? [{ type: 'line', x0: r.latency_p95_ms, x1: r.latency_p95_ms, y0: 0, y1: 1, yref: 'paper',
        line: { color: '#f5c542', dash: 'dot' } }] : [] }, { displayModeBar: false, responsive: true });
  const reasons = Object.keys(r.rejected || {});
  Plotly.react('rt-rejected', [{ type: 'bar', x: reasons, y: reasons.map((k) => r.rejected[k]), marker: { color: '#ff5c6c' } }],
    { ...dark, yaxis: { title: 'chunks' } }, { displayModeBar: false, responsive: true });
}

function onRuntime(r) {
  const state = r.state || 'idle';
  $('rt-state').dataset.state = state;
  $('rt-state').textContent = state.replace('_', ' ').toUpperCase();
  $('rt-why').textContent = RT_WHY[state]?.(r) ?? '';
  const a = r.arming || {};
  $('rt-armed').textContent = a.armed ? `armed ${a.expires_in_s.toFixed(0)} s: ${a.reason}` : 'not armed';
  $('rt-armed').className = a.armed ? 'ok' : 'warn';
  const c = r.chunk;
  text('rt-chunk', c ? `${c.id} · observed t=${c.observed_at.toFixed(2)} s` : '–');
  text('rt-left', c ? `${c.actions_left} / ${c.horizon}` : '–');
  const stale = c && c.arrival_age_ms > r.max_age_ms * 0.8;
  text('rt-age', c ? `${c.age_ms.toFixed(0)} ms now · ${c.arrival_age_ms.toFixed(0)} ms on arrival (stale > ${r.max_age_ms} ms)` : '–',
    stale ? 'warn' : '');
  text('rt-lead', r.lead_ms === undefined ? '–' : `${r.lead_ms} ms (p95 ${r.latency_p95_ms ?? '–'} ms) · ${r.in_flight} in flight`);
  text('rt-breaker', r.breaker ?? '–', r.breaker === 'closed' ? 'ok' : 'bad');
  text('rt-phase', r.phase === undefined ? '–' : `${r.phase.toFixed(2)} s of the task`);
  text('rt-hold', r.hold_s === undefined ? '–' : `${r.hold_s.toFixed(2)} s`);
  text('rt-faults', r.faults ? `${r.faults.profile} (seed ${r.faults.seed})` : '–', r.faults?.profile === 'healthy' ? '' : 'warn');
  const q = $('rt-queue');
  q.firstElementChild.style.width = c ? `${(100 * c.actions_left) / c.horizon}%` : '0';
  q.classList.toggle('stale', !!stale);
  const ol = $('rt-events');
  const key = (r.events || []).map((e) => `${e.t}${e.text}`).join('|');
  if (ol.dataset.key !== key) {
    ol.dataset.key = key;
    ol.replaceChildren(...(r.events || []).slice().reverse().map((e) => {
      const li = document.createElement('li');
      li.dataset.kind = e.kind;
      const t = document.createElement('time');
      t.textContent = `${e.t.toFixed(1)} s`;
      const span = document.createElement('span');
      span.textContent = e.text + (e.detail ? ` — ${e.detail}` : '');
      li.append(t, span);
      return li;
    }));
  }
  plotRuntime(r);
  window.remoteRuntime = r;
}

async function pollRuntime() {
  try {
    const res = await fetch('/api/remote/runtime');
    if (res.ok) onRuntime(await res.json());
  } catch (e) { /* the monitor above says why the server is not reachable */ }
  setTimeout(pollRuntime, 250);
}
pollRuntime();

async function runtimeAction(action, body, what) {
  try {
    const r = await api(`/api/remote/runtime/${action}`, body);
    if (r.state) onRuntime(r);
    rtShow(`${what}: ${r.state ?? (r.armed ? 'armed' : 'ok')}`, true);
  } catch (e) { rtShow(`${e.message}${e.hint ? `\n${e.hint}` : ''}`, false); }
}
function rtShow(msg, ok) { const el = $('rt-answer'); el.textContent = msg; el.className = `answer ${ok ? 'ok' : 'bad'}`; }

$('rt-estop').addEventListener('click', () => runtimeAction('estop', {}, 'e-stop'));
$('rt-clear').addEventListener('click', () => {
  if (window.confirm('Clear the e-stop? The robot goes back to a protective hold, then follows the policy again.')) {
    runtimeAction('estop/clear', { confirm: true }, 'e-stop cleared');
  }
});
$('rt-arm-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  runtimeAction('arm', { reason: $('rt-reason').value, expires_s: Number($('rt-expires').value) }, 'arm');
});
$('rt-start-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  runtimeAction('start', { policy_url: $('rt-policy').value }, 'start');
});
$('rt-stop').addEventListener('click', () => runtimeAction('stop', {}, 'stop'));
$('rt-fault-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  runtimeAction('faults', { profile: $('rt-profile').value, seed: Number($('rt-seed').value) }, 'faults');
});
