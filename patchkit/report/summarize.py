"""Turn loaded timing into a Summary: per-phase statistics, shares of the cycle, throughput.

Shares use device time when the cycles have it (events and sync modes) and host time
otherwise; `Summary.basis` says which. A phase's share is the sum of its time over the
cycles described divided by the sum of those cycles' time, so the shares of
non-overlapping top-level phases add up to the part of the cycle they cover (the rest is
untimed glue). On the device basis only cycles whose device times arrived count (the
others are `unresolved`).

`phases` describes all timed cycles together; `cycle_kinds` describes each kind of cycle
(the `kind=` passed to cycle_begin: decode, prefill, ...) on its own. Phases outside any
cycle (warm-up, CUDA-graph capture passes) are never phases of a cycle: they are counted
per name in `outside_cycles`. Off-block cycles of PATCHKIT_TIMER_AB are not timed cycles:
they serve `overhead` only.

Which cycles. Only the cycles inside the measured window (``window.json``; see
patchkit.report.measured) are described; the others are counted in `warmup_cycles` and
`after_window_cycles`. Of those, cycles that sampled timing left untimed count as cycles
(`cycle.count`, `decode.request_cycles`) but have no phases; stall cycles (see
patchkit.report.stalls) are accounted for in `stalls` per kind. Shares and phase statistics
come from the steady-state cycles: timed, in the window, not stalls. A phase's `count` is its
calls in all timed cycles (stalls included); its statistics (`host_ms`, `dev_ms` per call;
`per_cycle_host_ms`, `per_cycle_dev_ms`) are over the steady-state cycles. The per-cycle
statistics sum a phase's calls within each cycle and take every phase of a kind over the same
cycles (zero where a cycle did not run it), so a child can never exceed its parent, and
share_of_cycle = mean per cycle / mean cycle: the share uses the mean (the median is shown
beside it). A per-cycle p99 is given only over at least P99_MIN_N cycles (else null).
Where the timed cycles were drawn at varying probabilities (a budget, PATCHKIT_TIMER_BUDGET)
each weighs 1/p in the sums and means (patchkit.report.measured.cycle_weights).

A change in the level of cycle time across the window (another load on the machine) is
`drift` (patchkit.report.drift): the shares stay what they are, over every steady cycle, and
the drift is a warning beside them.

Every share has its 95 % interval (`share_ci95`, `host_share_ci95`, `top_level_share_ci95`:
[low, high] in percent of the cycle, like the share): a percentile bootstrap over the
steady-state cycles in blocks of consecutive cycles (patchkit.report.bootstrap), each resample's share
recomputed as the report computes it (sum of the phase over sum of the cycle). `share_ci` says
how: method, resamples, seed, the number of cycles (`timed_cycles`), the widest interval and,
when it is wider than +-2 points, about how many timed cycles would read every share to
within 2 points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from patchkit.report import bootstrap
from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind, ordered_kinds
from patchkit.report.load import ProcessTiming
from patchkit.report.stats import percentile

REPORT_SCHEMA = "patchkit.report/1"
META_THROUGHPUT = "tokens_per_s"
META_BASELINE = "baseline_tokens_per_s"
META_ACCEPT = "accept_length"
META_RUNS = "tokens_per_s_runs"  # repeated measurements of tokens_per_s (a list)
META_BASELINE_RUNS = "baseline_tokens_per_s_runs"
P99_MIN_N = 100  # fewer values than this: no p99 (it would be about the maximum)
CI_TARGET_POINTS = 2.0  # a share read to within this many points (interval half-width)
# summary.json's `units`: the unit of every number, by key name, wherever the key appears
UNITS = {
    "share_of_cycle": "% of the cycle's time on `basis` (device or host)",
    "host_share_of_cycle": "% of the cycle's host time",
    "phase_shares": "% of the cycle's time on `basis`, per top-level phase (decode_cycle)",
    "top_level_share": "% of the cycle's time that the top-level phases cover",
    "share_of_kind_time": "% of that kind of cycle's time",
    "*_ci95": "[low, high]: the 95 % interval, in the unit of the value it bounds",
    "*_ms": "milliseconds (mean, p50, p99, min, max, total; n: a count)",
    "tokens_per_s": "output tokens per second",
    "accept_length": "tokens per request per verify step (accepted drafts + 1)",
    "wall_time_s": "seconds",
    "*_s": "seconds",
    "count, cycles, *_cycles": "cycles",
    "cycle_counts": "cycles, each key a set of them (patchkit.report.counts.COUNT_WORDS; docs/runtime.md)",
    "warnings": (
        "value_pct and threshold_pct: % of the kind's cycle time (stalls) or of the cycle period "
        "(timer_cost); ratio and threshold_ratio (drift): as ratio_to_rest"
    ),
    "ratio_to_rest, min_ratio": (
        "x: a drifted segment's median cycle time over the rest's (at the same batch size where the "
        "cycles carry one); first_cycle, last_cycle, change_points: cycle numbers as recorded"
    ),
}


def distribution(
    values_ns: Sequence[int | None], gate_p99: bool = False, weights: Sequence[float] | None = None
) -> dict | None:
    """mean/p50/p99/total/min/max in milliseconds, or None when there are no values.
    `gate_p99`: p99 is null below P99_MIN_N values. `weights` (one per value; a timed cycle
    drawn at probability p weighs 1/p, patchkit.report.measured): the mean is weighted, the
    rest is not."""
    vals = [v / 1e6 for v in values_ns if v is not None]
    if not vals:
        return None
    p99 = percentile(vals, 99) if not gate_p99 or len(vals) >= P99_MIN_N else None
    mean = sum(vals) / len(vals)
    if weights is not None:
        pairs = [(v / 1e6, w) for v, w in zip(values_ns, weights) if v is not None]
        mean = sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
    return {
        "mean": mean,
        "p50": percentile(vals, 50),
        "p99": p99,
        "min": min(vals),
        "max": max(vals),
        "total": sum(vals),
        "n": len(vals),
    }


@dataclass
class Summary:
    """What the report says, as plain data; `to_dict()` is summary.json (stable keys)."""

    timing_dir: str
    mode: str
    basis: str
    ranks: list[dict]
    cycle: dict
    phases: list[dict]
    top_level_share: float | None
    decode: dict
    meta: dict
    throughput: dict
    cycle_kinds: dict = field(default_factory=dict)
    outside_cycles: dict = field(default_factory=dict)
    unresolved: int = 0
    lost_records: int = 0
    overhead: dict | None = None
    rank_skew: dict | None = None
    files: dict = field(default_factory=dict)
    schema: str = REPORT_SCHEMA
    # a run without speculation beside this one (profile.remote --baseline): tokens_per_s,
    # spec_tokens_per_s, ratio (spec / baseline), accept_length, server_command, error
    baseline: dict | None = None
    # decode cycles only (cycle attr kind "decode", or no kind): count, basis, top_level_share,
    # phase_shares {top-level phase: % of the decode cycles' time}
    decode_cycle: dict | None = None
    # the measured window used (window.json's content) or None; cycles before / after it
    window: dict | None = None
    warmup_cycles: int = 0
    after_window_cycles: int = 0
    # per kind of cycle: {count, total_ms, share_of_kind_time, by_phase, cycles, rule, ...}
    stalls: dict = field(default_factory=dict)
    # sampled timing: {every, method, seed, timed_cycles, cycles}, or None; under a budget
    # (PATCHKIT_TIMER_BUDGET) also `budget` (patchkit.report.measured._budget)
    sampling: dict | None = None
    # the 95 % interval of top_level_share ([low, high], %), and how every share's interval
    # was made (the `share_ci` of _breakdown); the phases carry share_ci95, host_share_ci95
    top_level_share_ci95: list[float] | None = None
    share_ci: dict | None = None
    # the unit of every number, by key name (UNITS): shares are percentages, times milliseconds
    units: dict = field(default_factory=lambda: dict(UNITS))
    # accept lengths of the decode cycles (patchkit.report.acceptance), or None
    acceptance: dict | None = None
    # the what-if's headline (patchkit.report.predict, no intervals: profile.predict gives
    # them): profiled_num_steps, best_num_steps, ratio_by_num_steps {n: x this run}, or None
    prediction: dict | None = None
    # the lead rank's measured window divided between decode and prefill cycles (periods:
    # host start to the next start; patchkit.report.benchsim.time_split): {decode, prefill:
    # {cycles, total_s, period_mean_ms}}, or None
    time_split: dict | None = None
    # every cycle count of the report named by what it counts (patchkit.report.counts), or None
    cycle_counts: dict | None = None
    # what makes the numbers untrustworthy, with what to do (patchkit.report.trust), or []
    warnings: list = field(default_factory=list)
    # a change in the level of the lead rank's decode cycle time across the window
    # (patchkit.report.drift.find_drift): {detected, tested, shape, segments, method, ...}
    drift: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def phase(self, name: str, parent: str | None = None, kind: str | None = None) -> dict | None:
        """The first phase entry called `name` (optionally under `parent`, of one kind)."""
        entries = self.phases if kind is None else (self.cycle_kinds.get(kind) or {}).get("phases", [])
        for entry in entries:
            if entry["name"] == name and (parent is None or entry["parent"] == parent):
                return entry
        return None

    @property
    def primary_kind(self) -> str | None:
        """The kind a reader looks at first: decode when there is one."""
        return next(iter(self.cycle_kinds), None)


def _phase_key(rec: dict) -> tuple:
    return (rec.get("depth") or 0, rec.get("parent"), rec["name"])


def _ordered_keys(groups: list[tuple[list[dict], dict]]) -> list[tuple]:
    """Phase keys as a tree in timeline order: each parent followed by its children.

    `groups`: per process, (its phase records, {cycle index: cycle record})."""
    first_seen: dict[tuple, tuple] = {}
    for phases, cycles in groups:
        for rec in phases:
            key = _phase_key(rec)
            cyc = rec.get("cycle")
            if rec.get("t0") is not None and cyc in cycles:
                offset = rec["t0"] - cycles[cyc]["t0"]
            elif rec.get("t0") is not None:
                offset = 0
            else:
                offset = rec.get("dev_off_ns") or 0
            rank = (cyc is None, offset)
            if key not in first_seen or rank < first_seen[key]:
                first_seen[key] = rank
    children: dict[tuple, list[tuple]] = {}
    for key in first_seen:
        depth, parent, _ = key
        children.setdefault((depth - 1, parent), []).append(key)
    for kids in children.values():
        kids.sort(key=lambda k: first_seen[k])
    ordered: list[tuple] = []

    def walk(node_depth, node_name):
        for kid in children.get((node_depth, node_name), []):
            if kid not in ordered:
                ordered.append(kid)
                walk(kid[0], kid[2])

    walk(-1, None)
    ordered += [k for k in sorted(first_seen, key=lambda k: first_seen[k]) if k not in ordered]
    return ordered


def _basis_field(basis: str) -> str:
    return "dev_ns" if basis == "device" else "host_ns"


def _decode_cycle(cycle_kinds: dict, basis: str) -> dict:
    """summary.json's decode_cycle: the decode cycles' count and top-level shares, flat (what a
    sweep row reads; the full breakdown is cycle_kinds["decode"]). Cycles without a kind
    count as decode when no cycle says decode (series that predate cycle kinds)."""
    decode = cycle_kinds.get(KIND_PRIMARY) or cycle_kinds.get(NO_KIND) or {}
    top = [e for e in decode.get("phases", []) if not e.get("depth") and e.get("share_of_cycle") is not None]
    return {
        "count": decode.get("cycles", 0),
        "basis": basis,
        "phase_shares": {e["name"]: e["share_of_cycle"] for e in top},
        "top_level_share": decode.get("top_level_share"),
        "timed_cycles": decode.get("timed_cycles", 0),
        "steady_cycles": decode.get("steady_cycles", 0),
        # 95 % intervals ([low, high], % like the shares; None below two cycles)
        "phase_shares_ci95": {e["name"]: e.get("share_ci95") for e in top},
        "top_level_share_ci95": decode.get("top_level_share_ci95"),
    }


def acceptance_of(cycles: list[dict], lead: list[ProcessTiming], meta: dict) -> dict | None:
    """The acceptance section of the lead rank's decode cycles (patchkit.report.acceptance)."""
    from patchkit.report.acceptance import acceptance, server_spec

    return acceptance(cycles, server_spec((p.header for p in lead), meta))


