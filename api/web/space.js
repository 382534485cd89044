// Spaces: the list the token may read, creating one (private, room, instance), one space's members
// (set rights, remove), its conversations (open, create), its memory rows and their publication
// into another space. The API decides what may be read and done; a refusal is shown as it came.
import {base64Bytes} from './api.js';
import {byId, clear, el, errorText, idLabel, shortId, showStatus} from './dom.js';

const enc = encodeURIComponent;
const RIGHTS = ['read', 'write', 'manage'];

export class SpacesView {
  constructor(api, {openConversation}) {
    this.api = api;
    this.openConversation = openConversation;
    this.spaces = [];
    this.space = null;
    byId('refresh-spaces').addEventListener('click', () => this.refresh());
    byId('new-space-form').addEventListener('submit', (ev) => { ev.preventDefault(); this.createSpace(); });
    byId('member-form').addEventListener('submit', (ev) => { ev.preventDefault(); this.setMember(); });
    byId('new-conversation').addEventListener('click', () => this.createConversation());
    byId('refresh-memory').addEventListener('click', () => this.showMemory());
  }

  me() {
    return this.api.me && this.api.me.participant;
  }

  status(text, kind = 'info') {
    showStatus(byId('space-status'), text, kind);
  }

  async refresh() {
    const current = this.latest('spaces');
    let spaces;
    try {
      spaces = await this.api.list('/spaces', 'spaces');
    } catch (err) {
      if (current()) showStatus(byId('spaces-status'), `spaces: ${err.message}`, 'error');
      return;
    }
    if (!current()) return;
    this.spaces = spaces;
    showStatus(byId('spaces-status'), this.spaces.length ? '' : 'no spaces yet');
    const list = clear(byId('space-list'));
    for (const space of this.spaces) {
      const button = el('button', {type: 'button', class: 'space', title: space.id, dataset: {space: space.id}},
        el('span', {class: `scope scope-${space.scope}`, text: space.scope}), ' ', shortId(space.id));
      button.addEventListener('click', () => this.select(space.id));
      list.append(el('li', {class: this.space === space.id ? 'selected' : ''}, button));
    }
    if (this.space) {
      const still = this.spaces.some((s) => s.id === this.space);
      if (still) await this.select(this.space);
      else { this.space = null; byId('space').hidden = true; }
    }
  }

  async createSpace() {
    const scope = byId('new-space-scope').value;
    try {
      const sent = await this.api.mutate('/spaces', {scope});
      if (![200, 201].includes(sent.status)) {
        showStatus(byId('spaces-status'), `not created: ${errorText(sent.status, sent.body)}`, 'error');
        return;
      }
      this.space = sent.body.resource;
      await this.refresh();
    } catch (err) {
      showStatus(byId('spaces-status'), `not created: ${err.message}`, 'error');
    }
  }

  async select(id) {
    this.space = id;
    for (const li of byId('space-list').children) {
      li.className = li.firstChild && li.firstChild.dataset.space === id ? 'selected' : '';
    }
    byId('space').hidden = false;
    byId('space-id').textContent = id;
    this.status('');
    let space;
    try {
      space = await this.api.get(`/spaces/${enc(id)}`);
    } catch (err) {
      this.status(`space: ${err.message}`, 'error');
      return;
    }
    byId('space-scope').textContent = space.scope;
    clear(byId('space-owner')).append(idLabel(space.owner, this.me()));
    byId('space-rights').textContent = (space.permissions || []).join(', ') || 'none';
    const manage = (space.permissions || []).includes('manage');
    byId('member-form').hidden = !manage;
    await Promise.all([this.showMembers(manage), this.showConversations(), this.showMemory()]);
  }

  // The latest of overlapping reads of one list draws it; an older one that answers later is dropped.
  latest(name) {
    this.reads = this.reads || {};
    const n = (this.reads[name] || 0) + 1;
    this.reads[name] = n;
    return () => this.reads[name] === n;
  }

  async showMembers(manage) {
    const current = this.latest('members');
    let members, failure;
    try {
      members = await this.api.list(`/spaces/${enc(this.space)}/members`, 'members');
    } catch (err) {
      failure = err;
    }
    if (!current()) return;
    const list = clear(byId('member-list'));
    if (failure) {
      const err = failure;
      list.append(el('li', {class: 'error', text: `members: ${err.message}`}));
      return;
    }
    if (!members.length) list.append(el('li', {class: 'empty', text: 'no member rows (the owner has every right)'}));
    for (const m of members) {
      const remove = el('button', {type: 'button', class: 'remove', hidden: !manage || !(m.permissions || []).length,
                                   text: 'Remove'});
      remove.addEventListener('click', () => this.sendMember(m.participant, []));
      list.append(el('li', {class: 'member', dataset: {participant: m.participant}},
        idLabel(m.participant, this.me()), ' ', el('span', {class: 'rights', text: (m.permissions || []).join(', ') || 'no rights (removed)'}),
        ' ', remove));
    }
  }

