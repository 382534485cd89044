// One open conversation: every member's inputs as they are saved (the conversation's SSE stream),
// each input's answer as it is generated (its operation's SSE stream, or its saved result once it is
// over), the receipt's states (saved admission, saved terminal), posting an input (a 429 hold keeps
// it with its reason and a button to send it again, exactly), and cancelling one's own. At most two
// answer streams are open at once (live.js): the other unfinished inputs wait "queued for live view",
// their receipts polled, and show their saved result once they end.
import {base64Bytes, Utf8Text} from './api.js';
import {byId, clear, el, errorText, idLabel, showStatus} from './dom.js';
import {LiveStreams, POLL_MS} from './live.js';
import {ResumableStream} from './sse.js';

const TERMINAL = new Set(['completed', 'cancelled', 'interrupted', 'failed', 'deadline_exceeded']);
const enc = encodeURIComponent;

export class ConversationView {
  constructor(api, {onLeave, onInputDone, onEnded} = {}) {
    this.api = api;
    this.onEnded = onEnded || (() => undefined);   // the stream ended (rights gone?): what is readable may have changed
    this.onLeave = onLeave || (() => undefined);
    this.onInputDone = onInputDone || (() => undefined);   // an input ended: its memory may be listed now
    this.con = null;
    this.stream = null;
    this.inputs = new Map();   // operation -> {node, answer, stream, ...}
    this.pollTimer = null;     // the next reading of the queued inputs' receipts
    this.live = new LiveStreams({onChange: (live, queued) => {
      const node = byId('conversation');
      node.dataset.liveStreams = String(live);
      node.dataset.queuedStreams = String(queued);
    }});
    byId('compose').addEventListener('submit', (ev) => { ev.preventDefault(); this.post(); });
    byId('close-conversation').addEventListener('click', () => this.close());
  }

  me() {
    return this.api.me && this.api.me.participant;
  }

  model() {
    const models = (this.api.capabilities && this.api.capabilities.models) || [];
    return models.length ? models[0].id : null;
  }

  close() {
    if (this.stream) this.stream.stop();
    for (const item of this.inputs.values()) if (item.stream) item.stream.stop();
    clearTimeout(this.pollTimer);
    this.pollTimer = null;
    this.stream = null;
    this.inputs.clear();
    this.live.clear();
    this.con = null;
    byId('conversation').hidden = true;
    this.onLeave();
  }

  open(con) {
    if (this.con) this.close();
    this.con = con;
    byId('conversation').hidden = false;
    const title = byId('conversation-id');
    title.textContent = con;
    clear(byId('transcript'));
    this.live.changed();
    showStatus(byId('compose-status'), '');
    const model = this.model();
    byId('send').disabled = !model;
    if (!model) showStatus(byId('compose-status'), 'this server runs no model: inputs cannot be posted', 'error');
    this.stream = new ResumableStream(this.api, `/conversations/${enc(con)}/events?stream=true`, {
      onEvent: (ev) => this.conversationEvent(ev),
      onState: (state, detail) => {
        const node = byId('stream-state');
        node.dataset.state = state;
        node.textContent = state === 'ended' ? `stream ended: ${detail}` : state + (detail ? ` (${detail})` : '');
        if (state === 'ended') this.onEnded(con);
      },
    });
  }

  conversationEvent(ev) {
    if (ev.event === 'input') this.addInput(ev.data);
    else if (ev.event === 'gap') {
      const gap = ev.data && ev.data.gap ? ev.data.gap : {};
      byId('transcript').append(el('li', {class: 'gap', text: `inputs ${gap.from}–${gap.to} were retired`}));
    } else if (ev.event === 'error') {
      return true;
    }
    return false;
  }

