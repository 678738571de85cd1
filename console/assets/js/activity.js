// The Activity view: the audit log (spec §15.10), newest first: who changed what, from
// where. The tenant sees its own account's (GET /v1/audit); the operator every account's
// or one's (GET /v1/admin/audit?account=). Every value goes in as text.
import { h, fill, field, button, status, say } from './dom.js';
import { call, seg } from './api.js';
import { when } from './fmt.js';
import { page, table } from './page.js';

const PAGE = 50;

const ACTIONS = {
  'account.created': 'Account created',
  'account.plan_changed': 'Plan changed',
  'account.suspended': 'Account suspended',
  'account.resumed': 'Account resumed',
  'account.deleted': 'Account deleted',
  'key.issued': 'Key issued',
  'key.revoked': 'Key revoked',
  'rule.set': 'Rule set',
  'rule.deleted': 'Rule deleted',
  'webhook.set': 'Webhook set',
  'webhook.deleted': 'Webhook removed',
  'counter.reset': 'Counter reset',
};

function actor(a) {
  if (a.type === 'operator') return [h('span', { class: 'tag' }, 'operator'), ' ', a.id];
  return [h('span', { class: 'tag' }, 'account'), ' ', a.id, a.key_id ? [' with key ', h('code', {}, a.key_id)] : null];
}

function details(d) {
  const keys = Object.keys(d || {}).sort();
  if (!keys.length) return h('span', { class: 'muted' }, '—');
  return h('ul', { class: 'details' }, keys.map((k) => h('li', {}, `${k}: `, h('code', {}, d[k]))));
}

function rows(entries, withAccount) {
  return entries.map((e) => h('tr', { 'data-action': e.action, 'data-id': e.id },
    h('td', {}, when(e.time)),
    h('td', { 'data-testid': 'actor' }, actor(e.actor)),
    h('td', {}, ACTIONS[e.action] || e.action, h('br'), h('code', { class: 'muted' }, e.action)),
    withAccount ? h('td', {}, h('a', { href: `#/activity/${seg(e.account)}` }, e.account)) : null,
    h('td', {}, h('code', {}, e.target)),
    h('td', {}, details(e.details)),
    h('td', {}, e.client || '—'),
    h('td', {}, h('code', {}, e.request_id || '—'))));
}

/**
 * activity shows the audit log at path (/v1/audit or /v1/admin/audit), of account when
 * given (operator); with extra, top(what extra() loaded) is drawn above (the banners).
 */
export function activity(main, path, { account = '', operator = false, extra = null, top = null } = {}) {
  const q = (cursor) => {
    const p = new URLSearchParams({ limit: String(PAGE) });
    if (account) p.set('account', account);
    if (cursor) p.set('cursor', cursor);
    return `${path}?${p}`;
  };
  let older = [];
  let next = null;
  let moreSlot;
  let tableSlot;
  const out = status({ 'data-testid': 'activity-status' });
  const head = ['When', 'Who', 'What', ...(operator && !account ? ['Account'] : []), 'Target', 'Details', 'Client address', 'Request id'];
  function draw(first) {
    const all = [...first.entries, ...older];
    fill(tableSlot, all.length
      ? table('Activity', head, rows(all, operator && !account), { 'data-testid': 'activity' })
      : h('p', { class: 'muted', 'data-testid': 'activity-empty' }, 'No changes recorded yet.'));
    const cursor = older.length ? next : first.next_cursor;
    fill(moreSlot, cursor ? button('Show older changes', async () => {
      try {
        const r = await call('GET', q(cursor));
        older = [...older, ...r.entries];
        next = r.next_cursor;
        draw(first);
      } catch (e) { say(out, 'error', e.message); }
    }, { class: 'secondary', 'data-testid': 'older' }) : null);
  }
  const title = operator ? (account ? `Activity of ${account}` : 'Activity') : 'Activity';
  const load = async () => {
    const [log, more] = await Promise.all([call('GET', q('')), extra ? extra() : null]);
    return { log, more };
  };
  return page(main, title, load, async (body, { log: d }, isFirst) => {
    if (isFirst) {
      tableSlot = h('div');
      moreSlot = h('div', { class: 'actions' });
      const intro = operator
        ? 'Every change made by an operator or an account, newest first, kept 90 days.'
        : 'Every change to this account, by its own keys or by an operator, newest first, kept 90 days.';
      let filter = null;
      if (operator) {
        const f = field('Account', { name: 'account', autocomplete: 'off', value: account, placeholder: 'every account' });
        filter = h('form', { class: 'inline', 'aria-label': 'Show one account\'s activity' }, f.wrap, h('button', { type: 'submit' }, 'Show'));
        filter.addEventListener('submit', (ev) => {
          ev.preventDefault();
          const v = f.input.value.trim();
          location.hash = v ? `#/activity/${seg(v)}` : '#/activity';
        });
      }
      fill(body, h('p', { class: 'muted' }, intro), filter, out, tableSlot, moreSlot);
    }
    draw(d);
  }, top ? (d) => top(d.more) : undefined);
}
