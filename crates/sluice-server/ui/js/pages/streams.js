// Streams: every stream with its partitions, the records and bytes it keeps and its slowest
// group's lag; a stream's page with each partition's first and next offset and bytes, each
// consumer group's committed offset and lag per partition, and a record browser that reads a
// partition from an offset (key, type, headers, timestamp, body) and pages older and newer.

import { age, ago, api, bytes, enc, fill, h, listAll, num, registerPage, time } from '../core.js';
import { badge, bodyCell, card, dataTable, errorBanner, keyValues, rateLimitText } from '../widgets.js';

/** Records a partition keeps: offsets never move, so it is the span from first to next. */
const kept = (p) => p.next_offset - p.first_offset;
const sum = (values) => values.reduce((a, b) => a + b, 0);
const slowest = (s) => (s.groups.length ? Math.max(...s.groups.map((g) => g.lag)) : null);

function retention(s) {
  const limits = [s.retention_ms ? age(s.retention_ms) : null, s.retention_bytes ? bytes(s.retention_bytes) : null].filter(Boolean);
  return limits.length ? limits.join(' or ') : 'kept forever';
}

function lagCell(lag) {
  return lag ? h('span', { class: 'warn-text' }, num(lag)) : num(lag);
}

function startText(start) {
  if (typeof start === 'string') return start;
  if (start && start.offset !== undefined) return `offset ${num(start.offset)}`;
  if (start && start.time_ms !== undefined) return `time ${time(start.time_ms)}`;
  return '–';
}

registerPage({
  id: 'streams',
  title: 'Streams',
  path: 'streams',
  nav: 44,
  render() {
    const banner = errorBanner();
    const count = h('span', { class: 'sub' });
    const table = dataTable({
      label: 'Streams',
      key: (s) => s.name,
      empty: 'No streams yet. Create one with `sluice stream create NAME --partitions 4`.',
      pageSize: 50,
      columns: [
        { id: 'name', label: 'Stream', value: (s) => s.name, cell: (s) => h('a', { href: `#/streams/${enc(s.name)}` }, s.name) },
        { id: 'partitions', label: 'Partitions', num: true, value: (s) => s.partitions, cell: (s) => num(s.partitions) },
        { id: 'records', label: 'Records kept', num: true, value: (s) => s.records, cell: (s) => num(s.records) },
        { id: 'bytes', label: 'Bytes', num: true, value: (s) => s.bytes, cell: (s) => bytes(s.bytes) },
        { id: 'groups', label: 'Groups', num: true, value: (s) => s.groups.length },
        { id: 'lag', label: 'Slowest group lag', num: true, value: slowest, cell: (s) => (s.groups.length ? lagCell(slowest(s)) : h('span', { class: 'muted' }, 'no groups')) },
        { id: 'retention', label: 'Retention', value: retention },
        { id: 'created', label: 'Created', value: (s) => s.created_at_ms, cell: (s) => h('span', { title: time(s.created_at_ms) }, ago(s.created_at_ms)) },
      ],
    });
    return {
      el: h('section', {},
        h('div', { class: 'page-head' }, h('h1', {}, 'Streams'), count),
        banner.el,
        h('div', { class: 'panel' }, table.el)),
      async refresh() {
        let streams;
        try {
          streams = await listAll('/v1/streams', 'streams');
        } catch (e) {
          banner.show(e);
          throw e;
        }
        banner.clear();
        table.update(streams.map((s) => ({ ...s, records: sum(s.partition_details.map(kept)), bytes: sum(s.partition_details.map((p) => p.bytes)) })));
        count.textContent = `${num(streams.length)} ${streams.length === 1 ? 'stream' : 'streams'}`;
      },
    };
  },
});

