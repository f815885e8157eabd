// Events: the event store's global log ($all) read from a position and filtered by type, stream
// prefix or correlation id, its catch-up subscriptions with their checkpoints and lag, and an
// event stream's page that reads it forward or backward from a version, with its snapshot.

import { ago, api, enc, fill, h, num, registerPage, time } from '../core.js';
import { card, dataTable, errorBanner, keyValues, pretty } from '../widgets.js';

const SHOWN = [10, 20, 50, 100];
const FILTERS = ['types', 'stream_prefix', 'correlation_id'];

const muted = (text) => h('span', { class: 'muted' }, text);
const traceLink = (id) => (id ? h('a', { href: `#/trace/${enc(id)}`, class: 'mono', title: 'Its causal trace' }, id) : muted('–'));

/** An event's data (and metadata) cut to a line; expand to read it pretty-printed. */
function dataCell(e) {
  const text = JSON.stringify(e.data ?? null);
  const short = text.length > 80 ? text.slice(0, 79) + '…' : text;
  return h('details', { class: 'body' }, h('summary', { class: 'mono' }, short),
    h('pre', { class: 'json' }, pretty(text)),
    e.metadata !== undefined ? [h('div', { class: 'muted' }, 'metadata'), h('pre', { class: 'json' }, pretty(JSON.stringify(e.metadata)))] : null);
}

/** The columns both event tables share, after their own first ones. */
const commonColumns = [
  { id: 'type', label: 'Type', value: (e) => e.type, cell: (e) => h('code', {}, e.type) },
  { id: 'time', label: 'Written', value: (e) => e.time_ms, cell: (e) => h('span', { title: e.time }, time(e.time_ms)) },
  { id: 'correlation', label: 'Correlation id', value: (e) => e.correlation_id, cell: (e) => traceLink(e.correlation_id) },
  { id: 'data', label: 'Data', value: (e) => JSON.stringify(e.data ?? null), cell: dataCell },
];

function subscriptionsTable() {
  return dataTable({
    label: 'Subscriptions',
    key: (s) => s.name,
    empty: 'No subscriptions. Create one with `sluice events subscribe NAME`.',
    search: false,
    columns: [
      { id: 'name', label: 'Subscription', value: (s) => s.name, cell: (s) => h('span', { class: 'mono' }, s.name) },
      { id: 'filter', label: 'Filter', value: (s) => filterText(s), cell: (s) => (filterText(s) ? h('code', {}, filterText(s)) : muted('every event')) },
      { id: 'checkpoint', label: 'Checkpoint', num: true, value: (s) => s.checkpoint, cell: (s) => (s.checkpoint === undefined || s.checkpoint === null ? muted('none yet') : num(s.checkpoint)) },
      { id: 'next', label: 'Next position', num: true, value: (s) => s.next_position, cell: (s) => num(s.next_position) },
      { id: 'lag', label: 'Lag', num: true, value: (s) => s.head_position - s.next_position,
        cell: (s) => { const lag = s.head_position - s.next_position; return lag ? h('span', { class: 'warn-text' }, num(lag)) : num(lag); } },
      { id: 'created', label: 'Created', value: (s) => Date.parse(s.created_at), cell: (s) => h('span', { title: s.created_at }, ago(Date.parse(s.created_at))) },
    ],
  });
}

function filterText(s) {
  const parts = [];
  if (s.types?.length) parts.push(`types ${s.types.join(', ')}`);
  if (s.stream_prefix) parts.push(`streams ${s.stream_prefix}*`);
  return parts.join(' · ');
}