def _decode_stats(cycles: list[dict]) -> dict:
    """Batch size and accepted length from cycle attrs (patchkit's docs/runtime.md, Records)."""
    reqs: float = 0
    tokens: float = 0
    drafts: float = 0
    batch_sizes = []
    for c in cycles:
        attrs = c.get("attrs") or {}
        bs = attrs.get("batch_size")
        if isinstance(bs, (int, float)):
            batch_sizes.append(bs)
        acc = attrs.get("accepted")
        tok = attrs.get("tokens")
        if isinstance(tok, list) and not isinstance(acc, list):
            # per-request tokens (e.g. sglang 0.5.23's accept_lens): one request per entry,
            # accepted drafts = tokens - 1 each
            n = len(tok)
            tok = sum(v for v in tok if isinstance(v, (int, float)))
            if n:
                reqs += n
                tokens += tok
                drafts += tok - n
            continue
        n_req: float | None
        if isinstance(acc, list):
            n_req = len(acc)
            acc = sum(acc)
        else:
            n_req = bs if isinstance(bs, (int, float)) else None
        if n_req and isinstance(acc, (int, float)):
            reqs += n_req
            drafts += acc
            tokens += tok if isinstance(tok, (int, float)) else acc + n_req
        elif n_req and isinstance(tok, (int, float)):
            reqs += n_req
            tokens += tok
    return {
        "cycles_with_batch_size": len(batch_sizes),
        "batch_size_mean": sum(batch_sizes) / len(batch_sizes) if batch_sizes else None,
        "request_cycles": reqs,
        "tokens": tokens,
        "accept_length_mean": tokens / reqs if reqs else None,
        "accepted_drafts_mean": drafts / reqs if reqs and drafts else None,
    }


