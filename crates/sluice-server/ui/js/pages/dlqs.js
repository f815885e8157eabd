// Dead-letter queues: which queues are DLQs (named in another queue's dead-letter policy or a
// subscription's), what is in them and why (the source queue and last error of each message),
// redrive at a chosen rate with progress and cancel, and purge with confirmation.

import { age, api, confirmAction, enc, fill, h, listAll, num, registerPage, time, toast } from '../core.js';
import { badge, card, dataTable, messageBrowser } from '../widgets.js';

/** Every dead-letter queue with the queues that dead-letter into it. */
async function deadLetterQueues() {
  const [queues, subscriptions] = await Promise.all([listAll('/v1/queues', 'queues'), listAll('/v1/subscriptions', 'subscriptions')]);
  const byName = new Map(queues.map((q) => [q.name, q]));
  const sources = new Map();
  const add = (dlq, source) => { if (byName.has(dlq)) (sources.get(dlq) || sources.set(dlq, []).get(dlq)).push(source); };
  for (const q of queues) if (q.dead_letter) add(q.dead_letter.queue, q.name);
  for (const s of subscriptions) if (s.dead_letter_queue) add(s.dead_letter_queue, `${s.topic} → ${s.protocol}`);
  return [...sources.entries()].map(([name, from]) => ({ ...byName.get(name), sources: from }));
}

const depthOf = (q) => q.counts.visible + q.counts.in_flight + q.counts.delayed;

registerPage({
  id: 'dlqs',
  title: 'Dead letters',
  path: 'dlqs',
  nav: 30,
  render() {
    const table = dataTable({
      label: 'Dead-letter queues',
      key: (q) => q.name,
      empty: 'No queue has a dead-letter policy yet.',
      sort: { id: 'depth', direction: -1 },
      columns: [
        { id: 'name', label: 'Dead-letter queue', value: (q) => q.name, cell: (q) => h('a', { href: `#/dlqs/${enc(q.name)}` }, q.name) },
        { id: 'depth', label: 'Messages', num: true, value: depthOf, cell: (q) => depthOf(q) ? badge(num(depthOf(q)), 'bad') : badge('0', 'ok') },
        { id: 'oldest', label: 'Oldest', num: true, value: (q) => q.counts.oldest_age_ms, cell: (q) => age(q.counts.oldest_age_ms) },
        { id: 'sources', label: 'Dead letters from', value: (q) => q.sources.join(', ') },
      ],
    });
    return {
      el: h('section', {}, h('div', { class: 'page-head' }, h('h1', {}, 'Dead letters'), h('span', { class: 'sub' }, 'Messages that failed too often, where they came from, and why')),
        h('div', { class: 'panel' }, table.el)),
      async refresh() { table.update(await deadLetterQueues()); },
    };
  },
});

