// Sagas: the instances, filtered by status and saga and paged by the server, and an instance's
// page with its step timeline (each step's status, attempts with their outcomes, errors and
// times, output, next attempt and deadline), Cancel (compensate what completed) and Retry (a
// failed compensation's new round), each after asking.

import { ago, api, confirmAction, enc, fill, h, num, registerPage, time, toast } from '../core.js';
import { badge, dataTable, errorBanner, keyValues, pager, pretty } from '../widgets.js';

const STATUSES = ['running', 'compensating', 'completed', 'compensated', 'failed'];
const TONES = { running: 'info', compensating: 'warn', completed: 'ok', compensated: '', failed: 'bad' };
const STEP_TONES = {
  pending: '', running: 'info', succeeded: 'ok', failed: 'warn', timed_out: 'warn', compensating: 'warn',
  compensated: '', compensation_failed: 'bad', skipped: '',
};
const SETTLED = new Set(['completed', 'compensated', 'failed']);
const FILTERS = ['saga', 'status'];

const ms = (text) => (text ? Date.parse(text) : null);
const when = (text) => (text ? h('span', { title: time(ms(text)) }, ago(ms(text))) : h('span', { class: 'muted' }, '–'));
const at = (text) => (text ? [time(ms(text)), ' ', h('span', { class: 'muted' }, `(${ago(ms(text))})`)] : '–');
const json = (value) => h('pre', { class: 'json' }, pretty(JSON.stringify(value ?? null)));

function statusBadge(i) {
  return [badge(i.status, TONES[i.status]), i.cancel_requested && !SETTLED.has(i.status) ? [' ', badge('cancel requested', 'warn')] : null];
}

function listHash(filters) {
  const query = new URLSearchParams();
  for (const name of FILTERS) if (filters[name]) query.set(name, filters[name]);
  const text = query.toString();
  return text ? `#/sagas?${text}` : '#/sagas';
}

