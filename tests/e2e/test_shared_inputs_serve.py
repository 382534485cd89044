"""Shared inputs through a real `aotx serve` (model + embedded nats-server + runtime in one process):
an input completes over HTTP and is retained as memory, which can be published; SIGKILL of the
process mid-generation, restart on the same state directory: the unfinished admission is
`interrupted`, never run again (nor its memory input: the memory rows are the same), and the
finished result is byte-identical after the restart."""
from __future__ import annotations

import base64

import httpx

from tests.conftest import SERVER_ARGS
from tests.server_process import ServerProcess
from tests.waiting import wait_until

BASE = "/aotx/v1/shared"


class Client:
    def __init__(self, url: str, token: str, first_key: int = 1) -> None:
        self.http = httpx.Client(base_url=url + BASE, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.keys = iter(range(first_key, 1 << 30))   # a later client of the lineage must not reuse keys
        me = self.http.get("/participant").json()
        self.lineage, self.next = me["lineage"], int(me["next_sequence"])

    def post(self, path: str, **fields) -> tuple[int, dict]:
        body = {"schema": "aotx.shared.mutation.v1", "lineage": self.lineage,
                "operation_key": f"{next(self.keys):032x}", "sequence": str(self.next), **fields}
        r = self.http.post(path, json=body)
        if r.status_code in (201, 202):
            self.next += 1
        return r.status_code, r.json()

    def receipt(self, op: str) -> dict:
        return self.http.get(f"/operations/{op}").json()

    def wait(self, op: str, states: tuple[str, ...]) -> dict:
        return wait_until(lambda: self.receipt(op), f"{op} to be {' or '.join(states)}",
                          done=lambda r: r["execution"] in states)


def test_inputs_through_aotx_serve_survive_sigkill_as_interrupted(tmp_path):
    var = tmp_path / "var"
    server = ServerProcess(*SERVER_ARGS, var=var).start()
    try:
        alice = Client(server.base_url, (var / "tokens" / "alice").read_text().strip())
        model = alice.http.get("/capabilities").json()["models"][0]["id"]
        assert alice.post("/participant")[0] == 201
        status, space = alice.post("/spaces", scope="private")
        status, conv = alice.post(f"/spaces/{space['resource']}/conversations")
        con = conv["resource"]
        status, short = alice.post(f"/conversations/{con}/inputs", text="Say yes.", model=model, max_output_tokens=4)
        assert status == 202, short
        done = alice.wait(short["operation"], ("completed", "failed"))
        assert done["execution"] == "completed", done
        before = alice.http.get(f"/operations/{short['operation']}/result").json()
        assert base64.b64decode(before["bytes"]) and before["output_tokens"] == done["result"]["output_tokens"]
        memory_path = f"/spaces/{space['resource']}/memory"
        rows = alice.http.get(memory_path).json()["memory"]
        assert sorted(r["kind"] for r in rows) == ["embedding", "source", "text"]
        text = next(r for r in rows if r["kind"] == "text")
        status, room = alice.post("/spaces", scope="room")
        status, published = alice.post(f"/spaces/{room['resource']}/publications", object=text["object"],
                                       source_version="1")
        assert status == 201, published
        copy = next(r for r in alice.http.get(f"/spaces/{room['resource']}/memory").json()["memory"]
                    if r["kind"] == "text")
        assert base64.b64decode(alice.http.get(f"/memory/{copy['object']}").json()["data"]) == b"Say yes."

        status, long = alice.post(f"/conversations/{con}/inputs", text="Write a very long story about the sea.",
                                  model=model, max_output_tokens=400, temperature=0)
        assert status == 202
        # its memory input goes into the journal with its first output: wait for saved output bytes
        running = wait_until(lambda: alice.receipt(long["operation"]), "the long input's first saved output",
                             done=lambda r: r["execution"] != "queued" and (r["execution"] != "running"
                                                                            or r["output_bytes"] > 0))
        assert running["execution"] == "running" and running["output_bytes"] > 0, running
        memory_before = alice.http.get(memory_path).json()
        assert len(memory_before["memory"]) == 6    # the running input's memory was retained with its first output
    finally:
        server.proc.kill()  # SIGKILL: no shutdown path runs
        server.proc.wait()
    server = ServerProcess(*SERVER_ARGS, var=var).start()
    try:
        alice = Client(server.base_url, (var / "tokens" / "alice").read_text().strip(), first_key=1 << 20)
        after = alice.receipt(long["operation"])
        assert after["execution"] == "interrupted" and after["status"]["terminal"] == "saved", after
        assert after["output_bytes"] >= running["output_bytes"]   # what was saved before the kill stays
        # a new input (in another space: the first one's memory stays as it was) runs to its end; the
        # queue is first come, first leased, so an input re-run by the boot would have been leased first
        status, other = alice.post("/spaces", scope="private")
        status, other_conv = alice.post(f"/spaces/{other['resource']}/conversations")
        status, later = alice.post(f"/conversations/{other_conv['resource']}/inputs", text="Say no.", model=model,
                                   max_output_tokens=4)
        assert status == 202, later
        assert alice.wait(later["operation"], ("completed", "failed"))["execution"] == "completed"
        assert alice.receipt(long["operation"]) == after   # never run again
        assert alice.http.get(f"/operations/{short['operation']}/result").json() == before
        assert alice.http.get(memory_path).json() == memory_before   # no memory input repeated
    finally:
        server.stop()
