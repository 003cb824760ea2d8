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
    this.connect();
  }

  connect() {
    this.setState('connecting');
    const ws = (this.ws = new WebSocket(this.url));
    ws.binaryType = 'blob';
    ws.onopen = () => { this.retryMs = 500; this.setState('live'); };
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

// Draws JPEG blobs on a canvas, newest only; counts displayed frames per second.
export class FrameView {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
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
    try {
      const bmp = await createImageBitmap(blob);
      if (this.canvas.width !== bmp.width) this.canvas.width = bmp.width;
      if (this.canvas.height !== bmp.height) this.canvas.height = bmp.height;
      this.ctx.drawImage(bmp, 0, 0);
      bmp.close();
      this.frames += 1;
      const now = performance.now();
      this.times.push(now);
      while (this.times.length && now - this.times[0] > 1000) this.times.shift();
    } catch (e) { /* a truncated frame: skip it */ }
    done?.();
    this.busy = false;
    if (this.next) this.drawNext();
  }

  fps() {
    const now = performance.now();
    while (this.times.length && now - this.times[0] > 1000) this.times.shift();
    return this.times.length;
  }
}
