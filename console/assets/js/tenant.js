// The tenant's views: overview, a namespace, the webhook and the API keys. Each shows the
// quota banner on top.
import { h, fill, field, select, button, status, say, copyBox, uid } from './dom.js';
import { call, seg, session } from './api.js';
import { num, ms, when } from './fmt.js';
import { banner, suspendedBanner } from './banner.js';
import { dayChart, spark } from './chart.js';
import { page, table } from './page.js';
import { activity as auditView } from './activity.js';

async function loadAccount() {
  const [account, usage] = await Promise.all([call('GET', '/v1/account'), call('GET', '/v1/usage')]);
  return { account, usage };
}

function banners(d) {
  return [suspendedBanner(d.account.suspended, 'tenant'), banner(d.usage.month, d.account.plan)];
}

function tenantPage(main, title, render) {
  return page(main, title, loadAccount, render, banners);
}

/** activity: the account's audit log, under its banners. */
export function activity(main) {
  return auditView(main, '/v1/audit', { extra: loadAccount, top: banners });
}

/** overview: the account's 30 days and its namespaces. */
export function overview(main) {
  let chartSlot;
  let tableSlot;
  return tenantPage(main, 'Overview', async (body, d, first) => {
    if (first) {
      chartSlot = h('div');
      tableSlot = h('div');
      const ns = field('Namespace', { name: 'ns', autocomplete: 'off', placeholder: 'e.g. api' });
      const go = h('form', { class: 'inline', 'aria-label': 'Open a namespace' }, ns.wrap, h('button', { type: 'submit' }, 'Open'));
      go.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const v = ns.input.value.trim();
        if (v) location.hash = `#/ns/${seg(v)}`;
      });
      fill(body,
        h('p', { class: 'lead' }, 'Account ', h('strong', { 'data-testid': 'account-id' }, d.account.id), ' on plan ', h('strong', {}, d.account.plan), '.'),
        chartSlot, h('h2', {}, 'Namespaces'), tableSlot,
        h('h2', {}, 'Open a namespace'),
        h('p', { class: 'muted' }, 'A namespace is listed once it has a rule or usage in the last 30 days; open any other by name to give it rules.'), go);
    }
    const list = await call('GET', '/v1/namespaces');
    const shown = list.namespaces.slice(0, 50);
    const stats = await Promise.all(shown.map((n) => call('GET', `/v1/namespaces/${seg(n.namespace)}/stats`).catch(() => null)));
    fill(chartSlot, dayChart(d.usage.days, 'All namespaces, last 30 days'));
    if (list.namespaces.length === 0) {
      fill(tableSlot, h('p', { 'data-testid': 'no-namespaces' }, 'No namespaces yet: write a rule or send a check (POST /v1/limit) and it appears here.'));
      return;
    }
    fill(tableSlot, table('Namespaces', ['Namespace', ...['Rules', 'Requests (30 days)', 'Blocked'].map((c) => h('th', { scope: 'col', class: 'num' }, c)), 'Last 30 days'],
      list.namespaces.map((n, i) => h('tr', {},
        h('th', { scope: 'row' }, h('a', { href: `#/ns/${seg(n.namespace)}` }, n.namespace)),
        h('td', { class: 'num' }, num(n.rules)), h('td', { class: 'num' }, num(n.total)), h('td', { class: 'num' }, num(n.blocked)),
        h('td', {}, stats[i] ? spark(stats[i].days, n.namespace) : h('span', { class: 'muted' }, '—')))),
    { 'data-testid': 'namespaces' }));
  });
}

// value reads a numeric input: empty is absent, digits a number, anything else is sent as
// typed so that the API's own message explains it.
function value(input) {
  const v = input.value.trim();
  if (v === '') return undefined;
  return /^\d{1,15}$/.test(v) ? Number(v) : v;
}

function clearErrors(form) {
  for (const m of form.querySelectorAll('.field-msg')) m.textContent = '';
  for (const i of form.querySelectorAll('[aria-invalid]')) i.removeAttribute('aria-invalid');
}

function showAt(f, message) {
  f.msg.textContent = message;
  f.input.setAttribute('aria-invalid', 'true');
}

const RATE = ['fixed_window', 'sliding_window', 'token_bucket'];

