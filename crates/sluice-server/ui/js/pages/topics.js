// Topics and their subscriptions: where each delivers, its filter policy, its backlog (the
// messages waiting in the queue it delivers into, what `lag_above` alerts on), and for HTTP/S
// endpoints the circuit breaker's state on the node that answers.

import { api, enc, fill, h, listAll, num, registerPage } from '../core.js';
import { badge, dataTable, keyValues, rateLimitText } from '../widgets.js';

const breakerTone = { closed: 'ok', open: 'bad', half_open: 'warn' };

function breaker(s) {
  if (s.protocol === 'sqs') return h('span', { class: 'muted' }, '–');
  return badge(s.breaker ? s.breaker.replace('_', '-') : 'not called yet', breakerTone[s.breaker] || '');
}

async function backlogs() {
  const queues = await listAll('/v1/queues', 'queues');
  return new Map(queues.map((q) => [q.name, q.counts.visible + q.counts.in_flight + q.counts.delayed]));
}

registerPage({
  id: 'topics',
  title: 'Topics',
  path: 'topics',
  nav: 40,
  render() {
    const table = dataTable({
      label: 'Topics',
      key: (t) => t.name,
      empty: 'No topics yet. Create one with `sluice topic create NAME`.',
      columns: [
        { id: 'name', label: 'Topic', value: (t) => t.name, cell: (t) => h('a', { href: `#/topics/${enc(t.name)}` }, t.name) },
        { id: 'fifo', label: 'Kind', value: (t) => (t.fifo ? 'fifo' : 'standard'), cell: (t) => (t.fifo ? badge('FIFO') : h('span', { class: 'muted' }, 'standard')) },
        { id: 'subs', label: 'Subscriptions', num: true, value: (t) => t.subs.length },
        { id: 'backlog', label: 'Backlog', num: true, value: (t) => t.backlog, cell: (t) => num(t.backlog) },
        { id: 'open', label: 'Open breakers', num: true, value: (t) => t.open, cell: (t) => (t.open ? badge(num(t.open), 'bad') : '0') },
      ],
    });
    return {
      el: h('section', {}, h('div', { class: 'page-head' }, h('h1', {}, 'Topics')), h('div', { class: 'panel' }, table.el)),
      async refresh() {
        const [topics, subscriptions, backlog] = await Promise.all([listAll('/v1/topics', 'topics'), listAll('/v1/subscriptions', 'subscriptions'), backlogs()]);
        table.update(topics.map((t) => {
          const subs = subscriptions.filter((s) => s.topic === t.name);
          return { ...t, subs, backlog: subs.reduce((n, s) => n + (backlog.get(s.queue) || 0), 0), open: subs.filter((s) => s.breaker && s.breaker !== 'closed').length };
        }));
      },
    };
  },
});

registerPage({
  id: 'topic',
  section: 'topics',
  title: 'Topic',
  path: 'topics/:name',
  render({ name }) {
    const about = h('div', {});
    const table = dataTable({
      label: 'Subscriptions',
      key: (s) => s.id,
      empty: 'No subscriptions. Subscribe a queue with `sluice topic subscribe TOPIC --queue QUEUE`.',
      columns: [
        { id: 'protocol', label: 'Protocol', value: (s) => s.protocol, cell: (s) => badge(s.protocol) },
        { id: 'endpoint', label: 'Delivers to', value: (s) => (s.protocol === 'sqs' ? s.queue : s.endpoint),
          cell: (s) => (s.protocol === 'sqs' ? h('a', { href: `#/queues/${enc(s.queue)}` }, s.queue) : h('span', { class: 'mono' }, s.endpoint)) },
        { id: 'filter', label: 'Filter policy', value: (s) => (s.filter_policy ? JSON.stringify(s.filter_policy) : ''),
          cell: (s) => (s.filter_policy ? h('details', { class: 'body' }, h('summary', { class: 'mono' }, `${s.filter_policy_scope}: ${JSON.stringify(s.filter_policy).slice(0, 48)}`), h('pre', {}, JSON.stringify(s.filter_policy, null, 2))) : h('span', { class: 'muted' }, 'everything')) },
        { id: 'backlog', label: 'Backlog', num: true, value: (s) => s.backlog, cell: (s) => h('a', { href: `#/queues/${enc(s.queue)}`, title: `waiting in ${s.queue}` }, num(s.backlog)) },
        { id: 'breaker', label: 'Breaker', value: (s) => s.breaker || '', cell: breaker },
        { id: 'state', label: 'State', value: (s) => (s.pending_confirmation ? 'pending' : 'confirmed'),
          cell: (s) => (s.pending_confirmation ? badge('awaiting confirmation', 'warn') : badge('confirmed', 'ok')) },
        { id: 'dlq', label: 'DLQ', value: (s) => s.dead_letter_queue, cell: (s) => (s.dead_letter_queue ? h('a', { href: `#/dlqs/${enc(s.dead_letter_queue)}` }, s.dead_letter_queue) : '–') },
        { id: 'raw', label: 'Raw', value: (s) => (s.raw ? 'yes' : 'no') },
        { id: 'id', label: 'Id', value: (s) => s.id, cell: (s) => h('span', { class: 'mono muted', title: s.arn }, s.id.slice(0, 8) + '…') },
      ],
    });
    const missing = h('p', { class: 'error-text', hidden: true });
    return {
      title: name,
      el: h('section', {},
        h('div', { class: 'crumbs' }, h('a', { href: '#/topics' }, 'Topics'), ' /'),
        h('div', { class: 'page-head' }, h('h1', {}, name)),
        missing,
        h('div', { class: 'panel' }, h('h2', {}, 'Subscriptions'), table.el),
        h('div', { class: 'panel' }, h('h2', {}, 'Topic'), about)),
      async refresh() {
        let topic;
        try {
          topic = await api('GET', `/v1/topics/${enc(name)}`);
        } catch (e) {
          if (e.code === 'topic_not_found') { missing.hidden = false; missing.textContent = `No topic is named ${name}.`; return; }
          throw e;
        }
        const [subscriptions, backlog] = await Promise.all([listAll(`/v1/topics/${enc(name)}/subscriptions`, 'subscriptions'), backlogs()]);
        table.update(subscriptions.map((s) => ({ ...s, backlog: backlog.get(s.queue) || 0 })));
        fill(about, keyValues([
          ['ARN', h('span', { class: 'mono' }, topic.arn)],
          ['Kind', topic.fifo ? `FIFO${topic.content_based_dedup ? ', content-based dedup' : ''}` : 'standard'],
          ['Display name', topic.display_name || '–'],
          ['Subscriptions', `${num(topic.subscriptions?.confirmed)} confirmed, ${num(topic.subscriptions?.pending)} pending`],
          ['Rate limit', rateLimitText(topic.rate_limit)],
          ['Delivery policy', topic.attributes.DeliveryPolicy ? h('code', {}, topic.attributes.DeliveryPolicy) : 'SNS default (3 retries, 20 s apart)'],
          ['Created', new Date(topic.created_at_ms).toLocaleString()],
        ]));
      },
    };
  },
});