  setMember() {
    const participant = byId('member-participant').value.trim();
    const permissions = RIGHTS.filter((r) => byId(`member-${r}`).checked);
    if (!participant) { this.status('name a participant id (par-…)', 'error'); return; }
    return this.sendMember(participant, permissions);
  }

  async sendMember(participant, permissions) {
    try {
      const sent = await this.api.mutate(`/spaces/${enc(this.space)}/members`, {participant, permissions});
      if (![200, 201].includes(sent.status)) {
        this.status(`member not set: ${errorText(sent.status, sent.body)}`, 'error');
        return;
      }
      this.status(permissions.length ? `rights set: ${permissions.join(', ')}` : 'member removed');
      byId('member-participant').value = '';
      await this.select(this.space);
    } catch (err) {
      this.status(`member not set: ${err.message}`, 'error');
    }
  }

  async showConversations() {
    const current = this.latest('conversations');
    let conversations, failure;
    try {
      conversations = await this.api.list(`/spaces/${enc(this.space)}/conversations`, 'conversations');
    } catch (err) {
      failure = err;
    }
    if (!current()) return;
    const list = clear(byId('conversation-list'));
    if (failure) {
      const err = failure;
      list.append(el('li', {class: 'error', text: `conversations: ${err.message}`}));
      return;
    }
    if (!conversations.length) list.append(el('li', {class: 'empty', text: 'no conversations yet'}));
    for (const c of conversations) {
      const open = el('button', {type: 'button', class: 'open-conversation', title: c.id, dataset: {conversation: c.id}},
        shortId(c.id));
      open.addEventListener('click', () => this.openConversation(c.id));
      list.append(el('li', {}, open, ' by ', idLabel(c.creator, this.me())));
    }
  }

  async createConversation() {
    try {
      const sent = await this.api.mutate(`/spaces/${enc(this.space)}/conversations`);
      if (![200, 201].includes(sent.status)) {
        this.status(`not created: ${errorText(sent.status, sent.body)}`, 'error');
        return;
      }
      await this.showConversations();
      this.openConversation(sent.body.resource);
    } catch (err) {
      this.status(`not created: ${err.message}`, 'error');
    }
  }

  async showMemory() {
    const current = this.latest('memory');
    let rows, failure;
    try {
      rows = await this.api.list(`/spaces/${enc(this.space)}/memory`, 'memory');
    } catch (err) {
      failure = err;
    }
    if (!current()) return;
    const list = clear(byId('memory-list'));
    if (failure) {
      const err = failure;
      list.append(el('li', {class: 'error', text: `memory: ${err.message}`}));
      return;
    }
    if (!rows.length) list.append(el('li', {class: 'empty', text: 'no memory yet'}));
    const targets = this.spaces.filter((s) => s.id !== this.space && (s.permissions || []).includes('manage'));
    for (const row of rows) {
      const preview = el('span', {class: 'preview'});
      const item = el('li', {class: `memory memory-${row.kind}`, dataset: {object: row.object}},
        el('span', {class: 'kind', text: row.kind}), ` v${row.version} · ${row.byte_length} bytes · `,
        el('span', {class: 'id', title: row.object, text: shortId(row.object)}), ' ', preview);
      if (row.kind === 'text') {
        this.preview(row.object, preview);
        if (targets.length) item.append(this.publishForm(row, targets));
      }
      list.append(item);
    }
  }

  async preview(object, node) {
    try {
      const body = await this.api.get(`/memory/${enc(object)}`);
      node.textContent = `“${new TextDecoder('utf-8').decode(base64Bytes(body.data))}”`;
    } catch (err) {
      node.textContent = `(${err.message})`;
    }
  }

  publishForm(row, targets) {   // source_version: the text object's current version
    const select = el('select', {class: 'publish-target', 'aria-label': 'publish into'},
      targets.map((s) => el('option', {value: s.id, text: `${s.scope} ${shortId(s.id)}`})));
    const button = el('button', {type: 'button', class: 'publish', text: 'Publish'});
    button.addEventListener('click', async () => {
      try {
        const sent = await this.api.mutate(`/spaces/${enc(select.value)}/publications`,
                                           {object: row.object, source_version: String(row.version)});
        this.status([200, 201].includes(sent.status) ? `published into ${select.value}`
          : `not published: ${errorText(sent.status, sent.body)}`, [200, 201].includes(sent.status) ? 'info' : 'error');
      } catch (err) {
        this.status(`not published: ${err.message}`, 'error');
      }
    });
    return el('span', {class: 'publish-form'}, ' → ', select, ' ', button);
  }
}
