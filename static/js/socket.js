// The stream client: one WebSocket to /ws, reconnecting by itself. Message names match lab/web/messages.py.
//   hello   -> onHello(msg)
//   frame   -> header, then the next binary message is that frame's JPEG -> onFrame(view, blob, header)
//   metrics -> onMetrics(msg);  status -> onStatus(msg)
// (api, toast and the other helpers every page shares are in util.js.)
export class StreamSocket {
  constructor({ path = '/ws', onHello, onFrame, onMetrics, onStatus, onState } = {}) {
    this.url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${path}`;
    Object.assign(this, { onHello, onFrame, onMetrics, onStatus, onState });
    this.pending = null;      // frame header waiting for its JPEG
    this.retryMs = 500;
    this.frameAges = [];      // [ms] recent frame ages (browser clock - server capture time)
    this.listeners = {};      // message type -> [fn(msg)] for the types a page module adds (camera, picked, ...)
    this.openers = [];        // fn(sock) run at every (re)connect: a module re-sends what the server must know
    this.connect();
  }

  connect() {
    this.setState('connecting');
    const ws = (this.ws = new WebSocket(this.url));
    ws.binaryType = 'blob';
    ws.onopen = () => { this.retryMs = 500; this.setState('live'); this.openers.forEach((fn) => fn(this)); };
    ws.onmessage = (ev) => this.dispatch(ev.data);
    ws.onclose = () => {
      this.setState('disconnected', this.retryMs);
      setTimeout(() => this.connect(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 1.6, 5000);
    };
    ws.onerror = () => ws.close();
  }

  dispatch(data) {
    if (typeof data !== 'string') {
      const h = this.pending;
      this.pending = null;
      if (h) {
        this.frameAges.push(Date.now() - h.t_wall * 1000);
        if (this.frameAges.length > 300) this.frameAges.shift();
        // flow control: the view acknowledges once it has drawn the frame (or dropped it for a newer one)
        this.onFrame?.(h.view, data, h, () => this.ack(h));
      }
      return;
    }
    const msg = JSON.parse(data);
    if (msg.type === 'frame') this.pending = msg;
    else if (msg.type === 'metrics') this.onMetrics?.(msg);
    else if (msg.type === 'status') this.onStatus?.(msg);
    else if (msg.type === 'hello') this.onHello?.(msg);
    (this.listeners[msg.type] || []).forEach((fn) => fn(msg));
  }

  // a page module's own message types: on('camera', fn); onOpen(fn) runs now if live and at each reconnect
  on(type, fn) { (this.listeners[type] ||= []).push(fn); }
  onOpen(fn) { this.openers.push(fn); if (this.ws.readyState === WebSocket.OPEN) fn(this); }
  send(obj) {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(obj));
    return true;
  }

  ack(h) {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'ack', view: h.view, seq: h.seq }));
  }

  setState(state, retryMs) {
    this.state = state;
    const el = document.getElementById('conn');
    if (el) {
      el.dataset.state = state;
      el.querySelector('.label').textContent =
        state === 'live' ? 'live' : state === 'connecting' ? 'connecting…'
          : `disconnected — retrying in ${(retryMs / 1000).toFixed(1)} s`;
    }
    this.onState?.(state);
  }

  frameAgeP95() {
    if (!this.frameAges.length) return null;
    const s = [...this.frameAges].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(0.95 * s.length))];
  }
}

// Where a FrameView draws (its `drawer` option; the page URL's `?draw=main|worker` sets it for a page):
// 'worker' decodes and draws in static/js/frame_worker.js on an OffscreenCanvas, so a busy main thread
// (chart redraws) does not hold the frames up; 'main' decodes and draws here. 'worker' is the default
// where the browser has OffscreenCanvas and Worker, 'main' elsewhere.
export function drawerFor(canvas, want = new URLSearchParams(location.search).get('draw')) {
  const can = typeof Worker !== 'undefined' && typeof OffscreenCanvas !== 'undefined'
    && typeof canvas.transferControlToOffscreen === 'function';
  return want !== 'main' && can ? 'worker' : 'main';
}

// Decodes and draws on the main thread; the canvas stays readable (toDataURL) here.
class MainDrawer {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
  }

  get width() { return this.canvas.width; }

  get height() { return this.canvas.height; }

  // true once drawn; false for a frame that does not decode (a truncated one: skipped)
  async draw(blob) {
    try {
      const bmp = await createImageBitmap(blob);
      if (this.canvas.width !== bmp.width) this.canvas.width = bmp.width;
      if (this.canvas.height !== bmp.height) this.canvas.height = bmp.height;
      this.ctx.drawImage(bmp, 0, 0);
      bmp.close();
      return true;
    } catch (e) { return false; }
  }

  async snapshot() { return this.canvas.toDataURL('image/png'); }
}

// Hands the canvas to frame_worker.js; the worker decodes and draws. After the transfer the page can no
// longer read or resize the canvas (toDataURL, getContext, width= throw): the size comes back with
// each drawn frame and snapshot() asks the worker for the pixels. Its displayed size
// (getBoundingClientRect) and its events are the element's as before.
class WorkerDrawer {
  constructor(canvas) {
    this.width = canvas.width;
    this.height = canvas.height;
    this.replies = new Map(); // id -> resolve
    this.lastId = 0;
    this.error = null; // the worker's load or run error, if any: every draw then answers false
    const offscreen = canvas.transferControlToOffscreen();
    this.worker = new Worker(new URL('./frame_worker.js', import.meta.url));
    this.worker.onmessage = (ev) => this.reply(ev.data);
    this.worker.onerror = (ev) => {
      this.error = ev.message || 'the frame worker failed';
      console.error(`frame worker: ${this.error}`);
      for (const resolve of this.replies.values()) resolve({ ok: false });
      this.replies.clear();
    };
    this.worker.postMessage({ type: 'init', canvas: offscreen }, [offscreen]);
  }

  ask(msg) {
    if (this.error) return Promise.resolve({ ok: false });
    return new Promise((resolve) => {
      const id = ++this.lastId;
      this.replies.set(id, resolve);
      this.worker.postMessage({ ...msg, id });
    });
  }

  reply(msg) {
    const resolve = this.replies.get(msg.id);
    this.replies.delete(msg.id);
    if (msg.type === 'drawn' && msg.ok) { this.width = msg.width; this.height = msg.height; }
    resolve?.(msg);
  }

  async draw(blob) { return (await this.ask({ type: 'draw', blob })).ok; }

  async snapshot() {
    const r = await this.ask({ type: 'snapshot' });
    if (!r.blob) throw new Error(`no snapshot: ${this.error || 'the frame worker did not answer'}`);
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(r.blob);
    });
  }
}

// Draws JPEG blobs on a canvas, newest only; counts displayed frames per second. One frame is drawn at a
// time; a frame that arrives meanwhile waits, and a newer one replaces it. done() (the stream's ack) is
// called once a frame is drawn, found undecodable, or replaced before it was drawn.
export class FrameView {
  constructor(canvas, { drawer } = {}) {
    this.canvas = canvas;
    this.path = drawerFor(canvas, drawer); // 'worker' | 'main'
    this.drawer = this.path === 'worker' ? new WorkerDrawer(canvas) : new MainDrawer(canvas);
    this.busy = false;
    this.next = null;
    this.times = [];
    this.frames = 0;
  }

  push(blob, done) {
    if (this.next) this.nextDone?.(); // replaced before it was drawn: release it
    this.next = blob;
    this.nextDone = done;
    if (!this.busy) this.drawNext();
  }

  async drawNext() {
    const blob = this.next;
    const done = this.nextDone;
    if (!blob) return;
    this.next = null;
    this.nextDone = null;
    this.busy = true;
    if (await this.drawer.draw(blob)) {
      this.frames += 1;
      const now = performance.now();
      this.times.push(now);
      while (this.times.length && now - this.times[0] > 1000) this.times.shift();
    }
    done?.();
    this.busy = false;
    if (this.next) this.drawNext();
  }

  fps() {
    const now = performance.now();
    while (this.times.length && now - this.times[0] > 1000) this.times.shift();
    return this.times.length;
  }

  // what is on the canvas: {drawer: 'worker'|'main', frames, width, height [px]} (the image's size, not
  // the displayed one); the main thread cannot read a worker's canvas, so pages and tests ask here
  info() {
    return { drawer: this.path, frames: this.frames, width: this.drawer.width, height: this.drawer.height };
  }

  // the canvas's pixels now, as a PNG data URL (a Promise)
  snapshot() { return this.drawer.snapshot(); }
}
