// The stats page: /health, every figure of /v1/stats, and live plots of tokens/s, time to first
// token and batch width, polled once a second. Fields are read defensively: a figure that is not
// where this page looks for it is shown as "n/a", and whatever /v1/stats holds is listed.
import {storedToken} from './api.js';
import {byId, clear, el, showStatus} from './dom.js';

const POINTS = 120;
const PERIOD_MS = 1000;
const series = {tps: [], ttft: [], batch: []};
let previous = null;

// The first number found at one of the dotted paths (figures may move between versions).
function pick(doc, ...paths) {
  for (const path of paths) {
    let at = doc;
    for (const key of path.split('.')) at = at && typeof at === 'object' ? at[key] : undefined;
    if (typeof at === 'number' && Number.isFinite(at)) return at;
  }
  return null;
}

// Every scalar leaf of the document as [path, value]; histogram bucket lists are summarised.
function leaves(doc, prefix = '', out = []) {
  if (Array.isArray(doc)) {
    out.push([prefix, `${doc.length} entries`]);
  } else if (doc && typeof doc === 'object') {
    for (const [key, value] of Object.entries(doc)) leaves(value, prefix ? `${prefix}.${key}` : key, out);
  } else {
    out.push([prefix, doc === null ? 'null' : String(doc)]);
  }
  return out;
}

function push(name, value) {
  const s = series[name];
  s.push(value);
  if (s.length > POINTS) s.shift();
}

function draw(name, unit) {
  const canvas = byId(`plot-${name}`);
  const ctx = canvas.getContext('2d');
  const values = series[name];
  const {width, height} = canvas;
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = '#d8dde3';
  ctx.strokeRect(0.5, 0.5, width - 1, height - 1);
  const known = values.filter((v) => v !== null);
  const max = Math.max(1e-9, ...known);
  ctx.strokeStyle = '#1f4e79';
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  let pen = false;
  values.forEach((v, i) => {
    if (v === null) { pen = false; return; }
    const x = (i / (POINTS - 1)) * (width - 4) + 2;
    const y = height - 2 - (v / max) * (height - 14);
    if (pen) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    pen = true;
  });
  ctx.stroke();
  ctx.fillStyle = '#1f4e79';
  values.forEach((v, i) => {   // a dot on each point: a lone point (TTFT of one request) shows too
    if (v !== null) ctx.fillRect((i / (POINTS - 1)) * (width - 4) + 1, height - 3 - (v / max) * (height - 14), 3, 3);
  });
  ctx.fillStyle = '#5b6470';
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillText(`max ${known.length ? max.toFixed(1) : 'n/a'} ${unit}`, 4, 11);
  const last = values.length ? values[values.length - 1] : null;
  const label = byId(`label-${name}`);
  label.dataset.value = last === null ? '' : String(last);
  label.dataset.max = known.length ? String(max) : '';   // the highest point on the plot (tests read it)
  label.textContent = `${label.textContent.split(':')[0]}: ${last === null ? 'n/a' : last.toFixed(1)}`;
}

async function health() {
  try {
    const r = await fetch('/health', {cache: 'no-store'});
    const body = await r.json();
    byId('health').textContent = r.ok ? String(body.status || 'ok') : `HTTP ${r.status}`;
    byId('health-detail').textContent = Object.entries(body).filter(([k]) => k !== 'status')
      .map(([k, v]) => `${k} ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ');
  } catch (err) {
    byId('health').textContent = `unreachable (${err.message})`;
  }
}

async function stats() {
  const token = storedToken();
  const headers = token ? {Authorization: `Bearer ${token}`} : {};
  let doc;
  try {
    const r = await fetch('/v1/stats', {headers, cache: 'no-store'});
    if (!r.ok) {
      showStatus(byId('stats-status'), r.status === 401 ? 'this server needs a token for /v1/stats: sign in on the '
        + 'shared spaces page in this tab first' : `/v1/stats answered HTTP ${r.status}`, 'error');
      return;
    }
    doc = await r.json();
  } catch (err) {
    showStatus(byId('stats-status'), `/v1/stats: ${err.message}`, 'error');
    return;
  }
  showStatus(byId('stats-status'), '');
  const now = performance.now();
  const tokens = pick(doc, 'engine.generation_tokens_total', 'generation_tokens_total');
  const ttftSum = pick(doc, 'engine.time_to_first_token_seconds.sum', 'time_to_first_token_seconds.sum');
  const ttftCount = pick(doc, 'engine.time_to_first_token_seconds.count', 'time_to_first_token_seconds.count');
  const batch = pick(doc, 'engine.last_batch_width', 'last_batch_width', 'engine.batch_width');
  if (previous) {
    const seconds = (now - previous.at) / 1000;
    push('tps', tokens !== null && previous.tokens !== null && seconds > 0 ? Math.max(0, (tokens - previous.tokens) / seconds) : null);
    const dn = ttftCount !== null && previous.ttftCount !== null ? ttftCount - previous.ttftCount : 0;
    push('ttft', dn > 0 && ttftSum !== null ? ((ttftSum - previous.ttftSum) / dn) * 1000 : null);
    push('batch', batch);
    draw('tps', 'tok/s');
    draw('ttft', 'ms');
    draw('batch', 'rows');
  }
  previous = {at: now, tokens, ttftSum, ttftCount};
  const body = clear(byId('figures'));
  for (const [path, value] of leaves(doc)) body.append(el('tr', {}, el('td', {text: path}), el('td', {text: value})));
}

async function tick() {
  await Promise.all([health(), stats()]);
  setTimeout(tick, PERIOD_MS);
}

tick();