function ruleForm(ns, kind, rule, account, onChange) {
  const rate = kind === 'rate';
  const algos = rate ? RATE : ['concurrent_limit'];
  const onPlan = rate ? account.plan_limits.algorithms : (account.plan_limits.concurrent_limit ? algos : []);
  const hid = uid('rule');
  const f = {
    algorithm: select('Algorithm', algos.map((a) => [a, onPlan.includes(a) ? a : `${a} (not on your plan)`]), rule?.algorithm ?? algos[0], { name: 'algorithm' }),
    limit: field(rate ? 'Limit (requests per window)' : 'Limit (leases held at once)', { name: 'limit', inputmode: 'numeric', autocomplete: 'off', value: rule?.limit ?? '' }),
    window_ms: field(rate ? 'Window (ms)' : 'Lease time-to-live (ms)', { name: 'window_ms', inputmode: 'numeric', autocomplete: 'off', value: rule?.window_ms ?? '' }),
    name: field('Name (optional)', { name: 'name', autocomplete: 'off', value: rule?.name ?? '' }),
  };
  const rows = [];
  const list = h('div', { class: 'overrides' });
  function addOverride(o) {
    const n = rows.length + 1;
    const row = {
      key: field(`Override ${n}: key`, { name: 'override-key', autocomplete: 'off', value: o?.key ?? '' }),
      limit: field(`Override ${n}: limit`, { name: 'override-limit', inputmode: 'numeric', autocomplete: 'off', value: o?.limit ?? '' }),
      window_ms: field(`Override ${n}: window (ms, optional)`, { name: 'override-window', inputmode: 'numeric', autocomplete: 'off', value: o?.window_ms ?? '' }),
    };
    row.el = h('div', { class: 'override', role: 'group', 'aria-label': `Override ${n}` }, row.key.wrap, row.limit.wrap, row.window_ms.wrap,
      button(`Remove override ${n}`, () => { row.el.remove(); rows.splice(rows.indexOf(row), 1); }, { class: 'secondary' }));
    rows.push(row);
    list.append(row.el);
    return row;
  }
  for (const o of rule?.overrides ?? []) addOverride(o);
  const out = status({ 'data-testid': `rule-${kind}-status` });
  const del = rule ? button('Delete rule', async () => {
    try {
      await call('DELETE', `/v1/namespaces/${seg(ns)}/rules/${kind}`);
      onChange(kind, null, 'Rule deleted.');
    } catch (e) { say(out, 'error', e.message); }
  }, { class: 'danger' }) : null;
  const form = h('form', { class: 'card rule', 'data-kind': kind, 'aria-labelledby': hid, novalidate: true },
    h('h3', { id: hid }, rate ? 'Rate rule' : 'Concurrent rule (leases)',
      h('span', { class: 'muted' }, rule ? (rule.name ? ` · “${rule.name}”` : ' · set') : ' · not set')),
    (!rate && !account.plan_limits.concurrent_limit) ? h('p', { class: 'notice' }, `Your plan (${account.plan}) has no leases: a concurrent rule is refused.`) : null,
    h('div', { class: 'grid' }, f.algorithm.wrap, f.limit.wrap, f.window_ms.wrap, f.name.wrap),
    h('h4', {}, 'Per-key overrides'), list,
    h('div', { class: 'actions' },
      button('Add override', () => addOverride().key.input.focus(), { class: 'secondary' }),
      h('button', { type: 'submit' }, rule ? 'Save rule' : 'Create rule'), del),
    out);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const name = f.name.input.value;
    const body = {
      algorithm: f.algorithm.input.value, limit: value(f.limit.input), window_ms: value(f.window_ms.input),
      name: name === '' ? undefined : name,
      overrides: rows.map((r) => ({ key: r.key.input.value, limit: value(r.limit.input), window_ms: value(r.window_ms.input) })),
    };
    try {
      const saved = await call('POST', `/v1/namespaces/${seg(ns)}/rules`, body);
      onChange(kind, saved, rule ? 'Rule saved.' : 'Rule created.');
    } catch (e) {
      const m = /overrides\[(\d+)\]\.(key|limit|window_ms)/.exec(e.message);
      let at = null;
      if (m && rows[+m[1]]) at = rows[+m[1]][m[2]];
      else if (e.code === 'unknown_algorithm' || e.code === 'algorithm_not_on_plan') at = f.algorithm;
      else at = ['window_ms', 'limit', 'name', 'algorithm'].map((k) => (new RegExp(`\\b${k}\\b`).test(e.message) ? f[k] : null)).find(Boolean);
      if (at) showAt(at, e.message);
      say(out, 'error', 'Not saved: ', e.message);
      (at?.input ?? out).focus?.();
    }
  });
  return form;
}