registerPage({
  id: 'events',
  title: 'Events',
  path: 'events',
  nav: 48,
  render(_params, query) {
    const filters = Object.fromEntries(FILTERS.map((name) => [name, query.get(name) || '']));
    let from = query.get('from') === null || query.get('from') === '' ? null : Number(query.get('from'));
    let max = 20;
    let answer = null;
    let reads = 0;
    const banner = errorBanner();
    const head = card('Events in the log', 'events-head');
    const subs = card('Subscriptions', 'events-subscriptions');
    const behind = card('Events behind (slowest)', 'events-lag');
    const subscriptions = subscriptionsTable();
    const status = h('div', { class: 'muted', id: 'events-status' });
    const input = (name, placeholder, size) => h('input', { name, value: filters[name], placeholder, size });
    const fromInput = h('input', { name: 'from', type: 'number', min: 0, step: 1, placeholder: 'latest', size: 10, value: from ?? '' });
    const maxSelect = h('select', { name: 'max', 'aria-label': 'Events shown', onchange: () => { max = Number(maxSelect.value); reload(); } },
      SHOWN.map((n) => h('option', { value: n, selected: n === max }, `${n} events`)));
    const older = h('button', { type: 'button', class: 'ghost', id: 'events-older', disabled: true, onclick: () => go(Math.max(0, (answer.events[0]?.position ?? answer.head_position) - max)) }, '‹ Older');
    const newer = h('button', { type: 'button', class: 'ghost', id: 'events-newer', disabled: true, onclick: () => go(answer.next_position) }, 'Newer ›');
    const latest = h('button', { type: 'button', class: 'ghost', id: 'events-latest', disabled: true, onclick: () => go(null) }, 'Latest');
    const form = h('form', { class: 'toolbar', id: 'events-form' },
      h('label', {}, 'From position', fromInput),
      h('label', {}, 'Types', input('types', 'any, comma-separated', 18)),
      h('label', {}, 'Stream prefix', input('stream_prefix', 'any', 12)),
      h('label', {}, 'Correlation id', input('correlation_id', 'any', 14)),
      h('label', {}, 'Show', maxSelect),
      h('button', { class: 'primary', type: 'submit' }, 'Read'),
      h('span', { class: 'grow' }), older, newer, latest);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      for (const name of FILTERS) filters[name] = form.elements[name].value.trim();
      go(fromInput.value === '' ? null : Math.max(0, Math.floor(Number(fromInput.value))));
    });
    const open = h('form', { class: 'toolbar', id: 'open-event-stream' },
      h('label', {}, 'Stream id', h('input', { name: 'stream', placeholder: 'order-123', size: 20, required: true })),
      h('button', { type: 'submit' }, 'Open'));
    open.addEventListener('submit', (event) => {
      event.preventDefault();
      location.hash = `#/events/${enc(open.elements.stream.value.trim())}`;
    });
    const events = dataTable({
      label: 'Events',
      key: (e) => String(e.position),
      empty: 'No events here.',
      sort: { id: 'position', direction: 1 },
      columns: [
        { id: 'position', label: 'Position', num: true, value: (e) => e.position, cell: (e) => num(e.position) },
        { id: 'stream', label: 'Stream', value: (e) => e.stream_id, cell: (e) => h('a', { href: `#/events/${enc(e.stream_id)}`, class: 'mono' }, e.stream_id) },
        { id: 'version', label: 'Version', num: true, value: (e) => e.version, cell: (e) => num(e.version) },
        ...commonColumns,
      ],
    });
    const reload = () => view.refresh().catch(() => {});

    function go(position) {
      from = position;
      fromInput.value = position === null ? '' : String(position);
      const q = new URLSearchParams();
      if (position !== null) q.set('from', String(position));
      for (const name of FILTERS) if (filters[name]) q.set(name, filters[name]);
      history.replaceState(null, '', q.toString() ? `#/events?${q}` : '#/events');
      reload();
    }

    function say(text) {
      status.textContent = text;
    }

    const view = {
      el: h('section', {},
        h('div', { class: 'page-head' }, h('h1', {}, 'Events'), h('span', { class: 'grow' }), open),
        banner.el,
        h('div', { class: 'cards' }, head.el, subs.el, behind.el),
        h('div', { class: 'panel', id: 'events-all' }, h('h2', {}, 'All events'),
          h('p', { class: 'muted' }, 'Every event in one global order: the order of commit, with no gaps.'), form, status, events.el),
        h('div', { class: 'panel', id: 'events-subs' }, h('h2', {}, 'Subscriptions'),
          h('p', { class: 'muted' }, 'Catch-up subscriptions and their server-kept checkpoints.'), subscriptions.el)),
      async refresh() {
        const read = ++reads;
        let list;
        let got;
        try {
          list = await api('GET', '/v1/events/subscriptions');
          const filtered = FILTERS.some((name) => filters[name]);
          // Following the end: the last `max` positions, or (filtered, where those may hold no
          // match) from the start.
          let start = from;
          if (start === null) {
            const probe = await api('GET', '/v1/events/all?max=1&from_position=0');
            start = filtered ? 0 : Math.max(0, probe.head_position - max);
          }
          const q = new URLSearchParams({ from_position: String(start), max: String(max) });
          for (const name of FILTERS) if (filters[name]) q.set(name, filters[name]);
          got = await api('GET', `/v1/events/all?${q}`);
          got.start = start;
        } catch (e) {
          if (read === reads) banner.show(e);
          throw e;
        }
        if (read !== reads) return;
        banner.clear();
        answer = got;
        const lags = list.subscriptions.map((s) => s.head_position - s.next_position);
        head.set(num(got.head_position), got.head_position ? `positions 0 to ${num(got.head_position - 1)}` : 'append with `sluice events append`');
        subs.set(num(list.subscriptions.length));
        const slowest = lags.length ? Math.max(...lags) : 0;
        behind.set(num(slowest), lags.length ? '' : 'no subscriptions', slowest ? 'warn' : '');
        subscriptions.update(list.subscriptions);
        events.update(got.events);
        const shown = got.events;
        older.disabled = got.start <= 0;
        newer.disabled = got.next_position >= got.head_position;
        latest.disabled = from === null;
        if (shown.length) say(`Positions ${num(shown[0].position)}–${num(shown[shown.length - 1].position)}${from === null ? ' (following the end)' : ''} of ${num(got.head_position)}.`);
        else if (!got.head_position) say('The log is empty. Append an event with `sluice events append STREAM TYPE DATA`.');
        else say(`No event at or after position ${num(got.start)} matches.`);
      },
    };
    return view;
  },
});

