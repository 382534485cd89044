"""What a step's token mask hands llguidance (aotx.engine.masks.LateMask.prepare): its rows in the lexers'
order, the rows with a token pending and the ids that hold them, and the fill's (matcher, row) pairs;
built by the mask worker before the read-back, shared with the last plan where the rows are the same."""
from __future__ import annotations

import operator

import numpy as np

_SECOND, _THIRD = operator.itemgetter(1), operator.itemgetter(2)


class MaskPlan:
    """A mask's rows as llguidance takes them (LateMask.prepare): the matchers; the rows with a token
    pending (their matchers, output indexes, and rows of the previous launch's ids), in lexer order as
    the fill's; the rows without one and the tokens their matchers must have consumed; the fill's
    (llguidance matcher, row) pairs with the rows of one lexer next to each other (aotx.structured.batch
    .fill_rows says why: a lexer's rows take turns at its mutex). Never changed once built: a later
    step's plan over the same matchers in the same order (most decode steps) shares its lists."""
    __slots__ = ("matchers", "lls", "tokens", "order", "pending", "pending_matchers", "pending_lls", "pending_tokens",
                 "pending_index", "id_rows", "id_list", "idle", "idle_tokens", "idle_index", "pairs", "rows", "row_list",
                 "id_src", "ok_seen", "__weakref__")

    @classmethod
    def of(cls, seqs: list[tuple], rows: list[int], last: "MaskPlan | None" = None) -> "MaskPlan | None":
        """``build`` from a mask's (seq, id row, index) tuples."""
        return cls.build([seq.matcher for seq, _, _ in seqs], list(map(_SECOND, seqs)), list(map(_THIRD, seqs)),
                         rows, last)

    @classmethod
    def build(cls, matchers: list, id_col: list[int], index_col: list[int], rows: list[int],
              last: "MaskPlan | None" = None) -> "MaskPlan | None":
        """The plan of a mask's rows given as columns (LateMask's: each row's matcher, the row of the previous
        launch's ids holding its pending token or -1, its output index); `last`: the plan built before, whose
        lists it shares where they would be the same (the very columns of the last one: a steady decode step's
        mask, LateMask.following, changes only the indexes)."""
        plan = cls()
        if (last is not None and last.matchers is matchers and last.id_src is id_col and last.row_list is rows
                and not last.idle):     # (every row pending, in the plan's order)
            for name in _STEADY:
                setattr(plan, name, getattr(last, name))
            plan.id_src = id_col
            plan.pending_index = (index_col if type(last.order) is range
                                  else list(map(index_col.__getitem__, plan.pending)))
            plan.idle_index = []
            return plan
        plan.id_src = id_col
        if last is not None and last.matchers == matchers:    # (identity: RowMatcher has no __eq__)
            plan.matchers, plan.lls, plan.order, plan.pairs = last.matchers, last.lls, last.order, last.pairs
            plan.tokens, plan.ok_seen = last.tokens, last.ok_seen
        else:
            lls = [getattr(m, "ll", None) for m in matchers]
            if None in lls:
                return None
            plan.tokens = [getattr(m, "_tokens", None) for m in matchers]    # (RowMatcher's record)
            if None in plan.tokens or any(getattr(m, "_ok", None) is None for m in matchers):
                return None
            groups = [getattr(m, "group", 0) for m in matchers]
            plan.matchers, plan.lls = matchers, lls
            plan.ok_seen = [None]     # (the count of rows failed when these matchers were last read all ok)
            plan.order = sorted(range(len(matchers)), key=groups.__getitem__) if any(groups) else range(len(matchers))
            plan.pairs = [(lls[k], k) for k in plan.order]
            last = None
        order = plan.order
        every = min(id_col, default=0) >= 0
        pending = (order if type(order) is list else list(order)) if every else [k for k in order if id_col[k] >= 0]
        if last is not None and pending == last.pending:
            plan.pending, plan.pending_matchers, plan.pending_lls = last.pending, last.pending_matchers, last.pending_lls
            plan.pending_tokens, plan.idle, plan.idle_tokens = last.pending_tokens, last.idle, last.idle_tokens
        else:
            plan.pending = pending
            plan.pending_matchers = [plan.matchers[k] for k in pending]
            plan.pending_lls = [plan.lls[k] for k in pending]
            plan.pending_tokens = [plan.tokens[k] for k in pending]
            plan.idle = [plan.matchers[k] for k in order if id_col[k] < 0]
            plan.idle_tokens = [plan.tokens[k] for k in order if id_col[k] < 0]
        if every and type(order) is range:
            plan.pending_index, ids = index_col, id_col
        else:
            plan.pending_index = list(map(index_col.__getitem__, plan.pending))
            ids = list(map(id_col.__getitem__, plan.pending))
        plan.id_rows = last.id_rows if last is not None and ids == last.id_list else np.array(ids, np.intp)
        plan.id_list = ids
        plan.idle_index = [index_col[k] for k in order if id_col[k] < 0] if plan.idle else []
        plan.rows = last.rows if last is not None and rows == last.row_list else np.array(rows, dtype=np.int32)
        plan.row_list = rows
        return plan


# what a steady step's plan shares with the last one as it is (MaskPlan.build)
_STEADY = ("matchers", "lls", "tokens", "order", "pending", "pending_matchers", "pending_lls", "pending_tokens",
           "id_rows", "id_list", "idle", "idle_tokens", "pairs", "rows", "row_list", "ok_seen")
