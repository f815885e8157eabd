// Jobs: how many jobs each queue holds in each status, a list filtered by queue, status, type
// and tag and paged by the server, and a job's page with its payload, progress, result, last
// error, attempts and times, and Cancel (after asking).
//
// The counts come from `GET /v1/jobs/stats`: one call, however many jobs there are.

import { age, ago, api, confirmAction, enc, fill, h, num, registerPage, time, toast } from '../core.js';
import { badge, card, dataTable, errorBanner, keyValues, pager, pretty } from '../widgets.js';

const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled'];
const TONES = { queued: '', running: 'info', succeeded: 'ok', failed: 'warn', dead: 'bad', cancelled: '' };
const FINISHED = new Set(['succeeded', 'dead', 'cancelled']);
const FILTERS = ['queue', 'status', 'type', 'tag'];
/** A filtered list may come back short with a `next_token` (the server scans a bounded number
 * of jobs per call): at most this many calls fill one page. */
const FILL_CALLS_MAX = 10;

function statusBadge(job) {
  return [badge(job.status, TONES[job.status]), job.cancel_requested && !FINISHED.has(job.status) ? [' ', badge('cancel requested', 'warn')] : null];
}

/** A progress value as text: a fraction as a percentage, any other JSON as it is. */
function progressText(progress) {
  if (progress === undefined || progress === null) return null;
  if (typeof progress === 'number' && progress >= 0 && progress <= 1) return `${Math.round(progress * 100)}%`;
  return typeof progress === 'string' ? progress : JSON.stringify(progress);
}

function progressCell(job) {
  const text = progressText(job.progress);
  if (text === null) return h('span', { class: 'muted' }, '–');
  if (typeof job.progress === 'number' && job.progress >= 0 && job.progress <= 1) {
    return h('span', { class: 'progress-line' }, h('progress', { max: 1, value: job.progress, 'aria-label': `progress ${text}` }), text);
  }
  return h('span', { class: 'mono truncate' }, text);
}

const when = (ms) => (ms ? h('span', { title: time(ms) }, ago(ms)) : h('span', { class: 'muted' }, '–'));

/** `#/jobs?queue=…&status=…` for these filters. */
function listHash(filters) {
  const query = new URLSearchParams();
  for (const name of FILTERS) if (filters[name]) query.set(name, filters[name]);
  const text = query.toString();
  return text ? `#/jobs?${text}` : '#/jobs';
}

/** Every job queue's counts by status: `{ queues: [{ queue, counts, total }], total }`. */
async function countJobs() {
  const answer = await api('GET', '/v1/jobs/stats');
  const queues = answer.queues.map((q) => ({ queue: q.queue, counts: Object.fromEntries(STATUSES.map((s) => [s, q[s]])), total: q.total }));
  return { queues, total: queues.reduce((n, q) => n + q.total, 0) };
}