registerPage({
  id: 'stream',
  section: 'streams',
  title: 'Stream',
  path: 'streams/:name',
  render({ name }) {
    const path = `/v1/streams/${enc(name)}`;
    const banner = errorBanner();
    const cards = {
      partitions: card('Partitions', 'partitions'),
      records: card('Records kept', 'records'),
      bytes: card('Bytes', 'bytes'),
      groups: card('Consumer groups', 'groups'),
      lag: card('Slowest group lag', 'lag'),
    };
    const partitions = dataTable({
      label: 'Partitions',
      key: (p) => String(p.partition),
      empty: 'No partitions.',
      search: false,
      pageSize: 32,
      columns: [
        { id: 'partition', label: 'Partition', num: true, value: (p) => p.partition },
        { id: 'first', label: 'First offset', num: true, value: (p) => p.first_offset, cell: (p) => num(p.first_offset) },
        { id: 'next', label: 'Next offset', num: true, value: (p) => p.next_offset, cell: (p) => num(p.next_offset) },
        { id: 'records', label: 'Records kept', num: true, value: kept, cell: (p) => num(kept(p)) },
        { id: 'bytes', label: 'Bytes', num: true, value: (p) => p.bytes, cell: (p) => bytes(p.bytes) },
        { id: 'read', label: '', value: () => '', cell: (p) => h('button', { type: 'button', class: 'ghost', 'aria-label': `Read partition ${p.partition}`,
          onclick: () => browser.show(p.partition, p.first_offset) }, 'Read') },
      ],
    });
    const groups = dataTable({
      label: 'Consumer groups',
      key: (g) => g.name,
      empty: 'No consumer groups. Create one with `sluice stream group create STREAM GROUP`.',
      search: false,
      sort: { id: 'lag', direction: -1 },
      pageSize: 25,
      columns: [
        { id: 'name', label: 'Group', value: (g) => g.name },
        { id: 'mode', label: 'Mode', value: (g) => g.mode, cell: (g) => [badge(g.mode), g.key_ordered ? [' ', badge('key-ordered')] : null] },
        { id: 'members', label: 'Members', num: true, value: (g) => g.members.length,
          cell: (g) => h('span', { title: g.members.join(', ') || 'none fetching now' }, num(g.members.length)) },
        { id: 'lag', label: 'Lag', num: true, value: (g) => g.lag, cell: (g) => lagCell(g.lag) },
        { id: 'in_flight', label: 'In flight', num: true, value: (g) => g.in_flight, cell: (g) => (g.mode === 'shared' ? num(g.in_flight) : '–') },
        { id: 'generation', label: 'Generation', num: true, value: (g) => g.generation, cell: (g) => (g.mode === 'offsets' ? num(g.generation) : '–') },
        { id: 'start', label: 'Starts at', value: (g) => startText(g.start) },
        { id: 'dlq', label: 'DLQ', value: (g) => g.dead_letter_queue, cell: (g) => (g.dead_letter_queue ? h('a', { href: `#/dlqs/${enc(g.dead_letter_queue)}` }, g.dead_letter_queue) : '–') },
        { id: 'created', label: 'Created', value: (g) => g.created_at_ms, cell: (g) => h('span', { title: time(g.created_at_ms) }, ago(g.created_at_ms)) },
      ],
    });
    const lag = dataTable({
      label: 'Lag per partition',
      key: (r) => `${r.group}/${r.partition}`,
      empty: 'No consumer groups, so no lag.',
      sort: { id: 'group', direction: 1 },
      pageSize: 50,
      columns: [
        { id: 'group', label: 'Group', value: (r) => r.group },
        { id: 'partition', label: 'Partition', num: true, value: (r) => r.partition },
        { id: 'committed', label: 'Committed offset', num: true, value: (r) => r.committed_offset, cell: (r) => num(r.committed_offset) },
        { id: 'next', label: 'Next offset', num: true, value: (r) => r.next_offset, cell: (r) => num(r.next_offset) },
        { id: 'lag', label: 'Lag', num: true, value: (r) => r.lag, cell: (r) => lagCell(r.lag) },
        { id: 'owner', label: 'Owner', value: (r) => r.owner, cell: (r) => (r.owner ? h('span', { class: 'mono' }, r.owner) : h('span', { class: 'muted' }, '–')) },
      ],
    });
    const settings = h('div', {});
    // A change of partition, offset or size reads at once; a failure shows in the banner.
    const browser = recordBrowser(path, () => view.refresh().catch(() => {}));

    const view = {
      title: name,
      el: h('section', {},
        h('div', { class: 'crumbs' }, h('a', { href: '#/streams' }, 'Streams'), ' /'),
        h('div', { class: 'page-head' }, h('h1', {}, name)),
        banner.el,
        h('div', { class: 'cards' }, Object.values(cards).map((c) => c.el)),
        h('div', { class: 'panel', id: 'stream-partitions' }, h('h2', {}, 'Partitions'), partitions.el),
        h('div', { class: 'panel', id: 'stream-groups' }, h('h2', {}, 'Consumer groups'),
          h('p', { class: 'muted' }, 'Lag is the records from a group\'s committed offset to the end of each partition.'), groups.el),
        h('div', { class: 'panel', id: 'stream-lag' }, h('h2', {}, 'Lag per partition'), lag.el),
        h('div', { class: 'panel', id: 'stream-records' }, h('h2', {}, 'Records'), browser.el),
        h('div', { class: 'panel' }, h('h2', {}, 'Settings'), settings)),
      async refresh() {
        let stream;
        try {
          stream = await api('GET', path);
        } catch (e) {
          banner.show(e, { stream_not_found: { what: `No stream is named ${name}.`, todo: 'It may have been deleted; the Streams page lists those there are.' } });
          throw e;
        }
        banner.clear();
        const parts = stream.partition_details;
        cards.partitions.set(num(stream.partitions));
        cards.records.set(num(sum(parts.map(kept))), `${num(sum(parts.map((p) => p.next_offset)))} appended in all`);
        cards.bytes.set(bytes(sum(parts.map((p) => p.bytes))));
        cards.groups.set(num(stream.groups.length));
        const worst = slowest(stream);
        cards.lag.set(worst === null ? '–' : num(worst), worst === null ? 'no groups' : stream.groups.find((g) => g.lag === worst).name, worst ? 'warn' : worst === 0 ? 'ok' : '');
        partitions.update(parts);
        groups.update(stream.groups);
        lag.update(stream.groups.flatMap((g) => g.partitions.map((p) => ({ ...p, group: g.name, next_offset: parts[p.partition]?.next_offset }))));
        fill(settings, keyValues([
          ['Retention', retention(stream)],
          ['Largest record', bytes(stream.record_bytes_max)],
          ['Segment size', bytes(stream.segment_bytes)],
          ['Rate limit', rateLimitText(stream.rate_limit)],
          ['Depth limit', stream.max_depth_messages || stream.max_depth_bytes
            ? `${[stream.max_depth_messages ? `${num(stream.max_depth_messages)} records` : null, stream.max_depth_bytes ? bytes(stream.max_depth_bytes) : null].filter(Boolean).join(' or ')}, then appends are refused`
            : 'none (retention only)'],
          ['Created', time(stream.created_at_ms)],
        ]));
        try {
          await browser.refresh(stream);
        } catch (e) {
          banner.show(e);
          throw e;
        }
      },
    };
    return view;
  },
});