function checkForm(ns) {
  const key = field('Key', { name: 'key', autocomplete: 'off', required: true });
  const cost = field('Cost', { name: 'cost', inputmode: 'numeric', autocomplete: 'off', value: '1' });
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'check-result' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'check-h', novalidate: true },
    h('h3', { id: 'check-h' }, 'Try a check'), h('p', { class: 'muted' }, 'Sends POST /v1/limit with the namespace\'s rule; it counts in usage like any check.'),
    h('div', { class: 'grid' }, key.wrap, cost.wrap), h('button', { type: 'submit' }, 'Check'), out);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    try {
      const r = await call('POST', '/v1/limit', { namespace: ns, key: key.input.value, cost: value(cost.input) });
      fill(out, h('p', { class: `verdict ${r.allowed ? 'ok' : 'no'}`, 'data-allowed': String(r.allowed) }, r.allowed ? '✓ Allowed' : '✗ Denied'),
        h('dl', { class: 'facts' }, h('dt', {}, 'Limit'), h('dd', {}, num(r.limit)), h('dt', {}, 'Remaining'), h('dd', {}, num(r.remaining)),
          h('dt', {}, 'Reset'), h('dd', {}, `in ${ms(r.reset_ms)}`)));
    } catch (e) {
      showAt(/\bcost\b/.test(e.message) ? cost : key, e.message);
      fill(out, h('p', { class: 'verdict error' }, e.message));
    }
  });
  return form;
}

function resetForm(ns) {
  const key = field('Key', { name: 'key', autocomplete: 'off', required: true });
  const out = status({ 'data-testid': 'reset-result' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'reset-h', novalidate: true },
    h('h3', { id: 'reset-h' }, 'Reset a key\'s counter'), key.wrap, h('button', { type: 'submit' }, 'Reset'), out);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await call('POST', '/v1/limit/reset', { namespace: ns, key: key.input.value });
      say(out, 'ok', 'Counter reset: the key starts afresh.');
    } catch (e) {
      say(out, 'error', e.code === 'key_not_found' ? 'Nothing to reset: this key has no unexpired counter here.' : e.message);
    }
  });
  return form;
}

function leasesForm(ns) {
  const key = field('Key', { name: 'key', autocomplete: 'off', required: true });
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'leases-result' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'leases-h', novalidate: true },
    h('h3', { id: 'leases-h' }, 'Active leases of a key'), key.wrap, h('button', { type: 'submit' }, 'Show leases'), out);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const r = await call('GET', `/v1/namespaces/${seg(ns)}/leases?key=${encodeURIComponent(key.input.value)}`);
      const now = Date.now();
      fill(out, h('p', {}, `${num(r.active)} active`, r.limit == null ? ' (no concurrent rule: no limit to resolve)' : ` of ${num(r.limit)} allowed`, ' for ', h('code', {}, r.key), '.'),
        r.leases.length ? table('Leases', ['Lease id', 'Expires'], r.leases.map((l) => h('tr', {}, h('td', {}, h('code', {}, l.lease_id)),
          h('td', {}, `in ${ms(l.expires_in_ms)} · `, when(new Date(now + l.expires_in_ms)))))) : null);
    } catch (e) {
      fill(out, h('p', { class: 'verdict error' }, e.message));
    }
  });
  return form;
}

/** namespace: a namespace's chart, rules with overrides, check, reset and leases. */
export function namespace(main, ns) {
  let chartSlot;
  let rulesSlot;
  let account;
  let rules = { rate: null, concurrent: null };
  const notes = status({ 'data-testid': 'rules-status' });
  function drawRules() {
    const change = (kind, rule, msg) => { rules[kind] = rule; drawRules(); say(notes, 'ok', msg); };
    fill(rulesSlot, ruleForm(ns, 'rate', rules.rate, account, change), ruleForm(ns, 'concurrent', rules.concurrent, account, change));
  }
  return tenantPage(main, `Namespace ${ns}`, async (body, d, first) => {
    account = d.account;
    if (first) {
      chartSlot = h('div');
      rulesSlot = h('div', { class: 'rules' });
      const r = await call('GET', `/v1/namespaces/${seg(ns)}/rules`);
      for (const rule of r.rules) rules[rule.algorithm === 'concurrent_limit' ? 'concurrent' : 'rate'] = rule;
      drawRules();
      fill(body, h('p', {}, h('a', { href: '#/overview' }, '← Overview')), chartSlot, h('h2', {}, 'Rules'), notes, rulesSlot,
        h('h2', {}, 'Try it'), h('div', { class: 'tools' }, checkForm(ns), resetForm(ns), leasesForm(ns)));
    }
    const st = await call('GET', `/v1/namespaces/${seg(ns)}/stats`);
    fill(chartSlot, dayChart(st.days, `${ns}, last 30 days`));
  });
}

