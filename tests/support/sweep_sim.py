"""The sweep's own round loop on simulated servers, for the decision's tests and
bench/decision_sim.py: ``_Rounds.run`` of patchkit/profile/remote/sweep.py (its horizon
planning, racing, drops and stop) with only the server start (and the baseline's) replaced by a
draw. A stand-in for what CI cannot have (GPU servers); everything downstream of a run's
tok/s is the sweep's real code.

A start's log tok/s is the point's level + the round's shift N(0, round_sd) + N(0, spread).
With ``prefill``, a start is a benchmark of decode + prefill + rest seconds whose prefill
period is drawn lognormal (``prefill_sd``) around 20 ms for every start: the start-to-start
nuisance the adjusted estimator takes out (patchkit/profile/remote/adjusted.py); the point's
level then sets its decode time.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

from patchkit.profile.remote import sweep as sweep_mod
from patchkit.profile.remote.adjusted import time_parts


class _Bracket:
    applied = True

    def __init__(self) -> None:
        self.notes: list = []
        self.lines: list[str] = []

    def log(self, line: str) -> None:
        self.lines.append(line)

    def verify_and_apply(self) -> None:
        pass

    def revert_series(self) -> list:
        return []


def _prefill_run(rng, mu: float, shift: float, decode_sd: float, prefill_sd: float) -> dict:
    """One start of the prefill stand-in: 10,000 tokens in decode + 100 prefill cycles + 0.5 s."""
    decode_s = 8.0 * math.exp(-mu - shift + rng.gauss(0.0, decode_sd))
    period = 0.02 * math.exp(rng.gauss(0.0, prefill_sd))
    duration = decode_s + 100 * period + 0.5
    doc = {
        "tokens_per_s": 10_000.0 / duration,
        "duration_s": duration,
        "time_split": {
            "decode": {"cycles": 500, "total_s": decode_s},
            "prefill": {"cycles": 100, "total_s": 100 * period},
        },
    }
    doc["time_parts"] = time_parts(doc)
    return doc


def run_sweep(
    rng,
    logs: list[float],
    spread: float,
    *,
    round_sd: float = 0.0,
    known: float | None = None,
    known_adjusted: float | None = None,
    min_effect: float = 5.0,
    power: float = 0.9,
    rounds: int = 20,
    baseline: float | None = None,
    prefill_sd: float | None = None,
):
    """One sweep of points at log levels ``logs`` (labels p0, p1, ...; ``baseline``: the
    baseline's level, raced): returns the _Rounds state after run(). ``known``: the spread the
    cache holds (40 df: taken as known), else none (measured); ``known_adjusted``: the cache's
    spread of the adjusted tok/s."""
    points = [{"label": f"p{i}", "params": {}, "server_command": "s", "env": {}} for i in range(len(logs))]
    cfg = SimpleNamespace(
        sweep_seed=1,
        repeat=None,
        sequential=True,
        rounds=rounds,
        baseline=baseline is not None,
        budget_minutes=None,
        min_effect=min_effect,
        power=power,
        until="decided",
    )
    rows = [sweep_mod._row(i, p) for i, p in enumerate(points)]
    for row in rows:
        row["reports_base"] = row["report"]
    block = SimpleNamespace(name=None, transports=None, describe=lambda: "")
    state = sweep_mod._Rounds(cfg, points, rows, [block], Path("/nonexistent"), None, 0.0, _Bracket())
    if known is not None:
        state.prior = {"spread": known, "df": 40, "runs": 50}
    if known_adjusted is not None:
        state.prior_adjusted = {"spread": known_adjusted, "df": 40, "runs": 50}
    shifts: dict[int, float] = {}
    level = {p["label"]: x for p, x in zip(points, logs)}

    def draw(rep: int, mu: float) -> dict:
        shift = shifts.setdefault(rep, rng.gauss(0.0, round_sd))
        if prefill_sd is not None:
            return _prefill_run(rng, mu, shift, spread, prefill_sd)
        return {"tokens_per_s": math.exp(mu + shift + rng.gauss(0.0, spread))}

    def run_point(cfg, point, row, rep, *args, **kwargs):
        run = {"ok": True, "rep": rep + 1, "block": None, "error": None, "wall_s": 1.0, "report": "x"}
        run |= draw(rep, level[point["label"]])
        row["runs"].append(run)
        return run

    def run_baseline(self, rnd):
        doc = {"error": None, "report": f"b{rnd}", "wall_s": 1.0} | draw(rnd, baseline or 0.0)
        self.base_runs.append(doc)
        return doc

    saved = sweep_mod._run_point, sweep_mod._Rounds._baseline
    sweep_mod._run_point, sweep_mod._Rounds._baseline = run_point, run_baseline
    try:
        state.run()
    finally:
        sweep_mod._run_point, sweep_mod._Rounds._baseline = saved
    return state


def named_best(state) -> str | None:
    """The best the sweep named (None: undecided)."""
    d = state.decision
    return d.best if d is not None and d.status == "decided" else None