def _per_cycle(
    groups: list[tuple[list[dict], dict]], keys: list[tuple], field: str, only_with: str | None = None
) -> dict[tuple, list[int] | None]:
    """Per phase key: its `field` time summed within each cycle, one value per cycle of the
    groups (0 where the cycle did not run it); cycles without `only_with` are left out. None
    for a phase that has no value of `field` at all (host time of captured steps)."""
    has = {k: False for k in keys}
    sums: dict[tuple, list[int]] = {k: [] for k in keys}
    for phases, sel in groups:
        by_cycle: dict[int, dict[tuple, int]] = {}
        for rec in phases:
            value = rec.get(field)
            if value is None:
                continue
            key = _phase_key(rec)
            has[key] = True
            slot = by_cycle.setdefault(rec["cycle"], {})
            slot[key] = slot.get(key, 0) + value
        for index, cycle in sel.items():
            if only_with is not None and cycle.get(only_with) is None:
                continue
            slot = by_cycle.get(index, {})
            for key in keys:
                sums[key].append(slot.get(key, 0))
    return {k: (sums[k] if has[k] else None) for k in keys}


def _weight_list(groups: list[tuple[list[dict], dict]], weights: list[dict] | None, only_with=None):
    """The weight of each cycle in _per_cycle's order (None without weights)."""
    if weights is None:
        return None
    return [
        w[index]
        for (_, sel), w in zip(groups, weights)
        for index, cycle in sel.items()
        if only_with is None or cycle.get(only_with) is not None
    ]


