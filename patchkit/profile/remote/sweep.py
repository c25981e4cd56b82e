"""``profile.remote --matrix``: one server start per point of a matrix, inside one apply/revert.

    cfg = RemoteConfig.from_mapping({..., "matrix": "speculative-num-steps=1,2,3;"
                                     "speculative-num-draft-tokens=2,4;env:NCCL_PROTO=LL,Simple",
                                     "baseline": True})
    outcome = run_remote_sweep(cfg)     # outcome.rows, .best, .baseline, .run_dir

The flow: verify and apply the series on every target; then ``repeat`` repetitions (default
patchkit.settings.REMOTE_REPEAT); in each, every point (cartesian product, first key slowest) and,
with ``baseline``, the baseline as one more point, in rotated order: repetition r starts at
the r-th entry (A B C base, B C base A, C base A B, ...), so that no point is always the first
after a revert or the last of a drifting machine. Each (repetition, point) is its own server
start: the point's server command (each option key replaces or adds ``--KEY VALUE``, see
patchkit.profile.remote.server_args) and environment (``env:`` keys over the settings' env) go
through the same steps as a single profile.remote run -- start, /health, warm-up benchmark,
measured benchmark, stop, fetch -- with that run's report built at once in
``points/NN-label/`` (repetition 1) or ``points/NN-label/repR/``. The baseline (the server
without its --speculative-* options) runs on the reverted tree, in ``baseline/`` (``repR/``
below it): the series is reverted before its turn and applied again after it. A run that
fails (server exits, never healthy, benchmark fails, no cycle recorded) is recorded with its
error and the sweep goes on. The series is reverted in ``finally``: after the last run, on a
failure outside the runs, on Ctrl-C and on SIGTERM.

Each row keeps the keys of a single run (from its median repetition, whose folder ``report``
names) and gains ``tokens_per_s_median``, ``tokens_per_s_ci`` (95%, patchkit.profile.verdict),
``repeats`` (tok/s per repetition, None where it failed), ``reports`` and ``ratio_ci``;
``tokens_per_s`` is the median. sweep.json gains ``verdict`` (verdict.decide_fixed over the points:
best, significant, indistinguishable, method, alpha, plus p_values and ``cost``: server starts
and minutes) and ``order`` (the runs as they ran). sweep.json, sweep.md, sweep.txt, sweep.png
and report.html (the sweep's page, linking each point's) go to the run directory; an
interrupted sweep still writes sweep.json/md/txt with the runs done (``interrupted``: true).

Rounds. A repetition is a *round*: every live point once, in rotated order (the
rotation above over the live points). With ``budget_minutes`` (``--budget``) or ``until``
(``--until decided``) the sweep is *sequential*: after each round
patchkit.profile.sequential.decide_sequential judges the runs so far -- a bounded test that
spends alpha over a horizon of rounds set by the plan (_Rounds.plan_design: the rounds that
decide ``min_effect`` at ``power``, at the spread the cache remembers -- a z test -- or the
spread measured by round 2 -- a t test; ``repeat`` and the budget cap it; a round after which
the budget fits no other is the last look and spends the rest); stopping as soon as it is
decided keeps its error rate; a point it
drops (shown slower than the leader) is not run again, nor is a point whose every run failed,
twice or more (it leaves the decision too); the sweep stops when decided, or before a round
that would not fit the budget (the estimate: the measured wall time of each point's runs,
per GPU the sum of its queue, the longest queue, plus the last round's time beyond its runs;
the first round always runs), or after ``repeat`` rounds (default patchkit.settings.MAX_ROUNDS then). Without them the
sweep runs ``repeat`` rounds and decides once, at the end, with verdict.decide_fixed. sweep.json gains
``rounds`` (per round: points run, their tok/s and errors, the decision's to_dict, minutes so
far, wall_s; the GPU of each point), ``dropped`` (label -> {round, reason}), ``stopped``
("decided", "budget", "max rounds", "interrupted"), ``decision`` (the last, over every run),
``plan`` (undecided: per contender, the more runs that would resolve a 5 % difference at the
spread measured -- the decision's plan, or for a fixed sweep sequential.plan_runs -- and
their minutes from the measured run times), ``spread`` (measured: the pooled sd of log tok/s
between one point's starts, the blocks' effects taken out; sequential sweeps also the
cache's entry read as ``prior`` -- planning only -- and the one written, see spread.py),
``phase_verdict`` (verdict.phase_comparison: per phase of the decode cycle, nested
phases included, its ms per cycle in each run, cycle time x share, and the interval of each
point's ratio to the best or top point, its variance the phase's own from every point (blocked
by round where the design allows), Bonferroni over every (point, phase) pair), ``starts`` (each run's time in decode cycles, prefill cycles and
the rest, adjusted.time_parts) and ``adjusted`` (the verdict with every run's prefill cycles
costed at the sweep's pooled period, and which verdict decided: adjusted.py). A sequential sweep's ``verdict`` is the
decision's in a fixed sweep's keys (best, significant, indistinguishable = the contenders, top,
method, cost with rounds) with ``sequential``: true.

GPUs (``gpus``, ``--gpus 0,1``; blocks.py): one server per GPU at once, each with its own
CUDA_VISIBLE_DEVICES and port; in each round the points are spread over the GPUs by a seeded
randomized Latin square (``seed`` in sweep.json), and points on one GPU run in the round's
order; a round ends when every GPU is done. Every run records its ``block`` ("gpu0", ...);
the decision pairs by block (decide_sequential's ``blocks``), also for a fixed sweep, and
sweep.json gains ``blocks`` and ``block_effects`` (sequential.block_effects, log tok/s). A
server failing on one GPU is that run's error; the sweep goes on. Ctrl-C or SIGTERM stops
every GPU's run at its next poll (RemoteRun.cancel) before the revert. Several targets stay
one fleet serving together (every GPU's runs use all of them), so the blocks are GPUs only --
unless ``blocks`` is "hosts" (``--blocks hosts``): then each target runs its own server, one
at a time, as one GPU does (blocks.py; a block per target, or per target and GPU with
``gpus``), the Latin square spreads the points over them, every run records its target's
label as ``block``, and all of the above holds for them (rounds, dropping, the budget, the
decision paired by block, block effects, a failing block recorded). The series is applied and
reverted on every target once for the whole sweep, as always; ``cost.server_starts`` counts
one start per run then.

Resume. The rounds' state goes to ``sweep-state.json`` at the start of every round and whenever a
run starts or finishes (_Rounds.on_change); ``resume`` (``--resume DIR``) reads it back and the
sweep goes on in DIR: the round cut short continues where it stopped, a run cut mid-server runs
again (patchkit.profile.remote.resume).
"""

from __future__ import annotations

import json
import math
import secrets
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.errors import PatchkitError
from patchkit.profile.local_run import new_run_dir
from patchkit.profile.local_sweep import _fmt, format_table, point_dir_name
from patchkit.profile.progress import ProgressLine
from patchkit.profile.remote import resume as resuming
from patchkit.profile.remote.adjusted import adjusted_verdict, time_parts
from patchkit.profile.remote.blocks import Block, assign, make_blocks
from patchkit.profile.remote.config import RemoteConfig
from patchkit.profile.remote.run import RemoteRun, report_meta, run_baseline
from patchkit.profile.remote.server_args import expand_server_matrix
from patchkit.profile.remote.spread import (
    cache_key,
    cache_path,
    measured_spread,
    read_spread,
    spread_by_part,
    update_spread,
)
from patchkit.profile.site import ProfileError, _sigint_deferred, sigterm_interrupts
from patchkit.profile.verdict import (
    CYCLE,
    DEFAULT_ALPHA,
    decide_fixed,
    describe,
    describe_phases,
    phase_comparison,
    ratio_interval,
    repetition_fields,
    title_line,
)

SCHEMA = "patchkit.remote-sweep/1"


@dataclass
class RemoteSweepOutcome:
    run_dir: Path
    rows: list[dict]
    baseline: dict | None
    best: dict | None
    table: str
    elapsed_s: float
    files: dict = field(default_factory=dict)
    verdict: dict | None = None


BASELINE = "baseline"
ADJUSTED_KEY = " | adjusted"  # the spread cache's key suffix for the adjusted tok/s' spread
PLAN_DIFFERENCE = 0.05  # the difference a plan of more runs is for
MEASURED_KEYS = (
    "ok",
    "error",
    "tokens_per_s",
    "accept_length",
    "cycles",
    "top_level_share",
    "phase_shares",
    "cycle_ms",
    "basis",
    "worker",
)


def _row(index: int, point: dict) -> dict:
    return {
        "index": index + 1,
        "label": point["label"],
        "params": point["params"],
        "server_command": point["server_command"],
        "env": point["env"],
        "report": "points/" + point_dir_name(index, point["label"]),
        "ok": False,
        "error": None,
        "tokens_per_s": None,
        "ratio_to_baseline": None,
        "accept_length": None,
        "cycles": None,
        "top_level_share": None,
        "phase_shares": {},
        "cycle_ms": None,
        "basis": None,
        "worker": None,
        "tokens_per_s_median": None,
        "tokens_per_s_ci": None,
        "repeats": [],
        "ratio_ci": None,
        "reports": [],
        "runs": [],
    }


def rep_dir(base: str, rep: int) -> str:
    """A repetition's folder: the point's own for the first, ``repR`` below it after."""
    return base if rep == 0 else f"{base}/rep{rep + 1}"


