// The dashboard's core: the API client, the page registry and router, the refresh loop, and
// the small helpers every page uses (DOM building, formatting, toasts, confirmation).
//
// A page is registered once with `registerPage({...})` (see its doc below) and gets a nav
// entry; the router shows the page whose `path` matches the location hash (`#/queues/orders`).
// While a page is shown its `refresh()` runs every REFRESH_MS (not while the tab is hidden or
// refreshing is paused), and it updates its DOM in place, so nothing jumps on refresh.

export const REFRESH_MS = 2000;
const KEY_STORAGE = 'sluice.key';
const THEME_STORAGE = 'sluice.theme';

// ---- the API ----

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** Calls the native API: `api('GET', '/v1/queues')`, `api('POST', path, body)`. Sends the key
 * kept in this browser as a bearer token; a 401 opens the key dialog. */
export async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const key = localStorage.getItem(KEY_STORAGE);
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { error: { code: 'invalid_json', message: text.slice(0, 200) } }; }
  }
  if (response.status === 401) askForKey(data && data.error && data.error.message);
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || 'http_' + response.status, error.message || response.statusText, error.details);
  }
  return data;
}

/** Every page of a paginated list (`queues`, `topics`, `subscriptions`), up to `max` items. */
export async function listAll(path, field, max = 10000) {
  const items = [];
  let token = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await api('GET', `${path}${sep}limit=1000${token ? '&next_token=' + encodeURIComponent(token) : ''}`);
    items.push(...page[field]);
    token = page.next_token || null;
  } while (token && items.length < max);
  return items;
}

export const enc = encodeURIComponent;

// ---- DOM ----

/** `h('a', {href: '#/'}, 'text', child)`: an element with properties (`class`, `on*`
 * handlers, `dataset`, attributes otherwise) and children (strings, nodes, arrays, nulls). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') el.className = value;
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'value') {
      el.value = value;
      // So that a form's reset() goes back to it.
      if ('defaultValue' in el) el.defaultValue = String(value);
    } else if (name === 'checked' || name === 'disabled') el[name] = value;
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Sets an element's text only when it changed (keeps selections and avoids repaints). */
export function setText(el, text) {
  const value = String(text);
  if (el.textContent !== value) el.textContent = value;
}

// ---- formatting ----

const numberFormat = new Intl.NumberFormat();
export function num(n) {
  return n === null || n === undefined ? '–' : numberFormat.format(n);
}

export function rate(n) {
  if (n === null || n === undefined) return '–';
  if (n === 0) return '0/s';
  if (n < 10) return `${n.toFixed(1)}/s`;
  return `${numberFormat.format(Math.round(n))}/s`;
}

/** `1h 5m`, `42s`, `850 ms`; `–` for none. */
export function age(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hr = Math.floor(s / 3600); s -= hr * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

export function time(ms) {
  if (!ms) return '–';
  return new Date(ms).toLocaleString();
}

/** `42s ago`, `in 5m 3s`; `–` for none. */
export function ago(ms, now = Date.now()) {
  if (!ms) return '–';
  return ms > now ? `in ${age(ms - now)}` : `${age(now - ms)} ago`;
}

const BYTE_UNITS = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
/** `512 bytes`, `1.5 KiB`, `64 MiB`; `–` for none. */
export function bytes(n) {
  if (n === null || n === undefined) return '–';
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) { value /= 1024; unit += 1; }
  if (unit === 0) return `${numberFormat.format(value)} bytes`;
  return `${value < 10 ? value.toFixed(1) : numberFormat.format(Math.round(value))} ${BYTE_UNITS[unit]}`;
}

export function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** Queues that Sluice keeps for itself (push deliveries, alert notifications). */
export function isInternal(name) {
  return name.startsWith('sluice-push-') || name.startsWith('sluice-alert-');
}

// ---- toasts and dialogs ----

export function toast(text, bad = false) {
  const el = h('div', { class: bad ? 'toast bad' : 'toast' }, text);
  document.getElementById('toasts').append(el);
  setTimeout(() => el.remove(), bad ? 8000 : 4000);
}

/** Shows the confirmation dialog; resolves to true when confirmed. `dismiss` names the button
 * that does nothing (say "Keep it" when the action itself is a cancel). */
export function confirmAction(title, text, action = 'Confirm', dismiss = 'Cancel') {
  const dialog = document.getElementById('confirm');
  setText(document.getElementById('confirm-title'), title);
  setText(document.getElementById('confirm-text'), text);
  setText(document.getElementById('confirm-ok'), action);
  setText(document.getElementById('confirm-dismiss'), dismiss);
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    dialog.showModal();
    document.getElementById('confirm-ok').focus();
  });
}

let askingForKey = false;
export function askForKey(reason) {
  const dialog = document.getElementById('login');
  if (askingForKey || dialog.open) return;
  askingForKey = true;
  // Why it opened: the server's 401 message (no key, a wrong one, a revoked one), or nothing
  // when opened from the Key button.
  const why = document.getElementById('login-why');
  why.textContent = reason ? `The server refused the call: ${reason}.` : '';
  why.hidden = !reason;
  const input = document.getElementById('login-key');
  input.value = localStorage.getItem(KEY_STORAGE) || '';
  dialog.addEventListener('close', () => {
    askingForKey = false;
    if (dialog.returnValue !== 'ok') return;
    if (input.value) localStorage.setItem(KEY_STORAGE, input.value.trim());
    else localStorage.removeItem(KEY_STORAGE);
    refreshNow();
  }, { once: true });
  dialog.showModal();
}

// ---- theme ----

export function initTheme() {
  const saved = localStorage.getItem(THEME_STORAGE);
  if (saved) document.documentElement.dataset.theme = saved;
}

