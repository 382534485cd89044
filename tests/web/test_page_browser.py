"""The page in a real browser (headless Chromium through Selenium) against the session's `aotx serve`:
alice and bob sign in with their dev tokens, alice makes a room, a conversation and bob a member; bob
opens the conversation; alice posts; bob's page shows the answer streaming in (its text grows, each
observation a prefix of the next, and ends as the saved result's exact text); alice removes bob and
his page shows his stream ended; the stats page plots the figures. A screenshot of each step is
saved (the path is printed); neither browser logs a console error or warning."""
from __future__ import annotations

import base64

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.waiting import wait_until

from .browser import artifact_dir, chromium, console_problems

TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")
PROMPT = "Tell me a short story about a lighthouse keeper."
LONG = "Write a very long story about the <b>sea</b>. <img src=x onerror=alert(1)>"   # markup: shown as text


class Page:
    """One person's browser on the page."""

    def __init__(self, name: str, base_url: str, token: str, shots) -> None:
        self.name, self.base_url, self.token, self.shots = name, base_url, token, shots
        self.driver = chromium()

    def find(self, css: str):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    # read in one script: the page redraws its lists, so an element found in one call may be gone in the next
    def text(self, css: str) -> str:
        return self.driver.execute_script(
            "const n = document.querySelector(arguments[0]); return n ? n.innerText : ''", css)

    def visible(self, css: str) -> bool:
        return self.driver.execute_script(
            "const n = document.querySelector(arguments[0]); return !!n && n.getClientRects().length > 0", css)

    def wait(self, check, what: str):
        return wait_until(check, f"{self.name}'s page: {what}")

    def click(self, css: str) -> None:
        def clicked() -> bool:
            try:
                found = self.find(css) if self.visible(css) else None
                if found is None or not found.is_enabled():
                    return False
                found.click()
                return True
            except StaleElementReferenceException:   # redrawn between the look and the click: look again
                return False
        self.wait(clicked, f"{css} clicked")

    def type(self, css: str, text: str) -> None:
        field = self.find(css)
        field.clear()
        field.send_keys(text)

    def shot(self, step: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{step}-{self.name}.png"))

    def sign_in(self) -> str:
        self.driver.get(self.base_url + "/")
        self.wait(lambda: self.visible("#token"), "the sign-in form")
        self.type("#token", self.token)
        self.click("#signin-button")
        self.wait(lambda: self.visible("#whoami"), "signed in")
        if self.wait(lambda: self.visible("#register") or self.visible("#spaces-panel"), "registered or not"):
            if self.visible("#register"):
                self.click("#register")
        me = self.wait(lambda: self.text("#me-id") if self.text("#me-id").startswith("par-") else "",
                       "its participant id")
        self.wait(lambda: self.visible("#spaces-panel"), "the spaces panel")
        return me

    def open_space(self, space: str) -> None:
        self.click(f'#space-list button[data-space="{space}"]')
        self.wait(lambda: self.text("#space-id") == space, f"space {space} shown")

    def open_conversation(self, con: str) -> None:
        self.click(f'#conversation-list button[data-conversation="{con}"]')
        self.wait(lambda: self.text("#conversation-id") == con and self.find("#stream-state").get_attribute(
            "data-state") == "live", f"conversation {con} streaming live")

    def create_space(self, scope: str) -> str:
        Select(self.find("#new-space-scope")).select_by_value(scope)
        before = self.space_ids()
        self.click("#new-space")
        space = self.wait(lambda: next((s for s in self.space_ids() if s not in before), None), f"a new {scope} space")
        self.wait(lambda: self.text("#space-id") == space and self.text("#space-scope") == scope, f"the {scope} shown")
        return space

    def space_ids(self) -> list[str]:
        return self.driver.execute_script(
            "return [...document.querySelectorAll('#space-list button.space')].map((b) => b.dataset.space)")

    def memory_object(self, text: str) -> str:
        return self.driver.execute_script(
            "return [...document.querySelectorAll('#memory-list li.memory-text')].find((li) => "
            "li.querySelector('.preview').textContent === arguments[0]).dataset.object", f"“{text}”")

    def memory_previews(self) -> list[str]:
        return self.driver.execute_script(
            "return [...document.querySelectorAll('#memory-list li.memory-text .preview')].map((p) => p.textContent)")

    def stream_state(self) -> tuple[str, str]:
        node = self.find("#stream-state")
        return node.get_attribute("data-state") or "", node.text


@pytest.fixture(scope="module")
def pages(server):
    shots = artifact_dir("web-page")
    print(f"\npage test screenshots: {shots}")
    opened: list[Page] = []
    try:
        for name in ("alice", "bob"):
            opened.append(Page(name, server.base_url, (server.var / "tokens" / name).read_text().strip(), shots))
        yield opened
    finally:
        for page in opened:
            page.driver.quit()


def _answer(page: Page, op: str) -> tuple[str, str, str]:
    """(answer text exactly as in the DOM, execution, receipt line) of an input on a page; empty strings while it is not shown."""
    return tuple(page.driver.execute_script(
        "const li = [...document.querySelectorAll('#transcript li.input')].find((n) => n.dataset.operation === arguments[0]);"
        "return li ? [li.querySelector('.answer').textContent, li.dataset.execution || '',"
        " li.querySelector('.receipt').textContent] : ['', '', '']", op))


def test_two_people_one_room_bob_sees_alice_streaming_and_his_stream_ends_when_removed(server, pages):
    alice, bob = pages
    alice_id, bob_id = alice.sign_in(), bob.sign_in()
    assert alice_id != bob_id
    alice.shot("1-signed-in")

    # alice: a private space (for the publication below), a room, a conversation in it, bob a member
    private, space = alice.create_space("private"), alice.create_space("room")
    alice.click("#new-conversation")
    con = alice.wait(lambda: alice.text("#conversation-id") if alice.visible("#conversation") else "",
                     "the new conversation open")
    alice.wait(lambda: alice.stream_state()[0] == "live", "its stream live")
    alice.type("#member-participant", bob_id)
    alice.click("#set-member")
    alice.wait(lambda: alice.all(f'#member-list li[data-participant="{bob_id}"]'), "bob listed as a member")
    assert "read, write" in alice.text(f'#member-list li[data-participant="{bob_id}"]')

    # bob: the room appears in his list; he opens its conversation
    bob.click("#refresh-spaces")
    bob.open_space(space)
    bob.open_conversation(con)
    bob.shot("2-joined")

    # alice posts; bob's page shows her input and the answer growing
    alice.type("#compose-text", PROMPT)
    alice.type("#compose-max", "40")
    alice.click("#send")
    status = alice.wait(lambda: alice.text("#compose-status") if alice.text("#compose-status").startswith("saved")
                        else "", "the input saved")
    op = status.split()[1]
    assert op.startswith("op-"), status
    seen: list[str] = []

    def observe():
        text, execution, _ = _answer(bob, op)
        if text and (not seen or text != seen[-1]):
            seen.append(text)
            if len(seen) == 2:
                bob.shot("3-streaming")
        return execution

    wait_until(observe, "bob's page: alice's answer to finish", done=lambda execution: execution in TERMINAL)
    assert len(seen) >= 3, f"the answer did not grow over several observations: {seen!r}"
    print(f"bob saw the answer grow over {len(seen)} observations")
    assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(seen, seen[1:])), seen
    text, execution, _ = _answer(bob, op)
    assert execution == "completed"
    receipt = bob.wait(lambda: _answer(bob, op)[2] if "terminal saved" in _answer(bob, op)[2] else "",
                       "the receipt's saved terminal state")
    assert "admission saved" in receipt
    result = httpx.get(f"{server.base_url}/aotx/v1/shared/operations/{op}/result",
                       headers={"Authorization": f"Bearer {bob.token}"}).json()
    assert text == base64.b64decode(result["bytes"]).decode("utf-8")   # the exact saved bytes
    author = bob.find(f'#transcript li.input[data-operation="{op}"] .meta .id')
    assert author.get_attribute("title") == alice_id
    alice.wait(lambda: _answer(alice, op)[0] == text, "the same answer on alice's page")
    bob.shot("4-answered")
    alice.shot("4-answered")

    # the room's memory lists alice's input; she publishes it into her private space
    alice.wait(lambda: f"“{PROMPT}”" in alice.memory_previews(), "the input listed as the room's memory")
    row = f'#memory-list li.memory-text[data-object="{alice.memory_object(PROMPT)}"]'
    Select(alice.find(f"{row} select.publish-target")).select_by_value(private)
    alice.click(f"{row} button.publish")
    alice.wait(lambda: alice.text("#space-status").startswith("published"), "the publication saved")
    alice.open_space(private)
    alice.wait(lambda: f"“{PROMPT}”" in alice.memory_previews(), "the published copy in the private space")
    alice.shot("5-published")
    alice.open_space(space)

    # alice cancels her own long input while bob watches it stream
    alice.type("#compose-text", LONG)
    alice.type("#compose-max", "400")
    alice.click("#send")
    long = alice.wait(lambda: (alice.text("#compose-status").split() + [""])[1] if alice.text(
        "#compose-status").startswith("saved") and op not in alice.text("#compose-status") else "", "the long input saved")
    bob.wait(lambda: _answer(bob, long)[0], "the long answer streaming")
    shown = bob.find(f'#transcript li.input[data-operation="{long}"] .text')
    assert shown.get_attribute("textContent") == LONG and not shown.find_elements(By.CSS_SELECTOR, "*")
    alice.click(f'#transcript li.input[data-operation="{long}"] button.cancel')
    for page in pages:
        page.wait(lambda: _answer(page, long)[1] == "cancelled", "the long input cancelled")

    # alice removes bob: his conversation stream ends, and his page says so
    alice.click(f'#member-list li[data-participant="{bob_id}"] button.remove')
    alice.wait(lambda: "no rights" in alice.text(f'#member-list li[data-participant="{bob_id}"]'),
               "bob's member row left with no rights")
    state, line = bob.wait(lambda: bob.stream_state() if bob.stream_state()[0] == "ended" else None,
                           "the stream to end")
    assert "not_found" in line, line
    bob.wait(lambda: space not in bob.space_ids() and not bob.visible("#space"), "the room gone from his list")
    bob.shot("6-removed")
    for page in pages:
        assert console_problems(page.driver) == [], page.name


