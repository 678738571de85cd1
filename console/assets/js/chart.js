// Charts drawn as SVG: days of allowed and blocked requests as stacked bars.
import { h, s } from './dom.js';
import { num } from './fmt.js';

function bars(days, w, hgt, gap) {
  const max = Math.max(1, ...days.map((d) => d.total));
  const bw = w / days.length;
  const out = [];
  days.forEach((d, i) => {
    const blocked = Math.min(d.blocked, d.total);
    const allowed = d.total - blocked;
    const x = i * bw + gap / 2;
    const ha = (allowed / max) * hgt;
    const hb = (blocked / max) * hgt;
    const g = s('g', {}, s('title', {}, `${d.day}: ${num(allowed)} allowed, ${num(blocked)} blocked`));
    if (ha > 0) g.append(s('rect', { class: 'allowed', x, y: hgt - ha, width: Math.max(1, bw - gap), height: ha }));
    if (hb > 0) g.append(s('rect', { class: 'blocked', x, y: hgt - ha - hb, width: Math.max(1, bw - gap), height: hb }));
    out.push(g);
  });
  return { max, nodes: out };
}

function sums(days) {
  let total = 0;
  let blocked = 0;
  for (const d of days) { total += d.total; blocked += d.blocked; }
  return { total, blocked, allowed: total - blocked };
}

/** dayChart is a 30-day chart of allowed and blocked requests with a legend. */
export function dayChart(days, caption) {
  const W = 600;
  const H = 160;
  const { max, nodes } = bars(days, W, H, 3);
  const t = sums(days);
  const label = `${caption}: ${num(t.allowed)} allowed and ${num(t.blocked)} blocked over ${days.length} days`;
  const first = days[0]?.day ?? '';
  const last = days[days.length - 1]?.day ?? '';
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H + 1}`, role: 'img', 'aria-label': label, preserveAspectRatio: 'none' },
    s('line', { class: 'axis', x1: 0, y1: H + 0.5, x2: W, y2: H + 0.5 }),
    nodes);
  return h('figure', { class: 'chart-box' },
    h('figcaption', {}, caption, h('span', { class: 'muted' }, ` · peak ${num(max)} a day (UTC days)`)),
    svg,
    h('p', { class: 'ticks', 'aria-hidden': 'true' }, h('span', {}, first), h('span', {}, last)),
    h('p', { class: 'legend' },
      h('span', { class: 'key key-allowed', 'aria-hidden': 'true' }), `Allowed ${num(t.allowed)}`, ' ',
      h('span', { class: 'key key-blocked', 'aria-hidden': 'true' }), `Blocked ${num(t.blocked)}`));
}

/** spark is a small chart of the same days, for a table cell. */
export function spark(days, name) {
  const W = 120;
  const H = 28;
  const { nodes } = bars(days, W, H, 1);
  const t = sums(days);
  return s('svg', { class: 'spark', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
    'aria-label': `${name}: ${num(t.allowed)} allowed, ${num(t.blocked)} blocked in ${days.length} days` }, nodes);
}