def _measure(
    cfg: RemoteConfig,
    point: dict,
    row: dict,
    point_dir: Path,
    progress,
    transports,
    sweep_start: float,
    block: Block | None = None,
    cancel: threading.Event | None = None,
) -> None:
    """One run of a point: serve, benchmark, fetch, report; fills ``row`` (raises on failure).
    ``block``: the GPU it runs on (its port, CUDA_VISIBLE_DEVICES, settings, transports)."""
    from patchkit.report import build_report

    command = block.server_command(point["server_command"]) if block else point["server_command"]
    env = block.env(point["env"]) if block else point["env"]
    if block is not None:
        cfg, transports = block.cfg, block.transports
    run = RemoteRun(cfg, point_dir, progress, transports, server_command=command, env=env, apply=False)
    run.cancel = cancel
    try:
        bench, timing = run.execute()
    finally:
        row["worker"] = run.worker
    bench.write(point_dir)
    meta = report_meta(cfg, bench, run.hosts, time.monotonic() - sweep_start, server_command=command, env=env)
    meta["sweep_point"] = point["label"]
    meta["worker"] = row["worker"]
    if block is not None and block.name:
        meta["sweep_block"] = block.describe()
    summary = build_report(timing, point_dir, meta=meta, chart=cfg.chart)
    dist = summary.cycle["dev_ms"] if summary.basis == "device" else summary.cycle["host_ms"]
    decode_cycle = summary.decode_cycle
    assert decode_cycle is not None, "build_report fills it"
    row.update(
        ok=True,
        tokens_per_s=bench.tokens_per_s,
        cycles=summary.cycle["count"],
        accept_length=bench.accept_length
        if bench.accept_length is not None
        else summary.decode.get("accept_length_mean"),
        top_level_share=decode_cycle["top_level_share"],
        basis=summary.basis,
        cycle_ms=dist["mean"] if dist else None,
        phase_shares=decode_cycle["phase_shares"],
        phase_ms=phase_ms(summary, dist["mean"] if dist else None),
        time_split=summary.time_split,
        duration_s=bench.duration_s,
    )
    row["time_parts"] = time_parts(row)
    if bench.tokens_per_s is None:
        row.update(ok=False, error=f"no output token throughput in {point_dir / 'benchmark.log'}")


def phase_ms(summary, cycle_ms: float | None) -> dict:
    """{phase: ms per decode cycle} for every phase of the decode cycles, nested ones
    included (the cycle's mean time on the report's basis x the phase's share / 100), and
    verdict.CYCLE: the decode cycle's own mean."""
    from patchkit.report.summarize import KIND_PRIMARY, NO_KIND

    decode = summary.cycle_kinds.get(KIND_PRIMARY) or summary.cycle_kinds.get(NO_KIND) or {}
    dist = (decode.get("cycle") or {}).get("dev_ms" if summary.basis == "device" else "host_ms")
    mean = dist["mean"] if dist else cycle_ms
    if not mean:
        return {}
    out = {CYCLE: mean}
    for entry in decode.get("phases", []):
        share = entry.get("share_of_cycle")
        if share is not None and entry["name"] not in out:
            out[entry["name"]] = mean * share / 100.0
    return out


ALL_FAILED = "every point failed"  # sweep.json stopped: no point left to run


def all_failed_message(rows: list[dict], run_dir: Path) -> str:
    """The error of a sweep whose every point failed: one short line per point (short_error)
    and where the whole logs are, not every log tail joined into one line."""
    per_point = "\n".join(f"  {r['label']}: {short_error(r['error'])}" for r in rows)
    return (
        f"every point of the sweep failed:\n{per_point}\nthe servers' logs: {run_dir}/points/*/node*/server.log "
        f"(each repetition's under rep2/, ...); the table: {run_dir / 'sweep.md'}"
    )


def short_error(error: str | None) -> str:
    """One line: the error's first line (without the log-tail lead-in) and its last line."""
    lines = [ln for ln in (error or "").splitlines() if ln.strip()]
    if not lines:
        return "-"
    head = lines[0].split("; last lines of")[0]
    return head + (f" -- {lines[-1].strip()}" if len(lines) > 1 else "")


def _phase_names(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(n for r in rows for n in r["phase_shares"]))


def _ci(ci, spec: str = ".1f", suffix: str = "") -> str:
    return "-" if not ci else f"[{format(ci[0], spec)}, {format(ci[1], spec)}]{suffix}"


def _count(row: dict) -> str:
    reps = row.get("repeats") or []
    ok = sum(v is not None for v in reps)
    return "-" if not reps else (f"{ok}" if ok == len(reps) else f"{ok}/{len(reps)}")


def render_sweep(
    rows: list[dict],
    baseline: dict | None,
    best: dict | None,
    headline: str,
    markdown: bool = False,
    verdict: dict | None = None,
    extra: dict | None = None,
) -> str:
    """The sweep table. ``best`` is marked only when ``verdict`` (when given) is significant.
    ``extra``: sweep.json's rounds, dropped, stopped, plan, block_effects, phase_verdict."""
    names = _phase_names(rows)
    best_mark = None if verdict is not None and not verdict.get("significant") else best
    columns, body, marks = _sweep_cells(rows, baseline, names, best_mark)
    lines = format_table(columns, body, marks, headline, markdown, title="profile.remote sweep")
    lines.append("")
    lines += _verdict_lines(best, best_mark, verdict)
    lines += extra_lines(extra or {}, verdict)
    lines += _failure_lines(rows, baseline)
    basis = next((r["basis"] for r in rows if r["basis"]), "host")
    stopped = (verdict or {}).get("sequential")
    lines.append(
        f"tok/s: median of the repetitions, 95% CI of the geometric mean (t on log "
        f"tok/s); ratio: medians, 95% Welch interval; phase shares: % of the decode "
        f"cycle ({basis} time) in the median repetition; tok/s and accept length: "
        "the benchmark's output"
        + (
            "; the table's 95% CIs are fixed-N intervals on a sequential sweep's runs (it stopped or "
            "dropped by their values): descriptive only, the verdict's intervals are the valid ones"
            if stopped
            else ""
        )
    )
    return "\n".join(lines) + "\n"


def _sweep_cells(rows: list[dict], baseline: dict | None, names: list[str], best_mark) -> tuple:
    """The sweep table's columns, its rows of cells (the baseline first) and which is marked."""
    columns = [
        "point",
        "tok/s",
        "95% CI",
        "n",
        "vs baseline",
        "ratio 95% CI",
        "accept len",
        "cycles",
        "top-level %",
    ] + [f"{n} %" for n in names]
    body, marks = [], []
    if baseline:
        body.append(
            tuple(
                [
                    "baseline (no speculation)",
                    _fmt(baseline.get("tokens_per_s"), ".1f"),
                    _ci(baseline.get("tokens_per_s_ci")),
                    _count(baseline),
                    "1.00x" if baseline.get("tokens_per_s") else "-",
                    "-",
                    _fmt(baseline.get("accept_length"), ".2f"),
                ]
                + ["-"] * (2 + len(names))
            )
        )
        marks.append(False)
    for r in rows:
        cells = [
            r["label"],
            _fmt(r["tokens_per_s"], ".1f") if r["ok"] else "failed",
            _ci(r.get("tokens_per_s_ci")),
            _count(r),
            _fmt(r["ratio_to_baseline"], ".2f", "x"),
            _ci(r.get("ratio_ci"), ".2f"),
            _fmt(r["accept_length"], ".2f"),
            _fmt(r["cycles"], "d"),
            _fmt(r["top_level_share"], ".1f", "%"),
        ]
        cells += [_fmt(r["phase_shares"].get(n), ".1f") for n in names]
        body.append(tuple(cells))
        marks.append(best_mark is not None and r is best_mark)
    return columns, body, marks


def _verdict_lines(best: dict | None, best_mark, verdict: dict | None) -> list[str]:
    """The best (or top) point's line, the verdict's and what the verdict cost."""
    lines = []
    if best is not None:
        ratio = (
            f", {best['ratio_to_baseline']:.2f}x the baseline"
            if best["ratio_to_baseline"] is not None
            else ""
        )
        what = "best" if best_mark is not None else "top (not a verdict)"
        lines.append(
            f"{what}: {best['label']} -- {best['tokens_per_s']:.1f} tok/s{ratio}, "
            f"accept length {_fmt(best['accept_length'], '.2f')}"
        )
    if verdict is not None:
        lines.append(describe_sequential(verdict) if verdict.get("sequential") else describe(verdict))
        cost = verdict.get("cost") or {}
        if cost:
            what = f"{cost['rounds']} round(s)" if "rounds" in cost else f"{cost['repeat']} repetition(s)"
            per = cost.get("starts_per_point") or {}
            each = f"; per point: {', '.join(f'{k} {v}' for k, v in per.items())}" if per else ""
            lines.append(
                f"verdict cost: {cost['server_starts']} server start(s) in all "
                f"({cost['runs']} run(s) x {cost['targets']} target(s), "
                f"{what}{each}), {cost['minutes']:.1f} min"
            )
    return lines


def _failure_lines(rows: list[dict], baseline: dict | None) -> list[str]:
    """The baseline's failure, the failed points and the points with failed repetitions."""
    lines = []
    if baseline and baseline.get("error"):
        lines.append(f"baseline failed: {baseline['error']}")
    failed = [r for r in rows if not r["ok"]]
    if failed:
        lines.append(f"failed points ({len(failed)}):")
        lines += [f"  {r['label']}: {short_error(r['error'])}" for r in failed]
    partly = [r for r in rows if r["ok"] and r.get("error")]
    if partly:
        lines.append(f"points with failed repetitions ({len(partly)}):")
        lines += [f"  {r['label']}: {short_error(r['error'])}" for r in partly]
    return lines


