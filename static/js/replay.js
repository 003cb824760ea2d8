// The replay page (templates/replay.html): a recording's exact state, re-rendered by the Lab at a cursor of
// this viewer's own (WS /ws/replay?id=ID, lab/web/replay_page.py). The transport (play/pause, speed, one
// frame back/forward, the scrubber) sends {"type": "replay", t | playing | speed | step}; the server's
// cursor comes back as `metrics` (and `cursor` after each change). Under the view: the events on the
// timeline (click one to go there), charts of the whole recording with a line at the cursor (click one to
// go there), and the export form (POST /api/recordings/<id>/export, progress from GET /api/exports/<job>).
import { StreamSocket, FrameView } from './socket.js';
import { View3d } from './view3d.js';
import { $, api, fmt, toast } from './util.js';
import { installShortcuts, viewKeys } from './keys.js';

const root = $('replay');
const rid = root.dataset.rid;
const view = new FrameView($('view'));
const OVERLAYS = ['contacts', 'com', 'support', 'cop', 'push', 'frames'];
const CHARTS = [
  { el: 'plot-z', key: 'pelvis_z', title: 'pelvis height [m]', color: '#5fb3ff' },
  { el: 'plot-pitch', key: 'pitch_deg', title: 'torso pitch [°]', color: '#f39a2e' },
  { el: 'plot-err', key: 'max_joint_err', title: 'max joint error [rad]', color: '#ff5c6c' },
];
const EXPORT_POLL_MS = 400;

let timeline = null; // GET /api/recordings/<id>/timeline
let cursor = { t: 0, playing: false, speed: 1, duration_s: 0 };
let shown = null; // the recording time [s] of the frame on the canvas
let scrubbing = false;
let pendingSeek = null;
let chartT = -1;

function clock(s) {
  const m = Math.floor(s / 60);
  return `${m}:${(s - 60 * m).toFixed(3).padStart(6, '0')}`;
}

function send(msg) { return sock.send({ type: 'replay', ...msg }); }
export function seek(t) { send({ t }); }

// the scrubber sends at most one seek per animation frame, the newest
function seekSoon(t) {
  const first = pendingSeek === null;
  pendingSeek = t;
  if (first) requestAnimationFrame(() => { seek(pendingSeek); pendingSeek = null; });
}

function onCursor(c) {
  cursor = { ...cursor, ...c };
  const d = cursor.duration_s;
  $('play').textContent = cursor.playing ? '❚❚ Pause' : '▶︎ Play';
  $('play').classList.toggle('on', cursor.playing);
  $('clock').textContent = `${clock(cursor.t)} / ${clock(d)}`;
  if (!scrubbing) $('scrub').value = String(cursor.t);
  if (c.seek_ms !== undefined && c.seek_ms !== null) $('seek').textContent = `seek ${c.seek_ms.toFixed(1)} ms`;
  if (c.speed !== undefined && Number($('speed').value) !== c.speed) $('speed').value = String(c.speed);
  moveChartCursor(cursor.t);
}

function onHello(m) {
  const r = m.recording;
  cursor.duration_s = r.duration_s;
  const s = $('scrub');
  s.max = String(r.duration_s);
  s.step = String(r.frame_dt);
  $('view-msg').textContent = 'rendering…';
}

const sock = new StreamSocket({
  path: `/ws/replay?id=${encodeURIComponent(rid)}`,
  onHello,
  onFrame: (v, blob, h, done) => view.push(blob, () => {
    shown = h.sim_time;
    $('time-badge').textContent = `t = ${h.sim_time.toFixed(3)} s`;
    $('view-msg').hidden = true;
    done();
  }),
  onMetrics: onCursor,
});
sock.on('cursor', onCursor);
sock.on('error', (m) => {
  if (m.about === 'open') { // the recording could not be opened (gone, being written, too many views)
    $('view-msg').hidden = false;
    $('view-msg').textContent = `${m.error} — ${m.hint}`;
  } else if (m.about === 'replay') toast(m.error, 'error', m.hint);
});

