// The queues table: every queue with its live counts and this node's recent rates, sortable
// by any column and filtered by the search box.

import { age, api, h, isInternal, listAll, num, rate, registerPage } from '../core.js';
import { badge, dataTable } from '../widgets.js';

registerPage({
  id: 'queues',
  title: 'Queues',
  path: 'queues',
  nav: 20,
  render() {
    let showInternal = false;
    let latest = [];
    const table = dataTable({
      label: 'Queues',
      key: (q) => q.name,
      empty: 'No queues yet. Create one with `sluice queue create NAME`.',
      rowClass: (q) => (isInternal(q.name) ? 'internal' : ''),
      columns: [
        { id: 'name', label: 'Name', value: (q) => q.name, cell: (q) => h('a', { href: `#/queues/${encodeURIComponent(q.name)}` }, q.name) },
        { id: 'kind', label: 'Kind', value: (q) => [q.fifo ? 'fifo' : 'standard', q.isDlq ? 'dlq' : ''].join(' ').trim(),
          cell: (q) => [q.fifo ? badge('FIFO') : null, q.isDlq ? badge('DLQ', 'warn') : null, !q.fifo && !q.isDlq ? h('span', { class: 'muted' }, 'standard') : null] },
        { id: 'visible', label: 'Visible', num: true, value: (q) => q.counts.visible, cell: (q) => num(q.counts.visible) },
        { id: 'in_flight', label: 'In flight', num: true, value: (q) => q.counts.in_flight, cell: (q) => num(q.counts.in_flight) },
        { id: 'delayed', label: 'Delayed', num: true, value: (q) => q.counts.delayed, cell: (q) => num(q.counts.delayed) },
        { id: 'oldest', label: 'Oldest', num: true, value: (q) => q.counts.oldest_age_ms, cell: (q) => age(q.counts.oldest_age_ms) },
        { id: 'dlq', label: 'DLQ depth', num: true, value: (q) => q.counts.dlq_depth,
          cell: (q) => q.counts.dlq_depth ? h('span', { class: 'error-text' }, num(q.counts.dlq_depth)) : num(q.counts.dlq_depth) },
        { id: 'sent', label: 'Sends', num: true, value: (q) => q.rates?.sent_per_second, cell: (q) => rate(q.rates?.sent_per_second) },
        { id: 'received', label: 'Receives', num: true, value: (q) => q.rates?.received_per_second, cell: (q) => rate(q.rates?.received_per_second) },
        { id: 'acked', label: 'Acks', num: true, value: (q) => q.rates?.acked_per_second, cell: (q) => rate(q.rates?.acked_per_second) },
      ],
    });
    const toggle = h('label', { class: 'inline' }, h('input', { type: 'checkbox', id: 'show-internal', onchange: (e) => { showInternal = e.target.checked; show(); } }), "Show Sluice's own queues");
    const count = h('span', { class: 'sub' });
    table.el.querySelector('.toolbar').append(toggle);

    function show() {
      table.update(latest.filter((q) => showInternal || !isInternal(q.name)));
      count.textContent = `${latest.filter((q) => !isInternal(q.name)).length} queues`;
    }

    return {
      el: h('section', {}, h('div', { class: 'page-head' }, h('h1', {}, 'Queues'), count), h('div', { class: 'panel' }, table.el)),
      async refresh() {
        const [queues, stats] = await Promise.all([listAll('/v1/queues', 'queues'), api('GET', '/v1/stats/queues')]);
        const rates = new Map(stats.queues.map((q) => [q.name, q]));
        const dlqs = new Set(queues.map((q) => q.dead_letter?.queue).filter(Boolean));
        latest = queues.map((q) => ({ ...q, isDlq: dlqs.has(q.name), rates: rates.get(q.name) }));
        show();
      },
    };
  },
});
