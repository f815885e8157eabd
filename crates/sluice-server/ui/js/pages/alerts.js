// Alerts: what fires now (and what is pending, waiting out its `for_ms`), the rules the server
// evaluates, and a form for new rules.

import { age, api, confirmAction, enc, h, num, registerPage, time, toast } from '../core.js';
import { badge, dataTable } from '../widgets.js';
import { subjectLink } from './overview.js';

const KINDS = {
  dlq_depth_above: 'DLQ depth above',
  oldest_age_above_ms: 'Oldest message older than (ms)',
  lag_above: 'Subscription lag above',
  lag_growing: 'Lag growing by more than, over for',
  rejected_rate_above: 'Refusals per second above',
  saga_failed: 'Failed saga instances',
};

function threshold(rule) {
  return rule.kind === 'oldest_age_above_ms' ? age(rule.threshold) : num(rule.threshold);
}

registerPage({
  id: 'alerts',
  title: 'Alerts',
  path: 'alerts',
  nav: 50,
  render() {
    const alerts = dataTable({
      label: 'Alerts',
      key: (a) => `${a.rule}/${a.subject}`,
      empty: 'Nothing is firing.',
      search: false,
      columns: [
        { id: 'status', label: 'Status', value: (a) => a.status, cell: (a) => badge(a.status, a.status === 'firing' ? 'bad' : 'warn') },
        { id: 'rule', label: 'Rule', value: (a) => a.rule },
        { id: 'subject', label: 'Subject', value: (a) => a.subject, cell: subjectLink },
        { id: 'value', label: 'Value', num: true, value: (a) => a.value, cell: (a) => (a.kind === 'oldest_age_above_ms' ? age(a.value) : num(a.value)) },
        { id: 'since', label: 'Since', value: (a) => a.since_ms, cell: (a) => h('span', { title: time(a.since_ms) }, `${age(Date.now() - a.since_ms)} ago`) },
      ],
    });
    const rules = dataTable({
      label: 'Rules',
      key: (r) => r.name,
      empty: 'No rules. The built-in rule is turned off.',
      columns: [
        { id: 'name', label: 'Rule', value: (r) => r.name, cell: (r) => [r.name, r.builtin ? [' ', badge('built in')] : null] },
        { id: 'kind', label: 'When', value: (r) => KINDS[r.kind] || r.kind },
        { id: 'target', label: 'Target', value: (r) => r.target, cell: (r) => h('code', {}, r.target) },
        { id: 'threshold', label: 'Threshold', num: true, value: (r) => r.threshold, cell: threshold },
        { id: 'for', label: 'For', num: true, value: (r) => r.for_ms, cell: (r) => (r.for_ms ? age(r.for_ms) : 'at once') },
        { id: 'webhook', label: 'Webhook', value: (r) => r.notify?.webhook || '', cell: (r) => (r.notify?.webhook ? h('span', { class: 'mono truncate' }, r.notify.webhook) : h('span', { class: 'muted' }, 'none')) },
        { id: 'actions', label: '', value: () => '', cell: (r) => h('button', { type: 'button', class: 'ghost', 'aria-label': `Delete rule ${r.name}`, onclick: () => remove(r) }, r.builtin ? 'Turn off' : 'Delete') },
      ],
    });

    async function remove(rule) {
      const text = rule.builtin
        ? 'The built-in rule stops watching dead-letter queues until a rule of its name is created again.'
        : `The rule, its alerts and any notification not yet delivered are deleted.`;
      if (!(await confirmAction(`${rule.builtin ? 'Turn off' : 'Delete'} ${rule.name}?`, text, rule.builtin ? 'Turn off' : 'Delete'))) return;
      await api('DELETE', `/v1/alerts/rules/${enc(rule.name)}`);
      toast(`Rule ${rule.name} ${rule.builtin ? 'turned off' : 'deleted'}.`);
      view.refresh();
    }

    const form = ruleForm(() => view.refresh());
    const showPending = h('input', { type: 'checkbox', id: 'show-pending', onchange: () => view.refresh() });
    const view = {
      el: h('section', {},
        h('div', { class: 'page-head' }, h('h1', {}, 'Alerts'), h('span', { class: 'sub' }, 'Evaluated by the server every 5 s; one node evaluates, webhooks hear of every change once')),
        h('div', { class: 'panel' }, h('h2', {}, 'Now', h('label', { class: 'inline muted' }, showPending, 'show pending')), alerts.el),
        h('div', { class: 'panel' }, h('h2', {}, 'Rules'), rules.el),
        h('div', { class: 'panel' }, h('h2', {}, 'New rule'), form)),
      async refresh() {
        const [list, ruleList] = await Promise.all([api('GET', `/v1/alerts${showPending.checked ? '?pending=true' : ''}`), api('GET', '/v1/alerts/rules')]);
        alerts.update(list.alerts);
        rules.update(ruleList.rules);
      },
    };
    return view;
  },
});

function ruleForm(created) {
  const field = (label, input) => h('label', {}, label, input);
  const form = h('form', { class: 'stack', id: 'rule-form' },
    h('div', { class: 'row' },
      field('Name', h('input', { name: 'name', required: true, pattern: '[A-Za-z0-9_\\-]{1,60}', placeholder: 'orders-late' })),
      field('When', h('select', { name: 'kind' }, Object.entries(KINDS).map(([k, label]) => h('option', { value: k }, label)))),
      field('Target (name or pattern)', h('input', { name: 'target', required: true, value: '*', placeholder: 'orders-*' })),
      field('Threshold', h('input', { name: 'threshold', type: 'number', min: 0, step: 'any', required: true, value: 0 })),
      field('For (seconds)', h('input', { name: 'for_s', type: 'number', min: 0, step: 'any', value: 0 }))),
    field('Webhook (optional)', h('input', { name: 'webhook', type: 'url', placeholder: 'the URL of your receiver (http or https)' })),
    h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit' }, 'Create rule')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const rule = {
      name: data.get('name'),
      kind: data.get('kind'),
      target: data.get('target'),
      threshold: Number(data.get('threshold')),
      for_ms: Math.round(Number(data.get('for_s') || 0) * 1000),
    };
    if (data.get('webhook')) rule.notify = { webhook: data.get('webhook') };
    try {
      const answer = await api('POST', '/v1/alerts/rules', rule);
      toast(answer.signing_secret ? `Rule ${answer.name} created; its webhook signing secret is ${answer.signing_secret}.` : `Rule ${answer.name} created.`);
      form.reset();
      created();
    } catch (e) {
      toast(`Not created: ${e.message}`, true);
    }
  });
  return form;
}