// ---- the transport --------------------------------------------------------------------------------
$('play').addEventListener('click', () => send({ playing: !cursor.playing, speed: Number($('speed').value) }));
$('step-back').addEventListener('click', () => send({ step: -1 }));
$('step-fwd').addEventListener('click', () => send({ step: 1 }));
$('speed').addEventListener('change', () => send({ speed: Number($('speed').value) }));
const scrub = $('scrub');
scrub.addEventListener('pointerdown', () => { scrubbing = true; });
window.addEventListener('pointerup', () => { scrubbing = false; });
scrub.addEventListener('input', () => seekSoon(Number(scrub.value)));
scrub.addEventListener('change', () => { scrubbing = false; seek(Number(scrub.value)); });

// ---- events and charts of the whole recording -----------------------------------------------------
function eventText(e) {
  const d = e.data || {};
  const what = d.mode ? ` ${d.mode}` : d.force_n ? ` ${Array.isArray(d.force_n) ? d.force_n.map((v) => v.toFixed(0)).join(', ') : d.force_n} N` : d.reason ? `: ${d.reason}` : '';
  return `${e.kind}${what}${e.count > 1 ? ` ×${e.count}` : ''}`;
}

function showEvents(events, duration) {
  const track = $('events-track');
  const list = $('events');
  track.replaceChildren();
  list.replaceChildren();
  if (!events.length) list.innerHTML = '<li class="muted">none</li>';
  events.forEach((e, i) => {
    const mark = document.createElement('button');
    mark.type = 'button';
    mark.className = 'event-mark';
    mark.dataset.kind = e.kind;
    mark.dataset.index = String(i);
    mark.dataset.t = String(e.t);
    mark.style.left = `${duration > 0 ? (100 * e.t) / duration : 0}%`;
    mark.title = `${fmt(e.t, 3)} s · ${eventText(e)}`;
    mark.addEventListener('click', () => seek(e.t));
    track.append(mark);
    const li = document.createElement('li');
    li.dataset.kind = e.kind;
    const a = document.createElement('a');
    a.href = '#';
    a.textContent = `${clock(e.t)}  ${eventText(e)}`;
    a.addEventListener('click', (ev) => { ev.preventDefault(); seek(e.t); });
    li.append(a);
    list.append(li);
  });
}

const LAYOUT = {
  paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)', font: { color: '#c9d1dc', size: 11 },
  margin: { l: 52, r: 12, t: 28, b: 30 }, showlegend: false,
  xaxis: { gridcolor: '#273041', zerolinecolor: '#3a4457', title: { text: 'recording time [s]', standoff: 4 } },
  yaxis: { gridcolor: '#273041', zerolinecolor: '#3a4457', automargin: true },
};

function showCharts(tl) {
  const s = tl.series;
  for (const c of CHARTS) {
    const el = $(c.el);
    const layout = structuredClone(LAYOUT);
    layout.title = { text: c.title, font: { size: 12 }, x: 0.01, xanchor: 'left' };
    layout.xaxis.range = [0, tl.duration_s];
    layout.shapes = [{ type: 'line', xref: 'x', yref: 'paper', x0: 0, x1: 0, y0: 0, y1: 1, line: { color: '#f5c542', width: 1.5 } }];
    const traces = [{ x: s.t, y: s[c.key], mode: 'lines', line: { color: c.color, width: 1.4 }, hovertemplate: '%{x:.3f} s: %{y:.4f}<extra></extra>' }];
    Plotly.newPlot(el, traces, layout, { displayModeBar: false, responsive: true });
    el.on('plotly_click', (ev) => { if (ev.points?.length) seek(ev.points[0].x); });
  }
}

// the charts' cursor line follows at most 10 times a second (a relayout redraws the chart)
function moveChartCursor(t) {
  if (!timeline || Math.abs(t - chartT) < 1e-6) return;
  if (moveChartCursor.timer) return;
  moveChartCursor.timer = setTimeout(() => {
    moveChartCursor.timer = 0;
    chartT = cursor.t;
    for (const c of CHARTS) Plotly.relayout($(c.el), { 'shapes[0].x0': chartT, 'shapes[0].x1': chartT });
  }, 100);
}

