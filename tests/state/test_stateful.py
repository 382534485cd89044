"""Random command sequences against an independent model of the rules (dicts, no numpy, no JSON).

Invariants: an exact retry returns the same receipt; 409/410 exactly as the retry table says;
nobody sees a space the model says they cannot read; replaying the emitted events from an
empty state gives the live state_hash (also checked by the `restart` rule, which continues
from the replayed state).
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from aotx.state import (Accepted, Capacities, Grants, MutationKind, Refusal, Replayed, apply, decode_event,
                        empty_state, encode_event, list_spaces, lineage_for, receipt_json, state_hash)

from .helpers import Driver

M = MutationKind
PRINCIPALS = ("alice", "bob", "carol")
CAPS = Capacities(participants=2, spaces=3, conversations=3, members=3, receipts=8)
R, W, X = "read", "write", "manage"
NEEDS = {M.REGISTER: "w", M.RETIRE: "w", M.CREATE_SPACE: "w", M.CREATE_CONVERSATION: "w", M.SET_MEMBER: "m"}


class Model:
    def __init__(self):
        self.parts: dict[str, dict] = {}                # name -> next, floor, key
        self.receipts: dict[tuple[str, int], tuple] = {}  # (name, seq) -> (canon, key)
        self.spaces: dict[tuple[str, int], str] = {}     # (owner, ident) -> scope
        self.members: dict[tuple[tuple[str, int], str], frozenset] = {}
        self.convs: set[tuple[str, int]] = set()
        self.grants = {p: frozenset("rwm") for p in PRINCIPALS}

    def rights(self, space, who) -> frozenset:
        if space not in self.spaces or who not in self.parts:
            return frozenset()
        if space[0] == who:
            base = frozenset((R, W, X))
        elif (space, who) in self.members:
            base = self.members[(space, who)]
        else:
            base = frozenset((R, W)) if self.spaces[space] == "instance" else frozenset()
        granted = {R: "r", W: "w", X: "m"}
        return frozenset(r for r in base if granted[r] in self.grants[who])

    def expect(self, who, kind, seq, key, canon, args) -> tuple[int, str]:
        """(status, label) for a command; label says which rule answered."""
        if NEEDS[kind] not in self.grants[who]:
            return 403, "grant"
        p = self.parts.get(who)
        if p is None and kind is not M.REGISTER:
            return 409, "unregistered"
        nxt, floor = (1, 1) if p is None else (p["next"], p["floor"])
        if seq > nxt:
            return 409, "future"
        if seq < floor:
            return 410, "retired"
        if seq < nxt:
            return (200, "retry") if self.receipts[(who, seq)][0] == canon else (409, "changed")
        if any(k == key for (w, _), (_, k) in self.receipts.items() if w == who):
            return 409, "key"
        if kind is M.RETIRE:
            new = args["floor"]
            if new < floor or new > seq:
                return 409, "floor"
            freed = sum(1 for (w, s) in self.receipts if w == who and s < new)
            return (507, "receipts") if len(self.receipts) - freed >= CAPS.receipts else (201, "new")
        if len(self.receipts) >= CAPS.receipts:
            return 507, "receipts"
        if kind is M.REGISTER:
            if p is not None:
                return 409, "registered"
            return (507, "participants") if len(self.parts) >= CAPS.participants else (201, "new")
        if kind is M.CREATE_SPACE:
            if (who, args["ident"]) in self.spaces:
                return 409, "exists"
            return (507, "spaces") if len(self.spaces) >= CAPS.spaces else (201, "new")
        space, mine = args["space"], self.rights(args["space"], who)
        if R not in mine:
            return 404, "hidden"
        if kind is M.CREATE_CONVERSATION:
            if W not in mine:
                return 403, "right"
            if (who, args["ident"]) in self.convs:
                return 409, "exists"
            return (507, "conversations") if len(self.convs) >= CAPS.conversations else (201, "new")
        if X not in mine:
            return 403, "right"
        target = args["target"]
        if target not in self.parts:
            return 404, "participant"
        if target == space[0]:
            return 409, "owner"
        if (space, target) not in self.members and len(self.members) >= CAPS.members:
            return 507, "members"
        return 201, "new"

    def commit(self, who, kind, seq, key, canon, args):
        if kind is M.REGISTER:
            self.parts[who] = {"next": 1, "floor": 1, "key": key}
        p = self.parts[who]
        if kind is M.RETIRE:
            p["floor"] = args["floor"]
            for k in [k for k in self.receipts if k[0] == who and k[1] < args["floor"]]:
                del self.receipts[k]
        elif kind is M.CREATE_SPACE:
            self.spaces[(who, args["ident"])] = args["scope"]
        elif kind is M.CREATE_CONVERSATION:
            self.convs.add((who, args["ident"]))
        elif kind is M.SET_MEMBER:
            self.members[(args["space"], args["target"])] = frozenset(args["perms"])
        self.receipts[(who, seq)] = (canon, key)
        p["next"] = seq + 1


class StateMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.driver = Driver(CAPS)
        self.model = Model()
        self.history: list[tuple] = []        # accepted commands: (who, kind, seq, key, args, receipt json)
        self.op_ids: set[str] = set()

    # ---- sending ----
    def send(self, who, kind, seq, key, args, expected=None):
        fields, space = {}, None
        if kind is M.RETIRE:
            fields["retry_floor"] = str(args["floor"])
        if kind is M.CREATE_SPACE:
            fields.update(id=f"{args['ident']:032x}", scope=args["scope"]) if args["explicit"] else \
                fields.update(scope=args["scope"])
        if kind is M.CREATE_CONVERSATION:
            fields["id"] = f"{args['ident']:032x}"
        if kind in (M.SET_MEMBER, M.CREATE_CONVERSATION):
            space = self.driver.spc(*args["space"])
        if kind is M.SET_MEMBER:
            fields.update(participant=self.driver.par(args["target"], self.model.parts.get(args["target"], {})
                                                      .get("key", 1)), permissions=sorted(args["perms"]))
        canon = (kind, key) + tuple(sorted((k, str(v)) for k, v in args.items() if k != "explicit"))
        status, label = self.model.expect(who, kind, seq, key, canon, args)
        event(f"{kind.label} {status} {label}")
        decision = self.driver.send(who, kind, seq, key, space, **fields)
        assert decision.status == status, (label, decision)
        if isinstance(decision, Refusal) and status == 507:
            assert decision.table == label
        if isinstance(decision, Accepted):
            self.model.commit(who, kind, seq, key, canon, args)
            assert decision.operation not in self.op_ids and f"{key:032x}" not in decision.operation[-32:]
            self.op_ids.add(decision.operation)
            slot = self.driver.state.receipt_slot(lineage_for(who), seq)
            self.history.append((who, kind, seq, key, args, receipt_json(self.driver.state, slot)))
        if isinstance(decision, Replayed):
            original = next(h for h in self.history if h[0] == who and h[2] == seq)
            assert receipt_json(self.driver.state, decision.slot) == original[5]
        return decision

    @rule(who=st.sampled_from(PRINCIPALS), kind=st.sampled_from([k for k in M if k <= M.CREATE_CONVERSATION]), key=st.integers(1, 12),
          ident=st.integers(1, 3), scope=st.sampled_from(["private", "room", "instance"]), explicit=st.booleans(),
          space=st.tuples(st.sampled_from(PRINCIPALS), st.integers(1, 3)), member=st.sampled_from(PRINCIPALS),
          perms=st.sets(st.sampled_from([R, W, X])), floor_delta=st.integers(-1, 3), data=st.data())
    def new_operation(self, who, kind, key, ident, scope, explicit, space, member, perms, floor_delta, data):
        if self.model.spaces and data.draw(st.integers(0, 3), label="existing space"):
            space = data.draw(st.sampled_from(sorted(self.model.spaces)), label="space")
        p = self.model.parts.get(who, {"next": 1, "floor": 1})
        if kind is M.CREATE_SPACE and not explicit:
            ident = key
        args = {M.REGISTER: {}, M.RETIRE: {"floor": max(1, p["floor"] + floor_delta)},
                M.CREATE_SPACE: {"ident": ident, "scope": scope, "explicit": explicit},
                M.CREATE_CONVERSATION: {"space": space, "ident": ident},
                M.SET_MEMBER: {"space": space, "target": member, "perms": frozenset(perms)}}[kind]
        self.send(who, kind, p["next"], key, args)

    @rule(data=st.data())
    def exact_retry(self, data):
        if self.history:
            who, kind, seq, key, args, _ = data.draw(st.sampled_from(self.history))
            self.send(who, kind, seq, key, args)

    @rule(data=st.data(), bump=st.integers(1, 2))
    def changed_input_or_future_sequence(self, data, bump):
        if self.history:
            who, kind, seq, key, args, _ = data.draw(st.sampled_from(self.history))
            if bump == 1:
                self.send(who, kind, seq, key + 100, args)       # same sequence, other bytes
            else:
                self.send(who, kind, self.model.parts[who]["next"] + 1, key + 200, args)

    @rule(who=st.sampled_from(PRINCIPALS), grants=st.sets(st.sampled_from("rwm")))
    def change_grants(self, who, grants):
        self.model.grants[who] = frozenset(grants)
        self.driver.grants[who] = Grants("r" in grants, "w" in grants, "m" in grants)

    @rule()
    def restart(self):
        replayed = empty_state(CAPS)
        for event in self.driver.log:
            replayed = apply(replayed, decode_event(encode_event(event)))
        assert state_hash(replayed) == state_hash(self.driver.state)
        self.driver.state = replayed

    # ---- invariants ----
    @invariant()
    def nobody_sees_what_they_cannot_read(self):
        for who in PRINCIPALS:
            seen = list_spaces(self.driver.state, self.driver.actor(who))
            if "r" not in self.model.grants[who]:
                assert isinstance(seen, Refusal) and seen.status == 403
                continue
            expected = {self.driver.spc(*s) for s in self.model.spaces if R in self.model.rights(s, who)}
            assert {s["id"] for s in seen["spaces"]} == expected

    @invariant()
    def counters_match(self):
        for who, p in self.model.parts.items():
            row = self.driver.state.participants[self.driver.state.participant_row(lineage_for(who))]
            assert (int(row["next_sequence"]), int(row["retry_floor"])) == (p["next"], p["floor"])
        assert self.driver.state.free_receipts() == CAPS.receipts - len(self.model.receipts)

    def teardown(self):
        self.restart()


StateMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=50, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestRules = StateMachine.TestCase
