// A page: a heading, an error line, a body its view fills, refreshed at most every 5 s.
import { h, fill, status, say } from './dom.js';
import { when } from './fmt.js';

/** REFRESH_MS is the shortest time between two refreshes of a page. */
export const REFRESH_MS = 5000;

/**
 * page shows title and calls render(body, data, first) with what load() returned, first
 * at once, then again REFRESH_MS after each refresh ends. top, if given, is filled with
 * top(data) above the heading (the banners: a node or a list). It returns { stop, refresh }.
 */
export function page(main, title, load, render, top) {
  document.title = `${title} · Leash console`;
  const slot = h('div', { class: 'top-slot' });
  const err = status({ class: 'status page-error', 'data-testid': 'page-error' });
  const body = h('div', { class: 'page' });
  const updated = h('p', { class: 'muted updated' });
  const again = h('button', { type: 'button', class: 'link', 'data-testid': 'refresh', onclick: () => refresh() }, 'Refresh now');
  fill(main, slot, h('div', { class: 'page-head' }, h('h1', {}, title)), err, body, h('footer', { class: 'page-foot' }, updated, again));
  let stopped = false;
  let timer = null;
  let first = true;
  let running = null;
  async function tick() {
    try {
      const d = await load();
      if (stopped) return;
      if (top) fill(slot, top(d));
      await render(body, d, first);
      first = false;
      if (stopped) return;
      err.removeAttribute('data-kind');
      fill(err);
      fill(updated, 'Updated ', when(new Date()), ` · refreshes every ${REFRESH_MS / 1000} s`);
    } catch (e) {
      if (!stopped) say(err, 'error', e.message);
    }
  }
  async function refresh() {
    if (running) return running;
    clearTimeout(timer);
    running = tick().finally(() => {
      running = null;
      if (!stopped) timer = setTimeout(refresh, REFRESH_MS);
    });
    return running;
  }
  refresh();
  return { stop() { stopped = true; clearTimeout(timer); }, refresh };
}

/** table is a table in a scrolling wrapper; head is a list of header cells or texts. */
export function table(caption, head, rows, props = {}) {
  return h('div', { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
    h('table', props, h('caption', { class: 'sr-only' }, caption),
      h('thead', {}, h('tr', {}, head.map((c) => (c instanceof Node ? c : h('th', { scope: 'col' }, c))))),
      h('tbody', {}, rows)));
}
