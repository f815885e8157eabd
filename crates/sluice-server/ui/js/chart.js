// Line charts drawn as inline SVG, without any library: time on x, one or more series on y,
// grid lines with round numbers, a legend with each series' latest value, and a cursor that
// shows the values under the pointer (or under the keyboard: focus the chart, then use the
// arrow keys).

import { clock, fill, h, setText } from './core.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const PAD = { left: 46, right: 10, top: 8, bottom: 22 };

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  el.append(...children);
  return el;
}

/** The smallest "nice" step (1, 2 or 5 times a power of ten) that splits `max` in at most
 * `count` parts. */
function niceStep(max, count) {
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

function shortNumber(v) {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(v < 10 && v % 1 ? 1 : 0)}`;
}

/**
 * A chart. `series`: `[{ name, tone }]` (tone `s1`..`s5`, the colour); `format(v)` formats a
 * value in the legend. `update(points)` takes `[{ t, values: [v per series] }]`, oldest first.
 */
export function lineChart({ label, series, format = shortNumber }) {
  const box = h('div', { class: 'chart', role: 'img', 'aria-label': label, tabindex: '0' });
  const legend = h('div', { class: 'legend' });
  const values = series.map((s) => h('b', {}, '–'));
  fill(legend, series.map((s, i) => h('span', { class: `key ${s.tone}` }, h('span', { class: 'swatch' }), h('span', { class: 'muted' }, s.name), values[i])));
  const at = h('span', { class: 'muted' });
  legend.append(at);
  const el = h('div', { class: 'chart-block' }, box, legend);
  let points = [];
  let cursor = null;

  function latest() {
    const index = cursor ?? points.length - 1;
    const point = points[index];
    values.forEach((v, i) => setText(v, point ? format(point.values[i] ?? 0) : '–'));
    setText(at, point && cursor !== null ? `at ${clock(point.t)}` : '');
  }

  function draw() {
    const width = Math.max(box.clientWidth, 200);
    const height = Math.max(box.clientHeight, 120);
    const plotW = width - PAD.left - PAD.right;
    const plotH = height - PAD.top - PAD.bottom;
    const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, 'aria-hidden': 'true' });
    if (points.length < 2) {
      fill(box, root, h('div', { class: 'chart-empty' }, points.length ? 'Collecting samples…' : 'No samples yet'));
      latest();
      return;
    }
    const t0 = points[0].t;
    const t1 = points[points.length - 1].t;
    const max = Math.max(1, ...points.flatMap((p) => p.values.map((v) => v ?? 0)));
    const step = niceStep(max, 4);
    const top = Math.ceil(max / step) * step;
    const x = (t) => PAD.left + (t1 === t0 ? 0 : ((t - t0) / (t1 - t0)) * plotW);
    const y = (v) => PAD.top + plotH - (v / top) * plotH;
    for (let v = 0; v <= top + step / 2; v += step) {
      root.append(svg('line', { class: 'grid-line', x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v) }));
      root.append(svg('text', { class: 'axis-text', x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, shortNumber(v)));
    }
    const ticks = Math.min(5, points.length);
    for (let i = 0; i < ticks; i++) {
      const t = t0 + ((t1 - t0) * i) / Math.max(1, ticks - 1);
      const anchor = i === 0 ? 'start' : i === ticks - 1 ? 'end' : 'middle';
      root.append(svg('text', { class: 'axis-text', x: x(t), y: height - 6, 'text-anchor': anchor }, clock(t)));
    }
    series.forEach((s, i) => {
      const coords = points.map((p) => `${x(p.t).toFixed(1)},${y(p.values[i] ?? 0).toFixed(1)}`);
      const area = `M${x(t0)},${y(0)} L${coords.join(' L')} L${x(t1)},${y(0)} Z`;
      root.append(svg('path', { class: `area ${s.tone}`, d: area }));
      root.append(svg('polyline', { class: `series ${s.tone}`, points: coords.join(' '), 'data-series': s.name }));
    });
    if (cursor !== null && points[cursor]) {
      const cx = x(points[cursor].t);
      root.append(svg('line', { class: 'cursor', x1: cx, x2: cx, y1: PAD.top, y2: PAD.top + plotH }));
    }
    fill(box, root);
    latest();

    root.addEventListener('pointermove', (event) => {
      const rect = root.getBoundingClientRect();
      const t = t0 + ((event.clientX - rect.left - PAD.left) / plotW) * (t1 - t0);
      cursor = nearest(t);
      draw();
    });
    root.addEventListener('pointerleave', () => { cursor = null; draw(); });
  }

  function nearest(t) {
    let best = 0;
    points.forEach((p, i) => { if (Math.abs(p.t - t) < Math.abs(points[best].t - t)) best = i; });
    return best;
  }

  box.addEventListener('keydown', (event) => {
    if (!points.length || !['ArrowLeft', 'ArrowRight', 'Escape'].includes(event.key)) return;
    event.preventDefault();
    if (event.key === 'Escape') cursor = null;
    else {
      const from = cursor ?? points.length - 1;
      cursor = Math.min(points.length - 1, Math.max(0, from + (event.key === 'ArrowLeft' ? -1 : 1)));
    }
    draw();
  });
  box.addEventListener('blur', () => { if (cursor !== null) { cursor = null; draw(); } });
  new ResizeObserver(() => draw()).observe(box);

  return {
    el,
    update(next) {
      points = next;
      if (cursor !== null && cursor >= points.length) cursor = null;
      draw();
    },
  };
}
