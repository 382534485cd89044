// Server-sent events over fetch(): EventSource cannot send an Authorization header, so the stream is
// read from fetch()'s body and parsed here (the WHATWG event-stream rules), and a stream that breaks
// is opened again with Last-Event-ID set to the last event's id, so nothing is missed or repeated.

// The events of a byte stream (ReadableStream), as {event, data, id}; `data` is parsed JSON when it is JSON.
export async function* parseEvents(body, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  let data = [];
  let event = '';
  let id;
  const onAbort = () => reader.cancel().catch(() => undefined);
  if (signal) signal.addEventListener('abort', onAbort, {once: true});
  try {
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, {stream: true});
      let match;
      while ((match = /\r\n|\n|\r/.exec(buffer)) !== null) {
        if (match[0] === '\r' && match.index === buffer.length - 1) break;  // a \r\n may be split: wait
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === '') {
          if (data.length) {
            const text = data.join('\n');
            let parsed = text;
            try { parsed = JSON.parse(text); } catch { /* a plain string, such as [DONE] */ }
            yield {event: event || 'message', data: parsed, id};
          }
          data = [];
          event = '';
          continue;
        }
        if (line.startsWith(':')) continue;   // a comment: the keep-alive
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') data.push(value);
        else if (field === 'event') event = value;
        else if (field === 'id' && !value.includes('\0')) id = value;
      }
    }
  } finally {
    if (signal) signal.removeEventListener('abort', onAbort);
  }
}

const RETRY_STATUSES = new Set([429, 502, 503, 504]);
const sleep = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  if (signal) signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, {once: true});
});

// One resumable stream of a shared SSE path. onEvent(ev) answers true when the stream is over (its
// end or error event); onState(state, detail) hears 'connecting', 'live', 'reconnecting', 'ended'.
export class ResumableStream {
  constructor(api, path, {onEvent, onState = () => undefined}) {
    this.api = api;
    this.path = path;
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastEventId = null;
    this.controller = new AbortController();
    this.connections = 0;
    this.done = this.run();
  }

  stop() {
    this.controller.abort();
  }

  get stopped() {
    return this.controller.signal.aborted;
  }

  async run() {
    let delay = 500;
    const signal = this.controller.signal;
    while (!this.stopped) {
      this.onState(this.connections ? 'reconnecting' : 'connecting', this.lastEventId || '');
      let response;
      try {
        const headers = {Accept: 'text/event-stream'};
        if (this.lastEventId) headers['Last-Event-ID'] = this.lastEventId;
        response = await this.api.raw(this.path, {headers, signal});
      } catch (err) {
        if (this.stopped) return;
        this.onState('reconnecting', `network: ${err.message}`);
        await sleep(delay, signal);
        delay = Math.min(delay * 2, 10000);
        continue;
      }
      this.connections += 1;
      if (!response.ok) {
        let body = null;
        try { body = await response.json(); } catch { /* not JSON */ }
        const err = body && body.error ? body.error : {type: `http_${response.status}`, message: ''};
        if (RETRY_STATUSES.has(response.status)) {
          this.onState('reconnecting', `${response.status} ${err.type}: ${err.message}`);
          await sleep(delay, signal);
          delay = Math.min(delay * 2, 10000);
          continue;
        }
        this.onState('ended', `${response.status} ${err.type}: ${err.message}`);
        return;
      }
      this.onState('live', '');
      delay = 500;
      try {
        for await (const ev of parseEvents(response.body, signal)) {
          if (ev.id !== undefined) this.lastEventId = ev.id;
          if (this.onEvent(ev)) {
            const err = ev.event === 'error' && ev.data && ev.data.error;
            this.onState('ended', err ? `${err.type}: ${err.message}` : ev.event);
            this.controller.abort();
            return;
          }
        }
      } catch (err) {
        if (this.stopped) return;
        this.onState('reconnecting', `stream broke: ${err.message}`);
      }
      if (this.stopped) return;
      await sleep(delay, signal);   // the server closed the stream (it is shutting down?): open it again
    }
  }
}
