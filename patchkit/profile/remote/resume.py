"""A sweep that goes on after its process, its connection or its machine died (``--resume DIR``).

The sweep (sweep.py) keeps ``sweep-state.json`` in its folder, rewritten atomically (a temporary
file, fsync, os.replace) at the start of every round and whenever a run starts or finishes:
the settings its design rests on (compared on resume), the points, the seeds (the blocks' Latin
square, the timing runtime's), the horizon and the round that ended it early, the spread read
from the cache (the prior), the decision's ``design`` (_Rounds.design, kept as it is), and the
rounds as far as they went: the points live, dropped and failed out, each round's record, the
order of the runs, every row's runs (with their reports' folders) and the baseline's, and the
runs started but not finished (``in_flight``). Once the sweep's files are written it says
``finished``.

``--resume DIR`` (run_remote_sweep's ``resume``) reads it back -- refused (exit 2) where DIR
holds none, or a finished sweep's (nothing to resume), or where the command's design differs
(each differing setting named) -- and the sweep goes on in DIR, so that its sweep.json covers
every round:

- restore(): the rounds back into the sweep's _Rounds. A run started and not finished (cut
  mid-server) is discarded -- its entry in the order, its half-filled run -- and runs again in
  its round; the round it was cut in goes on where it stopped (the runs it finished are kept, the
  rest run in the round's order), so the resumed sweep makes the same runs in the same order as
  an uninterrupted one and reaches the same verdict on the same measurements. Its clock is the
  sweep's time before the cut plus the time since the resume: a budget does not count the time
  the sweep was down.
- prepare_targets(), before the next start: what a discarded run left on its targets is
  stopped (its remote.json, written as soon as the run made its remote folders, names them;
  the agent skips a job whose machine has rebooted since), its local folder is set aside as
  ``REPORT.cut``, and the targets are checked pristine by patch.status. A target found with the
  series applied or partly applied is the cut sweep's own (the sweep verified every target
  pristine before its first apply, and a run cut short leaves it applied): it is reverted first.
  Any other state (modified after apply, drifted, locked) is refused (exit 1), the target
  untouched.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from patchkit.engine.host_result import HostState
from patchkit.errors import InvalidInput, PatchkitError
from patchkit.profile.remote.config import RemoteConfig
from patchkit.profile.remote.host import RemoteHost
from patchkit.profile.remote.run import SERVER_LOG_MAX, describe_failures
from patchkit.profile.site import ProfileError
from patchkit.profile.verdict import DEFAULT_ALPHA

STATE_FILE = "sweep-state.json"
SCHEMA = "patchkit.remote-sweep-state/1"
# the settings a sweep's design rests on: a resumed sweep must be given the same
DESIGN = (
    "matrix",
    "server_command",
    "env",
    "bench_command",
    "bench_env",
    "warmup",
    "warmup_command",
    "targets",
    "inventory",
    "limit",
    "root",
    "series",
    "baseline",
    "repeat",
    "budget_minutes",
    "until",
    "gpus",
    "blocks",
    "cpus",
    "min_effect",
    "power",
)


# ---- the snapshot --------------------------------------------------------------------------------


def design_settings(cfg: RemoteConfig) -> dict[str, Any]:
    """The settings of DESIGN as sweep-state.json holds them (JSON values)."""
    return json.loads(json.dumps({name: getattr(cfg, name) for name in DESIGN}))


def point_docs(points: list[dict]) -> list[dict]:
    return [{k: p[k] for k in ("label", "params", "server_command", "env")} for p in points]


def snapshot(state, settings: dict, points: list[dict]) -> dict[str, Any]:
    """sweep-state.json of a sweep's _Rounds ``state`` now."""
    now = time.monotonic()
    return {
        "schema": SCHEMA,
        "finished": False,
        "settings": settings,
        "points": points,
        "seed": state.seed,
        "timer_seed": state.cfg.timer_seed,
        "blocks": [b.name for b in state.blocks],
        "max_rounds": state.cfg.rounds,
        "horizon": state.horizon,
        "final_round": state.final_round,
        "alpha": DEFAULT_ALPHA,
        "prior": state.prior,
        "design": state.design,
        "elapsed_s": now - state.start,
        "round_began_s": state.round_began - state.start,
        "series_applied": state.bracket.applied,
        "stopped": state.stopped,
        "live": state.live,
        "dropped": state.dropped,
        "failed_out": sorted(state.failed_out),
        "estimator": state.estimator,
        "runs_started": state.runs_started,
        "order": state.order,
        "rounds": state.rounds,
        "rows": state.rows,
        "base_runs": state.base_runs,
        "in_flight": state.in_flight,
    }


