// The API client: the bearer token (kept in this tab's sessionStorage only), JSON requests, and the
// mutation envelope (schema, lineage, a fresh operation key, the participant's next sequence).
import {errorText} from './dom.js';

export const BASE = '/aotx/v1/shared';
const TOKEN_KEY = 'aotx.token';

export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function storeToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function operationKey() {
  const bytes = new Uint8Array(16);
  do crypto.getRandomValues(bytes); while (bytes.every((b) => b === 0));   // the key must be nonzero
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

// Exact bytes of a base64 string; text through a streaming UTF-8 decoder (see Utf8Text).
export function base64Bytes(b64) {
  const bin = atob(b64 || '');
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// Bytes arriving in pieces (a character may be split between two): decoded as they come.
export class Utf8Text {
  constructor() { this.decoder = new TextDecoder('utf-8'); this.text = ''; this.bytes = 0; }
  push(bytes) { this.bytes += bytes.length; this.text += this.decoder.decode(bytes, {stream: true}); return this.text; }
}

export class ApiError extends Error {
  constructor(status, body) { super(errorText(status, body)); this.status = status; this.body = body; }
}

export class Api {
  constructor(token) {
    this.token = token;
    this.me = null;            // GET /participant
    this.capabilities = null;  // GET /capabilities
  }

  headers(extra = {}) {
    return {Authorization: `Bearer ${this.token}`, ...extra};
  }

  // fetch() of a shared path with the token; the raw Response (for streams).
  raw(path, init = {}) {
    return fetch(BASE + path, {...init, headers: this.headers(init.headers || {}), cache: 'no-store'});
  }

  // {status, body} of a JSON request; a network failure throws.
  async request(method, path, body) {
    const init = {method};
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = {'Content-Type': 'application/json'};
    }
    const response = await this.raw(path, init);
    let parsed = null;
    try {
      parsed = await response.json();
    } catch (err) {
      parsed = {error: {type: 'not_json', message: `the answer was not JSON (${err.message})`}};
    }
    return {status: response.status, body: parsed};
  }

  // The body of a GET that must answer 200; else an ApiError.
  async get(path) {
    const {status, body} = await this.request('GET', path);
    if (status !== 200) throw new ApiError(status, body);
    return body;
  }

  async signIn() {
    this.me = await this.get('/participant');
    this.capabilities = await this.get('/capabilities');
    return this.me;
  }

  async syncParticipant() {
    this.me = await this.get('/participant');
    return this.me;
  }

  schema() {
    return (this.capabilities && this.capabilities.schemas && this.capabilities.schemas.mutation)
      || 'aotx.shared.mutation.v1';
  }

  // A new mutation: the envelope with the participant's next sequence (read again first: another
  // tab of the same participant may have used one). Answers {status, body, path, envelope}; an
  // envelope may be sent again as it is (`resend`): the exact retry of a held (429) mutation.
  async mutate(path, fields = {}) {
    const me = await this.syncParticipant();
    const envelope = {schema: this.schema(), lineage: me.lineage, operation_key: operationKey(),
                      sequence: String(me.next_sequence || '1'), ...fields};
    return this.resend(path, envelope);
  }

  async resend(path, envelope) {
    const {status, body} = await this.request('POST', path, envelope);
    return {status, body, path, envelope};
  }

  // Every page of a listing (cursor, next_cursor), as one array of body[key].
  async list(path, key) {
    const out = [];
    let cursor = '0';
    for (let pages = 0; pages < 100 && cursor !== null && cursor !== undefined; pages++) {
      const sep = path.includes('?') ? '&' : '?';
      const body = await this.get(`${path}${sep}cursor=${encodeURIComponent(cursor)}&limit=100`);
      out.push(...(Array.isArray(body[key]) ? body[key] : []));
      cursor = body.next_cursor;
    }
    return out;
  }

  // The whole saved result of an input from `offset` (pages by next_offset), as bytes.
  async resultBytes(op, offset = 0) {
    const chunks = [];
    let at = offset;
    let last = null;
    for (let pages = 0; pages < 1000; pages++) {
      last = await this.get(`/operations/${encodeURIComponent(op)}/result?offset=${at}`);
      const bytes = base64Bytes(last.bytes);
      chunks.push(bytes);
      at = Number(last.next_offset);
      if (!bytes.length || at >= Number(last.saved_bytes)) break;
    }
    return {chunks, last, offset: at};
  }
}
