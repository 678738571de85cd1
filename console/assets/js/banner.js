// The quota banner: the month's total against the plan's quota, in words and colour.
import { h } from './dom.js';
import { num, pct, when, monthEnd } from './fmt.js';

/** quotaState names the banner's state for a month record (spec §7.2). */
export function quotaState(m) {
  if (m.hard_cap != null && m.total >= m.hard_cap) return 'capped';
  if (m.over_quota) return 'over';
  if (m.quota > 0 ? m.total * 10 >= m.quota * 8 : m.total > 0) return 'near';
  return 'normal';
}

const TITLES = {
  normal: ['✓', 'Within the monthly quota'],
  near: ['!', 'Near the monthly quota (80 % or more used)'],
  over: ['▲', 'Over the monthly quota: requests are still served'],
  capped: ['■', 'Hard cap reached: checks and leases are refused'],
};

/** banner renders the month record m of an account on plan. */
export function banner(m, plan) {
  const state = quotaState(m);
  const [icon, title] = TITLES[state];
  const share = m.quota > 0 ? (m.total * 100) / m.quota : (m.total > 0 ? 100 : 0);
  const fill = h('span', { class: 'bar-fill' });
  fill.style.width = `${Math.min(100, share)}%`;
  const cap = m.hard_cap == null
    ? h('p', { class: 'cap', 'data-testid': 'no-cap' }, 'No hard cap configured: usage never refuses requests on this plan.')
    : state === 'capped'
      ? h('p', { class: 'cap', 'data-testid': 'resume' }, `Hard cap of ${num(m.hard_cap)} reached. Requests resume at `, when(monthEnd(m.month)), '.')
      : h('p', { class: 'cap' }, `Hard cap: ${num(m.hard_cap)} requests this month; at the cap, checks and leases are refused until the month ends.`);
  return h('section', { class: `banner banner-${state}`, id: 'quota-banner', 'data-state': state, 'aria-label': 'Monthly quota' },
    h('p', { class: 'banner-title', role: 'status' }, h('span', { class: 'banner-icon', 'aria-hidden': 'true' }, icon), ' ', title),
    h('div', { class: 'bar', role: 'progressbar', 'aria-label': 'Month usage against the quota', 'aria-valuemin': 0,
      'aria-valuemax': 100, 'aria-valuenow': Math.min(100, Math.round(share)), 'aria-valuetext': pct(m.total, m.quota) }, fill),
    h('p', {}, h('strong', { 'data-testid': 'usage-pct' }, pct(m.total, m.quota)), ` of the quota: ${num(m.total)} of ${num(m.quota)} requests in ${m.month} (UTC) on plan `,
      h('strong', { 'data-testid': 'plan' }, plan), '.'),
    cap);
}

/**
 * suspendedBanner says, above the quota banner, that the account is suspended (spec §15.6),
 * or is null for an active account. who is 'tenant' (the account's own view) or 'operator'.
 */
export function suspendedBanner(suspended, who) {
  if (!suspended) return null;
  const what = who === 'operator'
    ? 'Its checks, leases, rule and webhook changes and the keys it would issue itself are refused until it is resumed here.'
    : 'An operator suspended this account: checks, leases, rule and webhook changes and new keys are refused (403 account_suspended) until it is resumed. Reading and revoking keys still work.';
  return h('section', { class: 'banner banner-suspended', id: 'suspended-banner', 'data-testid': 'suspended-banner', 'aria-label': 'Account suspended' },
    h('p', { class: 'banner-title', role: 'alert' }, h('span', { class: 'banner-icon', 'aria-hidden': 'true' }, '‖'), ' ', 'Account suspended'),
    h('p', {}, what));
}