registerPage({
  id: 'dlq',
  section: 'dlqs',
  title: 'Dead-letter queue',
  path: 'dlqs/:name',
  render({ name }) {
    const path = `/v1/queues/${enc(name)}`;
    const cards = { depth: card('Messages', 'depth'), oldest: card('Oldest', 'oldest'), sources: card('From', 'sources') };
    const browser = messageBrowser({ deadLetters: true });
    let task = null;
    let total = 0;

    const rateInput = h('input', { type: 'number', id: 'redrive-rate', min: 1, max: 100000, value: 100, 'aria-label': 'Messages per second' });
    const target = h('select', { id: 'redrive-to', 'aria-label': 'Destination' }, h('option', { value: '' }, "each message's source queue"));
    const start = h('button', { class: 'primary', type: 'button', id: 'redrive-start', onclick: startRedrive }, 'Redrive');
    const cancel = h('button', { type: 'button', id: 'redrive-cancel', hidden: true, onclick: cancelRedrive }, 'Cancel');
    const bar = h('progress', { id: 'redrive-progress', max: 1, value: 0, hidden: true });
    const status = h('div', { id: 'redrive-status', class: 'muted' }, 'Moves this queue\'s messages back at the rate you choose.');
    const purge = h('button', { class: 'danger', type: 'button', id: 'purge', onclick: purgeAll }, 'Purge…');
    const tasks = h('div', {});

    async function startRedrive() {
      const body = { max_per_second: Number(rateInput.value) || 100 };
      if (target.value) body.to = target.value;
      try {
        task = await api('POST', `${path}/redrive`, body);
        toast(`Redrive of ${name} started at ${body.max_per_second}/s.`);
        showTask();
      } catch (e) {
        toast(`Redrive not started: ${e.message}`, true);
      }
    }

    async function cancelRedrive() {
      if (!task) return;
      task = await api('DELETE', `/v1/redrives/${enc(task.id)}`);
      toast(`Redrive cancelled after ${num(task.moved)} messages.`);
      showTask();
    }

    async function purgeAll() {
      if (!(await confirmAction(`Purge ${name}?`, `This deletes all ${num(total)} dead-lettered messages of ${name}. They cannot be redriven afterwards.`, 'Purge'))) return;
      const answer = await api('POST', `${path}/purge`);
      toast(`Purged ${num(answer.purged)} messages from ${name}.`);
      view.refresh();
    }

    function showTask() {
      const running = task && task.status === 'running';
      start.disabled = running;
      rateInput.disabled = running;
      cancel.hidden = !running;
      bar.hidden = !task;
      if (!task) return;
      bar.max = Math.max(task.total, task.moved, 1);
      bar.value = task.moved;
      const failed = task.failed ? `, ${num(task.failed)} stayed (no destination)` : '';
      status.textContent = `${task.status}: ${num(task.moved)} of ${num(task.total)} moved at ${num(task.max_per_second)}/s${failed}${task.error ? ' — ' + task.error : ''}`;
      status.dataset.status = task.status;
    }

    const view = {
      el: h('section', {},
        h('div', { class: 'crumbs' }, h('a', { href: '#/dlqs' }, 'Dead letters'), ' /'),
        h('div', { class: 'page-head' }, h('h1', {}, name), h('a', { href: `#/queues/${enc(name)}` }, 'queue page'), h('span', { class: 'grow' }), purge),
        h('div', { class: 'cards' }, Object.values(cards).map((c) => c.el)),
        h('div', { class: 'panel' }, h('h2', {}, 'Redrive'),
          h('div', { class: 'redrive' },
            h('div', { class: 'row' }, h('label', {}, 'Messages per second', rateInput), h('label', {}, 'To', target), start, cancel),
            bar, status)),
        h('div', { class: 'panel' }, h('h2', {}, 'What is in it, and why'), browser.el),
        h('div', { class: 'panel' }, h('h2', {}, 'Redrives of this queue'), tasks)),
      title: name,
      async refresh() {
        const [queues, peeked, history] = await Promise.all([
          deadLetterQueues(), api('GET', `${path}/messages?limit=100`), api('GET', `${path}/redrive`),
        ]);
        const queue = queues.find((q) => q.name === name) || { ...(await api('GET', path)), sources: [] };
        total = depthOf(queue);
        cards.depth.set(num(total), '', total ? 'bad' : 'ok');
        cards.oldest.set(age(queue.counts.oldest_age_ms));
        cards.sources.set(queue.sources.join(', ') || '–');
        purge.disabled = total === 0;
        browser.update(peeked.messages);
        const options = [...new Set(queue.sources.filter((s) => !s.includes(' → ')))];
        if (target.options.length !== options.length + 1) {
          fill(target, h('option', { value: '' }, "each message's source queue"), options.map((s) => h('option', { value: s }, s)));
        }
        const latest = history.tasks[history.tasks.length - 1];
        if (latest && (!task || task.id === latest.id || latest.status === 'running')) task = latest;
        showTask();
        fill(tasks, history.tasks.length ? h('table', {}, h('thead', {}, h('tr', {}, ['Started', 'Status', 'Moved', 'Rate', 'To'].map((t) => h('th', {}, t)))),
          h('tbody', {}, history.tasks.slice().reverse().slice(0, 10).map((t) => h('tr', {},
            h('td', {}, t.started_at ? time(Date.parse(t.started_at)) : '–'), h('td', {}, badge(t.status, t.status === 'failed' ? 'bad' : t.status === 'completed' ? 'ok' : '')),
            h('td', { class: 'num' }, `${num(t.moved)} / ${num(t.total)}`), h('td', { class: 'num' }, `${num(t.max_per_second)}/s`), h('td', {}, t.to || 'sources'))))) : h('p', { class: 'muted' }, 'None since the server started.'));
      },
    };
    return view;
  },
});