def test_stats_page_plots_the_figures(server, pages):
    alice = pages[0]   # signed in by the test above in this tab (sessionStorage): /v1/stats with her token
    alice.driver.get(server.base_url + "/stats")
    alice.wait(lambda: alice.text("#health") == "ok", "health ok")
    alice.wait(lambda: alice.all("#figures tr"), "the /v1/stats figures")
    alice.wait(lambda: alice.find("#label-tps").get_attribute("data-value"), "a tokens/s point")
    r = httpx.post(f"{server.base_url}/v1/chat/completions", timeout=120, json={
        "model": "smollm2-135m-instruct", "max_tokens": 16, "messages": [{"role": "user", "content": "Count to ten."}]})
    assert r.status_code == 200, r.text
    for plot in ("tps", "ttft", "batch"):   # the request shows on every plot
        alice.wait(lambda: float(alice.find(f"#label-{plot}").get_attribute("data-max") or 0) > 0, f"a {plot} point above 0")
    figures = set(alice.driver.execute_script(   # one read: the table is drawn again every second
        "return [...document.querySelectorAll('#figures tr td:first-child')].map((td) => td.textContent)"))
    assert "engine.generation_tokens_total" in figures
    alice.shot("7-stats")
    assert console_problems(alice.driver) == []


RESUME_SCRIPT = """
const done = arguments[arguments.length - 1];
(async () => {
  const {ResumableStream} = await import('/static/sse.js');
  const enc = new TextEncoder();
  const body = (parts) => new ReadableStream({start(c) { for (const p of parts) c.enqueue(enc.encode(p)); c.close(); }});
  const calls = [];
  const api = {raw: async (path, init) => {
    calls.push([path, init.headers['Last-Event-ID'] || null]);
    if (calls.length === 1) return new Response(body(['event: output\\nid: /x@3\\nda', 'ta: {"n":1}\\n\\n: keep-alive\\n\\n',
      'event: output\\r\\nid: /x@5\\r\\ndata: {"n":', '2}\\r', '\\n\\r\\n']), {status: 200});
    if (calls.length === 2) return new Response('{"error": {"type": "unavailable", "message": "booting"}}', {status: 503});
    return new Response(body(['event: end\\nid: /x@5\\ndata: {"n":3}\\n\\n']), {status: 200});
  }};
  const events = [], states = [];
  const stream = new ResumableStream(api, '/x', {onEvent: (ev) => { events.push([ev.event, ev.id, ev.data.n]);
    return ev.event === 'end'; }, onState: (state) => states.push(state)});
  await stream.done;
  done({calls, events, states});
})().catch((err) => done({error: String(err)}));
"""