registerPage({
  id: 'sagas',
  title: 'Sagas',
  path: 'sagas',
  nav: 47,
  render(_params, query) {
    const filters = Object.fromEntries(FILTERS.map((name) => [name, query.get(name) || '']));
    let tokens = [null];
    let next = null;
    let loads = 0;
    const reload = () => view.refresh().catch(() => {});
    const banner = errorBanner();
    const field = (label, input) => h('label', {}, label, input);
    const form = h('form', { class: 'toolbar', id: 'saga-filters' },
      field('Saga', h('input', { name: 'saga', value: filters.saga, placeholder: 'any', size: 16 })),
      field('Status', h('select', { name: 'status' }, h('option', { value: '' }, 'any'),
        STATUSES.map((s) => h('option', { value: s, selected: s === filters.status }, s)))),
      h('button', { class: 'primary', type: 'submit' }, 'Apply'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      for (const name of FILTERS) filters[name] = form.elements[name].value.trim();
      history.replaceState(null, '', listHash(filters));
      tokens = [null];
      reload();
    });
    const list = dataTable({
      label: 'Saga instances',
      key: (i) => i.id,
      empty: 'No instances match. Start one with `sluice saga start NAME --input JSON`.',
      search: false,
      columns: [
        { id: 'id', label: 'Instance', value: (i) => i.id, cell: (i) => h('a', { href: `#/sagas/${enc(i.id)}`, class: 'mono' }, i.id) },
        { id: 'saga', label: 'Saga', value: (i) => i.saga, cell: (i) => [i.saga, h('span', { class: 'muted' }, ` v${i.version}`)] },
        { id: 'status', label: 'Status', value: (i) => i.status, cell: statusBadge },
        { id: 'correlation', label: 'Correlation id', value: (i) => i.correlation_id, cell: (i) => h('a', { href: `#/trace/${enc(i.correlation_id)}`, class: 'mono' }, i.correlation_id) },
        { id: 'steps', label: 'Steps done', num: true, value: (i) => i.steps.filter((s) => s.status === 'succeeded').length, cell: (i) => `${num(i.steps.filter((s) => s.status === 'succeeded').length)} / ${num(i.steps.length)}` },
        { id: 'created', label: 'Started', value: (i) => ms(i.created_at), cell: (i) => when(i.created_at) },
        { id: 'finished', label: 'Finished', value: (i) => ms(i.finished_at), cell: (i) => when(i.finished_at) },
        { id: 'error', label: 'Why', value: (i) => i.error, cell: (i) => (i.error ? h('span', { class: 'error-text truncate', title: i.error }, i.error) : h('span', { class: 'muted' }, '–')) },
      ],
    });
    const pages = pager({
      label: 'instances',
      onPrev: () => { if (tokens.length > 1) tokens.pop(); reload(); },
      onNext: () => { if (next) tokens.push(next); reload(); },
    });
    const view = {
      el: h('section', {},
        h('div', { class: 'page-head' }, h('h1', {}, 'Sagas')),
        banner.el,
        h('div', { class: 'panel', id: 'saga-instances' }, h('h2', {}, 'Instances'),
          h('p', { class: 'muted' }, 'In the order they started.'), form, list.el, pages.el)),
      async refresh() {
        const load = ++loads;
        const params = new URLSearchParams();
        for (const name of FILTERS) if (filters[name]) params.set(name, filters[name]);
        params.set('limit', '50');
        const token = tokens[tokens.length - 1];
        if (token) params.set('next_token', token);
        let page;
        try {
          page = await api('GET', `/v1/sagas/instances?${params}`);
        } catch (e) {
          if (load === loads) banner.show(e);
          throw e;
        }
        if (load !== loads) return;
        banner.clear();
        next = page.next_token || null;
        list.update(page.instances);
        pages.set({ text: page.instances.length ? `page ${tokens.length} · ${num(page.instances.length)} instances` : '', prev: tokens.length > 1, next: Boolean(next) });
      },
    };
    return view;
  },
});

/** One step of the timeline: its state, then every attempt it remembers. */
function stepPanel(step, index) {
  const attempts = dataTable({
    label: `Attempts of ${step.name}`,
    // A retried compensation numbers its attempts afresh: the start time tells them apart.
    key: (a) => `${a.kind}-${a.number}-${a.started_at}`,
    empty: 'Not tried yet.',
    search: false,
    sort: { id: 'started', direction: 1 },
    columns: [
      { id: 'kind', label: 'Call', value: (a) => a.kind },
      { id: 'number', label: 'Attempt', num: true, value: (a) => a.number },
      { id: 'started', label: 'Started', value: (a) => ms(a.started_at), cell: (a) => time(ms(a.started_at)) },
      { id: 'took', label: 'Took', num: true, value: (a) => (a.finished_at ? ms(a.finished_at) - ms(a.started_at) : null), cell: (a) => (a.finished_at ? `${num(ms(a.finished_at) - ms(a.started_at))} ms` : h('span', { class: 'muted' }, 'in flight')) },
      { id: 'outcome', label: 'Outcome', value: (a) => a.outcome, cell: (a) => (a.outcome ? badge(a.outcome, a.outcome === 'succeeded' ? 'ok' : 'warn') : badge('in flight', 'info')) },
      { id: 'error', label: 'Error', value: (a) => a.error, cell: (a) => (a.error ? h('span', { class: 'error-text' }, a.error) : h('span', { class: 'muted' }, '–')) },
    ],
  });
  attempts.update(step.attempts_history);
  return h('div', { class: 'panel saga-step', 'data-step': step.name, 'data-status': step.status },
    h('h2', {}, `${index + 1}. ${step.name} `, badge(step.status, STEP_TONES[step.status])),
    keyValues([
      ['Attempts', `${num(step.attempts)} of the action, ${num(step.compensation_attempts)} of the compensation`],
      ['Next attempt', at(step.next_attempt_at)],
      ['Deadline', at(step.deadline_at)],
      ['Error', step.error ? h('span', { class: 'error-text' }, step.error) : '–'],
    ]),
    step.output !== undefined ? [h('h3', {}, 'Output'), json(step.output)] : null,
    attempts.el);
}