def share_intervals(
    groups: list[tuple[list[dict], dict]], keys: list[tuple], bfield: str, weights: list[dict] | None = None
) -> dict:
    """95 % intervals of every share of the cycle, by a percentile bootstrap over blocks of
    consecutive cycles (bootstrap.consecutive_blocks: a run's batch make-up drifts, so
    neighbouring cycles are alike and a block carries that).

    The smallest unit is a whole cycle, not a phase record: the phases of one cycle move
    together (a large batch lengthens verify and draft alike, a long cycle is long in every
    phase it runs, and a phase's calls within a cycle share its batch), so records resampled
    on their own would treat correlated values as independent, break the pairing of each
    phase with its own cycle's time in the ratio, and give intervals too narrow. For the same
    reason the ranks' records of one cycle index (tensor-parallel ranks run the same batch in
    lockstep) form one unit; processes whose indices do not line up only make units larger,
    which keeps the interval valid. Each resample recomputes what the report computes: the
    sum of a phase's time over the sum of the cycles' time (device basis: over the cycles
    with device times; host share: over every steady cycle), each cycle's times weighted by
    `weights` (per process {index: 1/p}) when p varied."""
    k = len(keys)
    col = {key: j for j, key in enumerate(keys)}
    host_basis = bfield == "host_ns"
    width = k + 2 if host_basis else 2 * k + 3
    units: dict[int, list[int]] = {}
    with_basis: set[int] = set()
    for pi, (phases, sel) in enumerate(groups):
        wsel = None if weights is None else weights[pi]
        for index, cycle in sel.items():
            w = 1 if wsel is None else wsel[index]
            row = units.setdefault(index, [0] * width)
            if cycle.get(bfield) is not None:
                row[k + 1] += w * cycle[bfield]
                with_basis.add(index)
            if not host_basis:
                row[2 * k + 2] += w * (cycle.get("host_ns") or 0)
        for rec in phases:
            cycle, row, j = sel[rec["cycle"]], units[rec["cycle"]], col[_phase_key(rec)]
            w = 1 if wsel is None else wsel[rec["cycle"]]
            if cycle.get(bfield) is not None:
                value = w * (rec.get(bfield) or 0)
                row[j] += value
                if not rec.get("depth"):
                    row[k] += value
            if not host_basis:
                row[k + 2 + j] += w * (rec.get("host_ns") or 0)
    pairs = [(j, k + 1) for j in range(k + 1)]
    if not host_basis:
        pairs += [(k + 2 + j, 2 * k + 2) for j in range(k)]
    ordered = [units[i] for i in sorted(units)]  # consecutive cycles: blocks keep their drift
    found = bootstrap.ratio_intervals(bootstrap.consecutive_blocks(ordered), pairs)
    listed = [None if ci is None else [ci[0], ci[1]] for ci in found]
    share = dict(zip(keys, listed[:k]))
    return {
        "share": share,
        "host_share": share if host_basis else dict(zip(keys, listed[k + 1 :])),
        "top": listed[k],
        "timed_cycles": len(with_basis),
        "host_timed_cycles": len(units),
    }


def process_shares(proc: ProcessTiming, steady: dict, basis: str, weights: dict | None = None) -> dict:
    """One process's top-level shares as this module computes them, for phases.png's bars:
    {"share": {name: %}, "share_ci95": {name: [lo, hi] or None}, "top_ci95": the interval of all
    top-level phases together}. `steady`: {cycle index: cycle} of the cycles described (timed,
    not stalls); `weights`: {cycle index: 1/p} when p varied (measured.cycle_weights)."""
    bfield = _basis_field(basis)
    phases = [r for r in proc.phases if r.get("cycle") in steady]
    w = weights or {}
    total = sum(w.get(i, 1) * c[bfield] for i, c in steady.items() if c.get(bfield) is not None)
    sums: dict[str, float] = {}
    for rec in phases:
        if not rec.get("depth") and steady[rec["cycle"]].get(bfield) is not None:
            value = w.get(rec["cycle"], 1) * (rec.get(bfield) or 0)
            sums[rec["name"]] = sums.get(rec["name"], 0) + value
    groups = [(phases, steady)]
    found = share_intervals(groups, _ordered_keys(groups), bfield, None if weights is None else [weights])
    return {
        "share": {name: 100.0 * v / total for name, v in sums.items()} if total else {},
        "share_ci95": {key[2]: ci for key, ci in found["share"].items() if not key[0]},
        "top_ci95": found["top"],
    }


