// The model picker (templates/_models.html) on the Lab and Sim2Sim pages: GET /api/models fills the
// select, Switch posts POST /api/model {id} and reloads the page when it worked (the view, curves and
// panels then follow the new robot), a .zip goes to POST /api/models/upload as the form field `file`.
// A refusal is shown in red under the picker, in the server's one line and its hint.
import { $, api, authHeader } from './util.js';

const card = $('models-card');
const select = $('models-select');
const switchBtn = $('models-switch');
const fileInput = $('models-file');
const uploadLabel = $('models-upload-label');
let current = null;
let busy = false;

function kib(n) { return n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : `${Math.max(1, Math.round(n / 1024))} KiB`; }

function showError(e) {
  const el = $('models-error');
  el.hidden = !e;
  el.textContent = e ? e.message : '';
  if (e && e.hint) {
    const s = document.createElement('small');
    s.textContent = e.hint;
    el.appendChild(s);
  }
}

function showOk(text) { $('models-ok').hidden = !text; $('models-ok').textContent = text || ''; }

function setBusy(text) {
  busy = Boolean(text);
  $('models-busy').hidden = !busy;
  $('models-busy-text').textContent = text || '';
  card.dataset.busy = busy ? '1' : '';
  if (busy) uploadLabel.dataset.busy = '1'; else delete uploadLabel.dataset.busy;
  select.disabled = busy;
  updateButton();
}

function updateButton() {
  const opt = select.selectedOptions[0];
  switchBtn.disabled = busy || !opt || opt.disabled || opt.value === current;
  switchBtn.textContent = busy ? 'Switching…' : opt && opt.value === current ? 'Running' : 'Switch';
}

async function refresh(selectId) {
  const res = await fetch('/api/models', { headers: { Accept: 'application/json' } });
  const data = await res.json();
  current = data.current;
  select.textContent = '';
  for (const m of data.models) {
    const o = document.createElement('option');
    o.value = m.id;
    const lab = m.usable ? '' : ' — Lab only (MJCF)';
    o.textContent = `${m.current ? '● ' : ''}${m.name} · ${m.kind.toUpperCase()} · ${kib(m.size)}${m.current ? ' (running)' : ''}${lab}`;
    o.disabled = !m.usable;
    o.dataset.kind = m.kind;
    if (m.current) o.classList.add('current');
    select.appendChild(o);
  }
  select.value = selectId || current;
  updateButton();
  window.labModels = data;
  return data;
}

async function switchTo(id) {
  showError(null);
  showOk('');
  setBusy(`switching to ${select.selectedOptions[0]?.textContent.replace(/ · .*/, '') || id}… (loading and checking the model)`);
  try {
    await api('/api/model', { id });
    setBusy('switched — reloading the page…');
    window.location.reload();
  } catch (e) {
    setBusy(null);
    showError(e);
  }
}

// POST the zip as multipart `file`; XMLHttpRequest for the upload's progress
function upload(file) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/api/models/upload');
    for (const [k, v] of Object.entries(authHeader())) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (ev) => {
      if (ev.lengthComputable) {
        const pct = Math.round((100 * ev.loaded) / ev.total);
        setBusy(pct < 100 ? `uploading ${file.name}: ${pct} %` : `checking ${file.name}: extracting and loading the model…`);
      }
    };
    xhr.onload = () => {
      let data = null;
      try { data = JSON.parse(xhr.responseText); } catch (e) { data = { error: `HTTP ${xhr.status}` }; }
      if (xhr.status >= 200 && xhr.status < 300) resolve(data);
      else reject(Object.assign(new Error(data.error || `HTTP ${xhr.status}`), { hint: data.hint, status: xhr.status }));
    };
    xhr.onerror = () => reject(new Error('upload failed: the server could not be reached'));
    const form = new FormData();
    form.append('file', file, file.name);
    xhr.send(form);
  });
}

select.addEventListener('change', () => { showError(null); updateButton(); });
switchBtn.addEventListener('click', () => { if (!busy && select.value) switchTo(select.value); });
fileInput.addEventListener('change', async () => {
  const file = fileInput.files[0];
  fileInput.value = '';
  if (!file || busy) return;
  showError(null);
  showOk('');
  setBusy(`uploading ${file.name}…`);
  try {
    const data = await upload(file);
    setBusy(null);
    await refresh(data.model.id);
    showOk(`uploaded ${data.model.name} — press Switch to run it`);
  } catch (e) {
    setBusy(null);
    showError(e);
  }
});

refresh().catch((e) => showError(e));
window.labModelsSwitch = switchTo;
