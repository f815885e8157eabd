// One queue: live counts, charts of its depth and rates from the server's history, its
// attributes, a message browser (peek, with bodies and attributes), a form that sends a test
// message, and purge.

import { age, api, confirmAction, enc, fill, h, num, rate, registerPage, toast } from '../core.js';
import { lineChart } from '../chart.js';
import { badge, card, keyValues, messageBrowser, rateLimitText } from '../widgets.js';

registerPage({
  id: 'queue',
  section: 'queues',
  title: 'Queue',
  path: 'queues/:name',
  render({ name }) {
    const path = `/v1/queues/${enc(name)}`;
    const cards = {
      visible: card('Visible', 'visible'),
      in_flight: card('In flight', 'in_flight'),
      delayed: card('Delayed', 'delayed'),
      oldest: card('Oldest message', 'oldest'),
      dlq: card('Dead-letter queue', 'dlq'),
      sent: card('Sends', 'sent'),
    };
    const depth = lineChart({
      label: `Depth of ${name}: visible, in flight, delayed`,
      series: [{ name: 'visible', tone: 's1' }, { name: 'in flight', tone: 's2' }, { name: 'delayed', tone: 's5' }],
      format: num,
    });
    const rates = lineChart({
      label: `Rates of ${name}: sends, receives, acks per second`,
      series: [{ name: 'sends', tone: 's1' }, { name: 'receives', tone: 's2' }, { name: 'acks', tone: 's3' }],
      format: rate,
    });
    const badges = h('span', {});
    const attributes = h('div', {});
    const browser = messageBrowser();
    let peekLimit = 20;
    const limit = h('select', { 'aria-label': 'Messages shown', onchange: (e) => { peekLimit = Number(e.target.value); view.refresh(); } },
      [10, 20, 50, 100].map((n) => h('option', { value: n, selected: n === peekLimit }, `${n} messages`)));
    browser.el.querySelector('.toolbar').append(limit);
    const form = sendForm(name, () => view.refresh());
    const missing = h('p', { class: 'error-text', hidden: true });

    const purge = h('button', { class: 'danger', type: 'button', id: 'purge', onclick: async () => {
      const queue = await api('GET', path);
      const total = queue.counts.visible + queue.counts.in_flight + queue.counts.delayed;
      if (!(await confirmAction(`Purge ${name}?`, `This deletes all ${num(total)} messages of ${name}, in flight or not. It cannot be undone.`, 'Purge'))) return;
      const answer = await api('POST', `${path}/purge`);
      toast(`Purged ${num(answer.purged)} messages from ${name}.`);
      view.refresh();
    } }, 'Purge…');

    const el = h('section', {},
      h('div', { class: 'crumbs' }, h('a', { href: '#/queues' }, 'Queues'), ' /'),
      h('div', { class: 'page-head' }, h('h1', {}, name), badges, h('span', { class: 'grow' }), purge),
      missing,
      h('div', { class: 'cards' }, Object.values(cards).map((c) => c.el)),
      h('div', { class: 'grid two' },
        h('div', { class: 'panel' }, h('h2', {}, 'Depth'), depth.el),
        h('div', { class: 'panel' }, h('h2', {}, 'Rates'), rates.el)),
      h('div', { class: 'panel' }, h('h2', {}, 'Messages'), h('p', { class: 'muted' }, 'Peeked in send order, without receiving them. Expand a body to read it whole.'), browser.el),
      h('div', { class: 'grid two' },
        h('div', { class: 'panel' }, h('h2', {}, 'Send a test message'), form),
        h('div', { class: 'panel' }, h('h2', {}, 'Attributes'), attributes)));

    const view = {
      el,
      title: name,
      async refresh() {
        let queue;
        try {
          queue = await api('GET', path);
        } catch (e) {
          if (e.code === 'queue_not_found') { missing.hidden = false; missing.textContent = `No queue is named ${name}.`; return; }
          throw e;
        }
        missing.hidden = true;
        const [history, peeked] = await Promise.all([
          api('GET', `/v1/stats/queues/${enc(name)}`), api('GET', `${path}/messages?limit=${peekLimit}`),
        ]);
        const c = queue.counts;
        const last = history.series[history.series.length - 1];
        cards.visible.set(num(c.visible));
        cards.in_flight.set(num(c.in_flight));
        cards.delayed.set(num(c.delayed));
        cards.oldest.set(age(c.oldest_age_ms));
        cards.dlq.set(queue.dead_letter ? num(c.dlq_depth) : '–', queue.dead_letter ? queue.dead_letter.queue : 'no dead-letter policy', c.dlq_depth ? 'bad' : '');
        cards.sent.set(rate(last?.sent_per_second), last ? `${rate(last.received_per_second)} received` : 'no sample yet');
        fill(badges, queue.fifo ? badge('FIFO') : badge('standard'),
          queue.dead_letter ? [' ', h('a', { href: `#/dlqs/${enc(queue.dead_letter.queue)}` }, badge(`DLQ ${queue.dead_letter.queue}`, c.dlq_depth ? 'bad' : ''))] : null);
        depth.update(history.series.map((p) => ({ t: p.at_ms, values: [p.visible, p.in_flight, p.delayed] })));
        rates.update(history.series.map((p) => ({ t: p.at_ms, values: [p.sent_per_second, p.received_per_second, p.acked_per_second] })));
        browser.update(peeked.messages);
        fill(attributes, keyValues([
          ['Visibility timeout', age(queue.visibility_timeout_ms)],
          ['Delay', age(queue.delay_ms)],
          ['Retention', age(queue.retention_ms)],
          ['Largest message', `${num(queue.message_bytes_max)} bytes`],
          ['Receive wait', age(queue.receive_wait_ms)],
          ['Dead letters', queue.dead_letter ? `to ${queue.dead_letter.queue} after ${queue.dead_letter.max_receive_count} receives` : 'kept here'],
          ['Depth limit', queue.max_depth_messages || queue.max_depth_bytes
            ? `${[queue.max_depth_messages ? `${num(queue.max_depth_messages)} messages` : null, queue.max_depth_bytes ? `${num(queue.max_depth_bytes)} bytes` : null].filter(Boolean).join(' or ')}, then ${queue.overflow}`
            : 'none'],
          ['Rate limit', rateLimitText(queue.rate_limit)],
          ['FIFO', queue.fifo ? `yes, dedup ${age(queue.dedup_window_ms)} per ${queue.dedup_scope}${queue.content_based_dedup ? ', by content' : ''}` : 'no'],
          ['Tags', Object.entries(queue.tags).map(([k, v]) => `${k}=${v}`).join(', ') || '–'],
          ['Created', new Date(queue.created_at_ms).toLocaleString()],
        ]));
        form.dataset.fifo = String(queue.fifo);
        form.querySelector('[name=group_id]').closest('label').hidden = !queue.fifo;
        form.querySelector('[name=priority]').closest('label').hidden = queue.fifo;
        form.querySelector('[name=delay_ms]').closest('label').hidden = queue.fifo;
      },
    };
    return view;
  },
});

