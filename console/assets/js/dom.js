// DOM helpers. Every piece of text goes in as a text node or an attribute value, never as
// markup: nothing an account writes through the API can run in a viewer's browser.

const SVG = 'http://www.w3.org/2000/svg';

function set(el, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'href') {
      // Links stay inside the console: only fragment links, built by the console itself.
      if (!String(v).startsWith('#/')) throw new Error('console links must start with #/');
      el.setAttribute('href', v);
    } else if (k.startsWith('on') || k === 'src' || k === 'srcdoc' || k === 'style') {
      throw new Error('refused attribute ' + k);
    } else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
}

/** add appends children: nodes as they are, anything else as a text node. */
export function add(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** h builds an HTML element: h('p', {class: 'x'}, 'text', child). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  set(el, props);
  return add(el, ...children);
}

/** s builds an SVG element. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG, tag);
  set(el, props);
  return add(el, ...children);
}

/** clear removes every child of el and appends children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return add(el, ...children);
}

let ids = 0;
/** uid returns a fresh element id with the given stem. */
export function uid(stem) {
  ids += 1;
  return `${stem}-${ids}`;
}

/** field is a labelled input with a message slot under it (aria-describedby). */
export function field(label, props = {}, hint) {
  const id = props.id || uid('f');
  const msg = h('span', { class: 'field-msg', id: id + '-msg', role: 'alert' });
  const input = h(props.tag || 'input', { ...props, tag: null, id, 'aria-describedby': id + '-msg' });
  const wrap = h('div', { class: 'field' },
    h('label', { for: id }, label), input, hint ? h('span', { class: 'hint' }, hint) : null, msg);
  return { wrap, input, msg };
}

/** select is a labelled select of [value, text] options. */
export function select(label, options, value, props = {}) {
  const id = props.id || uid('f');
  const msg = h('span', { class: 'field-msg', id: id + '-msg', role: 'alert' });
  const input = h('select', { ...props, id, 'aria-describedby': id + '-msg' },
    options.map(([v, t]) => h('option', { value: v, selected: v === value }, t)));
  const wrap = h('div', { class: 'field' }, h('label', { for: id }, label), input, msg);
  return { wrap, input, msg };
}

/** button makes a type=button button calling fn. */
export function button(text, fn, props = {}) {
  return h('button', { type: 'button', onclick: fn, ...props }, text);
}

/** status is a polite live region for results. */
export function status(props = {}) {
  return h('p', { class: 'status', role: 'status', 'aria-live': 'polite', ...props });
}

/** say fills a status element with a message of a kind: ok, error or info. */
export function say(el, kind, ...text) {
  el.dataset.kind = kind;
  fill(el, ...text);
}

/** copyBox shows a secret once with a copy button and a warning. */
export function copyBox(label, secret, warning, testid) {
  const id = uid('secret');
  const out = h('output', { id, class: 'secret', 'data-testid': testid }, secret);
  const note = status();
  const copy = button('Copy', async () => {
    try {
      await navigator.clipboard.writeText(secret);
      say(note, 'ok', 'Copied to the clipboard.');
    } catch {
      const r = document.createRange();
      r.selectNodeContents(out);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(r);
      say(note, 'info', 'Selected: press Ctrl+C (or ⌘C) to copy.');
    }
  });
  return h('div', { class: 'once', role: 'group', 'aria-labelledby': id + '-l' },
    h('p', { id: id + '-l', class: 'once-label' }, label),
    h('div', { class: 'secret-row' }, out, copy),
    h('p', { class: 'warn' }, '⚠ ', warning), note);
}