def _ci_summary(found: dict, entries: list[dict], top_ci: list | None) -> dict:
    """`share_ci`: how the intervals were made, the widest one on the report's basis, and
    when that is wider than +-2 points about how many timed cycles would narrow it to 2."""
    widest = None
    shown = [(e["name"], e["parent"], e.get("share_ci95")) for e in entries]
    for name, parent, ci in shown + [("top-level phases", None, top_ci)]:
        hw = bootstrap.half_width(ci)
        if hw is not None and (widest is None or hw > widest["half_width"]):
            widest = {"name": name, "parent": parent, "half_width": hw}
    n = found["timed_cycles"]
    too_wide = widest is not None and widest["half_width"] > CI_TARGET_POINTS
    return {
        "method": (
            f"percentile bootstrap over {bootstrap.UNIT} ({bootstrap.BLOCKS} blocks in their order, "
            "each cycle with every rank's records)"
        ),
        "blocks": min(bootstrap.BLOCKS, n),
        "level": bootstrap.LEVEL,
        "resamples": bootstrap.RESAMPLES,
        "seed": bootstrap.SEED,
        "timed_cycles": n,
        "host_timed_cycles": found["host_timed_cycles"],
        "widest": widest,
        "target_points": CI_TARGET_POINTS,
        "cycles_for_target": (
            bootstrap.cycles_needed(n, widest["half_width"], CI_TARGET_POINTS)
            if too_wide and widest
            else None
        ),
    }


def _breakdown(
    procs: list[ProcessTiming],
    timed: list[dict],
    steady: list[dict],
    n_all: int,
    basis: str,
    outside: dict[tuple, int],
    cache: dict | None = None,
    weights: list[dict] | None = None,
) -> dict:
    """Cycle statistics and phase entries. Per process, `timed`: {cycle index: cycle record}
    of the timed cycles described (counts), `steady`: the subset without stalls (statistics
    and shares); `n_all`: every cycle described, timed or not. `cache`: share intervals
    already bootstrapped, by cycles and phases (the overall breakdown and that of the only
    kind describe the same cycles). `weights`: per process {cycle index: 1/p} when the timed
    cycles were drawn at varying p (patchkit.report.measured): shares, their intervals, means
    and calls per cycle weigh each timed cycle by it; None: every cycle counts once."""
    bfield = _basis_field(basis)
    tcycles = [c for sel in timed for c in sel.values()]
    cycles = [c for sel in steady for c in sel.values()]
    ws = [{i: 1 for i in sel} for sel in timed] if weights is None else weights
    cw = None if weights is None else [ws[pi][i] for pi, sel in enumerate(steady) for i in sel]
    total, total_host = _cycle_totals(steady, ws, bfield)
    tgroups = [([r for r in p.phases if r.get("cycle") in sel], sel) for p, sel in zip(procs, timed)]
    groups = [([r for r in phases if r["cycle"] in sel], sel) for (phases, _), sel in zip(tgroups, steady)]
    keys = _ordered_keys(tgroups)
    counts, wcounts = _phase_counts(tgroups, keys, ws)
    wtimed = sum(ws[pi][i] for pi, sel in enumerate(timed) for i in sel)
    buckets = _phase_buckets(groups, keys, bfield, ws)
    per_dev = _per_cycle(groups, keys, "dev_ns", only_with="dev_ns")
    per_host = _per_cycle(groups, keys, "host_ns")
    w_dev = _weight_list(groups, weights, only_with="dev_ns")
    w_host = _weight_list(groups, weights)
    found = _cached_intervals(cache, groups, keys, bfield, weights)
    entries = []
    for key in keys:
        pairs = buckets[key]
        recs = [r for r, _, _ in pairs]
        rw = None if weights is None else [w for _, _, w in pairs]
        depth, parent, name = key
        basis_sum = sum(w * (r.get(bfield) or 0) for r, ok, w in pairs if ok)
        host_sum = sum(w * (r.get("host_ns") or 0) for r, _, w in pairs)
        entries.append(
            {
                "name": name,
                "parent": parent,
                "depth": depth,
                "count": counts[key],
                "steady_count": len(recs),
                "per_cycle": (counts[key] if weights is None else wcounts[key]) / wtimed if tcycles else None,
                "graph": any(r.get("graph") for r in recs),
                "captured": any(r.get("captured") for r in recs),
                "outside_cycles": outside.get(key, 0),
                "host_ms": distribution([r.get("host_ns") for r in recs], weights=rw),
                "dev_ms": distribution([r.get("dev_ns") for r in recs], weights=rw),
                "per_cycle_host_ms": distribution(per_host[key] or [], gate_p99=True, weights=w_host),
                "per_cycle_dev_ms": distribution(per_dev[key] or [], gate_p99=True, weights=w_dev),
                "share_of_cycle": 100.0 * basis_sum / total if total else None,
                "host_share_of_cycle": 100.0 * host_sum / total_host if total_host else None,
                "share_ci95": found["share"][key] if total else None,
                "host_share_ci95": found["host_share"][key] if total_host else None,
                "timed_cycles": found["timed_cycles"],
            }
        )
    top = [e["share_of_cycle"] for e in entries if e["depth"] == 0 and e["share_of_cycle"] is not None]
    top_ci = found["top"] if top else None
    return {
        "cycles": n_all,
        "timed_cycles": len(tcycles),
        "steady_cycles": len(cycles),
        "cycle": _cycle_row(n_all, len(tcycles), cycles, cw),
        "phases": entries,
        "top_level_share": sum(top) if top else None,
        "top_level_share_ci95": top_ci,
        "share_ci": _ci_summary(found, entries, top_ci),
    }