async function loadTimeline() {
  try {
    const r = await fetch(`/api/recordings/${encodeURIComponent(rid)}/timeline`);
    const data = await r.json();
    if (!r.ok) throw Object.assign(new Error(data.error), { hint: data.hint });
    timeline = data;
    $('replay-info').textContent = `${fmt(data.duration_s, 3)} s · frame ${fmt(data.frame_dt * 1000, 0)} ms · ${data.events.length} events${data.exact ? ' · bit-exact' : ''}`;
    const point = /^scan:(.+):(\d+)$/.exec(rid); // a scan point's recording (lab/web/scan_recordings.py)
    if (point) {
      const back = document.createElement('a');
      back.id = 'replay-scan';
      back.href = `/scans#scan=${encodeURIComponent(point[1])}`;
      back.textContent = `← its scan, point ${point[2]}`;
      $('replay-info').append(' · ', back);
    }
    showEvents(data.events, data.duration_s);
    showCharts(data);
    const f = $('export-form');
    f.t1.value = String(Math.min(data.duration_s, 2));
  } catch (e) { toast(e.message, 'error', e.hint); }
}

// ---- export ---------------------------------------------------------------------------------------
$('export-range').addEventListener('click', () => {
  const f = $('export-form');
  const d = cursor.duration_s;
  f.t0.value = fmt(Math.max(0, cursor.t - 1), 3);
  f.t1.value = fmt(Math.min(d, cursor.t + 1), 3);
});

$('export-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = ev.target;
  const body = {
    t0: Number(f.t0.value), t1: Number(f.t1.value), format: f.format.value,
    width: Number(f.width.value), height: Number(f.height.value), fps: Number(f.fps.value),
    overlays: f.overlays.checked ? [...(window.labView3d?.on || [])] : [],
  };
  const box = $('export-job');
  box.hidden = false;
  box.dataset.state = 'queued';
  $('export-bar').style.width = '0%';
  $('export-msg').textContent = 'starting…';
  $('export-btn').disabled = true;
  try {
    watchExport(await api(`/api/recordings/${encodeURIComponent(rid)}/export`, body));
  } catch (e) {
    box.dataset.state = 'failed';
    $('export-msg').textContent = `${e.message}${e.hint ? ` — ${e.hint}` : ''}`;
    $('export-btn').disabled = false;
  }
});

function watchExport(job) {
  const box = $('export-job');
  box.dataset.state = job.state;
  box.dataset.job = job.job;
  $('export-bar').style.width = `${(100 * job.progress).toFixed(1)}%`;
  const what = `${job.format.toUpperCase()} ${job.width}×${job.height} @ ${job.fps} fps, ${fmt(job.t0, 2)}–${fmt(job.t1, 2)} s`;
  const msg = $('export-msg');
  if (job.state === 'done') {
    msg.innerHTML = '';
    const a = document.createElement('a');
    a.href = job.file;
    a.id = 'export-link';
    a.textContent = `download ${job.format.toUpperCase()}`;
    a.setAttribute('download', '');
    msg.append(a, ` · ${what} · ${job.frames} frames · ${(job.bytes / 1e6).toFixed(2)} MB · ${job.codec} · ${fmt(job.seconds, 1)} s`);
    $('export-btn').disabled = false;
    return;
  }
  if (job.state === 'failed') {
    msg.textContent = `export failed: ${job.error}`;
    $('export-btn').disabled = false;
    return;
  }
  msg.textContent = `${job.state}: frame ${job.frames_done} of ${job.frames} · ${what}`;
  setTimeout(async () => {
    try {
      const r = await fetch(`/api/exports/${job.job}`);
      watchExport(await r.json());
    } catch (e) { setTimeout(() => watchExport(job), EXPORT_POLL_MS); }
  }, EXPORT_POLL_MS);
}

// ---- keys, the 3D view, and what tests read ---------------------------------------------------------
installShortcuts([
  { keys: [' '], label: 'play / pause', run: () => $('play').click() },
  { keys: ['ArrowLeft'], label: 'one frame back', run: () => send({ step: -1 }) },
  { keys: ['ArrowRight'], label: 'one frame forward', run: () => send({ step: 1 }) },
  ...viewKeys(),
], { hint: $('fps').parentElement });
setInterval(() => { $('fps').textContent = `${view.fps()} fps`; }, 250);

window.labView3d = new View3d(sock, [{ canvas: $('view'), view: 'replay' }], { bar: $('wrap'), overlays: OVERLAYS });
window.replay = { seek, send, cursor: () => cursor, shown: () => shown, view, sock, timeline: () => timeline };
loadTimeline();