/** webhook: the account's webhook, its secret shown once. */
export function webhook(main) {
  let allowed = null;
  return tenantPage(main, 'Webhook', async (body, d) => {
    if (allowed === d.account.plan_limits.webhooks) return;
    allowed = d.account.plan_limits.webhooks;
    const current = h('div', { 'data-testid': 'webhook-current' });
    const out = status({ 'data-testid': 'webhook-status' });
    const once = h('div');
    async function show() {
      try {
        const w = await call('GET', '/v1/webhook');
        fill(current, h('p', {}, 'Events are sent to ', h('code', { 'data-testid': 'webhook-url' }, w.url), '.'),
          h('div', { class: 'actions' },
            allowed ? button('Send a test event', async () => {
              try { const r = await call('POST', '/v1/webhook/test'); say(out, 'ok', 'Test event ', h('code', {}, r.event_id), ' queued.'); } catch (e) { say(out, 'error', e.message); }
            }) : null,
            button('Remove webhook', async () => {
              try { await call('DELETE', '/v1/webhook'); fill(once); say(out, 'ok', 'Webhook removed.'); show(); } catch (e) { say(out, 'error', e.message); }
            }, { class: 'danger' })));
      } catch (e) {
        fill(current, h('p', {}, e.code === 'webhook_not_found' ? 'No webhook is set.' : e.message));
      }
    }
    const url = field('Webhook URL', { name: 'url', type: 'url', autocomplete: 'off', placeholder: 'https://example.com/leash' });
    const form = h('form', { class: 'card', 'aria-labelledby': 'wh-set', novalidate: true }, h('h2', { id: 'wh-set' }, 'Set the webhook'),
      url.wrap, h('button', { type: 'submit' }, 'Save webhook'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearErrors(form);
      try {
        const r = await call('PUT', '/v1/webhook', { url: url.input.value });
        fill(once, copyBox('Signing secret', r.secret, 'Copy it now: Leash will not show this secret again. Deliveries are signed with it (Leash-Signature).', 'webhook-secret'));
        say(out, 'ok', 'Webhook saved.');
        url.input.value = '';
        show();
      } catch (e) {
        showAt(url, e.message);
      }
    });
    fill(body,
      allowed ? null : h('p', { class: 'notice', 'data-testid': 'no-webhooks' }, `Your plan (${d.account.plan}) has no webhooks: Leash sends this account no usage events. An operator can move the account to a plan with webhooks.`),
      h('div', { class: 'card' }, h('h2', {}, 'Current webhook'), current), out, once, allowed ? form : null);
    await show();
  });
}

/** keys: the account's API keys. */
export function keys(main) {
  const list = h('div');
  const out = status({ 'data-testid': 'keys-status' });
  const once = h('div');
  async function reload() {
    const r = await call('GET', '/v1/keys');
    const mine = session.key.slice(0, 12);
    fill(list, table('API keys', ['Name', 'Id', 'Prefix', 'Created', 'Source', 'Action'], r.keys.map((k) => {
      const cell = h('td', {});
      const revoke = button('Revoke', () => {
        fill(cell, button('Confirm revoke', async () => {
          try { await call('DELETE', `/v1/keys/${seg(k.id)}`); say(out, 'ok', 'Key ', h('code', {}, k.id), ' revoked: the API refuses it from now on.'); await reload(); } catch (e) { say(out, 'error', e.message); }
        }, { class: 'danger', 'aria-label': `Confirm revoking key ${k.id}` }), ' ', button('Cancel', () => fill(cell, revoke), { class: 'secondary' }));
        cell.querySelector('button').focus();
      }, { 'aria-label': `Revoke key ${k.id}` });
      if (k.source === 'api') cell.append(revoke); else cell.append(h('span', { class: 'muted' }, 'from the configuration'));
      return h('tr', { 'data-key-id': k.id }, h('td', {}, k.name || h('span', { class: 'muted' }, '(no name)')), h('td', {}, h('code', {}, k.id)),
        h('td', {}, k.prefix ? h('code', {}, `${k.prefix}…`) : '—', k.prefix && k.prefix === mine ? h('span', { class: 'tag' }, ' this session') : null),
        h('td', {}, when(k.created_at)), h('td', {}, k.source), cell);
    }), { 'data-testid': 'keys' }));
  }
  const name = field('Name (optional, up to 64 characters)', { name: 'name', autocomplete: 'off', maxlength: 64 });
  const form = h('form', { class: 'card', 'aria-labelledby': 'key-new', novalidate: true }, h('h2', { id: 'key-new' }, 'Create a key'), name.wrap, h('button', { type: 'submit' }, 'Create key'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    try {
      const r = await call('POST', '/v1/keys', name.input.value ? { name: name.input.value } : {});
      fill(once, copyBox(`New key ${r.id}`, r.key, 'Copy it now: Leash keeps only its SHA-256 and will not show this key again.', 'new-key'));
      name.input.value = '';
      await reload();
    } catch (e) { showAt(name, e.message); }
  });
  let first = true;
  return tenantPage(main, 'API keys', async (body) => {
    if (!first) return;
    first = false;
    fill(body, h('p', { class: 'muted' }, 'Rotate a key: create a new one, switch your services to it, then revoke the old one.'), list, out, once, form);
    await reload();
  });
}
