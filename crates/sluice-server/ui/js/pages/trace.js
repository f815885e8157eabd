// The causal trace: everything that carried one correlation id (messages, publishes, pushes,
// stream records, events, jobs, saga starts and step attempts) in causal order, each effect
// indented under its cause, with a link to where it lives (a queue, a stream, a job, a saga).

import { age, api, enc, fill, h, num, registerPage, time } from '../core.js';
import { badge, errorBanner } from '../widgets.js';

const TONES = { saga: 'info', saga_step: 'info', job: 'ok', push: 'warn', publish: '', message: '', record: '', event: 'ok' };
const KIND_TEXT = { saga_step: 'saga step' };

/** Where a target (`queue:orders`, `stream:clicks`, `events:order-7`, ...) is shown, if anywhere. */
function targetHref(target) {
  const mark = target.indexOf(':');
  if (mark < 0) return null;
  const [kind, name] = [target.slice(0, mark), target.slice(mark + 1)];
  if (kind === 'queue') return `#/queues/${enc(name)}`;
  if (kind === 'stream') return `#/streams/${enc(name)}`;
  if (kind === 'events') return `#/events/${enc(name)}`;
  if (kind === 'topic') return '#/topics';
  if (kind === 'saga') return `#/sagas?saga=${enc(name)}`;
  if (kind === 'job') return `#/jobs?queue=${enc(name)}`;
  return null;
}

/** The page of the thing an entry is, where it has one of its own. */
function entryHref(e) {
  if (e.kind === 'saga') return `#/sagas/${enc(e.id)}`;
  if (e.kind === 'saga_step') return `#/sagas/${enc(e.id.split('/')[0])}`;
  if (e.kind === 'job') return `#/jobs/${enc(e.id)}`;
  return null;
}

function row(e) {
  const href = entryHref(e);
  const where = targetHref(e.target);
  const id = href ? h('a', { href, class: 'mono' }, e.id) : h('span', { class: 'mono' }, e.id);
  return h('tr', { dataset: { key: `${e.kind}/${e.id}`, kind: e.kind, depth: String(e.depth) } },
    h('td', {}, h('span', { title: e.at }, time(e.at_ms))),
    h('td', {}, badge(KIND_TEXT[e.kind] || e.kind, TONES[e.kind])),
    // One spacer per level (the page's policy allows no inline styles).
    h('td', {}, h('div', { class: 'trace-id' },
      Array.from({ length: Math.min(e.depth, 12) }, () => h('span', { class: 'indent', 'aria-hidden': 'true' })),
      e.depth ? h('span', { class: 'muted', 'aria-hidden': 'true' }, '└ ') : null, id)),
    h('td', {}, where ? h('a', { href: where }, e.target) : e.target),
    h('td', {}, e.detail ? h('span', { class: 'truncate', title: e.detail }, e.detail) : h('span', { class: 'muted' }, '–')));
}

registerPage({
  id: 'trace',
  title: 'Trace',
  path: 'trace',
  nav: 49,
  render() {
    return traceView(null);
  },
});

registerPage({
  id: 'trace-of',
  section: 'trace',
  title: 'Trace',
  path: 'trace/:id',
  render({ id }) {
    return traceView(id);
  },
});

/** The form that asks for a correlation id and, with one, its entries (refreshed live). */
function traceView(correlationId) {
  const banner = errorBanner();
  const form = h('form', { class: 'toolbar', id: 'trace-form' },
    h('label', {}, 'Correlation id', h('input', { name: 'id', value: correlationId ?? '', placeholder: 'order-7', size: 32, required: true })),
    h('button', { class: 'primary', type: 'submit' }, 'Show trace'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = `#/trace/${enc(form.elements.id.value.trim())}`;
  });
  const status = h('p', { class: 'muted', id: 'trace-status' },
    'Send, publish, append or enqueue with a correlation id (and a causation id naming what caused it) to follow the work it starts.');
  const tbody = h('tbody');
  const table = h('div', { class: 'table-wrap', hidden: correlationId === null },
    h('table', { 'aria-label': 'Trace entries', id: 'trace-entries' },
      h('thead', {}, h('tr', {}, ['At', 'Kind', 'Id', 'Where', 'Detail'].map((label) => h('th', { scope: 'col' }, label)))), tbody));
  let signature = null;
  return {
    title: correlationId === null ? 'Trace' : `Trace ${correlationId}`,
    el: h('section', {},
      h('div', { class: 'page-head' }, h('h1', {}, 'Causal trace', correlationId === null ? null : [' ', h('span', { class: 'mono' }, correlationId)])),
      banner.el,
      h('div', { class: 'panel' }, form, status, table)),
    async refresh() {
      if (correlationId === null) return;
      let answer;
      try {
        answer = await api('GET', `/v1/trace/${enc(correlationId)}`);
      } catch (e) {
        banner.show(e);
        throw e;
      }
      banner.clear();
      const next = JSON.stringify(answer);
      if (next === signature) return;
      signature = next;
      fill(tbody, answer.entries.map(row));
      const times = answer.entries.map((e) => e.at_ms);
      const span = times.length > 1 ? `, over ${age(Math.max(...times) - Math.min(...times))}` : '';
      status.textContent = answer.entries.length
        ? `${num(answer.entries.length)} ${answer.entries.length === 1 ? 'entry' : 'entries'}${span}, causes before their effects${answer.truncated ? '; only the first ones are shown (the trace is longer)' : ''}.`
        : `Nothing has carried correlation id ${correlationId} (or it is older than the trace's retention).`;
      status.dataset.count = String(answer.entries.length);
    },
  };
}
