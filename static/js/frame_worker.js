// The frame drawer off the main thread (socket.js FrameView, `drawer: 'worker'`): decodes each JPEG blob
// and draws it on the OffscreenCanvas the page handed over (canvas.transferControlToOffscreen()).
// Messages in:  {type: 'init', canvas}            the OffscreenCanvas (transferred)
//               {type: 'draw', id, blob}           one frame; answered once, drawn or not
//               {type: 'snapshot', id}             the canvas as it is now, as a PNG blob
// Messages out: {type: 'drawn', id, ok, width, height}   ok false: the JPEG did not decode (skipped)
//               {type: 'snapshot', id, blob}
let canvas = null;
let ctx = null;

async function draw(blob) {
  const bmp = await createImageBitmap(blob);
  if (canvas.width !== bmp.width) canvas.width = bmp.width;
  if (canvas.height !== bmp.height) canvas.height = bmp.height;
  ctx.drawImage(bmp, 0, 0);
  bmp.close();
}

self.onmessage = async (ev) => {
  const msg = ev.data;
  if (msg.type === 'init') {
    canvas = msg.canvas;
    ctx = canvas.getContext('2d');
  } else if (msg.type === 'draw') {
    let ok = true;
    try { await draw(msg.blob); } catch (e) { ok = false; } // a truncated frame: skip it
    self.postMessage({ type: 'drawn', id: msg.id, ok, width: canvas.width, height: canvas.height });
  } else if (msg.type === 'snapshot') {
    self.postMessage({ type: 'snapshot', id: msg.id, blob: await canvas.convertToBlob({ type: 'image/png' }) });
  }
};