def _cycle_totals(steady: list[dict], ws: list[dict], bfield: str) -> tuple[float, float]:
    """The steady cycles' weighted time: on the basis (those that have it), and on the host."""
    total = sum(
        ws[pi][i] * c[bfield]
        for pi, sel in enumerate(steady)
        for i, c in sel.items()
        if c.get(bfield) is not None
    )
    total_host = sum(
        ws[pi][i] * (c.get("host_ns") or 0) for pi, sel in enumerate(steady) for i, c in sel.items()
    )
    return total, total_host


def _cycle_row(n_all: int, n_timed: int, cycles: list[dict], cw: list | None) -> dict:
    """The breakdown's cycle row: cycles described, timed and steady, the steady ones' times."""
    return {
        "count": n_all,
        "timed": n_timed,
        "steady": len(cycles),
        "host_ms": distribution([c.get("host_ns") for c in cycles], weights=cw),
        "dev_ms": distribution([c.get("dev_ns") for c in cycles], weights=cw),
    }


def _phase_counts(
    tgroups: list[tuple[list[dict], dict]], keys: list[tuple], ws: list[dict]
) -> tuple[dict[tuple, int], dict[tuple, float]]:
    """Calls timed per phase key over the timed cycles: as counted, and weighted by ``ws``."""
    counts = {k: 0 for k in keys}
    wcounts: dict[tuple, float] = {k: 0 for k in keys}
    for pi, (phases, _) in enumerate(tgroups):
        for rec in phases:
            counts[_phase_key(rec)] += 1
            wcounts[_phase_key(rec)] += ws[pi][rec["cycle"]]
    return counts, wcounts


def _phase_buckets(
    groups: list[tuple[list[dict], dict]], keys: list[tuple], bfield: str, ws: list[dict]
) -> dict[tuple, list[tuple[dict, bool, float]]]:
    """Per phase key, the steady cycles' records: (record, whether its cycle has a time on the
    basis and so counts in the share, its cycle's weight)."""
    buckets: dict[tuple, list[tuple[dict, bool, float]]] = {k: [] for k in keys}
    for pi, (phases, sel) in enumerate(groups):
        for rec in phases:
            in_share = sel[rec["cycle"]].get(bfield) is not None
            buckets[_phase_key(rec)].append((rec, in_share, ws[pi][rec["cycle"]]))
    return buckets


def _cached_intervals(
    cache: dict | None, groups: list[tuple[list[dict], dict]], keys: list[tuple], bfield: str, weights
) -> dict:
    """share_intervals over the steady cycles, bootstrapped once per set of cycles and phases."""
    cache_key = (bfield, tuple(keys), tuple(tuple(sel) for _, sel in groups), weights is None)
    found = None if cache is None else cache.get(cache_key)
    if found is None:
        found = share_intervals(groups, keys, bfield, weights)
        if cache is not None:
            cache[cache_key] = found
    return found


