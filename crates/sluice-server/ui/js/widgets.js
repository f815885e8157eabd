// Building blocks the pages share: sortable and filterable tables, figure cards, key-value
// lists, and the message browser. Each is built once and updated in place.

import { age, fill, h, setText, time } from './core.js';

/**
 * A table sorted by a clicked header and filtered by a search box.
 * - `columns`: `[{ id, label, num, value(row), cell(row) }]`; `value` sorts (and, as text,
 *   filters), `cell` renders (defaults to `value`).
 * - `key(row)`: a stable id per row (keeps keyboard focus across refreshes).
 * - `empty`: the text shown when there are no rows; `rowClass(row)`: extra row classes.
 */
export function dataTable({ columns, key, empty, rowClass, search = true, label, sort }) {
  let rows = [];
  let sortId = sort?.id ?? columns[0].id;
  let direction = sort?.direction ?? 1;
  let filter = '';
  let signature = null;
  const tbody = h('tbody');
  const heads = columns.map((column) => h('th', { class: column.num ? 'num' : '', scope: 'col', dataset: { col: column.id } },
    h('button', { class: 'sort', type: 'button', onclick: () => sortBy(column.id) }, column.label)));
  const input = search ? h('input', { type: 'search', placeholder: 'Filter  ( / )', 'aria-label': `Filter ${label || 'rows'}`,
    oninput: (e) => { filter = e.target.value.trim().toLowerCase(); render(); } }) : null;
  const el = h('div', { class: 'table-block' },
    input ? h('div', { class: 'toolbar' }, input) : null,
    h('div', { class: 'table-wrap' }, h('table', { 'aria-label': label }, h('thead', {}, h('tr', {}, heads)), tbody)));

  function sortBy(id) {
    direction = id === sortId ? -direction : 1;
    sortId = id;
    render();
  }

  function render() {
    for (const th of heads) {
      th.setAttribute('aria-sort', th.dataset.col === sortId ? (direction > 0 ? 'ascending' : 'descending') : 'none');
    }
    const column = columns.find((c) => c.id === sortId);
    const shown = rows
      .filter((row) => !filter || columns.some((c) => String(c.value(row) ?? '').toLowerCase().includes(filter)))
      .sort((a, b) => compare(column.value(a), column.value(b)) * direction);
    const next = JSON.stringify([filter, sortId, direction, shown.map((row) => columns.map((c) => c.value(row)))]);
    if (next === signature) return;
    signature = next;
    const focused = document.activeElement && tbody.contains(document.activeElement)
      ? document.activeElement.closest('tr')?.dataset.key : null;
    if (!shown.length) {
      fill(tbody, h('tr', {}, h('td', { class: 'empty', colspan: columns.length }, rows.length ? 'Nothing matches the filter.' : empty)));
      return;
    }
    fill(tbody, shown.map((row) => h('tr', { class: rowClass ? rowClass(row) : '', dataset: { key: key(row) } },
      columns.map((c) => h('td', { class: c.num ? 'num' : '' }, c.cell ? c.cell(row) : display(c.value(row)))))));
    if (focused) tbody.querySelector(`tr[data-key="${CSS.escape(focused)}"] a, tr[data-key="${CSS.escape(focused)}"] button`)?.focus();
  }

  render();
  return { el, input, update(next) { rows = next; render(); } };
}

function display(value) {
  return value === null || value === undefined ? '–' : String(value);
}

function compare(a, b) {
  const missing = (v) => v === null || v === undefined;
  if (missing(a) && missing(b)) return 0;
  if (missing(a)) return -1;
  if (missing(b)) return 1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/** A figure card: `{ el, set(value, note, tone) }`, tone `ok`, `warn`, `bad` or none. */
export function card(label, id) {
  const value = h('div', { class: 'value', dataset: { stat: id } }, '–');
  const note = h('div', { class: 'note' });
  const el = h('div', { class: 'card' }, h('div', { class: 'label' }, label), value, note);
  return {
    el,
    set(text, noteText = '', tone = '') {
      setText(value, text);
      setText(note, noteText);
      el.className = tone ? `card ${tone}` : 'card';
    },
  };
}

/** A `<dl>` of label and value pairs. */
export function keyValues(pairs) {
  return h('dl', { class: 'kv' }, pairs.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v ?? '–')]));
}

export function badge(text, tone = '') {
  return h('span', { class: tone ? `badge ${tone}` : 'badge' }, text);
}

function bodyText(message) {
  if (message.body !== undefined && message.body !== null) return message.body;
  if (message.body_base64) return `(binary, base64) ${message.body_base64}`;
  return '';
}

function attributesText(attributes) {
  const entries = Object.entries(attributes || {});
  if (!entries.length) return '–';
  return entries.map(([k, a]) => `${k}=${a.value}`).join(', ');
}

/**
 * The message browser: peeked messages with their bodies (expand to read in full) and
 * attributes; with `deadLetters`, the source queue and the last error of each.
 */
export function messageBrowser({ deadLetters = false } = {}) {
  const columns = [
    { id: 'sent', label: 'Sent', value: (m) => m.sent_at_ms, cell: (m) => h('span', { title: m.sent_at }, time(m.sent_at_ms)) },
    { id: 'state', label: 'State', value: (m) => m.state, cell: (m) => badge(m.state || '–', m.state === 'in_flight' ? 'warn' : '') },
    { id: 'receives', label: 'Receives', num: true, value: (m) => m.receive_count },
    ...(deadLetters ? [
      { id: 'source', label: 'From', value: (m) => m.dead_letter_source, cell: (m) => m.dead_letter_source ? h('a', { href: `#/queues/${encodeURIComponent(m.dead_letter_source)}` }, m.dead_letter_source) : '–' },
      { id: 'error', label: 'Last error', value: (m) => m.last_error, cell: (m) => h('span', { class: m.last_error ? 'error-text' : 'muted' }, m.last_error || '–') },
    ] : []),
    { id: 'body', label: 'Body', value: (m) => bodyText(m), cell: (m) => bodyCell(m) },
    { id: 'attributes', label: 'Attributes', value: (m) => attributesText(m.attributes), cell: (m) => h('span', { class: 'truncate mono' }, attributesText(m.attributes)) },
    { id: 'id', label: 'Id', value: (m) => m.id, cell: (m) => h('span', { class: 'mono muted', title: m.id }, m.id.slice(0, 8) + '…') },
  ];
  const table = dataTable({ columns, key: (m) => m.id, empty: 'No messages.', label: 'Messages', sort: { id: 'sent', direction: 1 } });
  return table;
}

function bodyCell(message) {
  const text = bodyText(message);
  const short = text.length > 80 ? text.slice(0, 79) + '…' : text;
  let pretty = text;
  try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON: shown as it is */ }
  return h('details', { class: 'body' }, h('summary', { class: 'mono' }, short || '(empty)'), h('pre', {}, pretty),
    message.priority ? h('div', { class: 'muted' }, `priority ${message.priority}`) : null,
    message.first_received_at_ms ? h('div', { class: 'muted' }, `first received ${age(Date.now() - message.first_received_at_ms)} ago`) : null);
}
