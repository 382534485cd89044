// The shared-spaces page: sign in with a bearer token (this tab's sessionStorage only), register a
// participant record when there is none, then spaces (space.js) and one conversation (conversation.js).
import {Api, storedToken, storeToken} from './api.js';
import {ConversationView} from './conversation.js';
import {byId, errorText, showStatus} from './dom.js';
import {SpacesView} from './space.js';

let api = null;

function showSignedIn(signedIn) {
  byId('signin').hidden = signedIn;
  byId('workspace').hidden = !signedIn;
  byId('whoami').hidden = !signedIn;
}

async function start(token) {
  const status = byId('signin-status');
  const candidate = new Api(token);
  try {
    await candidate.signIn();
  } catch (err) {
    storeToken(null);
    showSignedIn(false);
    showStatus(status, err.status === 401 ? 'this token is not accepted' : `sign-in failed: ${err.message}`, 'error');
    return;
  }
  api = candidate;
  storeToken(token);
  showStatus(status, '');
  showSignedIn(true);
  showParticipant();
  let spaces = null;
  const conversation = new ConversationView(api, {onInputDone: () => spaces && spaces.space && spaces.showMemory(),
                                                  onEnded: () => spaces && spaces.refresh()});
  spaces = new SpacesView(api, {openConversation: (con) => conversation.open(con)});
  if (api.me.registered) await spaces.refresh();
  byId('register').addEventListener('click', async () => {
    try {
      const sent = await api.mutate('/participant');
      if (![200, 201].includes(sent.status)) {
        showStatus(byId('register-status'), `not registered: ${errorText(sent.status, sent.body)}`, 'error');
        return;
      }
      await api.syncParticipant();
      showParticipant();
      await spaces.refresh();
    } catch (err) {
      showStatus(byId('register-status'), `not registered: ${err.message}`, 'error');
    }
  });
}

function showParticipant() {
  const me = api.me;
  byId('me-id').textContent = me.registered ? me.participant : '(no participant record yet)';
  byId('register-box').hidden = me.registered;
  byId('spaces-panel').hidden = !me.registered;
}

byId('signin-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const token = byId('token').value.trim();
  byId('token').value = '';
  if (token) start(token);
});

byId('signout').addEventListener('click', () => {
  storeToken(null);
  location.reload();
});

byId('copy-me').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(byId('me-id').textContent);
    showStatus(byId('register-status'), 'copied');
  } catch (err) {
    showStatus(byId('register-status'), `copy it by hand (${err.message})`);
  }
});

const saved = storedToken();
if (saved) start(saved);
else showSignedIn(false);
