// DOM helpers: every piece of data goes in as text (textContent, attributes set one by one), never
// as HTML, so whatever the server or another participant sends is shown, not run.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name === 'text') node.textContent = String(value);
    else if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

export function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no element #${id}`);
  return node;
}

// A long identifier shown short (prefix and the last 6 hex digits), the whole of it in the tooltip.
export function shortId(id) {
  if (typeof id !== 'string') return String(id);
  const parts = id.split('-');
  // par-/spc-/con-<lineage>-<ident>: the lineage is the hash of a principal's name (the operator's), the
  // ident a key the client chose; the label shows both, so no one can wear another's label
  if (parts.length === 3 && parts[1].length > 8 && parts[2].length > 6) return `${parts[0]}-${parts[1].slice(0, 8)}…${parts[2].slice(-6)}`;
  return id.length > 20 ? `${id.slice(0, 8)}…${id.slice(-6)}` : id;
}

export function idLabel(id, me) {
  return el('span', {class: 'id', title: id, text: id === me ? 'you' : shortId(id)});
}

// "type: message" of an API error body, whatever its envelope; the status when there is no body.
export function errorText(status, body) {
  const err = body && typeof body === 'object' ? body.error : null;
  if (err && typeof err === 'object') return `${status} ${err.type || err.code || 'error'}: ${err.message || ''}`.trim();
  return `HTTP ${status}`;
}

export function showStatus(node, text, kind = 'info') {
  node.textContent = text;
  node.dataset.kind = kind;
}