def test_the_page_s_stream_reader_resumes_with_last_event_id(pages):
    """sse.js in the browser: events split anywhere between chunks (CRLF too) are parsed, a comment is
    skipped; a stream the server closed is opened again with Last-Event-ID = the last event's id, a 503
    on reconnecting is retried, and the stream ends at its terminal event."""
    driver = pages[1].driver
    driver.set_script_timeout(60)
    got = driver.execute_async_script(RESUME_SCRIPT)
    assert "error" not in got, got
    assert got["calls"] == [["/x", None], ["/x", "/x@5"], ["/x", "/x@5"]]
    assert got["events"] == [["output", "/x@3", 1], ["output", "/x@5", 2], ["end", "/x@5", 3]]
    assert got["states"][0] == "connecting" and "reconnecting" in got["states"] and got["states"][-1] == "ended"
    assert console_problems(driver) == []


HOLD_SCRIPT = """
const done = arguments[arguments.length - 1];
(async () => {
  const {ConversationView} = await import('/static/conversation.js');
  const sent = [];
  const api = {resend: async (path, envelope) => { sent.push([path, envelope]);
    return {status: 202, body: {operation: 'op-1', status: {admission: 'saved'}}, path, envelope}; }};
  const view = Object.create(ConversationView.prototype);   // its answers only: no stream, no listeners
  view.api = api;
  const envelope = {schema: 'aotx.shared.mutation.v1', lineage: 'ab', operation_key: '01', sequence: '7', text: 'hi'};
  view.answered({status: 429, body: {error: {type: 'journal_hold', message: 'the journal is on hold (full): <i>x</i>'}},
                 path: '/conversations/con-x/inputs', envelope});
  const row = document.querySelector('#held li.held');
  const held = row.textContent, markup = row.querySelectorAll('i').length, status = document.getElementById('compose-status').textContent;
  row.querySelector('button').click();
  for (let i = 0; i < 100 && document.querySelector('#held li.held'); i++) await new Promise((r) => setTimeout(r, 20));
  done({held, markup, status, sent, left: document.querySelectorAll('#held li.held').length,
        after: document.getElementById('compose-status').textContent});
})().catch((err) => done({error: String(err)}));
"""