  addInput(input) {
    if (!input || this.inputs.has(input.operation)) return;
    const own = input.author === this.me();
    const answer = el('pre', {class: 'answer'});
    const receipt = el('span', {class: 'receipt'});
    const execution = el('span', {class: 'execution', text: input.execution});
    const cancel = el('button', {type: 'button', class: 'cancel', hidden: !own || TERMINAL.has(input.execution),
                                 text: 'Cancel'});
    const error = el('div', {class: 'item-error'});
    const liveState = el('span', {class: 'live-state'});
    const node = el('li', {class: own ? 'input own' : 'input', dataset: {operation: input.operation}},
      el('div', {class: 'meta'}, idLabel(input.author, this.me()), ' · ', execution, ' · ', receipt, ' ', cancel,
         ' ', liveState),
      el('div', {class: 'text', text: input.text}),
      Array.isArray(input.media) && input.media.length
        ? el('div', {class: 'media', text: `${input.media.length} media attached (not shown here)`}) : null,
      answer, error);
    byId('transcript').append(node);
    const item = {node, answer, receipt, execution, cancel, error, liveState, text: new Utf8Text(), stream: null,
                  sequence: input.sequence};
    this.inputs.set(input.operation, item);
    cancel.addEventListener('click', () => this.cancel(input.operation, item));
    this.refreshReceipt(input.operation, item);
    if (TERMINAL.has(input.execution)) this.readSaved(input.operation, item);
    else this.watch(input.operation, item, own);
  }

  // An unfinished input: its answer stream now when one of the live slots is free, else it waits in the
  // queue and its receipt is read every POLL_MS until it is its turn or its execution has ended.
  watch(op, item, own) {
    const started = this.live.want(op, {own, start: () => {
      this.setLive(item, 'live', '');
      return this.follow(op, item);
    }});
    if (started) return;
    this.setLive(item, 'queued', 'queued for live view');
    this.schedulePoll();
  }

  // Every POLL_MS, the queued inputs' receipts, read one request at a time (so the polls never hold
  // more than one of the browser's connections), until the queue is empty or the conversation closed.
  schedulePoll() {
    if (this.pollTimer !== null || !this.live.queue.length) return;
    const timer = setTimeout(async () => {
      for (const op of this.live.queue.map((q) => q.key)) {
        const item = this.inputs.get(op);
        if (this.pollTimer !== timer) return;   // closed meanwhile
        if (item) await this.pollQueued(op, item);
      }
      if (this.pollTimer !== timer) return;
      this.pollTimer = null;
      this.schedulePoll();
    }, POLL_MS);
    this.pollTimer = timer;
  }

  setLive(item, state, text) {
    item.node.dataset.live = state;
    item.liveState.textContent = text;
  }

  async pollQueued(op, item) {
    const execution = await this.refreshReceipt(op, item);
    if (!this.live.queued(op) || this.inputs.get(op) !== item) return;   // its stream started meanwhile, or closed
    if (execution === null) {   // the receipt cannot be read (rights gone?): stop asking
      this.live.drop(op);
      this.setLive(item, 'ended', '');
      return;
    }
    if (!TERMINAL.has(execution)) return;
    this.live.drop(op);
    this.setLive(item, 'saved', '');
    await this.readSaved(op, item);
    this.onInputDone(op);
  }

  async refreshReceipt(op, item) {
    let status, body;
    try {
      ({status, body} = await this.api.request('GET', `/operations/${enc(op)}`));
    } catch (err) {
      item.receipt.textContent = `receipt: ${err.message}`;
      return '';   // a network failure: ask again later
    }
    if (status !== 200) {
      item.receipt.textContent = `receipt: ${errorText(status, body)}`;
      return [401, 403, 404].includes(status) ? null : '';
    }
    const st = body.status || {};
    item.receipt.textContent = `admission ${st.admission || '?'} · terminal ${st.terminal || '?'}`;
    item.receipt.dataset.terminal = st.terminal || '';
    if (body.execution) this.setExecution(item, body.execution);
    return body.execution || '';
  }

  setExecution(item, execution) {
    item.execution.textContent = execution;
    item.node.dataset.execution = execution;
    if (TERMINAL.has(execution)) item.cancel.hidden = true;
  }

  show(item, bytes) {
    item.answer.textContent = item.text.push(bytes);
  }

