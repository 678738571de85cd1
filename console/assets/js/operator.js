// The operator's views: every account with its plan and month usage, and one account's
// plan, suspension and keys.
import { h, fill, field, button, status, say, copyBox } from './dom.js';
import { call, seg } from './api.js';
import { num, pct, when } from './fmt.js';
import { banner, quotaState, suspendedBanner } from './banner.js';
import { page, table } from './page.js';

const BUILTIN_PLANS = ['free', 'pro', 'scale'];
const seenPlans = new Set(BUILTIN_PLANS);

function planList(id) {
  return h('datalist', { id }, [...seenPlans].sort().map((p) => h('option', { value: p })));
}

async function allAccounts() {
  const out = [];
  let cursor = null;
  for (let i = 0; i < 20; i++) {
    const q = cursor ? `?limit=1000&cursor=${encodeURIComponent(cursor)}` : '?limit=1000';
    const r = await call('GET', `/v1/admin/accounts${q}`);
    out.push(...r.accounts);
    cursor = r.next_cursor;
    if (!cursor) break;
  }
  return out;
}

// inTurn maps items through fn, at most width calls at a time, keeping the order.
async function inTurn(items, width, fn) {
  const out = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  }
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

const COLUMNS = [
  ['id', 'Account', (a) => a.id],
  ['plan', 'Plan', (a) => a.plan],
  ['status', 'Status', (a) => (a.suspended ? 1 : 0)],
  ['keys', 'Keys', (a) => a.keys],
  ['usage', 'Month usage (% of quota)', (a) => a.share],
  ['total', 'Requests this month', (a) => a.month?.total ?? -1],
];

/** accounts: the table of accounts, sortable, and the form creating one. */
export function accounts(main) {
  let sort = { col: 'id', dir: 1 };
  let rows = [];
  let tableSlot;
  function draw() {
    const col = COLUMNS.find((c) => c[0] === sort.col);
    const sorted = [...rows].sort((a, b) => {
      const x = col[2](a);
      const y = col[2](b);
      return (x < y ? -1 : x > y ? 1 : 0) * sort.dir || (a.id < b.id ? -1 : 1);
    });
    const head = COLUMNS.map(([key, label]) => h('th', { scope: 'col', 'aria-sort': sort.col === key ? (sort.dir > 0 ? 'ascending' : 'descending') : 'none' },
      h('button', { type: 'button', class: 'sort', 'data-sort': key, onclick: () => {
        sort = { col: key, dir: sort.col === key ? -sort.dir : 1 };
        draw();
        tableSlot.querySelector(`[data-sort="${key}"]`).focus();
      } }, label, h('span', { 'aria-hidden': 'true' }, sort.col === key ? (sort.dir > 0 ? ' ▲' : ' ▼') : ''))));
    fill(tableSlot, table('Accounts', head, sorted.map((a) => {
      const bar = h('span', { class: 'bar-fill' });
      bar.style.width = `${Math.min(100, a.share)}%`;
      const state = a.month ? quotaState(a.month) : 'normal';
      return h('tr', { 'data-account': a.id },
        h('th', { scope: 'row' }, h('a', { href: `#/admin/${seg(a.id)}` }, a.id)),
        h('td', {}, a.plan), h('td', {}, a.suspended ? h('span', { class: 'tag tag-bad' }, 'Suspended') : 'Active'),
        h('td', { class: 'num' }, num(a.keys)),
        h('td', { class: `usage usage-${state}` }, a.month ? [h('span', { class: 'bar bar-small', 'aria-hidden': 'true' }, bar), ' ', pct(a.month.total, a.month.quota)] : '—'),
        h('td', { class: 'num' }, a.month ? `${num(a.month.total)} of ${num(a.month.quota)}` : '—'));
    }), { 'data-testid': 'accounts' }));
  }
  const id = field('Account id', { name: 'id', autocomplete: 'off', pattern: '[a-z0-9][a-z0-9_-]{0,63}' }, 'Lower-case letters, digits, _ and -.');
  const plan = field('Plan', { name: 'plan', autocomplete: 'off', list: 'plans-new' });
  const out = status({ 'data-testid': 'create-status' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'acct-new', novalidate: true }, h('h2', { id: 'acct-new' }, 'Create an account'),
    h('div', { class: 'grid' }, id.wrap, plan.wrap), planList('plans-new'), h('button', { type: 'submit' }, 'Create account'), out);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const f of [id, plan]) { f.msg.textContent = ''; f.input.removeAttribute('aria-invalid'); }
    try {
      const a = await call('POST', '/v1/admin/accounts', { id: id.input.value.trim(), plan: plan.input.value.trim() });
      location.hash = `#/admin/${seg(a.id)}`;
    } catch (e) {
      const at = /plan/.test(e.code) || /\bplan\b/.test(e.message) ? plan : id;
      at.msg.textContent = e.message;
      at.input.setAttribute('aria-invalid', 'true');
      say(out, 'error', 'Not created: ', e.message);
    }
  });
  return page(main, 'Accounts', async () => {
    const list = await allAccounts();
    const usage = await inTurn(list, 6, (a) => call('GET', `/v1/admin/accounts/${seg(a.id)}/usage`).catch(() => null));
    return list.map((a, i) => {
      seenPlans.add(a.plan);
      const month = usage[i]?.month ?? null;
      const share = month ? (month.quota > 0 ? (month.total * 100) / month.quota : (month.total > 0 ? 100 : 0)) : -1;
      return { ...a, month, share };
    });
  }, async (body, data, first) => {
    rows = data;
    if (first) {
      tableSlot = h('div');
      fill(body, h('p', { class: 'muted' }, 'Every account, configured or created through the API, with this UTC month\'s usage. Sort by a column with its header.'), tableSlot, form);
    }
    draw();
  });
}