registerPage({
  id: 'event-stream',
  section: 'events',
  title: 'Event stream',
  path: 'events/:stream',
  render({ stream }) {
    const path = `/v1/events/streams/${enc(stream)}`;
    let from = null;
    let backward = true;
    let max = 20;
    const banner = errorBanner();
    const about = h('div', { id: 'event-stream-about' });
    const snapshot = h('div', { id: 'event-stream-snapshot' });
    const status = h('div', { class: 'muted', id: 'stream-events-status' });
    const fromInput = h('input', { name: 'from', type: 'number', min: 0, step: 1, placeholder: 'the end', size: 10 });
    const direction = h('select', { name: 'direction', 'aria-label': 'Direction' },
      h('option', { value: 'backward', selected: true }, 'newest first'), h('option', { value: 'forward' }, 'oldest first'));
    const maxSelect = h('select', { name: 'max', 'aria-label': 'Events shown' }, SHOWN.map((n) => h('option', { value: n, selected: n === max }, `${n} events`)));
    const form = h('form', { class: 'toolbar', id: 'stream-events-form' },
      h('label', {}, 'From version', fromInput), h('label', {}, 'Order', direction), h('label', {}, 'Show', maxSelect),
      h('button', { class: 'primary', type: 'submit' }, 'Read'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      from = fromInput.value === '' ? null : Math.max(0, Math.floor(Number(fromInput.value)));
      backward = direction.value === 'backward';
      max = Number(maxSelect.value);
      view.refresh().catch(() => {});
    });
    const events = dataTable({
      label: `Events of ${stream}`,
      key: (e) => String(e.version),
      empty: 'No events here.',
      search: false,
      sort: { id: 'version', direction: -1 },
      columns: [
        { id: 'version', label: 'Version', num: true, value: (e) => e.version, cell: (e) => num(e.version) },
        { id: 'position', label: 'Position', num: true, value: (e) => e.position, cell: (e) => num(e.position) },
        { id: 'id', label: 'Event id', value: (e) => e.id, cell: (e) => h('span', { class: 'mono muted', title: e.id }, e.id.length > 12 ? `${e.id.slice(0, 12)}…` : e.id) },
        ...commonColumns,
        { id: 'causation', label: 'Caused by', value: (e) => e.causation_id, cell: (e) => (e.causation_id ? h('code', {}, e.causation_id) : muted('–')) },
      ],
    });
    const view = {
      title: `Event stream ${stream}`,
      el: h('section', {},
        h('div', { class: 'crumbs' }, h('a', { href: '#/events' }, 'Events'), ' /'),
        h('div', { class: 'page-head' }, h('h1', {}, 'Stream ', h('span', { class: 'mono' }, stream))),
        banner.el,
        h('div', { class: 'grid two' },
          h('div', { class: 'panel' }, h('h2', {}, 'Stream'), about),
          h('div', { class: 'panel' }, h('h2', {}, 'Latest snapshot'), snapshot)),
        h('div', { class: 'panel', id: 'stream-events' }, h('h2', {}, 'Events'), form, status, events.el)),
      async refresh() {
        const q = new URLSearchParams({ direction: backward ? 'backward' : 'forward', max: String(max) });
        if (from !== null) q.set('from_version', String(from));
        let got;
        let snap = null;
        try {
          got = await api('GET', `${path}?${q}`);
          try {
            snap = await api('GET', `${path}/snapshot`);
          } catch (e) {
            if (e.code !== 'snapshot_not_found') throw e;
          }
        } catch (e) {
          banner.show(e, { event_stream_not_found: { what: `No event stream ${stream} exists (never written, or deleted).`, todo: 'The Events page lists what the log holds.' } });
          throw e;
        }
        banner.clear();
        events.update(got.events);
        fill(about, keyValues([
          ['Versions', `${num(got.first_version)} to ${num(got.last_version)}`],
          ['Events', num(got.last_version - got.first_version + 1)],
          ['Last written', got.events.length ? time(Math.max(...got.events.map((e) => e.time_ms))) : '–'],
        ]));
        fill(snapshot, snap
          ? [keyValues([['Version', num(snap.snapshot.version)], ['Taken', time(Date.parse(snap.snapshot.taken_at))],
            ['Events after it', num(snap.events.length)]]), h('pre', { class: 'json' }, pretty(JSON.stringify(snap.snapshot.data)))]
          : muted('None. Put one with `PUT /v1/events/streams/{stream_id}/snapshot`.'));
        status.textContent = got.events.length
          ? `Versions ${num(Math.min(...got.events.map((e) => e.version)))}–${num(Math.max(...got.events.map((e) => e.version)))}, ${backward ? 'newest' : 'oldest'} first.`
          : 'No events at that version.';
      },
    };
    return view;
  },
});