def _runs(meta: dict, key: str) -> list[float]:
    runs = meta.get(key)
    if not isinstance(runs, (list, tuple)):
        return []
    return [float(v) for v in runs if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _throughput(meta: dict, decode: dict, cycles: list[dict]) -> dict:
    """tokens/s as measured by the caller; with repeated measurements (meta
    tokens_per_s_runs / baseline_tokens_per_s_runs), their median and range too (the median
    stands for tokens_per_s when the caller gave no single value)."""
    runs = _runs(meta, META_RUNS)
    base_runs = _runs(meta, META_BASELINE_RUNS)
    spec = meta.get(META_THROUGHPUT)
    base = meta.get(META_BASELINE)
    if spec is None and runs:
        spec = percentile(runs, 50)
    if base is None and base_runs:
        base = percentile(base_runs, 50)
    wall_ns = sum(c.get("host_ns") or 0 for c in cycles)
    timed = decode["tokens"] / (wall_ns / 1e9) if decode["tokens"] and wall_ns else None
    out = {
        "tokens_per_s": spec,
        "baseline_tokens_per_s": base,
        "speedup": spec / base if spec and base else None,
        "tokens_per_s_in_cycles": timed,
    }
    if runs:
        out.update(
            tokens_per_s_runs=runs,
            tokens_per_s_median=percentile(runs, 50),
            tokens_per_s_range=[min(runs), max(runs)],
        )
    if base_runs:
        out.update(
            baseline_tokens_per_s_runs=base_runs,
            baseline_tokens_per_s_median=percentile(base_runs, 50),
            baseline_tokens_per_s_range=[min(base_runs), max(base_runs)],
        )
    return out


def _choose_basis(procs: list[ProcessTiming]) -> str:
    timed = [c for p in procs if p.mode in ("events", "sync") for c in p.timed_cycles]
    return "device" if any(c.get("dev_ns") is not None for c in timed) else "host"


@dataclass
class Selection:
    """Which cycles the report describes: `procs` reduced to the measured window, how many
    cycles each process had before / after it, the basis, and the stalls (per kind, and per
    process the set of stall cycle indices)."""

    procs: list[ProcessTiming]
    full: list[ProcessTiming]
    window: object
    window_counts: list
    basis: str
    stalls: dict
    stall_sets: list[set[int]]


def select(
    procs: list[ProcessTiming],
    timing_dir,
    window=None,
    stall_factor: float | None = None,
    stall_floor_ms: float | None = None,
) -> Selection:
    """The Selection of `procs`; `window` None reads ``window.json`` from `timing_dir`."""
    from patchkit.report import measured, stalls as stall_mod
    from patchkit.report.window import read_window

    if window is None:
        window = read_window(timing_dir)
    firsts = [measured.first_at_batch_size(p) for p in procs]
    kept, counts = measured.restrict(procs, window)
    basis = _choose_basis(kept)
    stalls, stall_sets = stall_mod.find_stalls(
        kept,
        basis,
        firsts,
        factor=stall_mod.STALL_FACTOR if stall_factor is None else stall_factor,
        floor_ms=stall_mod.STALL_FLOOR_MS if stall_floor_ms is None else stall_floor_ms,
    )
    return Selection(kept, list(procs), window, counts, basis, stalls, stall_sets)


def summarize(
    procs: list[ProcessTiming],
    timing_dir: str,
    meta: dict | None = None,
    window=None,
    stall_factor: float | None = None,
    stall_floor_ms: float | None = None,
    selection: Selection | None = None,
) -> Summary:
    """The Summary of `procs` (as loaded from `timing_dir`).

    `window`: a patchkit.report.window.Window; None reads ``window.json`` from `timing_dir`
    (no file: every cycle is described). `stall_factor` / `stall_floor_ms` override the stall
    rule's constants (patchkit.report.stalls). `selection`: the result of select() when the
    caller made it already (the other arguments but meta are then unused)."""
    from patchkit.report import measured
    from patchkit.report.drift import find_drift
    from patchkit.report.overhead import paired_overhead
    from patchkit.report.skew import rank_skew

    meta = dict(meta or {})
    sel = selection or select(procs, timing_dir, window, stall_factor, stall_floor_ms)
    all_procs, procs, window = sel.full, sel.procs, sel.window
    win_counts, basis, stalls, stall_sets = sel.window_counts, sel.basis, sel.stalls, sel.stall_sets
    modes = sorted({p.mode for p in procs})
    mode = modes[0] if len(modes) == 1 else "mixed"
    outside_by_key, outside = _outside_cycles(procs)
    timed = [{c["cycle"]: c for c in p.timed_cycles} for p in procs]
    steady = [{i: c for i, c in sel.items() if i not in st} for sel, st in zip(timed, stall_sets)]
    # every cycle described, timed or not (off blocks of PATCHKIT_TIMER_AB serve `overhead`)
    every = [c for p in procs for c in p.cycles if c.get("ab") != "off"]
    intervals: dict = {}
    # a timed cycle drawn at p stands for 1/p cycles: weights where p varied (a budget)
    weights = measured.cycle_weights(procs, timed)
    overall = _breakdown(procs, timed, steady, len(every), basis, outside_by_key, intervals, weights)
    kinds = ordered_kinds({cycle_kind(c) for c in every})
    cycle_kinds = {}
    for kind in kinds:
        tsel = [{i: c for i, c in s.items() if cycle_kind(c) == kind} for s in timed]
        ssel = [{i: c for i, c in s.items() if cycle_kind(c) == kind} for s in steady]
        n_all = sum(1 for c in every if cycle_kind(c) == kind)
        cycle_kinds[kind] = _breakdown(procs, tsel, ssel, n_all, basis, outside_by_key, intervals, weights)
    primary = kinds[0] if kinds else KIND_PRIMARY
    first_rank = min(p.rank for p in procs)
    lead_cycles = _lead_cycles(procs, first_rank, primary if kinds else None)
    decode = _decode_stats(lead_cycles)
    accept = acceptance_of(lead_cycles, [p for p in procs if p.rank == first_rank], meta)
    if meta.get(META_ACCEPT) is not None:
        decode["accept_length_reported"] = meta[META_ACCEPT]
    ranks = [_rank_row(p, full, n, st) for p, full, n, st in zip(procs, all_procs, win_counts, stall_sets)]
    return Summary(
        timing_dir=str(timing_dir),
        mode=mode,
        basis=basis,
        ranks=ranks,
        cycle=overall["cycle"],
        phases=overall["phases"],
        top_level_share=overall["top_level_share"],
        top_level_share_ci95=overall["top_level_share_ci95"],
        share_ci=overall["share_ci"],
        decode=decode,
        meta=meta,
        throughput=_throughput(meta, decode, lead_cycles),
        cycle_kinds=cycle_kinds,
        outside_cycles=outside,
        unresolved=sum(p.unresolved for p in procs),
        lost_records=_lost_records(procs),
        overhead=paired_overhead(procs, primary),
        rank_skew=rank_skew(_steady_procs(procs, stall_sets), primary if kinds else None, basis),
        decode_cycle=_decode_cycle(cycle_kinds, basis),
        window=None if window is None else window.to_dict(),
        warmup_cycles=sum(n.before for n in win_counts),
        after_window_cycles=sum(n.after for n in win_counts),
        stalls=stalls,
        sampling=measured.sampling(procs),
        acceptance=accept,
        drift=find_drift(procs, stall_sets, basis, kinds),
    )


def _steady_procs(procs: list[ProcessTiming], stall_sets: list) -> list[ProcessTiming]:
    """Each process without its stall cycles (and their phases)."""
    return [
        replace(
            p,
            cycles=[c for c in p.cycles if c["cycle"] not in st],
            phases=[r for r in p.phases if r.get("cycle") not in st],
        )
        for p, st in zip(procs, stall_sets)
    ]


def _outside_cycles(procs: list[ProcessTiming]) -> tuple[dict[tuple, int], dict[str, int]]:
    """The phases recorded outside any cycle, counted by phase key and by name."""
    outside_by_key: dict[tuple, int] = {}
    outside: dict[str, int] = {}
    for p in procs:
        for r in p.phases:
            if r.get("cycle") is None:
                outside_by_key[_phase_key(r)] = outside_by_key.get(_phase_key(r), 0) + 1
                outside[r["name"]] = outside.get(r["name"], 0) + 1
    return outside_by_key, outside


def _lead_cycles(procs: list[ProcessTiming], first_rank: int, primary: str | None) -> list[dict]:
    """The cycles whose tokens count: tensor-parallel ranks all see the same batch, so the
    lowest rank's only; of the primary kind (None: every kind); every cycle with attrs counts
    (untimed sampled cycles too), off blocks carry none."""
    return [
        c
        for p in procs
        if p.rank == first_rank
        for c in p.cycles
        if c.get("ab") != "off" and (primary is None or cycle_kind(c) == primary)
    ]


def _rank_row(p: ProcessTiming, full: ProcessTiming, n, st) -> dict:
    """summary.json's row for one process: who it was, what it recorded, its cycle times
    (stalls left out), how it ended."""
    return {
        "rank": p.rank,
        "pid": p.header.get("pid"),
        "host": p.header.get("host"),
        "mode": p.mode,
        "requested_mode": p.header.get("requested_mode"),
        "rank_source": p.header.get("rank_source"),
        "file": p.path.name,
        "cycles": len(p.timed_cycles),
        "phases": len(p.phases),
        "cycles_in_file": len(full.cycles),
        "warmup_cycles": n.before,
        "after_window_cycles": n.after,
        "stall_cycles": len(st),
        "cycle_host_ms": distribution([c.get("host_ns") for c in p.timed_cycles if c["cycle"] not in st]),
        "cycle_dev_ms": distribution([c.get("dev_ns") for c in p.timed_cycles if c["cycle"] not in st]),
        "stats": p.stats,
        "truncated_lines": p.truncated_lines,
        "unresolved": p.unresolved,
        "repeated": p.repeated,
        "duplicate_files": p.duplicates,
        "ended_cleanly": p.stats is not None,
        "cuda_device": p.header.get("cuda_device"),
        "torch": p.header.get("torch"),
    }


def _lost_records(procs: list[ProcessTiming]) -> int:
    """Records lost: cut lines, device records whose cycle record is missing, dropped pending ones."""
    return sum(
        p.truncated_lines + p.orphan_dev + ((p.stats or {}).get("dropped_pending") or 0) for p in procs
    )