/** account: one account's usage, plan, suspension and keys. */
export function account(main, id) {
  const base = `/v1/admin/accounts/${seg(id)}`;
  const out = status({ 'data-testid': 'account-status' });
  const once = h('div');
  let controls;
  let keysSlot;
  let view;
  async function reloadKeys(readOnly) {
    const r = await call('GET', `${base}/keys`);
    fill(keysSlot, table(`Keys of ${id}`, ['Name', 'Id', 'Prefix', 'Created', 'Source', 'Action'], r.keys.map((k) => {
      const cell = h('td', {});
      const revoke = button('Revoke', () => {
        fill(cell, button('Confirm revoke', async () => {
          try { await call('DELETE', `${base}/keys/${seg(k.id)}`); say(out, 'ok', 'Key ', h('code', {}, k.id), ' revoked.'); await reloadKeys(readOnly); } catch (e) { say(out, 'error', e.message); }
        }, { class: 'danger', 'aria-label': `Confirm revoking key ${k.id}` }), ' ', button('Cancel', () => fill(cell, revoke), { class: 'secondary' }));
        cell.querySelector('button').focus();
      }, { 'aria-label': `Revoke key ${k.id}` });
      if (k.source === 'api') cell.append(revoke); else cell.append(h('span', { class: 'muted' }, 'from the configuration'));
      return h('tr', { 'data-key-id': k.id }, h('td', {}, k.name || h('span', { class: 'muted' }, '(no name)')), h('td', {}, h('code', {}, k.id)),
        h('td', {}, k.prefix ? h('code', {}, `${k.prefix}…`) : '—'), h('td', {}, when(k.created_at)), h('td', {}, k.source), cell);
    }), { 'data-testid': 'account-keys' }));
  }
  function drawControls(a) {
    const readOnly = a.source === 'config';
    const plan = field('Plan', { name: 'plan', autocomplete: 'off', list: 'plans-edit', value: a.plan, disabled: readOnly });
    const planForm = h('form', { class: 'card', 'aria-labelledby': 'plan-h', novalidate: true }, h('h2', { id: 'plan-h' }, 'Plan'), plan.wrap, planList('plans-edit'),
      h('button', { type: 'submit', disabled: readOnly }, 'Change plan'));
    planForm.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      plan.msg.textContent = '';
      plan.input.removeAttribute('aria-invalid');
      try {
        const r = await call('PATCH', base, { plan: plan.input.value.trim() });
        say(out, 'ok', `Plan changed to ${r.plan}.`);
        view.refresh();
      } catch (e) {
        plan.msg.textContent = e.message;
        plan.input.setAttribute('aria-invalid', 'true');
      }
    });
    const suspend = h('div', { class: 'card' }, h('h2', {}, 'Status'),
      h('p', { 'data-testid': 'suspended' }, a.suspended ? 'Suspended: its keys authenticate, but every decision, lease and rule write is refused (403 account_suspended).' : 'Active.'),
      button(a.suspended ? 'Resume account' : 'Suspend account', async () => {
        try { const r = await call('PATCH', base, { suspended: !a.suspended }); say(out, 'ok', r.suspended ? 'Account suspended.' : 'Account resumed.'); view.refresh(); } catch (e) { say(out, 'error', e.message); }
      }, { class: a.suspended ? '' : 'danger', disabled: readOnly }));
    const name = field('Key name (optional)', { name: 'key-name', autocomplete: 'off', maxlength: 64, disabled: readOnly });
    const issue = h('form', { class: 'card', 'aria-labelledby': 'issue-h', novalidate: true }, h('h2', { id: 'issue-h' }, 'Keys'), keysSlot,
      name.wrap, h('button', { type: 'submit', disabled: readOnly }, 'Issue a key'));
    issue.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      name.msg.textContent = '';
      try {
        const r = await call('POST', `${base}/keys`, name.input.value ? { name: name.input.value } : {});
        fill(once, copyBox(`New key ${r.id} for ${id}`, r.key, 'Copy it now and hand it to the account: Leash keeps only its SHA-256 and will not show it again.', 'new-key'));
        name.input.value = '';
        await reloadKeys(readOnly);
      } catch (e) { name.msg.textContent = e.message; }
    });
    fill(controls, readOnly ? h('p', { class: 'notice' }, 'This account comes from the configuration: it is read-only here.') : null, planForm, suspend, once, issue);
    return reloadKeys(readOnly);
  }
  let last = '';
  view = page(main, `Account ${id}`, async () => {
    const [a, usage] = await Promise.all([call('GET', base), call('GET', `${base}/usage`)]);
    seenPlans.add(a.plan);
    return { a, usage };
  }, async (body, d, first) => {
    if (first) {
      controls = h('div', { class: 'controls' });
      keysSlot = h('div');
      fill(body, h('p', {}, h('a', { href: '#/admin' }, '← Accounts'), ' · ', h('a', { href: `#/activity/${seg(id)}` }, 'Activity of this account')),
        h('dl', { class: 'facts' }, h('dt', {}, 'Source'), h('dd', {}, d.a.source), h('dt', {}, 'Created'), h('dd', {}, when(d.a.created_at))), out, controls);
    }
    const sig = `${d.a.plan}/${d.a.suspended}/${d.a.source}`;
    if (sig !== last) { last = sig; await drawControls(d.a); }
  }, (d) => [suspendedBanner(d.a.suspended, 'operator'), banner(d.usage.month, d.a.plan)]);
  return view;
}
