"""The spread between server starts, remembered per target and server command.

A small JSON file (default ``~/.cache/patchkit/spread.json``; the setting ``spread_cache`` or
the environment's ``PATCHKIT_SPREAD_CACHE`` name another, ``off`` none) maps a key -- the
targets and the server command without the options the matrix sweeps -- to the spread
measured there: the standard deviation of log tok/s between starts of one point (pooled over
the points, after the blocks' effects), its degrees of freedom and the runs it came from.

A sequential sweep reads it at its start and passes it to the decision as ``prior_spread``,
which only plans (how many runs a 5 % difference would need before the sweep has measured a
spread of its own); it is never data of the test. At the end the sweep's own spread is pooled
into the entry (variances weighted by degrees of freedom).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from patchkit.profile.remote.server_args import ENV_PREFIX, drop_options
from patchkit.settings import SPREAD_CACHE

ENV = "PATCHKIT_SPREAD_CACHE"
DEFAULT = SPREAD_CACHE  # the option table's (patchkit.settings)
SCHEMA = "patchkit.spread-cache/1"


def cache_path(setting: str | None) -> Path | None:
    """The cache file: the setting, else $PATCHKIT_SPREAD_CACHE, else the default; None: off."""
    where = setting if setting is not None else os.environ.get(ENV) or DEFAULT
    if where.strip().lower() in ("off", "none", "0", "false"):
        return None
    return Path(where).expanduser()


def cache_key(targets: list[str], server_command: str, matrix: dict) -> str:
    """The targets and the server command without the swept options (a matrix's env: keys
    change no command)."""
    return json.dumps([list(targets), _unswept(server_command, matrix)])


def _unswept(server_command: str, matrix: dict) -> str:
    """The server command without the options the matrix sweeps (its env: keys change no
    command): whitespace folded where options were dropped, else as given."""
    swept = [k for k in matrix if not k.startswith(ENV_PREFIX)]
    return " ".join(drop_options(server_command, swept).split()) if swept else server_command


def _load(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = doc.get("entries") if isinstance(doc, dict) else None
    return entries if isinstance(entries, dict) else {}


def read_spread(path: Path | None, key: str) -> dict | None:
    """The entry {spread, df, runs, updated} for ``key``, or None (no file, no entry, unreadable)."""
    return None if path is None else _valid(_load(path).get(key))


def _valid(entry) -> dict | None:
    """A cache entry with a usable spread, else None."""
    if not isinstance(entry, dict):
        return None
    spread = entry.get("spread")
    if not isinstance(spread, (int, float)) or not math.isfinite(spread) or spread < 0:
        return None
    return entry


def update_spread(path: Path | None, key: str, measured: dict | None) -> dict | None:
    """Pool ``measured`` ({spread, df, runs}) into the entry for ``key``; returns the entry
    written (None when nothing was written)."""
    if path is None or not measured or not measured.get("df"):
        return None
    entries = _load(path)
    old = entries.get(key) if isinstance(entries.get(key), dict) else None
    df, var, runs = measured["df"], measured["spread"] ** 2, measured["runs"]
    if old and old.get("df") and isinstance(old.get("spread"), (int, float)):
        var = (old["spread"] ** 2 * old["df"] + var * df) / (old["df"] + df)
        df, runs = old["df"] + df, int(old.get("runs") or 0) + runs
    entry = {"spread": math.sqrt(var), "df": df, "runs": runs, "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    entries[key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".spread-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"schema": SCHEMA, "entries": entries}, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)
    return entry


def measured_spread(runs: dict, blocks: dict | None = None, effects: dict | None = None) -> dict | None:
    """{spread, df, runs}: the pooled standard deviation of log tok/s between the runs of each
    point (``runs``: label -> tok/s per run, None where it failed), each run's block effect
    (``effects``: block -> effect on log tok/s) taken out first; None below 1 degree of freedom."""
    ss, df, count = 0.0, 0, 0
    for label, values in runs.items():
        names = (blocks or {}).get(label) or [None] * len(values)
        logs = [
            math.log(v) - (effects or {}).get(b or "", 0.0)
            for v, b in zip(values, names)
            if v is not None and v > 0
        ]
        if len(logs) < 2:
            continue
        mean = statistics.fmean(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
        count += len(logs)
    if effects:  # the block effects were estimated from the same runs
        df -= max(0, len([e for e in effects if e]) - 1)
    if df < 1:
        return None
    return {"spread": math.sqrt(ss / df), "df": df, "runs": count}


def spread_by_part(split_runs: dict) -> dict | None:
    """Where the spread between starts lies: ``split_runs`` is label -> one summary.json
    ``time_split`` per successful run (None where a run had none), with ``rest`` (the
    benchmark's time outside cycles) where every run has it. For the benchmark's time and for
    each part of it (decode cycles, prefill cycles, rest): the pooled standard deviation between
    the runs of each point, as a fraction of that point's mean time (so the parts' figures
    compare with each other and with the whole), and ``carried_by``, the part with the largest;
    None below one degree of freedom."""
    every = [s for splits in split_runs.values() for s in splits if s]
    with_rest = bool(every) and all(s.get("rest") for s in every)
    names = ("decode", "prefill", "rest") if with_rest else ("decode", "prefill")
    ss = {n: 0.0 for n in (*names, "total")}
    df = 0
    for splits in split_runs.values():
        got = [s for s in splits if s and all(s.get(n) for n in names)]
        if len(got) < 2:
            continue
        values = {n: [s[n]["total_s"] for s in got] for n in names}
        values["total"] = [sum(s[n]["total_s"] for n in names) for s in got]
        scale = statistics.fmean(values["total"])
        if scale <= 0:
            continue
        for n, vals in values.items():
            mean = statistics.fmean(vals)
            ss[n] += sum(((v - mean) / scale) ** 2 for v in vals)
        df += len(got) - 1
    if df < 1:
        return None
    out: dict = {"df": df, **{n: math.sqrt(v / df) for n, v in ss.items()}}
    out["carried_by"] = max(names, key=lambda n: out[n])
    return out


def spread_for_command(path: Path | None, server_command: str | None, matrix: dict) -> dict | None:
    """The cached entry (with its ``key``) whose server command, less the swept options, is
    ``server_command``'s: a run's meta names its targets by label, not as they were given, so
    the command alone is matched; with several targets cached, the entry with the most
    degrees of freedom. None when nothing matches."""
    if path is None or not server_command:
        return None
    want = " ".join(_unswept(server_command, matrix).split())
    best = None
    for key, entry in _load(path).items():  # one read of the file
        try:
            _targets, command = json.loads(key)
        except (ValueError, TypeError):
            continue
        if not isinstance(command, str) or " ".join(command.split()) != want:
            continue
        checked = _valid(entry)
        if checked and (best is None or (checked.get("df") or 0) > (best.get("df") or 0)):
            best = {**checked, "key": key}
    return best


def prediction_plan(pred: dict, spread: float | None, source: str, difference: float | None = None) -> dict:
    """What measuring a prediction's best against its runner-up would take: the predicted
    difference between them (or ``difference``), and the runs per point a sequential sweep
    needs to tell them apart at ``spread`` (sd of log tok/s between starts; None: unknown)."""
    from patchkit.profile.sequential import plan_runs

    ranked = sorted(pred["points"], key=lambda p: -p["ratio_to_profiled"])
    out: dict = {"spread": spread, "spread_source": source, "runs_per_point": None}
    if len(ranked) < 2:
        return out
    best, second = ranked[0], ranked[1]
    gap = best["ratio_to_profiled"] / second["ratio_to_profiled"] - 1.0
    diff = gap if difference is None else difference
    out.update(
        best=best["num_steps"], runner_up=second["num_steps"], predicted_difference=gap, difference=diff
    )
    if spread is not None and diff > 0:
        out["runs_per_point"] = plan_runs(spread, diff, points=2)
    return out


def plan_lines(plan: dict) -> list[str]:
    """The table's lines for prediction_plan's result."""
    if "best" not in plan:
        return []
    head = (
        f"to tell num-steps {plan['best']} from {plan['runner_up']} "
        f"(predicted {plan['predicted_difference'] * 100:.1f} % apart"
        + (
            f"; asked: {plan['difference'] * 100:g} %"
            if plan["difference"] != plan["predicted_difference"]
            else ""
        )
        + ")"
    )
    if plan["spread"] is None:
        return [
            head + ": no spread between server starts is known for this server command "
            "(a profile.remote sweep with --repeat records one; or give --spread PCT)"
        ]
    runs = plan["runs_per_point"]
    what = (
        f"about {runs} server starts per point" if runs else "more than 1000 starts per point: not practical"
    )
    return [
        head + f" at {plan['spread'] * 100:.1f} % between starts ({plan['spread_source']}): {what} "
        "(profile.remote --from-prediction RUN --top 2 --until decided stops as soon as it can)"
    ]
