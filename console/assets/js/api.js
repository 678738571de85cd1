// The /v1 API, the console's only source of data. The key lives in this tab's
// sessionStorage only and is sent as Authorization: Bearer.

const KEY = 'leash.console.key';
const ROLE = 'leash.console.role';

/** session is the signed-in key and its role (tenant or operator). */
export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  get role() { return sessionStorage.getItem(ROLE); },
  set(key, role) { sessionStorage.setItem(KEY, key); sessionStorage.setItem(ROLE, role); },
  clear() { sessionStorage.removeItem(KEY); sessionStorage.removeItem(ROLE); },
};

/** ApiError is an error answer of the API: its status, stable code and message. */
export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

let onRefused = () => {};
/** whenRefused sets what happens when the signed-in key is refused (401). */
export function whenRefused(fn) { onRefused = fn; }

/** call sends one request; it resolves to the JSON body (null for 204) or throws ApiError. */
export async function call(method, path, body, key = session.key) {
  const init = { method, headers: { Authorization: `Bearer ${key}` }, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'network', 'Leash could not be reached: check that it is running, then try again.');
  }
  if (res.status === 204) return null;
  let data = null;
  try { data = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) {
    const err = new ApiError(res.status, data?.code ?? `http_${res.status}`,
      data?.error ?? `Leash answered HTTP ${res.status}.`, res.headers.get('Retry-After'));
    if (res.status === 401 && key === session.key && key) onRefused(err);
    throw err;
  }
  return data;
}

/** seg percent-encodes one path segment. */
export function seg(v) { return encodeURIComponent(v); }

/** explainSignIn turns a refused sign-in into words. */
export function explainSignIn(e) {
  switch (e.code) {
    case 'unauthorized':
      return 'Leash does not know this key. Check that it was copied whole (no spaces or line breaks) and that it has not been revoked.';
    case 'too_many_auth_failures':
      return `Too many refused keys from this address: Leash will take another try in ${e.retryAfter || 'a few'} seconds.`;
    case 'operator_key_required':
      return 'This key belongs to an account, not an operator.';
    default:
      return e.message;
  }
}