registerPage({
  id: 'jobs',
  title: 'Jobs',
  path: 'jobs',
  nav: 46,
  render(_params, query) {
    const filters = Object.fromEntries(FILTERS.map((name) => [name, query.get(name) || '']));
    let pageSize = 50;
    let tokens = [null]; // the next_token each page starts from; the last is the page shown
    let next = null;
    let counted = null;
    let loads = 0; // so that an answer for earlier filters never replaces a later one's
    // A change of filters or page loads at once; a failure shows in the banner.
    const reload = () => view.refresh().catch(() => {});
    const banner = errorBanner();
    const sub = h('span', { class: 'sub', id: 'jobs-sub' });
    const cards = Object.fromEntries(STATUSES.map((s) => [s, card(s[0].toUpperCase() + s.slice(1), `jobs-${s}`)]));

    const countLink = (q, status) => {
      const n = status ? q.counts[status] : q.total;
      if (!n) return h('span', { class: 'muted' }, '0');
      const text = num(n);
      return h('a', { href: listHash({ queue: q.queue, status }), title: `List ${status || 'all'} jobs of ${q.queue}` },
        status === 'dead' ? h('span', { class: 'error-text' }, text) : text);
    };
    const byQueue = dataTable({
      label: 'Jobs by queue',
      key: (q) => q.queue,
      empty: 'No jobs yet. Enqueue one with `sluice job enqueue QUEUE TYPE --payload JSON`.',
      search: false,
      pageSize: 20,
      columns: [
        { id: 'queue', label: 'Queue', value: (q) => q.queue, cell: (q) => h('a', { href: listHash({ queue: q.queue }) }, q.queue) },
        ...STATUSES.map((s) => ({ id: s, label: s[0].toUpperCase() + s.slice(1), num: true, value: (q) => q.counts[s], cell: (q) => countLink(q, s) })),
        { id: 'total', label: 'Total', num: true, value: (q) => q.total, cell: (q) => countLink(q, '') },
      ],
    });

    // The filters: applied by the server; kept in the address so that a filtered list can be
    // bookmarked and the counts above link to one.
    const queueList = h('datalist', { id: 'job-queues' });
    const field = (label, input) => h('label', {}, label, input);
    const form = h('form', { class: 'toolbar', id: 'job-filters' },
      field('Queue', h('input', { name: 'queue', list: 'job-queues', value: filters.queue, placeholder: 'any', size: 14 })),
      field('Status', h('select', { name: 'status' }, h('option', { value: '' }, 'any'),
        STATUSES.map((s) => h('option', { value: s, selected: s === filters.status }, s)))),
      field('Type', h('input', { name: 'type', value: filters.type, placeholder: 'any', size: 14 })),
      field('Tag', h('input', { name: 'tag', value: filters.tag, placeholder: 'any', size: 14 })),
      field('Show', h('select', { name: 'limit', 'aria-label': 'Jobs per page', onchange: (e) => { pageSize = Number(e.target.value); tokens = [null]; reload(); } },
        [25, 50, 100, 200].map((n) => h('option', { value: n, selected: n === pageSize }, `${n} per page`)))),
      h('button', { class: 'primary', type: 'submit' }, 'Apply'),
      h('button', { type: 'button', class: 'ghost', id: 'job-filters-clear', onclick: () => { for (const name of FILTERS) form.elements[name].value = ''; apply(); } }, 'Clear'),
      queueList);
    form.addEventListener('submit', (event) => { event.preventDefault(); apply(); });

    function apply() {
      for (const name of FILTERS) filters[name] = form.elements[name].value.trim();
      history.replaceState(null, '', listHash(filters));
      tokens = [null];
      reload();
    }

    // Whole ids: they are time-ordered, so their first digits are alike for a burst of jobs.
    const list = dataTable({
      label: 'Jobs',
      key: (j) => j.id,
      empty: 'No jobs match.',
      search: false,
      sort: { id: 'created', direction: 1 },
      columns: [
        { id: 'id', label: 'Job', value: (j) => j.id, cell: (j) => h('a', { href: `#/jobs/${enc(j.id)}`, class: 'mono' }, j.id) },
        { id: 'queue', label: 'Queue', value: (j) => j.queue },
        { id: 'type', label: 'Type', value: (j) => j.type, cell: (j) => h('code', {}, j.type) },
        { id: 'status', label: 'Status', value: (j) => j.status, cell: statusBadge },
        { id: 'priority', label: 'Priority', num: true, value: (j) => j.priority },
        { id: 'attempts', label: 'Attempts', num: true, value: (j) => j.attempts, cell: (j) => `${num(j.attempts)} / ${num(j.max_attempts)}` },
        { id: 'progress', label: 'Progress', value: (j) => progressText(j.progress), cell: progressCell },
        { id: 'tags', label: 'Tags', value: (j) => (j.tags || []).join(' '), cell: (j) => (j.tags?.length ? j.tags.map((t) => [badge(t), ' ']) : h('span', { class: 'muted' }, '–')) },
        { id: 'created', label: 'Created', value: (j) => j.created_at_ms, cell: (j) => when(j.created_at_ms) },
        { id: 'finished', label: 'Finished', value: (j) => j.finished_at_ms, cell: (j) => when(j.finished_at_ms) },
        { id: 'error', label: 'Last error', value: (j) => j.error, cell: (j) => (j.error ? h('span', { class: 'error-text truncate', title: j.error }, j.error) : h('span', { class: 'muted' }, '–')) },
      ],
    });
    const pages = pager({
      label: 'jobs',
      onPrev: () => { if (tokens.length > 1) tokens.pop(); reload(); },
      onNext: () => { if (next) tokens.push(next); reload(); },
    });

    /** One page of the filtered list from `token`, filled up to `pageSize` when the server
     * answers short pages. */
    async function fetchPage(token) {
      const jobs = [];
      let after = token;
      let calls = 0;
      do {
        const params = new URLSearchParams();
        for (const name of FILTERS) if (filters[name]) params.set(name, filters[name]);
        params.set('limit', String(pageSize - jobs.length));
        if (after) params.set('next_token', after);
        const page = await api('GET', `/v1/jobs?${params}`);
        jobs.push(...page.jobs);
        after = page.next_token || null;
        calls += 1;
      } while (after && jobs.length < pageSize && calls < FILL_CALLS_MAX);
      return { jobs, next: after };
    }

    function showCounts() {
      const rows = counted.queues;
      byQueue.update(rows);
      for (const s of STATUSES) {
        const n = rows.reduce((sum, r) => sum + r.counts[s], 0);
        cards[s].set(num(n), '', s === 'dead' && n ? 'bad' : s === 'failed' && n ? 'warn' : '');
      }
      sub.textContent = `${num(counted.total)} ${counted.total === 1 ? 'job' : 'jobs'} in ${num(rows.length)} ${rows.length === 1 ? 'queue' : 'queues'}`;
      fill(queueList, rows.map((r) => h('option', { value: r.queue })));
    }

    const view = {
      el: h('section', {},
        h('div', { class: 'page-head' }, h('h1', {}, 'Jobs'), sub),
        banner.el,
        h('div', { class: 'cards' }, Object.values(cards).map((c) => c.el)),
        h('div', { class: 'panel', id: 'jobs-by-queue' }, h('h2', {}, 'By queue and status'), byQueue.el),
        h('div', { class: 'panel', id: 'jobs-list' }, h('h2', {}, 'Jobs'),
          h('p', { class: 'muted' }, 'In the order they were enqueued; finished jobs stay until their result_ttl_ms runs out.'), form, list.el, pages.el)),
      async refresh() {
        const load = ++loads;
        try {
          const [counts, page] = await Promise.all([countJobs(), fetchPage(tokens[tokens.length - 1])]);
          if (load !== loads) return;
          counted = counts;
          next = page.next;
          showCounts();
          list.update(page.jobs);
          pages.set({ text: page.jobs.length ? `page ${tokens.length} · ${num(page.jobs.length)} jobs` : '', prev: tokens.length > 1, next: Boolean(next) });
        } catch (e) {
          if (load !== loads) return;
          banner.show(e);
          throw e;
        }
        banner.clear();
      },
    };
    return view;
  },
});

