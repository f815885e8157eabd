// Building blocks the pages share: sortable, filterable and paged tables, figure cards,
// key-value lists, the message browser, and the error banner that says what to do when a call
// fails. Each is built once and updated in place.

import { age, ApiError, fill, h, num, REFRESH_MS, refreshNow, setText, time } from './core.js';

/**
 * A table sorted by a clicked header and filtered by a search box.
 * - `columns`: `[{ id, label, num, value(row), cell(row) }]`; `value` sorts (and, as text,
 *   filters), `cell` renders (defaults to `value`).
 * - `key(row)`: a stable id per row (keeps keyboard focus across refreshes).
 * - `empty`: the text shown when there are no rows; `rowClass(row)`: extra row classes.
 * - `pageSize`: show this many rows at a time, with a pager below (0: all of them).
 */
export function dataTable({ columns, key, empty, rowClass, search = true, label, sort, pageSize = 0 }) {
  let rows = [];
  let sortId = sort?.id ?? columns[0].id;
  let direction = sort?.direction ?? 1;
  let filter = '';
  let signature = null;
  let pageIndex = 0;
  const pages = pageSize ? pager({ label: label || 'rows', onPrev: () => { pageIndex -= 1; render(); }, onNext: () => { pageIndex += 1; render(); } }) : null;
  const tbody = h('tbody');
  const heads = columns.map((column) => h('th', { class: column.num ? 'num' : '', scope: 'col', dataset: { col: column.id } },
    h('button', { class: 'sort', type: 'button', onclick: () => sortBy(column.id) }, column.label)));
  const input = search ? h('input', { type: 'search', placeholder: 'Filter  ( / )', 'aria-label': `Filter ${label || 'rows'}`,
    oninput: (e) => { filter = e.target.value.trim().toLowerCase(); pageIndex = 0; render(); } }) : null;
  const el = h('div', { class: 'table-block' },
    input ? h('div', { class: 'toolbar' }, input) : null,
    h('div', { class: 'table-wrap' }, h('table', { 'aria-label': label }, h('thead', {}, h('tr', {}, heads)), tbody)),
    pages ? pages.el : null);

  function sortBy(id) {
    direction = id === sortId ? -direction : 1;
    sortId = id;
    pageIndex = 0;
    render();
  }

  function render() {
    for (const th of heads) {
      th.setAttribute('aria-sort', th.dataset.col === sortId ? (direction > 0 ? 'ascending' : 'descending') : 'none');
    }
    const column = columns.find((c) => c.id === sortId);
    const matching = rows
      .filter((row) => !filter || columns.some((c) => String(c.value(row) ?? '').toLowerCase().includes(filter)))
      .sort((a, b) => compare(column.value(a), column.value(b)) * direction);
    let shown = matching;
    if (pageSize) {
      const last = Math.max(0, Math.ceil(matching.length / pageSize) - 1);
      pageIndex = Math.min(Math.max(pageIndex, 0), last);
      shown = matching.slice(pageIndex * pageSize, (pageIndex + 1) * pageSize);
      const from = pageIndex * pageSize;
      pages.set({ text: matching.length > pageSize ? `${num(from + 1)}–${num(from + shown.length)} of ${num(matching.length)}` : '',
        prev: pageIndex > 0, next: pageIndex < last });
    }
    const next = JSON.stringify([filter, sortId, direction, pageIndex, shown.map((row) => columns.map((c) => c.value(row)))]);
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

/**
 * Previous and next buttons with a line saying what is shown, for a table paged here or by the
 * server: `{ el, set({ text, prev, next }) }`; hidden while there is neither a previous nor a
 * next page.
 */
export function pager({ label, onPrev, onNext }) {
  const prev = h('button', { type: 'button', class: 'ghost', 'data-pager': 'prev', 'aria-label': `Previous page of ${label}`, onclick: onPrev }, '‹ Previous');
  const next = h('button', { type: 'button', class: 'ghost', 'data-pager': 'next', 'aria-label': `Next page of ${label}`, onclick: onNext }, 'Next ›');
  const text = h('span', { class: 'muted' });
  const el = h('div', { class: 'pager', hidden: true }, text, prev, next);
  return {
    el,
    set({ text: line = '', prev: hasPrev, next: hasNext }) {
      setText(text, line);
      prev.disabled = !hasPrev;
      next.disabled = !hasNext;
      el.hidden = !hasPrev && !hasNext;
    },
  };
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

/** A token bucket: `100/s, burst 500`, or `none`. */
export function rateLimitText(limit) {
  return limit ? `${num(limit.per_second)}/s, burst ${num(limit.burst)}` : 'none';
}

export function badge(text, tone = '') {
  return h('span', { class: tone ? `badge ${tone}` : 'badge' }, text);
}

/** What went wrong and what to do about it, for an error a call threw: `{ what, todo }`. */
export function explain(error) {
  const retry = `The page tries again every ${REFRESH_MS / 1000} seconds.`;
  if (!(error instanceof ApiError)) {
    return { what: 'The server did not answer.', todo: `Check that \`sluice serve\` is running and that this browser can reach it. ${retry}` };
  }
  const said = `${error.message} (${error.code})`;
  if (error.status === 401) return { what: 'The server asks for an API key.', todo: 'Enter one under Key, at the top right.' };
  if (error.status === 403) return { what: `This key may not do that: ${said}.`, todo: 'Enter a key that may, under Key.' };
  if (error.status === 429 || error.status === 503) return { what: `The server is refusing work for now: ${said}.`, todo: `It is overloaded or starting. ${retry}` };
  if (error.status >= 500) return { what: `The server failed: ${said}.`, todo: `Its log says why. ${retry}` };
  if (error.status === 400) return { what: `The server refused the request: ${said}.`, todo: 'Correct the value it names, then try again.' };
  return { what: `${said}.`, todo: retry };
}

/**
 * A banner over a page for a call that failed: `{ el, show(error, custom), clear() }`.
 * `custom` maps an error code to its own `{ what, todo }` (say, a page's "no stream is named
 * X"). It stays until `clear()`, which a page calls when its next refresh succeeds.
 */
export function errorBanner() {
  const what = h('strong', {});
  const todo = h('span', {});
  const retry = h('button', { type: 'button', class: 'ghost', onclick: () => refreshNow() }, 'Try again now');
  const el = h('div', { class: 'banner bad', role: 'alert', hidden: true }, h('div', {}, what, ' ', todo), retry);
  return {
    el,
    show(error, custom = {}) {
      const said = (error instanceof ApiError && custom[error.code]) || explain(error);
      setText(what, said.what);
      setText(todo, said.todo);
      el.dataset.code = error instanceof ApiError ? error.code : 'unreachable';
      el.hidden = false;
    },
    clear() {
      el.hidden = true;
      delete el.dataset.code;
    },
  };
}

/** Pretty JSON of text that is JSON, the text itself otherwise. */
export function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

export function bodyText(message) {
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

/** A message's or record's body, cut to a line; expand to read it whole (pretty when JSON). */
export function bodyCell(message) {
  const text = bodyText(message);
  const short = text.length > 80 ? text.slice(0, 79) + '…' : text;
  return h('details', { class: 'body' }, h('summary', { class: 'mono' }, short || '(empty)'), h('pre', {}, pretty(text)),
    message.priority ? h('div', { class: 'muted' }, `priority ${message.priority}`) : null,
    message.first_received_at_ms ? h('div', { class: 'muted' }, `first received ${age(Date.now() - message.first_received_at_ms)} ago`) : null);
}
