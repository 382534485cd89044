"""Shared inputs through a real `aotx serve` (model + embedded nats-server + runtime in one process):
an input completes over HTTP and is retained as memory, which can be published; SIGKILL of the
process mid-generation, restart on the same state directory: the unfinished admission is
`interrupted`, never run again (nor its memory input: the memory rows are the same), and the
finished result is byte-identical after the restart."""
from __future__ import annotations

import base64
import time

import httpx

from tests.conftest import SERVER_ARGS
from tests.server_process import ServerProcess

BASE = "/aotx/v1/shared"


class Client:
    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url + BASE, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.keys = iter(range(1, 1 << 30))
        me = self.http.get("/participant").json()
        self.lineage, self.next = me["lineage"], int(me["next_sequence"])

    def post(self, path: str, **fields) -> tuple[int, dict]:
        body = {"schema": "aotx.shared.mutation.v1", "lineage": self.lineage,
                "operation_key": f"{next(self.keys):032x}", "sequence": str(self.next), **fields}
        r = self.http.post(path, json=body)
        if r.status_code in (201, 202):
            self.next += 1
        return r.status_code, r.json()

    def wait(self, op: str, states: tuple[str, ...], timeout: float = 120.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            receipt = self.http.get(f"/operations/{op}").json()
            if receipt["execution"] in states:
                return receipt
            assert time.monotonic() < deadline, receipt
            time.sleep(0.05)


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
                                  model=model, max_output_tokens=400)
        assert status == 202
        running = alice.wait(long["operation"], ("running", "completed", "cancelled", "failed"))
        assert running["execution"] == "running"
        time.sleep(0.5)  # some output journalled
        memory_before = alice.http.get(memory_path).json()
        assert len(memory_before["memory"]) == 6    # the running input's memory was retained before generation
    finally:
        server.proc.kill()  # SIGKILL: no shutdown path runs
        server.proc.wait()
    server = ServerProcess(*SERVER_ARGS, var=var).start()
    try:
        alice = Client(server.base_url, (var / "tokens" / "alice").read_text().strip())
        after = alice.http.get(f"/operations/{long['operation']}").json()
        assert after["execution"] == "interrupted" and after["status"]["terminal"] == "saved", after
        saved = after["output_bytes"]
        time.sleep(1.0)
        again = alice.http.get(f"/operations/{long['operation']}").json()
        assert again == after and again["output_bytes"] == saved  # never run again
        assert alice.http.get(f"/operations/{short['operation']}/result").json() == before
        assert alice.http.get(memory_path).json() == memory_before   # no memory input repeated
    finally:
        server.stop()