registerPage({
  id: 'saga-instance',
  section: 'sagas',
  title: 'Saga instance',
  path: 'sagas/:id',
  render({ id }) {
    const path = `/v1/sagas/instances/${enc(id)}`;
    let instance = null;
    const banner = errorBanner();
    const status = h('span', { id: 'saga-status' });
    const cancel = h('button', { class: 'danger', type: 'button', id: 'cancel-saga', disabled: true, onclick: cancelSaga }, 'Cancel…');
    const retry = h('button', { type: 'button', id: 'retry-saga', disabled: true, onclick: retrySaga }, 'Retry compensation…');
    const about = h('div', {});
    const input = h('div', { id: 'saga-input' });
    const timeline = h('div', { id: 'saga-steps' });

    async function act(what, question, text, yes, done) {
      if (!(await confirmAction(question, text, yes, 'Keep it'))) return;
      try {
        const answer = await api('POST', `${path}/${what}`);
        toast(done(answer));
      } catch (e) {
        toast(`Not done: ${e.message}`, true);
      }
      view.refresh().catch(() => {});
    }
    function cancelSaga() {
      act('cancel', 'Cancel this saga instance?',
        `Every step of ${instance.saga} that completed is compensated, in reverse order (after the answer or deadline of an action in flight).`,
        'Cancel instance', (a) => `Instance ${a.id} is ${a.status}.`);
    }
    function retrySaga() {
      act('retry', 'Retry the compensation?',
        `The compensation that kept failing starts a new round of attempts; fix its participant first.`,
        'Retry', (a) => `Instance ${a.id} is ${a.status} again.`);
    }

    const view = {
      title: `Saga instance ${id}`,
      el: h('section', {},
        h('div', { class: 'crumbs' }, h('a', { href: '#/sagas' }, 'Sagas'), ' /'),
        h('div', { class: 'page-head' }, h('h1', {}, 'Instance ', h('span', { class: 'mono' }, id)), status, h('span', { class: 'grow' }), retry, cancel),
        banner.el,
        h('div', { class: 'grid two' },
          h('div', { class: 'panel' }, h('h2', {}, 'Instance'), about),
          h('div', { class: 'panel' }, h('h2', {}, 'Input'), input)),
        h('h2', {}, 'Steps'),
        timeline),
      async refresh() {
        try {
          instance = await api('GET', path);
        } catch (e) {
          banner.show(e, { saga_instance_not_found: { what: `No saga instance has id ${id}.`, todo: 'The Sagas page lists the instances.' } });
          cancel.disabled = true;
          retry.disabled = true;
          throw e;
        }
        banner.clear();
        fill(status, statusBadge(instance));
        status.dataset.status = instance.status;
        cancel.disabled = SETTLED.has(instance.status) || instance.cancel_requested;
        retry.disabled = instance.status !== 'failed';
        fill(about, keyValues([
          ['Status', statusBadge(instance)],
          ['Saga', h('a', { href: listHash({ saga: instance.saga }) }, `${instance.saga} (version ${instance.version})`)],
          ['Correlation id', h('a', { href: `#/trace/${enc(instance.correlation_id)}`, class: 'mono', title: 'Its causal trace' }, instance.correlation_id)],
          ['Why', instance.error ? h('span', { class: 'error-text' }, instance.error) : '–'],
          ['Started', at(instance.created_at)],
          ['Changed', at(instance.updated_at)],
          ['Finished', at(instance.finished_at)],
        ]));
        fill(input, json(instance.input));
        fill(timeline, instance.steps.map(stepPanel));
      },
    };
    return view;
  },
});
