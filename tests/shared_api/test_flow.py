"""The client sequence of seed 000 through HTTP against a real nats-server: retries, 409, 410, rights."""

from __future__ import annotations

from .harness import TOKENS, fresh_spec, journal_bytes, shared_app


async def test_register_create_retry_conflict_retire(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, client):
        alice, bob, carol = p["alice"], p["bob"], p["carol"]
        me = await alice.sync()
        assert me == {"registered": False, "participant": None, "lineage": alice.lineage,
                      "next_sequence": "1", "retry_floor": "1"}
        status, caps = await alice.get("/capabilities")
        assert status == 200 and caps["limits"]["receipts"] == 1024 and caps["journal"]["hold"] is False

        reg = alice.body()
        status, r1 = await alice.post("/participant", reg)
        assert status == 201, r1
        assert r1["status"] == {"transport": "accepted", "commit": "committed", "admission": "saved",
                                "terminal": "saved"}
        save = r1["save"]
        assert save["source"] == runtime.spec.name and save["generation"] == 1 and save["boot"] == runtime.boot_id
        assert len(save["commit_digest"]) == 64 and save["pending_bytes"] == 0 and save["disk_error"] is None
        assert save["incarnation"] == runtime.projector.incarnation
        assert (await alice.post("/participant", reg)) == (200, r1)  # exact retry: the identical receipt

        space_body = alice.body(scope="private")
        status, sp = await alice.post("/spaces", space_body)
        assert status == 201 and sp["kind"] == "space.create"
        space = sp["resource"]
        assert space == f"spc-{alice.lineage}-{space_body['operation_key']}"  # omitted id = operation key
        status, conv = await alice.post(f"/spaces/{space}/conversations", alice.body())
        assert status == 201
        con = conv["resource"]

        # exact retry of an older sequence; changed input; future sequence
        assert (await alice.post("/spaces", space_body)) == (200, sp)
        status, err = await alice.post("/spaces", {**space_body, "scope": "room"})
        assert status == 409 and err["error"]["type"] == "conflict"
        status, err = await alice.post("/spaces", alice.body(sequence=alice.next_sequence + 5))
        assert status == 409 and set(err) == {"error", "request_id"}

        # a non-member never sees the private space; a read member does after the manage grant
        await bob.sync()
        status, bob_reg = await bob.post("/participant", bob.body())
        assert status == 201
        await carol.sync()
        assert (await carol.post("/participant", carol.body()))[0] == 201
        for who in (bob, carol):
            assert (await who.get(f"/spaces/{space}"))[0] == 404
            assert (await who.get(f"/conversations/{con}"))[0] == 404
            assert (await who.get(f"/spaces/{space}/conversations"))[0] == 404
        status, _ = await alice.post(f"/spaces/{space}/members",
                                     alice.body(participant=bob_reg["resource"], permissions=["read"]))
        assert status == 201
        status, seen = await bob.get(f"/spaces/{space}")
        assert status == 200 and seen["permissions"] == ["read"]
        assert (await bob.get(f"/conversations/{con}"))[0] == 200
        assert (await carol.get(f"/spaces/{space}"))[0] == 404
        status, members = await alice.get(f"/spaces/{space}/members")
        assert members["members"] == [{"participant": bob_reg["resource"], "permissions": ["read"]}]
        status, listed = await bob.get("/spaces")
        assert [s["id"] for s in listed["spaces"]] == [space]
        # bob can read but not write in alice's space
        status, err = await bob.post(f"/spaces/{space}/conversations", bob.body())
        assert status == 403
        # foreign participant counters are null
        status, foreign = await bob.get(f"/participant?participant={r1['resource']}")
        assert status == 200 and foreign["next_sequence"] is None and foreign["retry_floor"] is None

        # the operation resource returns the receipt; another lineage cannot select it
        assert (await alice.get(f"/operations/{sp['operation']}")) == (200, sp)
        assert (await bob.get(f"/operations/{sp['operation']}"))[0] == 404

        # retirement, then the stale sequence and the retired handle answer 410
        floor = alice.next_sequence
        status, ret = await alice.post("/participant/retirements", alice.body(retry_floor=str(floor)))
        assert status == 201 and ret["kind"] == "participant.retire"
        assert (await alice.post("/spaces", space_body))[0] == 410
        assert (await alice.get(f"/operations/{sp['operation']}"))[0] == 410
        me = await alice.sync()
        assert me["retry_floor"] == str(floor)
        # the retired key can be reused by a new operation with the next sequence
        status, again = await alice.post("/spaces", alice.body(key=space_body["operation_key"],
                                                              id=f"{0xabc:032x}"))
        assert status == 201 and again["operation"] != sp["operation"]
        assert (await alice.get(f"/operations/{sp['operation']}"))[0] == 410

        # the token never reaches the journal
        raw = b"".join(data for _, data in await journal_bytes(runtime))
        for token in TOKENS.values():
            assert token.encode() not in raw
        for name in ("alice", "bob", "carol"):
            assert name.encode() not in raw


async def test_auth_malformed_and_unknown(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, client):
        alice, reader = p["alice"], p["reader"]
        resp = await client.get("/aotx/v1/shared/participant")
        assert resp.status_code == 401 and resp.headers["Cache-Control"] == "no-store"
        assert (await resp.get_json())["error"]["type"] == "unauthorized"
        resp = await client.get("/aotx/v1/shared/participant", headers={"Authorization": "Bearer wrong"})
        assert resp.status_code == 401
        await alice.sync()
        assert (await alice.post("/participant", alice.body()))[0] == 201
        before = runtime.state_hash()
        good = alice.body()
        cases = [
            b'{"schema": "aotx.shared.mutation.v1", "lineage": "\xff"}',                 # invalid UTF-8
            __import__("json").dumps({**good, "extra": 1}).encode(),                      # unknown field
            __import__("json").dumps({**good, "operation_key": "0" * 32}).encode(),       # zero key
            __import__("json").dumps({**good, "sequence": "01"}).encode(),                # non-canonical counter
            __import__("json").dumps({**good, "id": "XYZ"}).encode(),                     # malformed id
            b"[]", b"not json",
        ]
        for raw in cases:
            status, err = await alice.post_raw("/spaces", raw)
            assert status == 400 and err["error"]["type"] == "invalid_request", (raw, err)
        status, err = await alice.post_raw("/spaces/spc-zz/conversations",
                                           __import__("json").dumps(good).encode())
        assert status == 400
        assert (await alice.get("/spaces/spc-nothex"))[0] == 400
        assert (await alice.get("/spaces?limit=x"))[0] == 400
        assert (await alice.get("/no/such/route"))[0] == 404
        assert runtime.state_hash() == before
        assert (await alice.sync())["next_sequence"] == "2"
        # a read-only principal can read but not register
        await reader.sync()
        status, err = await reader.post("/participant", reader.body())
        assert status == 403 and err["error"]["type"] == "forbidden"
        status, doc = await alice.get("/openapi.json")
        assert status == 200 and doc["openapi"].startswith("3.")
        for path in ("/capabilities", "/participant", "/participant/retirements", "/spaces", "/spaces/{space}",
                     "/spaces/{space}/members", "/spaces/{space}/conversations", "/conversations/{con}",
                     "/operations/{op}", "/openapi.json"):
            assert path in doc["paths"]