def describe_sequential(verdict: dict) -> str:
    """The sequential decision in one line (sweep.txt/sweep.md)."""
    cost = verdict.get("cost") or {}
    after = f" after {cost['rounds']} round(s)" if cost.get("rounds") else ""
    if verdict.get("horizon") is not None:
        test = f"group-sequential, alpha spent over a horizon of {verdict['horizon']} round(s)"
    else:
        test = "anytime-valid confidence sequences"
    level = f", one-sided level {verdict['level']:.2g} at this look" if verdict.get("level") else ""
    if verdict.get("significant") and verdict.get("best") is not None:
        line = (
            f"verdict: best {verdict['best']} -- decided{after} ({test}, "
            f"alpha {verdict['alpha']:g}{level}; the method in sweep.json decision.method)"
        )
        if verdict.get("estimates_note"):
            line += f"\nestimates: {verdict['estimates_note']}"
    else:
        names = ", ".join(verdict.get("indistinguishable") or []) or "-"
        note = f"; {verdict['note']}" if verdict.get("note") else ""
        line = f"verdict: undecided{after} ({test}, alpha {verdict.get('alpha', 0.05):g}); contenders: {names}{note}"
    against = verdict.get("against_baseline")
    if against:
        line += "\n" + _baseline_line(against)
    return line


def _baseline_line(against: dict) -> str:
    """The race's answer on no speculation, one line."""
    if against["status"] == "baseline fastest":
        return "against no speculation: the baseline is the fastest -- no point beats it"
    ratio, iv = against.get("ratio"), against.get("interval") or [None, None]
    span = (
        f" (interval {iv[0]:.3f}..{iv[1]:.3f}x at the verdict's level)"
        if iv[0] is not None and iv[1] is not None
        else (f" (at least {iv[0]:.3f}x at the verdict's level)" if iv[0] else "")
    )
    if against["status"] == "beats baseline":
        return f"against no speculation: {against['point']} beats it, {ratio:.3f}x the baseline's tok/s{span}"
    shown = f"{ratio:.3f}x" if ratio else "-"
    return f"against no speculation: undecided (leader {against.get('point') or '-'} at {shown}{span})"


def _pct(x: float) -> str:
    return f"{(math.exp(x) - 1) * 100:+.1f} %"


def extra_lines(extra: dict, verdict: dict | None) -> list[str]:
    """Rounds, drops, the plan, block effects and the per-phase companion, a few lines each."""
    lines = []
    if (extra.get("design") or {}).get("why"):
        lines.append(f"horizon: {extra['design']['why']}")
    if extra.get("stopped") and extra.get("rounds") is not None and (verdict or {}).get("sequential"):
        budget = extra.get("budget_minutes")
        lines.append(
            f"rounds: {len(extra['rounds'])} of at most {extra.get('max_rounds')}"
            + (f", budget {budget:g} min" if budget is not None else "")
            + f"; stopped: {extra['stopped']}"
        )
    for label, why in (extra.get("dropped") or {}).items():
        lines.append(f"dropped after round {why['round']}: {label} -- {why['reason']}")
    plan = extra.get("plan")
    if plan and plan.get("points"):
        head = f"to resolve a {plan['difference'] * 100:g} % difference at the spread measured"
        spreads = [e.get("spread") for e in plan["points"].values() if e.get("spread")]
        if spreads:
            head += f" ({max(spreads) * 100:.1f} % between starts)"
        if plan.get("test") != "sequential":
            head += ", by a sweep with --until decided"
        parts = []
        for label, entry in plan["points"].items():
            more, minutes = entry.get("more_runs"), entry.get("minutes")
            if more is None and entry.get("spread"):
                from patchkit.profile.sequential import MAX_RUNS

                parts.append(
                    f"{label}: more than {MAX_RUNS} runs at {entry['spread'] * 100:.1f} % between starts"
                )
            elif more is None:
                parts.append(f"{label}: cannot say (no spread measured yet)")
            else:
                parts.append(
                    f"{label}: {more} more run(s)" + (f", ~{minutes:.1f} min" if minutes is not None else "")
                )
        lines.append(head + ": " + "; ".join(parts))
        if plan.get("server_minutes") is not None and plan.get("blocks", 1) > 1:
            lines.append(
                f"  together ~{plan['server_minutes']:.1f} server-minutes, "
                f"~{plan['wall_minutes']:.1f} min on {plan['blocks']} {extra.get('block_kind') or 'GPUs'}"
            )
    effects = extra.get("block_effects")
    if effects:
        lines.append(
            "block effects (tok/s against the blocks' mean, paired out of the verdict): "
            + ", ".join(f"{b} {_pct(e)}" for b, e in effects.items())
        )
    by_part = extra.get("spread_by_part")
    if by_part:
        rest = f", rest {by_part['rest'] * 100:.1f} %" if by_part.get("rest") is not None else ""
        lines.append(
            f"between starts (pooled over the points, {by_part['df']} df; % of a run's time in cycles): "
            f"whole {by_part['total'] * 100:.1f} %, decode cycles {by_part['decode'] * 100:.1f} %, "
            f"prefill cycles {by_part['prefill'] * 100:.1f} %{rest}"
            + (f"; carried most by {by_part['carried_by']}" if by_part.get("carried_by") else "")
        )
    lines += adjusted_lines(extra.get("adjusted"), extra.get("starts") or [])
    phases = extra.get("phase_verdict")
    if phases and phases.get("points"):
        lines.append(
            f"phases against {phases['leader']} (ms per decode cycle; ratio and its interval on log ms, "
            f"the phase's spread from every point, blocked by round where the design allows; Bonferroni over all "
            f"{phases.get('pairs', '?')} (point, phase) pairs at {phases['alpha']:g}):"
        )
        lines += describe_phases(phases)
    return lines


def adjusted_lines(adjusted: dict | None, starts: list[dict]) -> list[str]:
    """Where each start's time went (sweep.json ``starts``), and the adjusted verdict beside
    the raw one."""
    lines = []
    if starts:
        lines.append(
            "time per start (s): decode cycles / prefill cycles (their mean period) / rest; tok/s -> adjusted"
        )
        for st in starts:
            rest = "-" if st.get("rest_s") is None else f"{st['rest_s']:.2f}"
            tps, adj = st.get("tokens_per_s"), st.get("adjusted_tokens_per_s")
            lines.append(
                f"  {st['label']} round {st['round']}: {st['decode_s']:.2f} / {st['prefill_s']:.2f} "
                + (f"({st['prefill_period_ms']:.1f} ms)" if st.get("prefill_period_ms") else "(none)")
                + f" / {rest}; "
                + (f"{tps:.1f} -> {adj:.1f}" if tps is not None and adj is not None else "-")
            )
    if adjusted:

        def said(v: dict | None) -> str:
            v = v or {}
            return f"best {v['best']}" if v.get("best") else str(v.get("status", "undecided"))

        lines.append(
            f"adjusted verdict (prefill cycles at the sweep's {adjusted['prefill_period_ms']:.1f} ms; "
            f"each verdict at alpha {adjusted['alpha']:g}): adjusted {said(adjusted.get('verdict'))}, "
            f"raw {said(adjusted.get('raw_verdict'))}; decided by: {adjusted['decided_by']} -- {adjusted['why']}"
        )
    return lines


