// Sliding-window Plotly strip charts. Plotly is served from the installed Python package (/vendor/plotly.min.js).
const DARK = {
  paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)',
  font: { color: '#c9d1dc', size: 11 },
  margin: { l: 52, r: 12, t: 28, b: 30 },
  xaxis: { gridcolor: '#273041', zerolinecolor: '#3a4457', title: { text: 'sim time [s]', standoff: 4 } },
  yaxis: { gridcolor: '#273041', zerolinecolor: '#3a4457', automargin: true }, // long tick labels (0.4207045) get room
  legend: { orientation: 'h', x: 1, xanchor: 'right', y: 1.0, yanchor: 'bottom', font: { size: 10 } },
  showlegend: true,
};

export class StripChart {
  // series: [{name, color, dash?}], window: seconds shown
  constructor(el, { title, unit, series, window = 10, yrange = null }) {
    this.el = el;
    this.window = window;
    this.series = series;
    this.x = series.map(() => []);
    this.y = series.map(() => []);
    this.dirty = false;
    const layout = structuredClone(DARK);
    layout.title = { text: `${title}${unit ? ` [${unit}]` : ''}`, font: { size: 12 }, x: 0.01, xanchor: 'left' };
    if (yrange) layout.yaxis.range = yrange;
    layout.showlegend = series.length > 1;
    const traces = series.map((s) => ({
      x: [], y: [], name: s.name, mode: 'lines', line: { color: s.color, width: 1.6, dash: s.dash || 'solid' },
    }));
    Plotly.newPlot(el, traces, layout, { displayModeBar: false, responsive: true, staticPlot: false });
  }

  add(t, values) {
    values.forEach((v, i) => {
      if (v === null || v === undefined || Number.isNaN(v)) return;
      this.x[i].push(t);
      this.y[i].push(v);
    });
    this.dirty = true;
  }

  clear() {
    this.x = this.series.map(() => []);
    this.y = this.series.map(() => []);
    this.dirty = true;
  }

  flush() {
    if (!this.dirty) return;
    this.dirty = false;
    let tmax = -Infinity;
    for (const xs of this.x) if (xs.length) tmax = Math.max(tmax, xs[xs.length - 1]);
    const tmin = tmax - this.window;
    this.x.forEach((xs, i) => {
      let k = 0;
      while (k < xs.length && xs[k] < tmin) k++;
      if (k) { xs.splice(0, k); this.y[i].splice(0, k); }
    });
    const range = Number.isFinite(tmax) ? [Math.max(0, tmin), Math.max(tmax, this.window)] : [0, this.window];
    Plotly.update(this.el, { x: this.x, y: this.y }, { 'xaxis.range': range }, this.series.map((_, i) => i));
  }
}