def test_a_held_input_shows_the_429_reason_and_send_again_is_the_exact_same_mutation(pages):
    """conversation.js in the browser: a 429 journal hold keeps the input with the server's reason
    (as text), and "Send again" posts the very same envelope (operation key and sequence) to the same path."""
    driver = pages[1].driver
    driver.set_script_timeout(60)
    got = driver.execute_async_script(HOLD_SCRIPT)
    assert "error" not in got, got
    assert got["held"].startswith("held (429): 429 journal_hold: the journal is on hold (full): <i>x</i>"), got
    assert got["markup"] == 0 and "on hold" in got["status"], got
    assert got["sent"] == [["/conversations/con-x/inputs", {"schema": "aotx.shared.mutation.v1", "lineage": "ab",
                                                           "operation_key": "01", "sequence": "7", "text": "hi"}]]
    assert got["left"] == 0 and got["after"].startswith("saved: op-1"), got
    assert console_problems(driver) == []


COUNT = "Count from 1 to 1000, separated by commas: 1, 2, 3, 4, 5,"
WATCH_LIVE = """
const con = document.getElementById('conversation');
window.__maxLive = Number(con.dataset.liveStreams || 0);
new MutationObserver(() => { window.__maxLive = Math.max(window.__maxLive, Number(con.dataset.liveStreams || 0)); })
  .observe(con, {attributes: true, attributeFilter: ['data-live-streams']});
"""


def _live(page: Page, op: str) -> str:
    return page.driver.execute_script(
        "const li = document.querySelector(`#transcript li.input[data-operation=\"${arguments[0]}\"]`);"
        "return li ? (li.dataset.live || '') + '|' + li.querySelector('.live-state').textContent : ''", op)