registerPage({
  id: 'job',
  section: 'jobs',
  title: 'Job',
  path: 'jobs/:id',
  render({ id }) {
    const path = `/v1/jobs/${enc(id)}`;
    let job = null;
    const banner = errorBanner();
    const status = h('span', { id: 'job-status' });
    const cancel = h('button', { class: 'danger', type: 'button', id: 'cancel-job', disabled: true, onclick: cancelJob }, 'Cancel job…');
    const about = h('div', {});
    const times = h('div', {});
    const payload = h('pre', { class: 'json', id: 'job-payload' });
    const result = h('div', { id: 'job-result' });
    const error = h('div', { id: 'job-error' });

    async function cancelJob() {
      if (!job) return;
      const running = job.status === 'running';
      const text = running
        ? `Job ${job.id} is running: its worker is asked to stop, and learns it at its next heartbeat; the job ends cancelled when the worker gives it up.`
        : `Job ${job.id} (${job.type} on ${job.queue}) has not run yet${job.attempts ? ' again' : ''}: it is cancelled at once and never runs.`;
      if (!(await confirmAction(`Cancel this ${job.type} job?`, text, 'Cancel job', 'Keep it'))) return;
      try {
        const answer = await api('POST', `${path}/cancel`);
        toast(answer.status === 'cancelled' ? `Job ${answer.id} cancelled.` : `Cancel requested: job ${answer.id} stops at its worker's next heartbeat.`);
      } catch (e) {
        toast(`Not cancelled: ${e.message}`, true);
      }
      view.refresh().catch(() => {});
    }

    const view = {
      title: `Job ${id}`,
      el: h('section', {},
        h('div', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' /'),
        h('div', { class: 'page-head' }, h('h1', {}, 'Job ', h('span', { class: 'mono' }, id)), status, h('span', { class: 'grow' }), cancel),
        banner.el,
        h('div', { class: 'grid two' },
          h('div', { class: 'panel' }, h('h2', {}, 'Job'), about),
          h('div', { class: 'panel' }, h('h2', {}, 'Times'), times)),
        h('div', { class: 'grid two' },
          h('div', { class: 'panel' }, h('h2', {}, 'Payload'), payload),
          h('div', { class: 'panel' }, h('h2', {}, 'Result'), result)),
        h('div', { class: 'panel' }, h('h2', {}, 'Last error'), error)),
      async refresh() {
        try {
          job = await api('GET', path);
        } catch (e) {
          banner.show(e, { job_not_found: { what: `No job has id ${id}.`, todo: 'It never existed, or it finished and was pruned when its result_ttl_ms ran out. The Jobs page lists those kept.' } });
          cancel.disabled = true;
          throw e;
        }
        banner.clear();
        fill(status, statusBadge(job));
        status.dataset.status = job.status;
        cancel.disabled = FINISHED.has(job.status) || job.cancel_requested;
        fill(about, keyValues([
          ['Status', statusBadge(job)],
          ['Queue', h('a', { href: listHash({ queue: job.queue }) }, job.queue)],
          ['Type', h('code', {}, job.type)],
          ['Priority', num(job.priority)],
          ['Attempts', `${num(job.attempts)} of ${num(job.max_attempts)}`],
          ['Progress', progressCell(job)],
          ['Tags', job.tags?.length ? job.tags.map((t) => [badge(t), ' ']) : '–'],
          ['Unique key', job.unique_key ? h('code', {}, job.unique_key) : '–'],
          ['Timeout per attempt', job.timeout_ms ? age(job.timeout_ms) : 'none (heartbeats keep it alive)'],
          ['Retries', `backoff from ${age(job.backoff.initial_ms)} up to ${age(job.backoff.max_ms)}, ×${job.backoff.multiplier}, ${job.backoff.jitter} jitter`],
          ['Completion webhook', job.callback_url ? h('span', { class: 'mono' }, job.callback_url) : 'none'],
          ['Result kept for', age(job.result_ttl_ms)],
        ]));
        const at = (ms) => (ms ? [time(ms), ' ', h('span', { class: 'muted' }, `(${ago(ms)})`)] : '–');
        fill(times, keyValues([
          ['Created', at(job.created_at_ms)],
          [FINISHED.has(job.status) || job.status === 'running' ? 'Last claimable' : 'Claimable', at(job.run_at_ms)],
          ['Started', at(job.started_at_ms)],
          ['Lease expires', at(job.lease_expires_at_ms)],
          ['Finished', at(job.finished_at_ms)],
          ['Pruned', at(job.expires_at_ms)],
        ]));
        const payloadText = pretty(JSON.stringify(job.payload ?? null));
        if (payload.textContent !== payloadText) payload.textContent = payloadText;
        fill(result, job.result !== undefined ? h('pre', { class: 'json' }, pretty(JSON.stringify(job.result)))
          : h('p', { class: 'muted' }, job.status === 'succeeded' ? 'It succeeded without a result.' : 'None: the job has not succeeded.'));
        fill(error, job.error ? h('pre', { class: 'json error-text' }, job.error) : h('p', { class: 'muted' }, 'None.'));
      },
    };
    return view;
  },
});