export function toggleTheme() {
  const root = document.documentElement;
  const dark = root.dataset.theme ? root.dataset.theme === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  root.dataset.theme = dark ? 'light' : 'dark';
  localStorage.setItem(THEME_STORAGE, root.dataset.theme);
  refreshNow();
}

// ---- pages and routing ----

const pages = [];
let current = null; // { page, view, params }
let paused = false;
let refreshing = false;

/**
 * Registers a page.
 * - `id`: unique, also the `data-page` of its root element.
 * - `title`: shown in the nav and the document title.
 * - `path`: `'queues'`, `'queues/:name'` (segments of the hash after `#/`; `''` is the
 *   overview).
 * - `nav`: its place in the nav bar (a number; pages without one are not listed), and
 *   `navPath` when the nav entry should point elsewhere than `path`.
 * - `render(params, query)`: returns `{ el, refresh?(), destroy?() }`. `params` are the path's
 *   `:names`; `query` is the `URLSearchParams` after a `?` in the hash (`#/jobs?status=dead`),
 *   which a page may rewrite with `history.replaceState` (that does not render it again).
 *   `refresh` may be async; it is called once at once and then every REFRESH_MS while the page
 *   is shown.
 */
export function registerPage(page) {
  if (pages.some((p) => p.id === page.id)) throw new Error(`page ${page.id} is registered twice`);
  pages.push(page);
}

function matchPath(pattern, segments) {
  const parts = pattern === '' ? [] : pattern.split('/');
  if (parts.length !== segments.length) return null;
  const params = {};
  for (let i = 0; i < parts.length; i++) {
    if (parts[i].startsWith(':')) params[parts[i].slice(1)] = decodeURIComponent(segments[i]);
    else if (parts[i] !== segments[i]) return null;
  }
  return params;
}

function route() {
  const hash = location.hash.replace(/^#\/?/, '');
  const mark = hash.indexOf('?');
  const path = mark < 0 ? hash : hash.slice(0, mark);
  const query = new URLSearchParams(mark < 0 ? '' : hash.slice(mark + 1));
  const segments = path === '' ? [] : path.split('/');
  for (const page of pages) {
    const params = matchPath(page.path, segments);
    if (params) return { page, params, query };
  }
  return null;
}

function renderNav() {
  const nav = document.getElementById('nav');
  const listed = pages.filter((p) => p.nav !== undefined).sort((a, b) => a.nav - b.nav);
  fill(nav, listed.map((p) => h('a', { href: '#/' + (p.navPath ?? p.path), dataset: { nav: p.id } }, p.title)));
}

function markNav(page) {
  for (const link of document.querySelectorAll('#nav a')) {
    const active = link.dataset.nav === page.id || link.dataset.nav === page.section;
    if (active) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

function show() {
  if (current && current.view.destroy) current.view.destroy();
  const main = document.getElementById('main');
  const found = route();
  if (!found) {
    current = null;
    fill(main, h('div', { class: 'panel' }, h('h1', {}, 'Not found'), h('p', {}, 'No page has this address. ', h('a', { href: '#/' }, 'Overview'))));
    return;
  }
  const view = found.page.render(found.params, found.query);
  view.el.dataset.page = found.page.id;
  current = { page: found.page, view, params: found.params };
  fill(main, view.el);
  document.title = `${view.title || found.page.title} · Sluice`;
  markNav(found.page);
  refreshNow();
}

/** Refreshes the shown page now (after an action), whatever the timer says. */
export async function refreshNow() {
  if (!current || !current.view.refresh || refreshing) return;
  refreshing = true;
  const live = document.getElementById('live');
  const shown = current;
  try {
    await shown.view.refresh();
    live.classList.remove('error');
    setText(document.getElementById('live-text'), paused ? 'paused' : 'live');
  } catch (e) {
    live.classList.add('error');
    setText(document.getElementById('live-text'), e.status ? `error ${e.status}` : 'offline');
    if (!(e instanceof ApiError) && !(e instanceof TypeError)) console.warn(e);
  } finally {
    refreshing = false;
  }
}

function setPaused(value) {
  paused = value;
  const button = document.getElementById('pause');
  button.setAttribute('aria-pressed', String(paused));
  setText(button, paused ? 'Resume' : 'Pause');
  document.getElementById('live').classList.toggle('paused', paused);
  setText(document.getElementById('live-text'), paused ? 'paused' : 'live');
}

export function start() {
  initTheme();
  renderNav();
  document.getElementById('theme').addEventListener('click', toggleTheme);
  document.getElementById('key').addEventListener('click', () => askForKey());
  document.getElementById('pause').addEventListener('click', () => setPaused(!paused));
  window.addEventListener('hashchange', () => {
    show();
    document.getElementById('main').focus({ preventScroll: true });
  });
  document.addEventListener('keydown', (event) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName) || event.target.isContentEditable;
    if (typing || event.ctrlKey || event.metaKey || event.altKey || document.querySelector('dialog[open]')) return;
    if (event.key === '/') {
      const search = document.querySelector('main input[type=search]');
      if (search) { event.preventDefault(); search.focus(); }
    } else if (event.key === 'p') setPaused(!paused);
    else if (event.key === 't') toggleTheme();
    else if (/^[0-9]$/.test(event.key)) {
      // 1 to 9 open the first nine pages of the bar, 0 the tenth.
      const link = document.querySelectorAll('#nav a')[(Number(event.key) + 9) % 10];
      if (link) location.hash = link.getAttribute('href');
    }
  });
  setInterval(() => {
    if (!paused && document.visibilityState === 'visible') refreshNow();
  }, REFRESH_MS);
  show();
}