def test_at_most_two_answer_streams_are_live_and_the_page_still_answers(server, pages):
    """Four long inputs at once: at most two operation streams are open (#conversation's
    data-live-streams, watched on every change); the others say "queued for live view"; a member
    change completes while they run; when a live stream ends the newest queued one goes live; one that
    ends while queued shows its saved result, exactly; live.js alone: the queue gives the next free stream
    to one's own inputs first, then to the newest."""
    alice, bob = pages
    alice_id = httpx.get(f"{server.base_url}/aotx/v1/shared/participant",
                         headers={"Authorization": f"Bearer {alice.token}"}).json()["participant"]
    alice_id = alice_id or alice.sign_in()   # this test alone: alice registers first
    bob.driver.get(server.base_url + "/")   # signed in from this tab's sessionStorage when the first test ran
    if bob.wait(lambda: bob.visible("#token") or bob.visible("#spaces-panel"), "signed in or not") and bob.visible("#token"):
        bob.sign_in()
    bob.create_space("room")
    bob.click("#new-conversation")
    bob.wait(lambda: bob.visible("#conversation") and bob.stream_state()[0] == "live", "a new conversation live")
    bob.driver.execute_script(WATCH_LIVE)
    ops: list[str] = []
    for _ in range(4):
        bob.type("#compose-text", COUNT)
        bob.type("#compose-max", "400")
        bob.click("#send")
        ops.append(bob.wait(lambda: (bob.text("#compose-status").split() + ["", ""])[1] if bob.text(
            "#compose-status").startswith("saved") and not any(o in bob.text("#compose-status") for o in ops) else "",
            f"input {len(ops) + 1} saved"))
    def live() -> str:
        return bob.find("#conversation").get_attribute("data-live-streams")
    bob.wait(lambda: live() == "2" and all(_live(bob, op) for op in ops), "two answer streams live, all four shown")
    assert [_live(bob, op) for op in ops[2:]] == ["queued|queued for live view"] * 2
    bob.shot("8-queued")

    # a member change while the four run: the page still has connections to spare
    bob.type("#member-participant", alice_id)
    bob.click("#set-member")
    bob.wait(lambda: bob.all(f'#member-list li[data-participant="{alice_id}"]'), "alice listed as a member")
    running = [op for op in ops if _answer(bob, op)[1] not in TERMINAL]
    assert running, "the four inputs ended before the member change: it proves nothing"

    # a live one ends (cancelled): the newest queued one goes live; cancel the rest
    bob.click(f'#transcript li.input[data-operation="{ops[0]}"] button.cancel')
    bob.wait(lambda: _live(bob, ops[3]).startswith("live|"), "the newest queued input live")
    assert _live(bob, ops[2]).startswith("queued|")
    for op in ops[1:]:
        if _answer(bob, op)[1] not in TERMINAL:
            bob.click(f'#transcript li.input[data-operation="{op}"] button.cancel')
    for op in ops:
        bob.wait(lambda op=op: _answer(bob, op)[1] in TERMINAL, f"{op} ended")
    bob.wait(lambda: live() == "0", "no answer stream left open")
    assert bob.driver.execute_script("return window.__maxLive") == 2
    result = httpx.get(f"{server.base_url}/aotx/v1/shared/operations/{ops[2]}/result",
                       headers={"Authorization": f"Bearer {bob.token}"}).json()
    saved = base64.b64decode(result["bytes"]).decode("utf-8")
    bob.wait(lambda: _answer(bob, ops[2])[0] == saved, "the input that ended queued shows its saved result")
    bob.shot("9-streams-ended")
    # the queue's order, in live.js alone: own inputs first, then the newest
    order = bob.driver.execute_async_script(ORDER_SCRIPT)
    assert order == ["a", "b", "own-2", "own-1", "d", "c"], order
    assert console_problems(bob.driver) == []


ORDER_SCRIPT = """
const done = arguments[arguments.length - 1];
(async () => {
  const {LiveStreams} = await import('/static/live.js');
  const started = [], ends = {};
  const live = new LiveStreams({limit: 2});
  const want = (key, own) => live.want(key, {own, start: () => { started.push(key);
    return new Promise((resolve) => { ends[key] = resolve; }); }});
  want('a', false); want('b', false); want('c', false); want('own-1', true); want('d', false); want('own-2', true);
  for (const key of ['a', 'b', 'own-1', 'own-2', 'd']) {
    ends[key]();
    await new Promise((r) => setTimeout(r, 0));
  }
  done(started);
})().catch((err) => done(String(err)));
"""
