// A limit on the page's live answer streams. A browser opens about six HTTP/1.1 connections per server;
// each open operation stream holds one for as long as its input runs, so a conversation with many
// long inputs would leave nothing for the page's other requests (send, cancel, member changes). At most
// LIVE_LIMIT operation streams are open at once; the other inputs wait in a queue, your own first, then
// the newest, and the queued inputs' receipts are read every POLL_MS, one request at a time: once an
// input's execution has ended, its saved result is read instead (conversation.js). When a live stream
// ends, the next queued one starts.

export const LIVE_LIMIT = 2;
export const POLL_MS = 2000;

export class LiveStreams {
  // onChange(live, queued): the counts changed (the page shows them as data attributes).
  constructor({limit = LIVE_LIMIT, onChange = () => undefined} = {}) {
    this.limit = limit;
    this.onChange = onChange;
    this.live = new Map();      // key -> the entry of its open stream
    this.queue = [];            // {key, own, order, start}
    this.order = 0;
  }

  // Ask for a live stream for `key`: start() opens it and answers a promise that settles when it ends;
  // it runs now when a slot is free, else later. Answers true when it started now, false when queued.
  want(key, {own = false, start}) {
    if (this.live.has(key) || this.queue.some((q) => q.key === key)) return this.live.has(key);
    const entry = {key, own, order: this.order++, start};
    if (this.live.size < this.limit) {
      this.run(entry);
      this.changed();
      return true;
    }
    this.queue.push(entry);
    this.changed();
    return false;
  }

  // Leave the queue (the input ended while it waited); answers whether it was queued.
  drop(key) {
    const at = this.queue.findIndex((q) => q.key === key);
    if (at < 0) return false;
    this.queue.splice(at, 1);
    this.changed();
    return true;
  }

  queued(key) {
    return this.queue.some((q) => q.key === key);
  }

  clear() {
    this.live.clear();
    this.queue = [];
    this.order = 0;
    this.changed();
  }

  run(entry) {
    this.live.set(entry.key, entry);
    let ended;
    try {
      ended = Promise.resolve(entry.start());
    } catch (err) {
      ended = Promise.reject(err);
    }
    ended.catch((err) => console.info(`live stream of ${entry.key} ended: ${err.message}`))
      .then(() => this.release(entry));
  }

  release(entry) {
    if (this.live.get(entry.key) !== entry) return;   // cleared meanwhile (the conversation was closed)
    this.live.delete(entry.key);
    this.pump();
    this.changed();
  }

  // Fill the free slots from the queue: own inputs first, then the newest.
  pump() {
    while (this.live.size < this.limit && this.queue.length) {
      let best = 0;
      for (let i = 1; i < this.queue.length; i++) {
        const a = this.queue[i], b = this.queue[best];
        if (a.own !== b.own ? a.own : a.order > b.order) best = i;
      }
      this.run(this.queue.splice(best, 1)[0]);
    }
  }

  changed() {
    this.onChange(this.live.size, this.queue.length);
  }
}