def write_state(run_dir: Path, doc: dict) -> None:
    """sweep-state.json, atomically: a reader (or a resume after a crash) sees the last whole one.
    Compact JSON: the C encoder writes it without yielding to the GPUs' threads mid-object."""
    path = run_dir / STATE_FILE
    tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def writer(cfg: RemoteConfig, points: list[dict], run_dir: Path):
    """The sweep's on_change: the snapshot of its _Rounds into run_dir."""
    settings, docs = design_settings(cfg), point_docs(points)
    return lambda state: write_state(run_dir, snapshot(state, settings, docs))


def mark_finished(run_dir: Path) -> None:
    """The sweep's files are written: nothing left to resume."""
    path = run_dir / STATE_FILE
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["finished"] = True
    write_state(run_dir, doc)


# ---- reading it back -------------------------------------------------------------------------


def read_state(folder: str | Path) -> dict:
    """The snapshot in ``folder``; InvalidInput (exit 2) where there is none, it cannot be read,
    or its sweep finished."""
    folder = Path(folder)
    where = f"profile.remote --resume {folder}"
    path = folder / STATE_FILE
    if not folder.is_dir():
        raise InvalidInput(f"{where}: no such folder")
    if not path.is_file():
        raise InvalidInput(
            f"{where}: no {STATE_FILE} there: not the folder of a sweep (profile.remote --matrix) "
            "that can be resumed"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{where}: {path} cannot be read ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InvalidInput(f"{where}: {path} is not a sweep's state ({SCHEMA})")
    if doc.get("finished"):
        raise InvalidInput(
            f"{where}: that sweep finished (stopped: {doc.get('stopped') or '-'}, "
            f"{len(doc.get('rounds') or [])} round(s), {len(doc.get('order') or [])} run(s)); "
            f"nothing to resume -- its verdict is in {folder / 'sweep.json'}"
        )
    return doc


def load(folder: str | Path | None, cfg: RemoteConfig, points: list[dict]) -> dict | None:
    """The snapshot a sweep resumes from (None: a new sweep), read and checked against the command."""
    if folder is None:
        return None
    doc = read_state(folder)
    check_design(cfg, points, doc, folder)
    return doc


def _short(value: Any, width: int = 90) -> str:
    text = json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def check_design(cfg: RemoteConfig, points: list[dict], doc: dict, folder: str | Path) -> None:
    """InvalidInput (exit 2) naming each setting (or the points, or the seed given) in which the
    command differs from the sweep it would resume."""
    mine, theirs = design_settings(cfg), doc.get("settings") or {}
    differ = [(name, theirs.get(name), mine[name]) for name in DESIGN if mine[name] != theirs.get(name)]
    if not differ and point_docs(points) != doc.get("points"):
        labels = [[p["label"] for p in pts] for pts in (doc.get("points") or [], point_docs(points))]
        differ.append(("points", labels[0], labels[1]))
    if cfg.sweep_seed is not None and cfg.sweep_seed != doc.get("seed"):
        differ.append(("sweep_seed", doc.get("seed"), cfg.sweep_seed))
    if differ:
        said = "; ".join(
            f"{name}: the sweep's {_short(a)}, this command's {_short(b)}" for name, a, b in differ
        )
        raise InvalidInput(
            f"profile.remote --resume {folder}: this command's design differs from the sweep's -- {said} "
            f"(resume it with its own settings, in {Path(folder) / STATE_FILE}, or start a new sweep)"
        )


def _open(record: dict, judged: bool) -> bool:
    """Whether a round's record is of a round cut short: not ended, or ended and not judged."""
    return "wall_s" not in record or (judged and "decision" not in record)


def restore(state, doc: dict) -> list[dict]:
    """The snapshot into the sweep's _Rounds ``state`` (its rows list refilled in place); the
    runs cut mid-server, discarded here, are returned ({label, round, report, block})."""
    cut = list(doc.get("in_flight") or [])
    keys = {(c["label"], c["round"]) for c in cut}
    state.seed, state.cfg.timer_seed = doc["seed"], doc["timer_seed"]
    state.horizon, state.final_round = doc["horizon"], doc["final_round"]
    state.prior, state.design = doc["prior"], dict(doc.get("design") or {})
    state.live, state.dropped = list(doc["live"]), dict(doc["dropped"])
    state.failed_out, state.estimator = set(doc["failed_out"]), dict(doc.get("estimator") or {})
    state.stopped = None if doc["stopped"] == "interrupted" else doc["stopped"]
    rows = doc["rows"]
    for row in rows:
        row["runs"] = [r for r in row["runs"] if (row["label"], r["rep"]) not in keys]
    state.rows[:] = rows
    state.base_runs = list(doc["base_runs"])
    state.order = [o for o in doc["order"] if (o["label"], o["rep"]) not in keys]
    state.runs_started = doc["runs_started"] - (len(doc["order"]) - len(state.order))
    rounds = list(doc["rounds"])
    judged = state.cfg.sequential or len(state.blocks) > 1
    if state.stopped is None and rounds and _open(rounds[-1], judged):
        record = rounds.pop()
        for label in [c["label"] for c in cut if c["round"] == record["round"]]:
            if label in record["points"]:  # finished on one GPU while another's run was cut
                record["points"].remove(label)
            for key in ("tokens_per_s", "errors", "blocks"):
                record.get(key, {}).pop(label, None)
        state.partial = {"record": record, "began_s": doc["round_began_s"]}
    state.rounds = rounds
    state.first_round = len(rounds)
    state.start = time.monotonic() - doc["elapsed_s"]
    state.round_began = state.start + doc["round_began_s"]
    return cut


# ---- the targets, before the next start ------------------------------------------------------------


def prepare_targets(state, cut: list[dict], per_run: int) -> None:
    """Each run cut mid-server: said, what it left on its targets stopped and removed, its folder
    set aside; then every target pristine (the series the cut sweep left applied reverted, any
    other state refused); then where the sweep resumes."""
    log = state.bracket.log
    for entry in cut:
        block = state.blocks[entry["block"] or 0]
        folder = state.run_dir / entry["report"]
        _stop_leftovers(folder, block, log)
        kept = _set_aside(folder)
        log(
            f"round {entry['round']}: {entry['label']}: the run cut mid-server is discarded and run again"
            + (f" (its folder kept as {kept.relative_to(state.run_dir)})" if kept else "")
        )
    _pristine(state.bracket, log)
    horizon = state.horizon or state.cfg.rounds
    log(
        f"resumed at round {state.first_round + 1} of at most {horizon} "
        f"({len(state.order) * per_run} starts done)"
    )


def _stop_leftovers(folder: Path, block, log) -> None:
    """Stop every job a cut run started on its targets (its remote.json names their folders),
    keep its server log beside the run, remove the folders (unless keep_remote_dir)."""
    try:
        doc = json.loads((folder / "remote.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # cut before it made a remote folder
    for entry in doc.get("hosts") or []:
        if not entry.get("remote_run_dir") or entry.get("index", 0) >= len(block.transports):
            continue
        host = RemoteHost(entry["index"], block.transports[entry["index"]], block.cfg)
        host.run_dir = entry["remote_run_dir"]
        try:
            jobs = host.stop()
            stopped = [
                f"{j['name']} (process group {j['pgid']}: {', '.join(j['sent'])})" for j in jobs if j["sent"]
            ]
            if stopped:
                log(f"stopped what the cut run left on {host.where}: {'; '.join(stopped)}")
            log_text = host.tail("server.log", SERVER_LOG_MAX) if jobs else b""
            if log_text:
                node = folder / f"node{host.index}"
                node.mkdir(parents=True, exist_ok=True)
                (node / "server.log").write_bytes(log_text)
            if not block.cfg.keep_remote_dir:
                host.cleanup()
        except PatchkitError as exc:
            log(f"{host.where}: could not clear what the cut run left in {host.run_dir}: {exc.message}")


def _set_aside(folder: Path) -> Path | None:
    """A cut run's local folder renamed REPORT.cut (.cut2, ...), so that its rerun starts afresh."""
    if not folder.exists():
        return None
    dest, n = folder.with_name(folder.name + ".cut"), 1
    while dest.exists():
        n += 1
        dest = folder.with_name(f"{folder.name}.cut{n}")
    folder.rename(dest)
    return dest


def _pristine(bracket, log) -> None:
    """patch.status on every target: pristine, or the series the cut sweep left applied (or half
    applied) reverted; any other state refused (exit 1)."""
    status = bracket.ops("status")
    found = [h for h in status.hosts if h.state != HostState.PRISTINE]
    if not found:
        log(f"patch.status: {len(status.hosts)} target(s) pristine")
        return
    if any(h.state not in (HostState.APPLIED, HostState.PARTIAL) for h in found):
        raise ProfileError(
            "profile.remote --resume: a target is neither pristine nor left applied by the cut sweep; "
            "not touched (see patch.status): " + describe_failures(status)
        )
    log(f"the cut sweep left its series applied on {len(found)} target(s): reverting before the next start")
    bracket.applied = True
    problems = bracket.revert_series()
    if problems:
        raise ProfileError("; ".join(problems))
