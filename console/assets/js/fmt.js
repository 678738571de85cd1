// Formatting: numbers and dates, dates always in UTC and in the viewer's local time.
import { h } from './dom.js';

/** num formats an integer with thousands separators. */
export function num(x) {
  return Number(x).toLocaleString('en-US');
}

/** pct formats a share as a percentage. */
export function pct(part, whole) {
  if (whole <= 0) return part > 0 ? 'over 100 %' : '0 %';
  const p = (part * 100) / whole;
  return `${p < 10 && p > 0 ? p.toFixed(1) : Math.round(p)} %`;
}

function utc(d) {
  return d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

function local(d) {
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** when is a <time> showing an instant in UTC and in local time. */
export function when(value) {
  if (value == null) return h('span', { class: 'muted' }, '—');
  const d = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(d.getTime())) return h('span', {}, String(value));
  return h('time', { datetime: d.toISOString() }, utc(d), h('span', { class: 'local' }, ` (local: ${local(d)})`));
}

/** monthEnd is the first instant of the UTC month after "YYYY-MM". */
export function monthEnd(month) {
  const [y, m] = month.split('-').map(Number);
  return new Date(Date.UTC(y, m, 1));
}

/** ms formats a duration in milliseconds. */
export function ms(v) {
  if (v < 1000) return `${v} ms`;
  if (v < 120000) return `${(v / 1000).toFixed(1)} s`;
  return `${Math.round(v / 60000)} min`;
}