def _write(
    run_dir: Path,
    cfg: RemoteConfig,
    rows,
    baseline,
    best,
    elapsed: float,
    *,
    interrupted: bool,
    chart: bool,
    verdict: dict | None = None,
    order: list | None = None,
    extra: dict | None = None,
) -> tuple[str, dict]:
    """sweep.txt, sweep.md, sweep.json and (``chart``) sweep.png and report.html: the table's
    text and {kind: file name}."""
    ok = [r for r in rows if r["ok"]]
    extra = extra or {}
    headline = _headline(cfg, rows, baseline, extra, interrupted)
    table = render_sweep(rows, baseline, best, headline, verdict=verdict, extra=extra)
    (run_dir / "sweep.txt").write_text(table, encoding="utf-8")
    (run_dir / "sweep.md").write_text(
        render_sweep(rows, baseline, best, headline, markdown=True, verdict=verdict, extra=extra),
        encoding="utf-8",
    )
    files = {"json": "sweep.json", "markdown": "sweep.md", "table": "sweep.txt"}
    significant = bool(verdict and verdict.get("significant"))
    if chart and rows:
        from patchkit.report.chart import write_sweep_chart

        write_sweep_chart(
            rows,
            run_dir / "sweep.png",
            best_label=best["label"] if best and significant else None,
            baseline_tokens_per_s=(baseline or {}).get("tokens_per_s"),
            baseline_ci=(baseline or {}).get("tokens_per_s_ci"),
            title=f"profile.remote sweep: {len(ok)}/{len(rows)} point(s) x "
            f"{cfg.repeats}, series {Path(cfg.series).name}\n" + (title_line(verdict) if verdict else ""),
        )
        files["chart"] = "sweep.png"
        files["html"] = "report.html"
    doc = {
        "schema": SCHEMA,
        "matrix": cfg.matrix,
        "series": cfg.series,
        "targets": cfg.targets,
        "server_command": cfg.server_command,
        "bench_command": cfg.bench_command,
        "env": cfg.env,
        "baseline": baseline,
        "best": best["label"] if best else None,
        "rows": rows,
        "interrupted": interrupted,
        "wall_s": elapsed,
        "files": files,
        "repeat": cfg.repeats,
        "warmup": cfg.warmup,
        "verdict": verdict,
        "order": order or [],
    }
    doc.update(extra)
    (run_dir / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if chart and rows:  # one page for the sweep, linking each point's
        from patchkit.report.html_sweep import write_sweep_page

        write_sweep_page(run_dir, json.loads(json.dumps(doc)), table)
    return table, files


def _headline(cfg: RemoteConfig, rows: list[dict], baseline, extra: dict, interrupted: bool) -> str:
    """The table's first line: points, rounds or repetitions, blocks, series and targets."""
    ok = [r for r in rows if r["ok"]]
    if cfg.sequential:
        how = (
            f"{len(extra.get('rounds') or [])} round(s) until decided (at most {cfg.rounds}"
            + (f", budget {cfg.budget_minutes:g} min" if cfg.budget_minutes is not None else "")
            + f"; stopped: {extra.get('stopped') or '-'})"
        )
    else:
        how = f"{cfg.repeats} repetition(s)"
    gpus = f"; GPUs {','.join(cfg.gpus)} at once" if cfg.gpus and len(cfg.gpus) > 1 else ""
    if cfg.hosts_as_blocks and len(extra.get("blocks") or []) > 1:
        gpus = f"; {len(extra['blocks'])} {extra['block_kind']} as blocks at once"
    return (
        f"sweep: {len(rows)} point(s), {len(ok)} measured"
        f"{', baseline' if baseline else ''}, {how} in rotated "
        f"order{gpus}; series {Path(cfg.series).name}; targets {', '.join(cfg.targets)}"
        + ("; INTERRUPTED" if interrupted else "")
    )


def _fold_baseline(runs: list[dict]) -> dict | None:
    """The baseline's repetitions as one summary.json-style "baseline" document."""
    if not runs:
        return None
    good = [r for r in runs if r["error"] is None and r["tokens_per_s"] is not None]
    ranked = sorted(good, key=lambda r: r["tokens_per_s"])
    doc: dict[str, Any] = dict(ranked[(len(ranked) - 1) // 2] if ranked else runs[0])
    doc.update(repetition_fields([r["tokens_per_s"] if r in good else None for r in runs]))
    doc["reports"] = [r["report"] for r in runs]
    doc["tokens_per_s"] = doc["tokens_per_s_median"]
    errors = [f"{r['report']}: {r['error']}" for r in runs if r not in good]
    doc["error"] = None if good else "; ".join(errors)
    doc["errors"] = errors
    return doc


def _fold_point(row: dict) -> None:
    """A point's repetitions into its row: the median run's fields, the intervals."""
    runs = row["runs"]
    good = [r for r in runs if r["ok"]]
    row.update(repetition_fields([r["tokens_per_s"] if r["ok"] else None for r in runs]))
    row["reports"] = [r["report"] for r in runs]
    errors = [f"{r['report']}: {r['error']}" for r in runs if not r["ok"] and r["error"]]
    if good:
        ranked = sorted(good, key=lambda r: r["tokens_per_s"])
        median_run = ranked[(len(ranked) - 1) // 2]
        row.update({k: median_run[k] for k in MEASURED_KEYS})
        row["report"] = median_run["report"]
        row["tokens_per_s"] = row["tokens_per_s_median"]
        row["error"] = "; ".join(errors) or None
    elif runs:
        last = runs[-1]
        row.update({k: last[k] for k in MEASURED_KEYS})
        row["ok"] = False
        row["error"] = "; ".join(errors) or last["error"]


def _run_point(
    cfg, point, row, rep, run_dir, progress, transports, start, bracket, block=None, cancel=None
) -> dict:
    run: dict[str, Any] = {k: None for k in MEASURED_KEYS}
    run.update(ok=False, phase_shares={}, phase_ms={}, rep=rep + 1, report=rep_dir(row["reports_base"], rep))
    run["block"] = block.name if block is not None else None
    row["runs"].append(run)
    point_dir = run_dir / run["report"]
    point_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    try:
        _measure(cfg, point, run, point_dir, progress, transports, start, block, cancel)
    except PatchkitError as exc:
        run["error"] = exc.message
        where = f" on {block.name}" if block is not None and block.name else ""
        bracket.log(f"point {point['label']} (round {rep + 1}{where}) failed: {exc.message}")
    finally:
        run["wall_s"] = time.monotonic() - began
    return run


class _Rounds:
    """The sweep's rounds: who runs where and when, what the decision says after each round
    (sequential sweeps), what was dropped and why the sweep stopped."""

    def __init__(self, cfg, points, rows, blocks, run_dir, progress, start, bracket):
        self.cfg, self.points, self.rows, self.blocks = cfg, points, rows, blocks
        self.run_dir, self.progress, self.start, self.bracket = run_dir, progress, start, bracket
        self.base_runs: list[dict] = []
        self.order: list[dict] = []
        self.rounds: list[dict] = []
        self.dropped: dict[str, dict] = {}
        self.decision = None
        self.stopped: str | None = None
        self.prior: dict | None = None
        self.seed = cfg.sweep_seed if cfg.sweep_seed is not None else secrets.randbelow(1 << 32)
        self.cancel = threading.Event()
        self.live = list(range(len(points)))
        self.failed_out: set[str] = set()  # failed every run, twice or more: out of the decision
        self.runs_started = 0
        # the bounded test's horizon (rounds that can happen) and the round that ended it early:
        # --repeat's rounds (a fixed sweep on several GPUs or hosts is decided by the same test,
        # paired by block, over its rounds); --budget's after round 1; --until decided alone: none
        self.horizon: int | None = (
            cfg.repeat if cfg.repeat is not None else (None if cfg.sequential else cfg.rounds)
        )
        self.final_round: int | None = None
        self.estimator: dict[str, Any] = {}  # which tok/s the last decision was on (decide)
        # the sequential design: min_effect, power, the spread the horizon was planned at and
        # whether the test takes it as known (known_spread), the horizon and why (plan_design)
        self.design: dict[str, Any] = {}
        # --baseline in a sequential sweep: no speculation is a point of the race (label BASELINE)
        self.race_baseline = bool(cfg.baseline and cfg.sequential)
        self.prior_adjusted: dict | None = None  # the cache's entry for the adjusted tok/s
        # a resumed sweep (patchkit.profile.remote.resume): the round to start at, the round cut
        # short ({"record", "began_s"}: continued, not run again), the runs started and not
        # finished ({label, round, report, block}), and the snapshot written after every start,
        # every finished run and at the start of every round (on_change)
        self.first_round = 0
        self.partial: dict | None = None
        self.in_flight: list[dict] = []
        self.on_change: Callable[[_Rounds], None] | None = None
        self.round_began = start
        self.changes = threading.Lock()  # the GPUs' threads start and finish runs at once

    # ---- what a round costs -------------------------------------------------------------------

    def _estimate_s(self, label: str) -> float | None:
        """Seconds a run of ``label`` takes: its own runs' mean, else every run's."""
        walls: dict[str, list[float]] = {r["label"]: [] for r in self.rows}
        walls[BASELINE] = []
        for row in self.rows:
            walls[row["label"]] += [r["wall_s"] for r in row["runs"] if r.get("wall_s") is not None]
        walls[BASELINE] += [r["wall_s"] for r in self.base_runs if r.get("wall_s") is not None]
        everything = [w for ws in walls.values() for w in ws]
        own = walls.get(label) or everything
        return statistics.fmean(own) if own else None

    def round_estimate_s(self, rnd: int, entries: list) -> float | None:
        """The next round's wall time: per block, the sum of its runs' estimates; the longest.
        None for a round cut short and continued: it was admitted before the cut."""
        if self.partial is not None and self.partial["record"]["round"] == rnd + 1:
            return None
        where = self._where(rnd, [e for e in entries if e != BASELINE])
        per_block: dict[int, float] = {}
        for entry in entries:
            label = BASELINE if entry == BASELINE else self.points[entry]["label"]
            est = self._estimate_s(label)
            if est is None:
                return None
            b = 0 if entry == BASELINE else where[entry]
            per_block[b] = per_block.get(b, 0.0) + est
        return (max(per_block.values()) if per_block else 0.0) + self._overhead_s()

    def _overhead_s(self) -> float:
        """What the last round took beyond its runs (revert and apply around the baseline,
        waiting for the slowest GPU's queue): its wall time less its longest queue of runs."""
        last = next((r for r in reversed(self.rounds) if r.get("wall_s") is not None), None)
        if last is None:
            return 0.0
        queues: dict[str | None, float] = {}
        for row in self.rows:
            for run in row["runs"]:
                if run["rep"] == last["round"] and run.get("wall_s") is not None:
                    queues[run.get("block")] = queues.get(run.get("block"), 0.0) + run["wall_s"]
        for doc in self.base_runs:
            if doc["report"] == rep_dir(BASELINE, last["round"] - 1) and doc.get("wall_s") is not None:
                queues[None] = queues.get(None, 0.0) + doc["wall_s"]
        return max(0.0, last["wall_s"] - max(queues.values(), default=0.0))

    def _baseline_runs(self) -> bool:
        """Whether the baseline runs in the next round: always with --baseline, unless the
        race dropped it."""
        return bool(self.cfg.baseline) and BASELINE not in self.dropped

    def _where(self, rnd: int, entries: list[int]) -> dict[int, int]:
        return assign(entries, rnd, len(self.blocks), self.seed)

    # ---- the rounds ---------------------------------------------------------------------------

    def run(self) -> None:
        cfg = self.cfg
        # --budget (budget_minutes): the sweep's time limit, in wall-clock minutes
        time_limit_s = cfg.budget_minutes * 60 if cfg.budget_minutes is not None else None
        if cfg.sequential and self.horizon is None:
            self.plan_design(self.first_round, time_limit_s, list(self.live))
        for rnd in range(self.first_round, cfg.rounds):
            entries: list = list(self.live) + ([BASELINE] if self._baseline_runs() else [])
            if not self.live:
                # the decision always keeps its leader: only failing points leave none
                measured = any(r["ok"] for row in self.rows for r in row["runs"])
                self.stopped = "no point left" if measured else ALL_FAILED
                if not measured:
                    self.bracket.log(
                        f"stopping after round {rnd}: every point failed every run (their server logs: "
                        "points/*/node*/server.log)"
                    )
                return
            if rnd and time_limit_s is not None:
                est = self.round_estimate_s(rnd, entries)
                spent = time.monotonic() - self.start
                if est is not None and spent + est > time_limit_s:
                    self.bracket.log(
                        f"stopping before round {rnd + 1}: it would take ~{est / 60:.1f} min, "
                        f"{max(0.0, time_limit_s - spent) / 60:.1f} min of the budget left"
                    )
                    self.stopped = "budget"
                    return
            ordered = [entries[(rnd + i) % len(entries)] for i in range(len(entries))]  # rotation()
            record: dict[str, Any] = {"round": rnd + 1, "points": [], "tokens_per_s": {}, "errors": {}}
            self.rounds.append(record)  # an interrupted round is kept as far as it went
            self._round(rnd, ordered, record)
            out_of_time = False
            if cfg.sequential and self.horizon is None:
                self.plan_design(rnd + 1, time_limit_s, entries)
            if cfg.sequential and time_limit_s is not None:
                out_of_time = self._next_round_misses(rnd + 1, entries, time_limit_s)
            judged = cfg.sequential or len(self.blocks) > 1  # by the bounded or anytime test
            final = judged and self.horizon is not None and (rnd + 1 >= self.horizon or out_of_time)
            if final:
                self.final_round = rnd + 1
            if judged:
                self.decide_now(record, rnd)
            if cfg.sequential and self.decision is not None and self.decision.status == "decided":
                self.stopped = "decided"
                return
            if final:
                by_time_limit = time_limit_s is not None and (out_of_time or rnd + 1 < cfg.rounds)
                self.stopped = "budget" if by_time_limit else "max rounds"
                self.bracket.log(
                    f"round {rnd + 1} was the last "
                    + ("the budget allows" if by_time_limit else "of the sweep")
                    + ": the bounded test spent what was left of its level on it"
                )
                return
        self.stopped = "max rounds"

    def plan_design(self, done: int, time_limit_s: float | None, entries: list) -> None:
        """The sequential test's horizon, from the plan: the rounds that decide a --min-effect
        difference at --power, at the spread remembered for this command (taken as known: a z
        test, planned before round 1) or, without one, at the spread measured by round 2 (a t
        test, on the tok/s that decides and at its level); at most --repeat rounds and what the
        budget allows. Called before round 1 and after each round until it is set; ``design``
        says what was chosen and why."""
        from patchkit.profile.sequential import KNOWN_DF, plan_horizon

        cfg = self.cfg
        min_effect, power = cfg.min_effect / 100.0, cfg.power
        cap = cfg.rounds
        if time_limit_s is not None and done >= 1:
            cap = min(cap, self._rounds_in_time_limit(time_limit_s, entries, done))
        prior = self.prior or {}
        points = len(self.points) + (1 if self.race_baseline else 0)
        known_raw = _known(prior, KNOWN_DF)
        known_adjusted = None if self.race_baseline else _known(self.prior_adjusted or {}, KNOWN_DF)
        remembered = "remembered for this command (taken as known)"
        if known_adjusted is not None:
            spread, source, alpha = (
                known_adjusted,
                f"of the adjusted tok/s, {remembered}",
                DEFAULT_ALPHA / 2.0,
            )
        elif known_raw is not None:
            spread, source, alpha = known_raw, remembered, DEFAULT_ALPHA
        elif done < 2 and cap > done:
            return  # the spread is measured by round 2
        elif cap <= max(done, 1):
            spread, source, alpha = None, "", DEFAULT_ALPHA
        else:
            spread, source, alpha = self._planning_spread(done)
        known = known_raw is not None or known_adjusted is not None
        self.design = {
            "min_effect": min_effect,
            "power": power,
            "spread": spread,
            "known_spread": known_raw,
            "known_adjusted_spread": known_adjusted,
        }
        if not spread:
            self.horizon = cap
            why = f"{cap} round(s): no spread to plan with; the rounds --repeat and the budget allow"
            if cap <= max(done, 1):
                why = f"{cap} round(s): the budget allows no more"
        else:
            plan = plan_horizon(spread, min_effect, alpha, power, max(2, points), cap, known)
            self.horizon = plan["horizon"]
            why = plan["why"] + f"; spread {source}"
            if known_adjusted is not None and self.horizon < min(2, cap):
                # the adjusted tok/s decide from round 2 on (the prefill test needs two rounds)
                self.horizon = 2
                why += "; 2 rounds: the adjusted tok/s can decide from round 2 on"
            self.design.update(
                spread_source=source, planned_power=plan["power"], expected_rounds=plan["expected_rounds"]
            )
        self.design.update(horizon=self.horizon, why=why, planned_after_round=done, cap=cap, alpha=alpha)
        self.bracket.log(f"horizon: {why}")

    def _planning_spread(self, done: int) -> tuple[float | None, str, float]:
        """(spread, where it came from, level): the spread measured so far on the tok/s that
        decides (the adjusted tok/s where adjusted.choose_estimator says so) and its level."""
        from patchkit.profile.remote.adjusted import choose_estimator

        runs, alpha, what = self.samples()[0], DEFAULT_ALPHA, ""
        choice = None if self.race_baseline else choose_estimator(self.rows, DEFAULT_ALPHA)
        if choice is not None:
            alpha = choice["alpha"]
            if choice["decided_by"] == "adjusted":
                runs, what = {k: choice["tokens_per_s"][k] for k in runs}, " (adjusted tok/s)"
        measured = measured_spread(runs)
        spread = (measured or {}).get("spread")
        return spread, f"measured by round {done}{what} ({(measured or {}).get('df', 0)} df)", alpha

    def _rounds_in_time_limit(self, time_limit_s: float, entries: list, done: int = 1) -> int:
        """The rounds the time limit allows, ``done`` rounds done, from the measured cost of a
        round with every point live (fewer points later only end the sweep earlier)."""
        est = self.round_estimate_s(done, entries)
        spent = time.monotonic() - self.start
        if est is None or est <= 0.0:
            return self.cfg.rounds
        return max(done, min(self.cfg.rounds, done + math.floor(max(0.0, time_limit_s - spent) / est)))

    def _next_round_misses(self, rnd: int, entries: list, time_limit_s: float) -> bool:
        """Whether the round after this one would not fit the time limit (the points live now)."""
        live = [e for e in entries if e == BASELINE or e in self.live]
        est = self.round_estimate_s(rnd, live)
        return est is not None and time.monotonic() - self.start + est > time_limit_s

    def _round(self, rnd: int, ordered: list, record: dict) -> None:
        cfg = self.cfg
        total = f"/{cfg.rounds}" if not cfg.sequential else f", at most {cfg.rounds}"
        self.round_began = time.monotonic()
        if len(self.blocks) > 1:
            record["blocks"] = {}
        done = self._continue(record)
        self._changed()
        if len(self.blocks) == 1:
            for entry in ordered:
                label = BASELINE if entry == BASELINE else self.points[entry]["label"]
                if label in done:
                    continue
                self.runs_started += 1
                self.order.append({"rep": rnd + 1, "label": label})
                if cfg.sequential:
                    self.bracket.log(
                        f"run {self.runs_started} (round {rnd + 1}, at most {cfg.rounds}): {label}"
                    )
                else:
                    runs = len(ordered) * cfg.rounds
                    self.bracket.log(
                        f"run {self.runs_started}/{runs} (repetition {rnd + 1}/{cfg.rounds}): {label}"
                    )
                with self._running(label, rnd):
                    self._run_entry(rnd, entry, label, record)
        else:
            if not self.bracket.applied:
                self.bracket.verify_and_apply()
            self._parallel(rnd, ordered, record, total, done)
        record["minutes"] = (time.monotonic() - self.start) / 60
        record["wall_s"] = time.monotonic() - self.round_began

    def _run_entry(self, rnd: int, entry, label: str, record: dict) -> None:
        """One run of a round on the one block: the baseline (on the reverted tree) or a point."""
        if entry == BASELINE:
            run = self._baseline(rnd)
            record["points"].append(label)
            record["tokens_per_s"][label] = run["tokens_per_s"]
            if run["error"]:
                record["errors"][label] = run["error"]
            return
        if not self.bracket.applied:
            self.bracket.verify_and_apply()
        self._point(rnd, entry, self.blocks[0], record)

    # ---- what a resumed sweep continues, and the snapshot (patchkit.profile.remote.resume) ------

    def _continue(self, record: dict) -> set[str]:
        """A round cut short and now continued: its record as far as it went, the time it began
        (on the sweep's clock), and the labels it ran, which are not run again."""
        if self.partial is None or self.partial["record"]["round"] != record["round"]:
            return set()
        saved, self.partial = self.partial, None
        for key in ("points", "tokens_per_s", "errors", "blocks"):
            if key in saved["record"]:
                record[key] = saved["record"][key]
        self.round_began = self.start + saved["began_s"]
        return set(record["points"])

    @contextmanager
    def _running(self, label: str, rnd: int, block: Block | None = None) -> Iterator[None]:
        """A run started and not finished, in the snapshot while it runs; one cut short (an
        exception, or the process gone) stays in it: a resumed sweep discards it and runs it again."""
        base = (
            BASELINE
            if label == BASELINE
            else next(r["reports_base"] for r in self.rows if r["label"] == label)
        )
        entry = {
            "label": label,
            "round": rnd + 1,
            "report": rep_dir(base, rnd),
            "block": block.index if block else None,
        }
        with self.changes:
            self.in_flight.append(entry)
        self._changed()
        yield
        with self.changes:
            self.in_flight.remove(entry)
        self._changed()

    def _changed(self) -> None:
        """The snapshot (on_change); one that cannot be written is said once, and the sweep goes on."""
        if self.on_change is None:
            return
        with self.changes:
            try:
                self.on_change(self)
            except OSError as exc:
                self.on_change = None
                self.bracket.log(f"the sweep's state cannot be written ({exc}): this sweep cannot be resumed")

    def _point(self, rnd: int, entry: int, block: Block, record: dict, progress=None) -> None:
        point, row = self.points[entry], self.rows[entry]
        run = _run_point(
            self.cfg,
            point,
            row,
            rnd,
            self.run_dir,
            progress or self.progress,
            block.transports,
            self.start,
            self.bracket,
            block,
            self.cancel,
        )
        record["points"].append(point["label"])
        record["tokens_per_s"][point["label"]] = run["tokens_per_s"] if run["ok"] else None
        if run["error"]:
            record["errors"][point["label"]] = run["error"]
        if "blocks" in record:
            record["blocks"][point["label"]] = block.name

    def _baseline(self, rnd: int) -> dict:
        problems = self.bracket.revert_series()
        if problems:
            raise ProfileError("; ".join(problems))
        began = time.monotonic()
        doc = run_baseline(
            self.cfg, self.run_dir, self.progress, self.blocks[0].transports, None, sub=rep_dir(BASELINE, rnd)
        )
        doc["wall_s"] = time.monotonic() - began
        self.base_runs.append(doc)
        return doc

    def _parallel(self, rnd: int, ordered: list, record: dict, total: str, done: set[str]) -> None:
        """Every GPU runs its share of the round at the same time, each in the round's order."""
        where = self._where(rnd, ordered)
        queues: dict[int, list[int]] = {b: [] for b in range(len(self.blocks))}
        for entry in ordered:
            queues[where[entry]].append(entry)
        stream = self.progress.stream

        def work(b: int, entries: list[int]) -> None:
            block = self.blocks[b]
            progress = ProgressLine(stream=stream, prefix=f"profile {block.name}")
            progress.live = False  # several lines at once: each stage its own line
            for entry in entries:
                if self.cancel.is_set():
                    return
                label = self.points[entry]["label"]
                if label in done:
                    continue
                self.runs_started += 1
                self.order.append({"rep": rnd + 1, "label": label, "block": block.name})
                progress.close(final=f"round {rnd + 1}{total}: {label} on {block.describe()}")
                with self._running(label, rnd, block):
                    self._point(rnd, entry, block, record, progress)

        pool = ThreadPoolExecutor(max_workers=len(self.blocks), thread_name_prefix="patchkit-gpu")
        futures = [pool.submit(work, b, q) for b, q in queues.items() if q]
        try:
            while not all(f.done() for f in futures):
                wait(futures, timeout=0.5)
        except BaseException:
            self.cancel.set()  # every block's run stops at its next poll and cleans up
            with _sigint_deferred():
                pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)
        for future in futures:
            if future.exception() is not None:
                raise future.exception()  # type: ignore[misc]

    # ---- the decision -------------------------------------------------------------------------

    def samples(self) -> tuple[dict, dict | None]:
        """label -> tok/s per run, one a round (None where it failed), and label -> block per
        run (None for a sweep of one block): every point that ran, except those left out for
        failing every run."""
        runs, blocks = {}, {}
        for row in self.rows:
            if not row["runs"] or row["label"] in self.failed_out:
                continue
            runs[row["label"]] = [r["tokens_per_s"] if r["ok"] else None for r in row["runs"]]
            blocks[row["label"]] = [r.get("block") for r in row["runs"]]
        if self.race_baseline and self.base_runs:
            runs[BASELINE] = [None if d.get("error") else d.get("tokens_per_s") for d in self.base_runs]
            blocks[BASELINE] = [None] * len(self.base_runs)
        return runs, (blocks if len(self.blocks) > 1 else None)

    def decide(self):
        """The sequential decision over the rounds so far, on the tok/s that decides now
        (adjusted.choose_estimator: the adjusted tok/s where the prefill period does not differ
        by point, else the raw; each at alpha / 2 wherever an adjustment exists, so that
        following either never names a wrong best in more than alpha of sweeps). The drops and
        the stop follow it; ``estimator`` says which one it was."""
        from patchkit.profile.remote.adjusted import choose_estimator
        from patchkit.profile.sequential import decide_sequential

        runs, blocks = self.samples()
        prior = self.prior["spread"] if self.prior else None
        choice = choose_estimator(self.rows, DEFAULT_ALPHA) if self.cfg.sequential else None
        if BASELINE in runs:
            choice = None  # the baseline serves the reverted tree: no cycles of its own to adjust
        alpha = DEFAULT_ALPHA if choice is None else choice["alpha"]
        self.estimator = {
            "decided_by": "raw",
            "alpha": alpha,
            "why": "the baseline is in the race and has no cycles to adjust"
            if BASELINE in runs
            else "no prefill cycle to adjust",
        }
        if choice is not None:
            self.estimator = {k: choice[k] for k in ("decided_by", "alpha", "why")}
            if choice["decided_by"] == "adjusted":
                runs = {label: choice["tokens_per_s"][label] for label in runs}
        return decide_sequential(
            runs,
            blocks=blocks,
            alpha=alpha,
            difference=PLAN_DIFFERENCE,
            prior_spread=prior,
            horizon=self.horizon,
            final_round=self.final_round,
            sigma=self.known_sigma(self.estimator["decided_by"]),
        )

    def known_sigma(self, estimator: str) -> float | None:
        """The spread the z test takes as known for the tok/s that decide (raw or adjusted),
        where the cache held one; None: the t test."""
        key = "known_adjusted_spread" if estimator == "adjusted" else "known_spread"
        return self.design.get(key)

    def decide_now(self, record: dict, rnd: int) -> None:
        """After a round: points that failed every run (twice or more) leave the sweep and the
        decision; then the decision, and the points it drops (sequential sweeps only)."""
        reasons: dict[str, str] = {}
        if self.cfg.sequential:
            for row in self.rows:
                runs = row["runs"]
                failing = len(runs) >= 2 and not any(r["ok"] for r in runs)
                if failing and row["label"] not in self.dropped:
                    reasons[row["label"]] = (
                        f"failed every run ({len(runs)}): {short_error(runs[-1]['error'])}"
                    )
                    self.failed_out.add(row["label"])
        self.decision = self.decide() if self.samples()[0] else None
        record["decision"] = self.decision.to_dict() if self.decision is not None else None
        if self.decision is not None:
            record["estimator"] = dict(self.estimator)
        newly = []
        if self.cfg.sequential:
            if self.decision is not None:
                reasons.update(self.decision.dropped)
            for label, reason in reasons.items():
                if label in self.dropped:
                    continue
                self.dropped[label] = {"round": rnd + 1, "reason": reason}
                newly.append(label)
            self.live = [i for i in self.live if self.points[i]["label"] not in self.dropped]
            for label in newly:
                self.bracket.log(f"dropped {label} after round {rnd + 1}: {self.dropped[label]['reason']}")
        record["dropped"] = newly


def run_remote_sweep(
    cfg: RemoteConfig,
    *,
    stream=None,
    progress: ProgressLine | None = None,
    transports=None,
    resume: str | Path | None = None,
) -> RemoteSweepOutcome:
    """The sweep (module docstring). Raises ProfileError when every point failed or the revert
    failed; KeyboardInterrupt (Terminated for SIGTERM) after the revert when interrupted.
    ``resume``: the folder of a sweep cut short, continued there (patchkit.profile.remote.resume;
    InvalidInput before anything is touched where it cannot be)."""
    out = stream or sys.stdout
    start = time.monotonic()
    if cfg.chart:  # phases.png and sweep.png: said before a target is touched
        from patchkit.extras import require

        require("report", "profile.remote", instead="or give --no-chart")
    assert isinstance(cfg.matrix, dict), "RemoteConfig parsed --matrix (callers check it is given)"
    points = expand_server_matrix(cfg.matrix, cfg.server_command, cfg.env)
    saved = resuming.load(resume, cfg, points)  # refused (exit 2) before a target is touched
    transports = transports or cfg.open_targets()  # patchkit.transport.resolve_targets
    cache = cache_path(cfg.spread_cache) if cfg.sequential else None
    cache_at = cache_key(cfg.targets, cfg.server_command, cfg.matrix)
    run_dir = Path(resume) if resume is not None else new_run_dir(cfg.out)
    progress = progress or ProgressLine(prefix="profile")
    rows = [_row(i, p) for i, p in enumerate(points)]
    for row in rows:
        row["reports_base"] = row["report"]
    blocks = make_blocks(cfg, transports)
    failure, interrupted = None, False
    bracket = RemoteRun(cfg, run_dir, progress, transports)  # verify, apply ... revert
    state = _Rounds(cfg, points, rows, blocks, run_dir, progress, start, bracket)
    per_run = 1 if cfg.hosts_as_blocks else len(transports)  # servers a run starts
    cut = _begin(state, saved, cache, cache_at)
    start = state.start
    with sigterm_interrupts():
        try:
            try:
                _announce(cfg, state, cache)
                if saved is not None:
                    resuming.prepare_targets(state, cut, per_run)
                if state.stopped is None:  # a resumed sweep whose rounds had ended: concluded only
                    state.run()
            finally:
                with _sigint_deferred():
                    problems = bracket.cleanup()
                    bracket.record()
                    progress.close()
            if problems:
                raise ProfileError("; ".join(problems))
        except KeyboardInterrupt:
            interrupted = True
            state.stopped = "interrupted"
            raise
        except BaseException as exc:  # no sweep files for a sweep that never ran
            failure = exc
            raise
        finally:
            ran = any(r["runs"] for r in rows) or bool(state.base_runs)
            if failure is not None and ran:  # e.g. applying again after the baseline failed
                interrupted = True
                state.stopped = "interrupted"
                for row in rows:
                    if not row["runs"]:
                        row["error"] = f"not run (the sweep stopped: {failure})"
            with _sigint_deferred():
                state._changed()  # the rounds as they ended, before _conclude folds the rows
            if failure is None or ran:
                table, files, verdict, baseline, best = _conclude(
                    cfg, state, rows, run_dir, start, per_run, interrupted, cache, cache_at
                )
                if not interrupted:
                    resuming.mark_finished(run_dir)
    print(table, file=out)
    print(f"sweep: {run_dir}/ ({', '.join(files.values())}, points/*/)", file=out)
    _refuse_failed(rows, baseline, run_dir)
    return RemoteSweepOutcome(run_dir, rows, baseline, best, table, time.monotonic() - start, files, verdict)


def _refuse_failed(rows: list[dict], baseline: dict | None, run_dir: Path) -> None:
    """ProfileError, after the sweep's files are written, when every point or the baseline failed."""
    if not any(r["ok"] for r in rows):
        raise ProfileError(all_failed_message(rows, run_dir))
    if baseline and baseline["error"]:
        raise ProfileError(
            f"the baseline run failed: {baseline['error']} (the sweep's report is in {run_dir}/)"
        )


def _begin(state: _Rounds, saved: dict | None, cache, cache_at) -> list[dict]:
    """A new sweep's prior from the spread cache, or a resumed sweep's rounds read back (the runs
    cut mid-server, discarded, returned); from here on every change is in the snapshot."""
    cut: list[dict] = []
    if saved is not None:
        cut = resuming.restore(state, saved)
    else:
        state.prior = read_spread(cache, cache_at)
        state.prior_adjusted = read_spread(cache, cache_at + ADJUSTED_KEY)
    state.on_change = resuming.writer(state.cfg, state.points, state.run_dir)
    return cut


def _announce(cfg: RemoteConfig, state: _Rounds, cache) -> None:
    """The run log's first lines: the points, the design, the blocks and the spread remembered."""
    blocks, points = state.blocks, state.points
    also = " and the baseline" if cfg.baseline else ""
    how = (
        f"rounds until decided (at most {cfg.rounds}"
        + (f", budget {cfg.budget_minutes:g} min" if cfg.budget_minutes is not None else "")
        + ")"
        if cfg.sequential
        else f"{cfg.repeats} repetition(s)"
    )
    on = (
        f", {len(blocks)} {_blocks_word(cfg)} at once "
        f"({', '.join(b.name or '' for b in blocks)}; seed {state.seed})"
        if len(blocks) > 1
        else ""
    )
    state.bracket.log(
        f"sweep of {len(points)} point(s){also}, {how}, rotated{on}: " + ", ".join(p["label"] for p in points)
    )
    if state.prior:
        state.bracket.log(
            f"spread remembered for this target and command: {state.prior['spread'] * 100:.1f} % "
            f"({state.prior['runs']} runs; planning only) in {cache}"
        )


def _conclude(cfg, state: _Rounds, rows, run_dir, start, targets, interrupted, cache, cache_at):
    """Fold the runs, decide, plan, compare the phases, remember the spread, write the files."""
    for row in rows:
        row.pop("reports_base", None)
        _fold_point(row)
        if not row["ok"] and row["error"] is None:
            row["error"] = "not run (interrupted)"
        row["dropped"] = state.dropped.get(row["label"])
    baseline = _fold_baseline(state.base_runs)
    elapsed = time.monotonic() - start
    for record in state.rounds:  # an interrupted round: as far as it went
        record.setdefault("minutes", elapsed / 60)
    extra = _design(cfg, state)
    blocked = len(state.blocks) > 1
    decision = None
    if cfg.sequential or blocked:
        with _sigint_deferred():
            decision = state.decide() if any(r["ok"] for r in rows) else None
        verdict = _verdict_of(decision, rows, cfg, len(state.order), targets, elapsed, len(state.rounds))
        extra["decision"] = decision.to_dict() if decision is not None else None
    else:
        verdict = _verdict(rows, cfg, len(state.order), targets, elapsed)
    # starts are the unit of a decision's cost: in all (server_starts) and per point
    per_point = {r["label"]: len(r["runs"]) * targets for r in rows}
    if state.base_runs:
        per_point[BASELINE] = len(state.base_runs) * targets
    verdict["cost"]["starts_per_point"] = per_point
    if state.design:
        extra["design"] = dict(state.design)
    best = _finish(rows, baseline, verdict["top"])
    runs, blocks_of = state.samples()
    effects = None
    if blocked and runs:
        from patchkit.profile.sequential import block_effects

        effects = block_effects(runs, blocks_of or {})
        extra["block_effects"] = effects
    measured = measured_spread(runs, blocks_of, effects)
    extra["plan"] = _plan(rows, verdict, decision, state, len(state.blocks), measured)
    extra["phase_verdict"] = _phase_verdict(rows, verdict.get("best") or verdict.get("top"))
    extra["spread_by_part"] = spread_by_part(
        {r["label"]: [_with_rest(x) for x in r["runs"] if x["ok"]] for r in rows}
    )
    sequential = decision is not None
    extra["adjusted"] = adjusted_verdict(
        rows,
        lambda runs, alpha: _decide_runs(runs, alpha, state, sequential, "adjusted"),
        DEFAULT_ALPHA,
        lambda runs, alpha: _decide_runs(runs, alpha, state, sequential, "raw"),
    )
    extra["starts"] = _starts(rows, (extra["adjusted"] or {}).get("tokens_per_s") or {})
    extra["spread"] = _spread_doc(cfg, state, measured, extra["adjusted"], cache, cache_at, interrupted)
    with _sigint_deferred():
        table, files = _write(
            run_dir,
            cfg,
            rows,
            baseline,
            best,
            time.monotonic() - start,
            interrupted=interrupted,
            chart=cfg.chart and not interrupted,
            verdict=verdict,
            order=state.order,
            extra=extra,
        )
    return table, files, verdict, baseline, best


def _design(cfg: RemoteConfig, state: _Rounds) -> dict[str, Any]:
    """sweep.json's rounds, drops, stop and limits, and on several blocks which they were."""
    extra: dict[str, Any] = {
        "rounds": state.rounds,
        "dropped": state.dropped,
        "stopped": state.stopped,
        "budget_minutes": cfg.budget_minutes,
        "until": cfg.until,
        "max_rounds": cfg.rounds,
    }
    if len(state.blocks) > 1:
        extra["blocks"] = [
            {"name": b.name, "gpu": b.gpu, "port": b.cfg.port} | ({"target": b.target} if b.target else {})
            for b in state.blocks
        ]
        extra["block_kind"] = _blocks_word(cfg)
        extra["seed"] = state.seed
    return extra


def _phase_verdict(rows: list[dict], leader: str | None) -> dict | None:
    """verdict.phase_comparison over every timed run of every point, against ``leader``."""
    if not leader:
        return None
    timed = {r["label"]: [x for x in r["runs"] if x["ok"] and x.get("phase_ms")] for r in rows}
    return phase_comparison(
        {label: [x["phase_ms"] for x in runs] for label, runs in timed.items()},
        leader,
        rounds={label: [x["rep"] for x in runs] for label, runs in timed.items()},
    )


def _starts(rows: list[dict], adjusted: dict) -> list[dict]:
    """sweep.json ``starts``: each timed start's parts, its tok/s and its adjusted tok/s."""
    return [
        {"label": r["label"], "round": x["rep"], "block": x.get("block")}
        | x["time_parts"]
        | {
            "tokens_per_s": x.get("tokens_per_s"),
            "adjusted_tokens_per_s": adjusted[r["label"]][i] if r["label"] in adjusted else None,
        }
        for r in rows
        for i, x in enumerate(r["runs"])
        if x["ok"] and x.get("time_parts")
    ]


def _spread_doc(
    cfg, state: _Rounds, measured, adjusted_doc: dict | None, cache, cache_at, interrupted: bool
) -> dict[str, Any]:
    """sweep.json ``spread``: the spread measured, and for a sequential sweep the cache's entry
    read (planning only) and the one written."""
    spread: dict[str, Any] = {"measured": measured}
    if cfg.sequential:
        spread.update(cache=str(cache) if cache else None, key=cache_at, prior=state.prior)
        adjusted = _adjusted_spread(adjusted_doc)
        if adjusted is not None:
            spread["adjusted"] = adjusted
        if cache is not None and measured and not interrupted:
            try:
                spread["written"] = update_spread(cache, cache_at, measured)
                if adjusted is not None:
                    spread["written_adjusted"] = update_spread(cache, cache_at + ADJUSTED_KEY, adjusted)
            except OSError as exc:
                spread["written"] = None
                state.bracket.notes.append(f"spread cache {cache} not written: {exc.strerror}")
    return spread


def _adjusted_spread(adjusted_doc: dict | None) -> dict | None:
    """The spread between starts of the adjusted tok/s (sweep.json ``adjusted``: its per-run
    tok/s), where they are the ones that decide."""
    if adjusted_doc is None or adjusted_doc["decided_by"] != "adjusted":
        return None
    return measured_spread(adjusted_doc["tokens_per_s"])


def _with_rest(run: dict) -> dict | None:
    """A run's time_split with the rest of its benchmark's time (``rest``), where known."""
    split, parts = run.get("time_split"), run.get("time_parts")
    if not split or not parts or parts.get("rest_s") is None:
        return split
    return {**split, "rest": {"total_s": parts["rest_s"]}}


def _decide_runs(values: dict, alpha: float, state: _Rounds, sequential: bool, estimator: str) -> dict:
    """The sweep's own test over other tok/s per run (the same points, rounds, blocks and
    horizon; a last look spends the rest only where the budget, not the test, ended the sweep)."""
    runs, blocks = state.samples()
    runs = {label: values[label] for label in runs if label in values}
    if sequential:
        from patchkit.profile.sequential import decide_sequential

        final = state.final_round if state.stopped == "budget" else None
        d = decide_sequential(
            runs,
            blocks=blocks,
            alpha=alpha,
            horizon=state.horizon,
            final_round=final,
            sigma=state.known_sigma(estimator),
        )
        return {
            "best": d.best,
            "status": d.status,
            "design": d.design,
            "alpha": alpha,
            "contenders": d.contenders,
            "dropped": d.dropped,
            "intervals": d.to_dict()["intervals"],
            "estimates": d.estimates,
        }
    v = decide_fixed({label: [x for x in xs if x is not None] for label, xs in runs.items()}, alpha=alpha)
    return {
        "best": v["best"],
        "status": "decided" if v["significant"] else "undecided",
        "design": "fixed",
    } | {k: v[k] for k in ("alpha", "indistinguishable", "p_values", "method")}


def _blocks_word(cfg: RemoteConfig) -> str:
    """What the blocks are, for a line: GPUs, targets, or (target, GPU) pairs."""
    if not cfg.hosts_as_blocks:
        return "GPUs"
    return "target GPUs" if cfg.gpus else "targets"


def _cost(cfg, runs: int, targets: int, elapsed_s: float, rounds: int | None = None) -> dict:
    cost = {
        "runs": runs,
        "targets": targets,
        "server_starts": runs * targets,
        "repeat": cfg.repeats if rounds is None else rounds,
        "warmup": cfg.warmup,
        "minutes": elapsed_s / 60,
    }
    if rounds is not None:
        cost["rounds"] = rounds
    return cost


def _verdict_of(decision, rows, cfg, runs: int, targets: int, elapsed_s: float, rounds: int) -> dict:
    """The verdict's keys (render_sweep, the chart) from a sequential decision."""
    doc: dict[str, Any] = {
        "best": None,
        "significant": False,
        "indistinguishable": [],
        "method": None,
        "alpha": DEFAULT_ALPHA,
        "top": None,
        "p_values": {},
        "note": "no point was measured",
        "sequential": True,
        "status": "undecided",
    }
    if decision is not None:
        estimates = decision.estimates or {}
        top = decision.leader or (max(estimates, key=lambda k: estimates[k]) if estimates else None)
        decided = decision.status == "decided" and decision.best is not None
        doc.update(
            best=decision.best if decided else None,
            significant=decided,
            indistinguishable=[decision.best] if decided else list(decision.contenders),
            method=decision.method,
            top=decision.best or top,
            leader=decision.leader,
            note=None,
            status=decision.status,
            dropped=dict(decision.dropped),
            intervals=dict(decision.intervals),
            design=decision.design,
            horizon=decision.horizon,
            level=decision.level,
            early_stop=decision.early_stop,
            estimates_note=decision.estimates_note,
            alpha=decision.alpha,
        )
        against = _against_baseline(decision)
        if against is not None:
            doc["against_baseline"] = against
    doc["cost"] = _cost(cfg, runs, targets, elapsed_s, rounds)
    return doc


def _known(entry: dict, min_df: int) -> float | None:
    """A cache entry's spread where it rests on ``min_df`` degrees of freedom or more."""
    spread = entry.get("spread")
    return spread if spread and (entry.get("df") or 0) >= min_df else None


def _against_baseline(decision) -> dict | None:
    """With the baseline in the race: whether the best beats no speculation, by how much (the
    ratio best / baseline: its estimate and the decision's interval, inverted), or whether no
    speculation is the fastest; None without the baseline among the decision's points."""
    est = decision.estimates or {}
    if BASELINE not in est:
        return None
    leader = decision.best or decision.leader
    if leader == BASELINE:
        status = "baseline fastest" if decision.best == BASELINE else "undecided"
        return {"status": status, "point": None, "ratio": None, "interval": None}
    lo, hi = decision.intervals.get(BASELINE) or [0.0, math.inf]  # baseline / leader
    interval = [1.0 / hi if hi and math.isfinite(hi) else 0.0, 1.0 / lo if lo else math.inf]
    return {
        "status": "beats baseline" if BASELINE in decision.dropped else "undecided",
        "point": leader,
        "ratio": est[leader] / est[BASELINE] if est.get(BASELINE) else None,
        "interval": [interval[0], interval[1] if math.isfinite(interval[1]) else None],
    }


def _verdict(rows: list[dict], cfg: RemoteConfig, runs: int, targets: int, elapsed_s: float) -> dict:
    """The fixed sweep's one verdict: decide_fixed over the tok/s that decides (the adjusted
    tok/s where adjusted.choose_estimator says so, else the raw), at the level it is judged at
    (alpha / 2 wherever an adjustment exists): the headline and sweep.json's ``verdict`` are the
    verdict that ``adjusted.decided_by`` names, never a second one at another level."""
    from patchkit.profile.remote.adjusted import choose_estimator

    samples = {r["label"]: [v for v in r["repeats"] if v is not None] for r in rows if r["ok"]}
    choice = choose_estimator(rows, DEFAULT_ALPHA)
    alpha = DEFAULT_ALPHA if choice is None else choice["alpha"]
    if choice is not None and choice["decided_by"] == "adjusted":
        samples = {
            label: [v for v in choice["tokens_per_s"].get(label) or [] if v is not None] for label in samples
        }
    verdict = decide_fixed(samples, alpha=alpha)
    verdict["decided_by"] = "raw" if choice is None else choice["decided_by"]
    verdict["cost"] = _cost(cfg, runs, targets, elapsed_s)
    return verdict


def _plan_at(spread: float | None, runs: dict, labels: list[str], source: str | None = None) -> dict:
    """label -> {more_runs, for_difference, spread[, spread_source]}: the runs per point a
    sequential sweep needs at ``spread`` (plan_runs), less those each label has done."""
    from patchkit.profile.sequential import plan_runs

    need = plan_runs(spread, PLAN_DIFFERENCE, DEFAULT_ALPHA, points=max(2, len(runs))) if spread else None
    out = {}
    for label in labels:
        done = sum(v is not None for v in runs.get(label, []))
        entry: dict[str, Any] = {
            "more_runs": max(0, need - done) if need is not None else None,
            "for_difference": PLAN_DIFFERENCE,
            "spread": spread,
        }
        if source:
            entry["spread_source"] = source
        out[label] = entry
    return out


def _plan(
    rows: list[dict], verdict: dict, decision, state: _Rounds, blocks: int, measured: dict | None
) -> dict | None:
    """For a verdict not decided: per contender, how many more runs would resolve a
    PLAN_DIFFERENCE difference at the spread measured (the decision's plan; for a fixed sweep
    plan_runs at ``measured``, the pooled spread the sweep records), and the minutes they would take from the measured start
    and run times (server minutes; on several GPUs the wall time divides by their number).
    Where the decision has no spread of its own yet (too few rounds for its paired test), the
    spread the sweep measured between starts (``measured``, block effects out) plans it."""
    if verdict.get("significant"):
        return None
    contenders = list(verdict.get("indistinguishable") or [])
    runs, _ = state.samples()
    spread = (measured or {}).get("spread")
    if decision is not None:
        contenders = list(decision.contenders) or contenders
        raw = {label: dict(decision.plan.get(label) or {}) for label in contenders}
        bare = [k for k, e in raw.items() if e.get("spread") is None and e.get("more_runs") is None]
        if spread and bare:
            raw.update(_plan_at(spread, runs, bare, source="measured between starts"))
    else:
        # what a sequential sweep (--until decided) would need, runs per point from the start
        raw = _plan_at(spread, runs, contenders)
    points, total = {}, 0.0
    for label, entry in raw.items():
        more = entry.get("more_runs")
        est = state._estimate_s(label)
        minutes = more * est / 60 if more is not None and est is not None else None
        entry["minutes"] = minutes
        total += minutes or 0.0
        points[label] = entry
    if not points:
        return None
    unknown = any(e.get("minutes") is None for e in points.values())
    return {
        "difference": PLAN_DIFFERENCE,
        "test": "sequential" if decision is not None else "sequential, had the sweep run --until decided",
        "points": points,
        "server_minutes": None if unknown else total,
        "wall_minutes": None if unknown else total / max(1, blocks),
        "blocks": blocks,
    }


def _finish(rows: list[dict], baseline: dict | None, top: str | None = None) -> dict | None:
    """Ratios to the baseline (medians; interval from the repetitions) and the top point (the
    verdict's: highest mean log tok/s; else the highest median); the verdict says whether it
    is significantly best."""
    base = (baseline or {}).get("tokens_per_s")
    base_reps = [v for v in (baseline or {}).get("repeats") or [] if v is not None]
    for r in rows:
        if r["ok"] and base:
            r["ratio_to_baseline"] = r["tokens_per_s"] / base
            r["ratio_ci"] = ratio_interval([v for v in r["repeats"] if v is not None], base_reps)
    ranked = [r for r in rows if r["ok"]]
    best = next((r for r in ranked if r["label"] == top), None) or (
        max(ranked, key=lambda r: r["tokens_per_s"]) if ranked else None
    )
    if baseline and best:
        baseline["spec_tokens_per_s"] = best["tokens_per_s"]
        baseline["ratio"] = best["ratio_to_baseline"]
        baseline["ratio_ci"] = best["ratio_ci"]
    return best
