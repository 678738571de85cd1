// The console's entry: sign-in, navigation and the router (#/ paths).
import { h, fill, field, status, say } from './dom.js';
import { call, session, explainSignIn, whenRefused } from './api.js';
import * as tenant from './tenant.js';
import * as operator from './operator.js';
import { activity } from './activity.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
let page = null; // the current page's { stop() }
let notice = ''; // a message for the sign-in page

const TENANT = [['#/overview', 'Overview'], ['#/webhook', 'Webhook'], ['#/keys', 'API keys'], ['#/activity', 'Activity']];
const OPERATOR = [['#/admin', 'Accounts'], ['#/activity', 'Activity']];

function signOut(why) {
  session.clear();
  notice = why || '';
  if (location.hash === '#/signin') route(); else location.hash = '#/signin';
}

whenRefused(() => signOut('Leash refused your key (it may have been revoked). Sign in again.'));

function drawNav(current) {
  const links = session.role === 'operator' ? OPERATOR : session.role === 'tenant' ? TENANT : [];
  fill(nav, links.map(([href, text]) => h('a', { href, 'aria-current': current.startsWith(href) ? 'page' : null }, text)),
    session.key ? h('button', { type: 'button', class: 'link', onclick: () => signOut('Signed out: the key was forgotten.') }, 'Sign out') : null,
    h('span', { class: 'role', 'data-testid': 'role' }, session.role ? `${session.role} view` : ''));
}

function signIn() {
  document.title = 'Sign in · Leash console';
  const key = field('API key', { type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, name: 'key' },
    'An account key opens the tenant view, an operator key the operator view.');
  const out = status({ 'data-testid': 'signin-msg' });
  if (notice) say(out, 'info', notice);
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-h', novalidate: true },
    h('h1', { id: 'signin-h' }, 'Sign in to the Leash console'), key.wrap,
    h('button', { type: 'submit' }, 'Sign in'), out,
    h('p', { class: 'muted' }, 'The key stays in this browser tab only (session storage) and is sent to this Leash as a bearer token; signing out or closing the tab forgets it.'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const k = key.input.value.trim();
    if (!k) { say(out, 'error', 'Enter a key.'); key.input.focus(); return; }
    say(out, 'info', 'Checking the key…');
    try {
      await call('GET', '/v1/account', undefined, k);
      session.set(k, 'tenant');
      notice = '';
      location.hash = '#/overview';
    } catch (e) {
      if (e.code !== 'account_key_required') { say(out, 'error', explainSignIn(e)); return; }
      try {
        await call('GET', '/v1/admin/accounts?limit=1', undefined, k);
        session.set(k, 'operator');
        notice = '';
        location.hash = '#/admin';
      } catch (e2) {
        say(out, 'error', explainSignIn(e2));
      }
    }
  });
  fill(main, form);
  key.input.focus();
  return null;
}

async function route() {
  if (page) { page.stop(); page = null; }
  const path = location.hash.replace(/^#\/?/, '');
  drawNav('#/' + path);
  if (!session.key) {
    if (path !== 'signin') { location.hash = '#/signin'; return; }
    page = signIn();
    return;
  }
  const parts = path.split('/');
  const role = session.role;
  if (role === 'operator') {
    if (parts[0] === 'admin' && parts[1]) page = operator.account(main, decodeURIComponent(parts[1]));
    else if (parts[0] === 'admin') page = operator.accounts(main);
    else if (parts[0] === 'activity') page = activity(main, '/v1/admin/audit', { operator: true, account: parts[1] ? decodeURIComponent(parts[1]) : '' });
    else { location.hash = '#/admin'; return; }
  } else {
    if (parts[0] === 'ns' && parts[1]) page = tenant.namespace(main, decodeURIComponent(parts[1]));
    else if (parts[0] === 'webhook') page = tenant.webhook(main);
    else if (parts[0] === 'keys') page = tenant.keys(main);
    else if (parts[0] === 'activity') page = tenant.activity(main);
    else if (parts[0] === 'overview') page = tenant.overview(main);
    else { location.hash = '#/overview'; return; }
  }
  main.focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
route();