  async readSaved(op, item) {
    try {
      const {chunks, last} = await this.api.resultBytes(op);
      for (const bytes of chunks) this.show(item, bytes);
      if (last) this.setExecution(item, last.execution);
    } catch (err) {
      item.error.textContent = `result: ${err.message}`;
    }
  }

  // The input's answer stream; answers a promise that settles when it is over.
  follow(op, item) {
    item.stream = new ResumableStream(this.api, `/operations/${enc(op)}/events`, {
      onEvent: (ev) => {
        if (ev.event === 'output' && ev.data) {
          this.show(item, base64Bytes(ev.data.bytes));
          item.node.dataset.streaming = 'true';
          return false;
        }
        if (ev.event === 'end') {
          item.node.dataset.streaming = 'false';
          if (ev.data && ev.data.execution) this.setExecution(item, ev.data.execution);
          if (ev.data && ev.data.error) item.error.textContent = String(ev.data.error);
          this.refreshReceipt(op, item);
          this.onInputDone(op);
          return true;
        }
        if (ev.event === 'error') {
          item.node.dataset.streaming = 'false';
          const err = ev.data && ev.data.error ? ev.data.error : {};
          item.error.textContent = `answer stream ended: ${err.type}: ${err.message}`;
          return true;
        }
        return false;
      },
      onState: (state, detail) => {
        if (state === 'ended' && detail.match(/^\d{3} /)) item.error.textContent = `answer stream: ${detail}`;
        if (state === 'ended') this.setLive(item, 'ended', '');
      },
    });
    return item.stream.done;
  }

  async post() {
    const text = byId('compose-text').value;
    const max = Number(byId('compose-max').value) || 64;
    const status = byId('compose-status');
    if (!text.trim()) { showStatus(status, 'write something first', 'error'); return; }
    byId('send').disabled = true;
    try {
      const sent = await this.api.mutate(`/conversations/${enc(this.con)}/inputs`,
                                         {text, model: this.model(), max_output_tokens: max});
      this.answered(sent, () => { byId('compose-text').value = ''; });
    } catch (err) {
      showStatus(status, `not sent: ${err.message}`, 'error');
    } finally {
      byId('send').disabled = !this.model();
    }
  }

  // What a mutation of this view answered: the receipt (it streams in through the conversation
  // stream), or a hold kept with its reason and a button to send the same envelope again.
  answered(sent, onSaved) {
    const status = byId('compose-status');
    if ([200, 201, 202].includes(sent.status)) {
      showStatus(status, `saved: ${sent.body.operation} (admission ${sent.body.status && sent.body.status.admission})`);
      if (onSaved) onSaved();
      return;
    }
    if (sent.status === 429) {
      const held = byId('held');
      const retry = el('button', {type: 'button', text: 'Send again'});
      const row = el('li', {class: 'held'}, el('span', {text: `held (429): ${errorText(429, sent.body)}`}), ' ', retry);
      retry.addEventListener('click', async () => {
        retry.disabled = true;
        try {
          const again = await this.api.resend(sent.path, sent.envelope);   // the exact same mutation
          if (again.status !== 429) row.remove();
          this.answered(again, onSaved);
        } catch (err) {
          showStatus(status, `not sent: ${err.message}`, 'error');
        } finally {
          retry.disabled = false;
        }
      });
      held.append(row);
      showStatus(status, 'the journal is on hold: nothing was saved; send it again once the hold lifts', 'error');
      return;
    }
    showStatus(status, `refused: ${errorText(sent.status, sent.body)}`, 'error');
  }

  async cancel(op, item) {
    item.cancel.disabled = true;
    try {
      const sent = await this.api.mutate(`/conversations/${enc(this.con)}/cancellations`,
                                         {target_sequence: String(item.sequence)});
      this.answered(sent);
      if (![200, 201, 202].includes(sent.status)) return;
      if (this.live.queued(op)) this.pollQueued(op, item);   // it ended queued: its saved result now
      else this.refreshReceipt(op, item);
    } catch (err) {
      item.error.textContent = `cancel: ${err.message}`;
    } finally {
      item.cancel.disabled = false;
    }
  }
}