function sendForm(name, sent) {
  const field = (label, input) => h('label', {}, label, input);
  const form = h('form', { class: 'stack', id: 'send-form' },
    field('Body', h('textarea', { name: 'body', required: true, placeholder: '{"hello": "world"}' })),
    h('div', { class: 'row' },
      field('Attribute name', h('input', { name: 'attr_name', placeholder: 'kind', size: 12 })),
      field('Type', h('select', { name: 'attr_type' }, ['String', 'Number'].map((t) => h('option', { value: t }, t)))),
      field('Value', h('input', { name: 'attr_value', placeholder: 'test', size: 12 }))),
    h('div', { class: 'row' },
      field('Priority (0–9)', h('input', { name: 'priority', type: 'number', min: 0, max: 9, value: 0 })),
      field('Delay (ms)', h('input', { name: 'delay_ms', type: 'number', min: 0, value: 0 })),
      field('Group id', h('input', { name: 'group_id', placeholder: 'group' }))),
    h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit' }, 'Send'), h('span', { class: 'muted', id: 'send-result' })));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const message = { body: data.get('body') };
    if (data.get('attr_name')) message.attributes = { [data.get('attr_name')]: { type: data.get('attr_type'), value: data.get('attr_value') } };
    if (form.dataset.fifo === 'true') message.group_id = data.get('group_id') || 'dashboard';
    else {
      if (Number(data.get('priority'))) message.priority = Number(data.get('priority'));
      if (Number(data.get('delay_ms'))) message.delay_ms = Number(data.get('delay_ms'));
    }
    try {
      const answer = await api('POST', `/v1/queues/${enc(name)}/messages`, { messages: [message] });
      const result = answer.results[0];
      if (result.error) throw new Error(`${result.error.message} (${result.error.code})`);
      form.querySelector('#send-result').textContent = `sent ${result.id}`;
      toast(`Sent a message to ${name}.`);
      sent();
    } catch (e) {
      toast(`Not sent: ${e.message}`, true);
    }
  });
  return form;
}
