// The overview: totals, the server's recent rates and depth, the alerts firing now, the
// busiest queues, and the store's health.

import { age, api, fill, h, num, rate, registerPage, time } from '../core.js';
import { lineChart } from '../chart.js';
import { badge, card, dataTable } from '../widgets.js';

registerPage({
  id: 'overview',
  title: 'Overview',
  path: '',
  nav: 10,
  render() {
    const cards = {
      queues: card('Queues', 'queues'),
      depth: card('Messages waiting', 'depth'),
      sent: card('Sends', 'sent'),
      received: card('Receives', 'received'),
      acked: card('Acks', 'acked'),
      dead: card('Dead-letters', 'dead_lettered'),
      alerts: card('Firing alerts', 'firing'),
      store: card('Store', 'store'),
    };
    const rates = lineChart({
      label: 'Messages per second: sends, receives, acks, dead-letters',
      series: [{ name: 'sends', tone: 's1' }, { name: 'receives', tone: 's2' }, { name: 'acks', tone: 's3' }, { name: 'dead-letters', tone: 's4' }],
      format: rate,
    });
    const depth = lineChart({ label: 'Messages waiting in all queues', series: [{ name: 'messages', tone: 's1' }], format: num });
    const alerts = dataTable({
      label: 'Firing alerts',
      search: false,
      key: (a) => `${a.rule}/${a.subject}`,
      empty: 'Nothing is firing.',
      columns: [
        { id: 'rule', label: 'Rule', value: (a) => a.rule, cell: (a) => h('a', { href: '#/alerts' }, a.rule) },
        { id: 'subject', label: 'Subject', value: (a) => a.subject, cell: (a) => subjectLink(a) },
        { id: 'value', label: 'Value', num: true, value: (a) => a.value, cell: (a) => `${num(a.value)} > ${num(a.threshold)}` },
        { id: 'since', label: 'Firing since', value: (a) => a.since_ms, cell: (a) => h('span', { title: time(a.since_ms) }, `${age(Date.now() - a.since_ms)} ago`) },
      ],
    });
    const busiest = dataTable({
      label: 'Busiest queues',
      search: false,
      key: (q) => q.name,
      empty: 'No queues yet.',
      sort: { id: 'depth', direction: -1 },
      columns: [
        { id: 'name', label: 'Queue', value: (q) => q.name, cell: (q) => h('a', { href: `#/queues/${encodeURIComponent(q.name)}` }, q.name) },
        { id: 'depth', label: 'Depth', num: true, value: (q) => q.visible + q.in_flight + q.delayed, cell: (q) => num(q.visible + q.in_flight + q.delayed) },
        { id: 'oldest', label: 'Oldest', num: true, value: (q) => q.oldest_age_ms, cell: (q) => age(q.oldest_age_ms) },
        { id: 'sent', label: 'Sends', num: true, value: (q) => q.sent_per_second, cell: (q) => rate(q.sent_per_second) },
        { id: 'received', label: 'Receives', num: true, value: (q) => q.received_per_second, cell: (q) => rate(q.received_per_second) },
      ],
    });
    const health = h('div', { class: 'kv-wrap' });
    const el = h('section', {},
      h('div', { class: 'page-head' }, h('h1', {}, 'Overview'), h('span', { class: 'sub', id: 'overview-sub' })),
      h('div', { class: 'cards' }, Object.values(cards).map((c) => c.el)),
      h('div', { class: 'grid two' },
        h('div', { class: 'panel' }, h('h2', {}, 'Rates'), rates.el),
        h('div', { class: 'panel' }, h('h2', {}, 'Messages waiting'), depth.el)),
      h('div', { class: 'grid two' },
        h('div', { class: 'panel' }, h('h2', {}, 'Firing alerts'), alerts.el),
        h('div', { class: 'panel' }, h('h2', {}, 'Busiest queues'), busiest.el)),
      h('div', { class: 'panel' }, h('h2', {}, 'Store health'), health));

    return {
      el,
      async refresh() {
        const [stats, firing, queues] = await Promise.all([
          api('GET', '/v1/stats'), api('GET', '/v1/alerts'), api('GET', '/v1/stats/queues'),
        ]);
        const last = stats.series[stats.series.length - 1] || {};
        cards.queues.set(num(stats.queues));
        cards.depth.set(num(stats.depth));
        cards.sent.set(rate(last.sent_per_second), `${num(stats.messages_sent)} since start`);
        cards.received.set(rate(last.received_per_second), `${num(stats.messages_received)} since start`);
        cards.acked.set(rate(last.acked_per_second), `${num(stats.messages_acked)} since start`);
        cards.dead.set(rate(last.dead_lettered_per_second), `${num(stats.messages_dead_lettered)} since start`, last.dead_lettered_per_second ? 'warn' : '');
        cards.alerts.set(num(stats.firing_alerts), stats.firing_alerts ? 'see Alerts' : 'all quiet', stats.firing_alerts ? 'bad' : 'ok');
        cards.store.set(stats.store.status === 'ok' ? 'OK' : stats.store.status, '', stats.store.status === 'ok' ? 'ok' : 'bad');
        document.getElementById('overview-sub').textContent = `sampled every ${stats.sample_ms / 1000} s, last ${Math.round((stats.sample_ms * stats.history_samples_max) / 60000)} min kept · rates are this node's`;
        rates.update(stats.series.map((p) => ({ t: p.at_ms, values: [p.sent_per_second, p.received_per_second, p.acked_per_second, p.dead_lettered_per_second] })));
        depth.update(stats.series.map((p) => ({ t: p.at_ms, values: [p.depth] })));
        alerts.update(firing.alerts);
        busiest.update(queues.queues.filter((q) => q.visible + q.in_flight + q.delayed > 0).sort((a, b) => (b.visible + b.in_flight + b.delayed) - (a.visible + a.in_flight + a.delayed)).slice(0, 8));
        const batches = stats.store.batches_committed;
        fill(health, h('dl', { class: 'kv' },
          h('dt', {}, 'Status'), h('dd', {}, badge(stats.store.status, stats.store.status === 'ok' ? 'ok' : 'bad')),
          h('dt', {}, 'Write batches'), h('dd', {}, num(batches)),
          h('dt', {}, 'Records per batch'), h('dd', {}, batches ? (stats.store.records_committed / batches).toFixed(1) : '–'),
          h('dt', {}, 'Server time'), h('dd', {}, time(stats.now_ms))));
      },
    };
  },
});

export function subjectLink(alert) {
  if (alert.kind === 'lag_above' || alert.kind === 'lag_growing') {
    const topic = alert.subject.split('/')[0];
    return h('a', { href: `#/topics/${encodeURIComponent(topic)}` }, alert.subject);
  }
  if (alert.kind === 'rejected_rate_above' || alert.kind === 'saga_failed') return alert.subject;
  return h('a', { href: `#/queues/${encodeURIComponent(alert.subject)}` }, alert.subject);
}