/**
 * Reads one partition from an offset, `max` records at a time, with Older, Newer and Latest.
 * With no offset given it follows the end of the partition (the latest `max` records).
 */
function recordBrowser(path, changed) {
  let partition = 0;
  let from = null;
  let max = 20;
  let bounds = null; // the last answer's { first_offset, next_offset }
  let shown = []; // offsets shown now
  let reads = 0; // so that an answer to an earlier read never replaces a later one's
  const partitionSelect = h('select', { id: 'records-partition', 'aria-label': 'Partition', onchange: () => { partition = Number(partitionSelect.value); from = null; offsetInput.value = ''; changed(); } });
  const offsetInput = h('input', { id: 'records-from', type: 'number', min: 0, step: 1, placeholder: 'latest', 'aria-label': 'From offset', size: 10 });
  const maxSelect = h('select', { id: 'records-max', 'aria-label': 'Records shown', onchange: () => { max = Number(maxSelect.value); changed(); } },
    [10, 20, 50, 100].map((n) => h('option', { value: n, selected: n === max }, `${n} records`)));
  const older = h('button', { type: 'button', class: 'ghost', id: 'records-older', disabled: true, onclick: () => go(Math.max(bounds.first_offset, (shown[0] ?? bounds.next_offset) - max)) }, '‹ Older');
  const newer = h('button', { type: 'button', class: 'ghost', id: 'records-newer', disabled: true, onclick: () => go(shown[shown.length - 1] + 1) }, 'Newer ›');
  const latest = h('button', { type: 'button', class: 'ghost', id: 'records-latest', disabled: true, onclick: () => go(null) }, 'Latest');
  const status = h('div', { class: 'muted', id: 'records-status' });
  const form = h('form', { class: 'toolbar', id: 'records-form' },
    h('label', {}, 'Partition', partitionSelect),
    h('label', {}, 'From offset', offsetInput),
    h('label', {}, 'Show', maxSelect),
    h('button', { class: 'primary', type: 'submit' }, 'Read'),
    h('span', { class: 'grow' }), older, newer, latest);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    go(offsetInput.value === '' ? null : Math.max(0, Math.floor(Number(offsetInput.value))));
  });
  const table = dataTable({
    label: 'Records',
    key: (r) => String(r.offset),
    empty: 'No records here.',
    sort: { id: 'offset', direction: 1 },
    columns: [
      { id: 'offset', label: 'Offset', num: true, value: (r) => r.offset, cell: (r) => num(r.offset) },
      { id: 'timestamp', label: 'Timestamp', value: (r) => r.timestamp_ms, cell: (r) => h('span', { title: r.timestamp }, time(r.timestamp_ms)) },
      { id: 'key', label: 'Key', value: (r) => r.key ?? (r.key_base64 ? `(base64) ${r.key_base64}` : null),
        cell: (r) => (r.key !== undefined || r.key_base64 ? h('span', { class: 'mono truncate' }, r.key ?? `(base64) ${r.key_base64}`) : h('span', { class: 'muted' }, 'none')) },
      { id: 'type', label: 'Type', value: (r) => r.type, cell: (r) => (r.type ? h('code', {}, r.type) : h('span', { class: 'muted' }, '–')) },
      { id: 'headers', label: 'Headers', value: (r) => Object.entries(r.headers || {}).map(([k, v]) => `${k}=${v}`).join(', '),
        cell: (r) => headersCell(r.headers) },
      { id: 'body', label: 'Body', value: (r) => r.body ?? r.body_base64, cell: (r) => bodyCell(r) },
    ],
  });
  const el = h('div', {}, form, status, table.el);

  function go(offset) {
    from = offset;
    offsetInput.value = offset === null ? '' : String(offset);
    changed();
  }

  function say(text, bad = false) {
    status.textContent = text;
    status.className = bad ? 'error-text' : 'muted';
  }

  return {
    el,
    /** Shows `p` from `offset` (the partitions table's Read). */
    show(p, offset) {
      partition = p;
      partitionSelect.value = String(p);
      go(offset);
      el.closest('.panel')?.scrollIntoView({ block: 'start' });
    },
    async refresh(stream) {
      if (partitionSelect.options.length !== stream.partitions) {
        fill(partitionSelect, Array.from({ length: stream.partitions }, (_, i) => h('option', { value: i }, `${i}`)));
      }
      partition = Math.min(partition, stream.partitions - 1);
      partitionSelect.value = String(partition);
      const part = stream.partition_details[partition];
      const start = from === null ? Math.max(part.first_offset, part.next_offset - max) : from;
      const read = ++reads;
      let answer;
      try {
        answer = await api('GET', `${path}/partitions/${partition}/records?from_offset=${start}&max=${max}`);
      } catch (e) {
        if (read !== reads) return;
        if (e.code !== 'offset_out_of_range') throw e;
        const first = e.details?.first_offset ?? part.first_offset;
        bounds = { first_offset: first, next_offset: part.next_offset };
        shown = [];
        table.update([]);
        say(`Offset ${num(start)} is no longer kept: retention dropped partition ${partition}'s records below ${num(first)}. Read from ${num(first)} or later.`, true);
        older.disabled = true;
        newer.disabled = true;
        latest.disabled = false;
        return;
      }
      if (read !== reads) return;
      bounds = { first_offset: answer.first_offset, next_offset: answer.next_offset };
      shown = answer.records.map((r) => r.offset);
      table.update(answer.records);
      older.disabled = start <= answer.first_offset;
      newer.disabled = !shown.length || shown[shown.length - 1] + 1 >= answer.next_offset;
      latest.disabled = from === null;
      const keptText = answer.next_offset > answer.first_offset
        ? `it keeps offsets ${num(answer.first_offset)} to ${num(answer.next_offset - 1)}` : 'it has no records yet';
      if (shown.length) say(`Offsets ${num(shown[0])}–${num(shown[shown.length - 1])} of partition ${partition}${from === null ? ' (following the end)' : ''}; ${keptText}.`);
      else if (answer.next_offset === answer.first_offset) say(`Partition ${partition} has no records yet. Append some with \`sluice stream append ${stream.name} BODY\`.`);
      else say(`Nothing at or after offset ${num(start)} yet in partition ${partition}; ${keptText}.`);
    },
  };
}

function headersCell(headers) {
  const entries = Object.entries(headers || {});
  if (!entries.length) return h('span', { class: 'muted' }, '–');
  return h('span', { class: 'mono' }, entries.map(([k, v], i) => [i ? h('br') : null, `${k}=${v}`]));
}
