"""What-if: from one profiled run at num-steps N, the tokens/s of num-steps 1..N.

One profiled run measures, per decode cycle: its period (host start to the next cycle's
start), its batch size, every request's accepted draft tokens, and (timed cycles) the time of
each phase. With topk 1 the draft is a chain, and greedy verification accepts its longest
matching prefix, so a request that accepted ``a`` of N drafts would have accepted
``min(a, n)`` of n: the tokens of a cycle at n steps follow from the records exactly.
The cycle's cost at n steps is modelled from the same records:

    period(n) = period(N) - (rounds(N) - rounds(n)) * step - (N - n) * slope * batch_size

- ``step``: one round of the draft loop, the loop's measured time over its rounds (SGLang's
  EAGLE loop: n rounds of top-k selection with n - 1 draft forwards between them, measured on
  the H200 to cost about n equal rounds; transformers' assistant: one forward per drafted
  token), per batch size seen;
- ``slope``: what one more draft token per request adds to the target's verify and the draft
  extend, per token of the batch. It cannot be read from one run: the verify graph runs at
  one token count per request. A fit over the batch sizes a run passes through (reported as
  ``verify_us_per_token_fitted``) mixes in everything else that changes with the batch (on
  the H200 it gave 34 us per token where servers at num-steps 1 and 3 differed by about
  3 us), so by default the slope is 0 (verify cost independent of the draft length, the
  memory-bound case) and ``--verify-us-per-token`` sets a value measured elsewhere. With 0,
  fewer steps are predicted slightly too slow when verify does grow with the draft.

Decode tokens/s at n = sum of tokens(n) / sum of period(n) over the decode cycles. The
benchmark's tokens/s: where its command names the load (sglang.bench_serving, a random dataset,
a fixed concurrency), the whole benchmark is replayed at each n (patchkit.report.benchsim:
more decode cycles at fewer steps, and the prefill cycles the finishing requests cost);
otherwise it is scaled by the decode ratio on its decode share (prefill and idle time unchanged). The interval: a bootstrap over blocks of consecutive cycles (the batch's make-up
drifts through a run, so neighbouring cycles are not independent). Assumptions the model cannot check are listed in ``assumptions``.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from itertools import pairwise

from patchkit.report.acceptance import request_accepts
from patchkit.report.benchsim import (
    SIM_SEEDS,
    Acceptance,
    BenchShape,
    CycleCosts,
    SimResult,
    bench_shape,
    client_pauses,
    cycle_costs,
    simulate,
)
from patchkit.report.stats import percentile_sorted, t_ppf
from patchkit.settings import PREDICT_BOOTSTRAP

SCHEMA = "patchkit.predict/1"
BOOTSTRAP = PREDICT_BOOTSTRAP  # the option table's (profile.predict --bootstrap)
BLOCKS = 200
SEED = 20261202
_Z95 = 1.959963984540054  # the normal's 97.5 % quantile: a 95 % interval's half-width in sds
# (draft loop phase, forwards in it at n steps = n - offset, verify phase, extend phase)
ENGINES = {
    # SGLang's draft loop: n rounds of top-k selection and n - 1 draft forwards; on the H200
    # (8B EAGLE-3 pair, v2) its time was 0.36, 0.68, 1.14, 1.44, 1.78 ms at n = 1..5: about
    # proportional to n, so it is modelled as n equal rounds
    "sglang": ("draft_forward", 0, "target_verify", "draft_extend_after_decode"),
    "transformers": ("draft_generate", 0, "verify_forward", None),
}
# draft tokens at num-steps n = n + this: SGLang's --speculative-num-draft-tokens counts the
# verified chain's nodes, its root (the last accepted token) included (num_steps + 1 at topk 1);
# transformers' num_assistant_tokens counts the tokens drafted
DRAFT_TOKENS_BEYOND_STEPS = {"sglang": 1, "transformers": 0}
# the replay of the profiled run may miss its measured time in cycles by this much (relative)
# before predict.json's replay_miss flags it: about twice the replay's own seed-to-seed spread
# (~2.5 %), so a replay that reproduces the run is not flagged by its own luck
REPLAY_MISS_LIMIT = 0.05
MIN_SLOPE_SPREAD = 0.05  # the tokens per verify must vary by 5 % (relative sd) to fit a slope


@dataclass
class CycleRow:
    """One decode cycle as the model sees it."""

    index: int
    period_ns: int
    batch_size: int
    accepted: list[int]
    drafted: list[int] | None
    phases: dict[str, int]  # phase name -> time (ns) in this cycle; empty when untimed


def engine_of(phase_names: set[str]) -> str | None:
    for name, (_, _, verify, _) in ENGINES.items():
        if verify in phase_names:
            return name
    return None


def cycle_rows(
    cycles: list[dict], phases: list[dict], basis: str, stalls: set[int] | frozenset[int] = frozenset()
) -> list[CycleRow]:
    """The decode cycles of one process with a period and per-request acceptance; the
    report's stalls (kernel compilation at a new batch size: patchkit.report.stalls) left
    out, as the report leaves them out of its shares, and the client's pauses left out, as
    the report's time in cycles leaves them out (patchkit.report.benchsim.client_pauses)."""
    stalls = set(stalls) | client_pauses(cycles)
    field = "dev_ns" if basis == "device" else "host_ns"
    per_cycle: dict[int, dict[str, int]] = {}
    for rec in phases:
        value = rec.get(field)
        cyc = rec.get("cycle")
        if value is None or cyc is None or rec.get("captured"):
            continue
        slot = per_cycle.setdefault(cyc, {})
        slot[rec["name"]] = slot.get(rec["name"], 0) + value
    ordered = sorted(cycles, key=lambda c: c["cycle"])
    rows = []
    for cur, nxt in pairwise(ordered):
        attrs = cur.get("attrs") or {}
        if attrs.get("kind", "decode") != "decode" or attrs.get("prefill"):
            continue
        if nxt["cycle"] != cur["cycle"] + 1 or cur.get("ab") == "off" or cur["cycle"] in stalls:
            continue
        if (nxt.get("attrs") or {}).get("prefill"):  # the call ended: no period (benchsim.periods_of)
            continue
        got = request_accepts(attrs)
        if got is None or not got[0]:
            continue
        bs = attrs.get("batch_size")
        rows.append(
            CycleRow(
                index=cur["cycle"],
                period_ns=nxt["t0"] - cur["t0"],
                batch_size=bs if isinstance(bs, int) and bs > 0 else len(got[0]),
                accepted=got[0],
                drafted=got[1],
                phases=per_cycle.get(cur["cycle"], {}) if cur.get("timed") is not False else {},
            )
        )
    return rows


class _Agg:
    """Sums over a set of decode cycles: everything the costs and the prediction need, so
    that a bootstrap resample is a sum of block aggregates (not a pass over cycles)."""

    def __init__(self, ns: list[int]):
        self.ns = ns
        self.rows = 0
        self.req_steps = 0
        self.period = 0.0
        self.tokens = dict.fromkeys(ns, 0.0)
        self.cut: dict[tuple[int, int], float] = {}  # (batch size, n) -> draft forwards removed
        self.fewer_bs = dict.fromkeys(ns, 0.0)  # n -> sum of (tokens per request removed) x bs
        self.step_sum: dict[int, float] = {}
        self.step_n: dict[int, int] = {}
        self.verify = [0.0] * 5  # n, sum x, sum y, sum xx, sum xy
        self.extend = [0.0] * 5

    def add(self, other: _Agg) -> None:
        self.rows += other.rows
        self.req_steps += other.req_steps
        self.period += other.period
        for n in self.ns:
            self.tokens[n] += other.tokens[n]
            self.fewer_bs[n] += other.fewer_bs[n]
        for key, v in other.cut.items():
            self.cut[key] = self.cut.get(key, 0.0) + v
        for bs, v in other.step_sum.items():
            self.step_sum[bs] = self.step_sum.get(bs, 0.0) + v
            self.step_n[bs] = self.step_n.get(bs, 0) + other.step_n[bs]
        for i in range(5):
            self.verify[i] += other.verify[i]
            self.extend[i] += other.extend[i]


def _slope(sums: list[float]) -> float | None:
    """Least-squares slope of y on x from (n, sx, sy, sxx, sxy); None when x hardly varies."""
    n, sx, sy, sxx, sxy = sums
    if n < 3:
        return None
    mx, my = sx / n, sy / n
    var = sxx / n - mx * mx
    if mx <= 0 or var <= 0 or var**0.5 / mx < MIN_SLOPE_SPREAD:
        return None
    return max(0.0, (sxy / n - mx * my) / var)


class _Model:
    """The engine's phase roles and num-steps; aggregates cycles and predicts from sums."""

    def __init__(self, engine: str, num_steps: int, slope_ns: float | None = None, fixed_batch: bool = False):
        self.engine, self.N, self.slope_ns, self.fixed_batch = engine, num_steps, slope_ns, fixed_batch
        self.loop, self.offset, self.verify, self.extend = ENGINES[engine]
        self.ns = list(range(1, num_steps + 1))

    def forwards(self, n: int) -> int:
        return max(0, n - self.offset)

    def aggregate(self, rows: list[CycleRow]) -> _Agg:
        agg = _Agg(self.ns)
        for r in rows:
            drafted = max(r.drafted) if r.drafted else self.N
            agg.rows += 1
            agg.req_steps += len(r.accepted)
            agg.period += r.period_ns
            for n in self.ns:
                agg.tokens[n] += sum(min(a, n) + 1 for a in r.accepted)
                key = (r.batch_size, n)
                agg.cut[key] = agg.cut.get(key, 0.0) + self.forwards(drafted) - self.forwards(min(n, drafted))
                agg.fewer_bs[n] += max(0, drafted - n) * r.batch_size
            if not r.phases:
                continue
            loops = self.forwards(drafted)
            if self.loop in r.phases and loops > 0:
                agg.step_sum[r.batch_size] = agg.step_sum.get(r.batch_size, 0.0) + r.phases[self.loop] / loops
                agg.step_n[r.batch_size] = agg.step_n.get(r.batch_size, 0) + 1
            x = r.batch_size * (drafted + 1)
            for name, sums in ((self.verify, agg.verify), (self.extend, agg.extend)):
                if name and name in r.phases:
                    y = r.phases[name]
                    sums[0] += 1
                    sums[1] += x
                    sums[2] += y
                    sums[3] += x * x
                    sums[4] += x * y
        return agg

    def costs(self, agg: _Agg) -> dict:
        """step_ns per batch size (and overall), verify and extend slopes (ns per token)."""
        total_n = sum(agg.step_n.values())
        return {
            "step_ns": {bs: agg.step_sum[bs] / agg.step_n[bs] for bs in agg.step_sum},
            "step_ns_all": sum(agg.step_sum.values()) / total_n if total_n else None,
            "step_samples": total_n,
            "verify_slope": _slope(agg.verify),
            "verify_points": int(agg.verify[0]),
            "extend_slope": _slope(agg.extend) if self.extend else None,
            "verify_mean_ns": agg.verify[2] / agg.verify[0] if agg.verify[0] else None,
        }

    def slope(self, costs: dict) -> float:
        """ns per draft token of the batch: the given value, or (auto) the fitted one where
        one batch size ran throughout (then only the draft length moved the verify's tokens)."""
        if self.slope_ns is not None:
            return self.slope_ns
        if self.fixed_batch and costs["verify_slope"] is not None:
            return costs["verify_slope"] + (costs["extend_slope"] or 0.0)
        return 0.0

    def sums(self, agg: _Agg, costs: dict) -> dict[int, tuple[float, float]]:
        """n -> (tokens, time ns) at n steps, over the aggregated cycles."""
        step_all = costs["step_ns_all"] or 0.0
        slope = self.slope(costs)
        out = {}
        for n in self.ns:
            time = agg.period - slope * agg.fewer_bs[n]
            for (bs, m), cut in agg.cut.items():
                if m == n and cut:
                    time -= cut * costs["step_ns"].get(bs, step_all)
            out[n] = (agg.tokens[n], max(time, 1.0))
        return out


def predict(
    rows: list[CycleRow],
    engine: str,
    num_steps: int,
    measured_tokens_per_s: float | None = None,
    decode_share: float | None = None,
    bootstrap: int = BOOTSTRAP,
    seed: int = SEED,
    verify_us_per_token: float | None = None,
    bench: tuple[BenchShape, CycleCosts] | None = None,
) -> dict:
    """predict.json's content (see the module docstring). `verify_us_per_token`: what one
    more draft token per request adds to verify and draft extend (us per token of the
    batch); 0 by default (see the module docstring for why it is not fitted). `bench`: the
    benchmark's load and the run's cycle costs (patchkit.report.benchsim): the whole
    benchmark is then replayed at each n instead of scaling its decode share."""
    fixed_batch = len({r.batch_size for r in rows}) == 1
    model = _Model(
        engine, num_steps, None if verify_us_per_token is None else verify_us_per_token * 1e3, fixed_batch
    )
    k = min(BLOCKS, len(rows))
    blocks = [model.aggregate(rows[i * len(rows) // k : (i + 1) * len(rows) // k]) for i in range(k)]
    whole = _Agg(model.ns)
    for b in blocks:
        whole.add(b)
    costs = model.costs(whole)
    draws = _bootstrap_draws(model, blocks, bootstrap if k >= 2 else 0, seed)
    sims = None
    base_tps = measured_tokens_per_s  # the replay's tokens/s at N: the measured, else its own
    if bench is not None and costs["step_ns_all"] is not None:
        sims = _replay(model, rows, bench, costs["step_ns_all"])
        if base_tps is None:
            base_tps = bench[0].tokens / sims[num_steps].total_ns * 1e9
    else:
        bench = None
    share = decode_share if decode_share is not None and 0 < decode_share <= 1 else 1.0
    points = _points(model, whole, costs, draws, sims, base_tps, measured_tokens_per_s, share)
    best = max(points, key=lambda p: p["ratio_to_profiled"])
    assumptions = _assumptions(
        model, costs, verify_us_per_token, bench if sims is not None else None, decode_share, share
    )
    simulation = None if sims is None or bench is None else _simulation_json(bench, sims[num_steps])
    return {
        "schema": SCHEMA,
        "engine": engine,
        "profiled": {
            "num_steps": num_steps,
            "topk": 1,
            "num_draft_tokens": num_steps + DRAFT_TOKENS_BEYOND_STEPS[engine],
            "tokens_per_s": measured_tokens_per_s,
        },
        "cycles": len(rows),
        "timed_cycles": sum(1 for r in rows if r.phases),
        "decode_share": decode_share,
        "simulation": simulation,
        "replay_miss": replay_miss(simulation),
        "costs": _costs_json(model, costs, verify_us_per_token),
        "points": points,
        "best": {
            "num_steps": best["num_steps"],
            "tokens_per_s": best["tokens_per_s"],
            "ratio_to_profiled": best["ratio_to_profiled"],
        },
        "by_batch_size": _by_batch_size(model, rows, costs),
        "assumptions": assumptions,
        "bootstrap": {
            "resamples": bootstrap,
            "blocks": k,
            "seed": seed,
            "unit": "blocks of consecutive decode cycles",
        },
    }


def _bootstrap_draws(model: _Model, blocks: list[_Agg], resamples: int, seed: int) -> dict[int, list[float]]:
    """n -> each resample's decode ratio to the profiled num-steps: a bootstrap over blocks of
    consecutive cycles (none with fewer than two blocks)."""
    rng = random.Random(seed)
    draws: dict[int, list[float]] = {n: [] for n in model.ns}
    for _ in range(resamples):
        sample = _Agg(model.ns)
        for b in rng.choices(blocks, k=len(blocks)):
            sample.add(b)
        s = model.sums(sample, model.costs(sample))
        r_n = s[model.N][0] / s[model.N][1]
        for n in model.ns:
            draws[n].append((s[n][0] / s[n][1]) / r_n)
    return draws


def _interval(values: list[float]) -> list[float] | None:
    """The 2.5 % and 97.5 % percentiles of the bootstrap's draws (patchkit.report.stats's
    percentile, interpolated); None with fewer than 20."""
    if len(values) < 20:
        return None
    v = sorted(values)
    return [percentile_sorted(v, 2.5), percentile_sorted(v, 97.5)]


def _replay(
    model: _Model, rows: list[CycleRow], bench: tuple[BenchShape, CycleCosts], step_ns: float
) -> dict[int, SimResult]:
    """n -> the whole benchmark replayed at n steps, with the run's acceptance per batch size."""
    by_batch: dict[int, list[int]] = {}
    for r in rows:
        by_batch.setdefault(r.batch_size, []).extend(r.accepted)
    accepts = Acceptance(by_batch)
    return {n: simulate(bench[0], accepts, n, bench[1], step_ns, model.N) for n in model.ns}


def _points(
    model: _Model,
    whole: _Agg,
    costs: dict,
    draws: dict[int, list[float]],
    sims: dict[int, SimResult] | None,
    base_tps: float | None,
    measured_tokens_per_s: float | None,
    share: float,
) -> list[dict]:
    """predict.json's ``points``: one per num-steps 1..N."""
    num_steps = model.N
    base = model.sums(whole, costs)
    rate = {n: base[n][0] / base[n][1] * 1e9 for n in model.ns}

    def e2e(ratio: float) -> float | None:
        if measured_tokens_per_s is None:
            return None
        return measured_tokens_per_s / ((1 - share) + share / ratio)

    points: list[dict] = []
    for n in model.ns:
        ratio = rate[n] / rate[num_steps]
        ci = _interval(draws[n])
        if sims is None:
            whole_ratio, whole_ci, tps = ratio, ci, e2e(ratio)
            tps_ci = [e2e(ci[0]), e2e(ci[1])] if ci and tps is not None else None
        else:
            whole_ratio = sims[num_steps].total_ns / sims[n].total_ns
            tps = (base_tps or 0.0) * whole_ratio
            whole_ci = replay_interval(whole_ratio, ratio, ci, sims[n], sims[num_steps], n == num_steps)
            tps_ci = [tps * c / whole_ratio for c in whole_ci] if whole_ci else None
        point: dict = {
            "num_steps": n,
            "topk": 1,
            "num_draft_tokens": n + DRAFT_TOKENS_BEYOND_STEPS[model.engine],
            "profiled": n == num_steps,
            "decode_tokens_per_s": rate[n],
            "decode_ratio_to_profiled": ratio,
            "decode_ratio_ci95": ci,
            "ratio_to_profiled": whole_ratio,
            "ratio_ci95": whole_ci,
            "tokens_per_s": tps,
            "tokens_per_s_ci95": tps_ci,
            "accept_length": base[n][0] / whole.req_steps,
        }
        if sims is not None:
            sim = sims[n]
            point["benchmark"] = {
                "decode_cycles": round(sim.decode_cycles, 1),
                "prefill_cycles": round(sim.prefill_cycles, 1),
                "decode_s": sim.decode_ns / 1e9,
                "prefill_s": sim.prefill_ns / 1e9,
                "seconds": sim.total_ns / 1e9,
            }
        points.append(point)
    return points


def _by_batch_size(model: _Model, rows: list[CycleRow], costs: dict) -> list[dict]:
    """By batch size: the best n where the batch size was seen in enough cycles."""
    by_bs = []
    groups: dict[int, list[CycleRow]] = {}
    for r in rows:
        groups.setdefault(r.batch_size, []).append(r)
    for bs, part in sorted(groups.items()):
        if len(part) < 20:
            continue
        s = model.sums(model.aggregate(part), costs)
        rates = {n: s[n][0] / s[n][1] * 1e9 for n in model.ns}
        top = max(model.ns, key=lambda n: rates[n])
        by_bs.append(
            {
                "batch_size": bs,
                "cycles": len(part),
                "best_num_steps": top,
                "ratio_to_profiled": {str(n): rates[n] / rates[model.N] for n in model.ns},
            }
        )
    return by_bs


def _assumptions(
    model: _Model,
    costs: dict,
    verify_us_per_token: float | None,
    bench: tuple[BenchShape, CycleCosts] | None,
    decode_share: float | None,
    share: float,
) -> list[str]:
    """predict.json's ``assumptions``; ``bench`` only where the benchmark was replayed."""
    assumptions = [
        "topk 1 and greedy verification: a request that accepted a of N drafts accepts min(a, n) of n",
        "the draft loop's rounds cost the same each ("
        + (
            "num_steps - 1 forwards: the first draft token comes from the previous draft extend"
            if model.offset
            else "n rounds at num-steps n"
        )
        + ")",
        "batch sizes and the cycle's other work (scheduling, sampling, verify's fixed part) stay as profiled",
        _slope_assumption(verify_us_per_token, model.slope(costs), model.fixed_batch),
    ]
    if bench is not None:
        assumptions.append(
            f"the benchmark's load as its command says ({bench[0].requests} requests of {bench[0].output_len} "
            f"tokens, {bench[0].concurrency} at a time), replayed: a replacement reaches the server one decode "
            f"cycle after its request finished; a prefill cycle costs {bench[1].prefill / 1e6:.1f} ms as profiled "
            "(it varies between server starts: the interval covers that only where the spread between "
            "starts is known, --spread or the spread cache)"
        )
    elif decode_share is not None:
        assumptions.append(
            f"the benchmark's time outside decode cycles ({(1 - share) * 100:.1f} %) does not change"
        )
    return assumptions


def _costs_json(model: _Model, costs: dict, verify_us_per_token: float | None) -> dict:
    """predict.json's ``costs``: the draft round, the verify and the slope used, in ms and us."""
    return {
        "draft_step_ms": None if costs["step_ns_all"] is None else costs["step_ns_all"] / 1e6,
        "draft_step_ms_by_batch_size": {str(bs): v / 1e6 for bs, v in sorted(costs["step_ns"].items())},
        "verify_ms_mean": None if costs["verify_mean_ns"] is None else costs["verify_mean_ns"] / 1e6,
        "verify_us_per_token": model.slope(costs) / 1e3,
        "verify_slope_source": "given"
        if verify_us_per_token is not None
        else (
            "fitted over the draft lengths at one batch size"
            if model.fixed_batch and costs["verify_slope"] is not None
            else "0: not measurable from this run"
        ),
        "verify_us_per_token_fitted": None if costs["verify_slope"] is None else costs["verify_slope"] / 1e3,
        "extend_us_per_token_fitted": None if costs["extend_slope"] is None else costs["extend_slope"] / 1e3,
    }


def replay_interval(
    whole: float,
    decode: float,
    decode_ci: list[float] | None,
    at_n: SimResult,
    at_profiled: SimResult,
    same: bool,
) -> list[float] | None:
    """The replayed ratio's 95 % interval: the decode model's sampling interval (the bootstrap
    over blocks of cycles, ``decode_ci`` of the decode ratio ``decode``, as a relative width on
    the log scale) and, at another num-steps than the profiled one, the benchmark's own
    variation: a measured benchmark is one pass of its load (which requests finish when, which
    drafts are accepted), and the profiled run was one pass too, so each side adds one pass's
    variance (the replay's seed-to-seed spread) and the replay's mean its own Monte Carlo error.
    None without the bootstrap's interval."""
    if not decode_ci or decode <= 0 or decode_ci[0] <= 0:
        return None
    lo, hi = math.log(decode_ci[0] / decode), math.log(decode_ci[1] / decode)
    if same:
        return [whole * math.exp(lo), whole * math.exp(hi)]
    var = sum(sim.seed_sd**2 * (1 + 1 / max(1, sim.seeds)) for sim in (at_n, at_profiled))
    # the seeds' spread is itself estimated from a few seeds: its t quantile, not the normal's
    seeds = min(at_n.seeds, at_profiled.seeds)
    q = t_ppf(0.975, seeds - 1) if seeds >= 2 else _Z95
    return [
        whole * math.exp(-math.sqrt(lo * lo + q * q * var)),
        whole * math.exp(math.sqrt(hi * hi + q * q * var)),
    ]


def with_start_spread(pred: dict, spread: float | None, source: str) -> dict:
    """Widen every point's ratio_ci95 and tokens_per_s_ci95 (but the profiled one's) by the
    spread between server starts (sd of log tok/s, from --spread or the spread cache): a start
    at another num-steps and the profiled start each bring their own luck, 2 spread^2 of
    variance on the log scale. ``intervals`` in predict.json says what the intervals hold
    (:func:`interval_coverage`). A pooled prediction is left alone: its interval already rests
    on the spread of its starts."""
    pred["intervals"] = {
        "cycles": "bootstrap over blocks of consecutive cycles",
        "benchmark": "one pass of the load at each side (the replay's seed-to-seed spread)"
        if pred.get("simulation")
        else None,
        "starts": None,
    }
    pooled = pred.get("pooled")
    if pooled:
        pred["intervals"]["starts"] = {"runs": len(pooled["runs"]), "source": "the pooled starts' own spread"}
    elif spread:
        extra = 2 * spread * spread * _Z95**2
        for point in pred["points"]:
            if point.get("profiled"):
                continue
            for key, centre in (
                ("ratio_ci95", point.get("ratio_to_profiled")),
                ("tokens_per_s_ci95", point.get("tokens_per_s")),
            ):
                ci = point.get(key)
                if ci and centre and ci[0] > 0:
                    lo, hi = math.log(ci[0] / centre), math.log(ci[1] / centre)
                    point[key] = [
                        centre * math.exp(-math.sqrt(lo * lo + extra)),
                        centre * math.exp(math.sqrt(hi * hi + extra)),
                    ]
        pred["intervals"]["starts"] = {"spread": spread, "source": source}
    pred["intervals"].update(interval_coverage(pred))
    return pred


def interval_coverage(pred: dict) -> dict:
    """What a prediction's 95 % intervals cover, as predict.json's ``intervals`` names it:
    ``start_to_start`` (whether the variation between server starts is in them) and ``covers``
    (the words the table, the page and the JSON print beside "95 % interval"). Without a known
    spread (``--spread``, the spread cache) or pooled starts the interval holds only what one
    run fixes, not another start's luck."""
    intervals = pred.get("intervals") or {}
    starts = intervals.get("starts")
    load = " and one pass of the benchmark's load a side" if pred.get("simulation") else ""
    if pred.get("pooled"):
        runs = len(pred["pooled"]["runs"])
        words = f"the mean over {runs} pooled starts: start-to-start variation included, from the starts' own spread"
        return {"start_to_start": True, "covers": words}
    if starts and starts.get("spread"):
        words = (
            f"within this run's cycles{load}, and start-to-start variation included "
            f"(spread {starts['spread'] * 100:.2g} % between starts, {starts['source']})"
        )
        return {"start_to_start": True, "covers": words}
    words = (
        f"within this run's cycles{load}; start-to-start variation not included: "
        "give --spread or pool starts (--pool)"
    )
    return {"start_to_start": False, "covers": words}


def replay_miss(simulation: dict | None) -> dict | None:
    """predict.json's ``replay_miss``: the replay of the profiled run against the run's measured
    time in cycles (``simulation``'s profiled_s and simulated_s); ``flagged`` when they differ by
    more than REPLAY_MISS_LIMIT. None without a replay."""
    if not simulation or not simulation.get("profiled_s"):
        return None
    measured, replayed = simulation["profiled_s"], simulation["simulated_s"]
    miss = replayed / measured - 1
    return {
        "measured_s": measured,
        "replayed_s": replayed,
        "miss": miss,
        "limit": REPLAY_MISS_LIMIT,
        "flagged": abs(miss) > REPLAY_MISS_LIMIT,
    }


def _simulation_json(bench: tuple[BenchShape, CycleCosts], at_profiled: SimResult) -> dict:
    shape, cyc = bench
    return {
        "load": {
            "requests": shape.requests,
            "concurrency": shape.concurrency,
            "output_len": shape.output_len,
            "range_ratio": shape.range_ratio,
        },
        "decode_ms_at_batch_size_0": cyc.decode_a / 1e6,
        "decode_us_per_request": cyc.decode_b / 1e3,
        "prefill_ms": cyc.prefill / 1e6,
        "profiled_cycles": {"decode": cyc.decode_cycles, "prefill": cyc.prefill_cycles},
        "profiled_s": (cyc.decode_total + cyc.prefill_total) / 1e9,
        "simulated_s": at_profiled.total_ns / 1e9,
        "simulated_cycles": {"decode": at_profiled.decode_cycles, "prefill": at_profiled.prefill_cycles},
        "seeds": len(SIM_SEEDS),
        # > 1: a long load replayed with fewer requests and scaled up (benchsim.scaled_load)
        "load_scale": at_profiled.scale,
    }


def _slope_assumption(given: float | None, used_ns: float, fixed_batch: bool) -> str:
    if given is not None:
        return f"verify and draft extend grow by {given:g} us per draft token of the batch (given)"
    if used_ns:
        return (
            f"verify grows by {used_ns / 1e3:.1f} us per draft token, fitted over the cycles' draft lengths "
            "at the one batch size of the run"
        )
    return (
        "verify and draft extend cost the same at every num-steps (not measurable from this run"
        + (
            ""
            if fixed_batch
            else ": its batch sizes varied, and a fit over them mixes in everything else that moves with the batch"
        )
        + "; if they grow with the draft, fewer steps are predicted slightly too slow)"
    )


def pooled_interval(values: list, intervals: list) -> list[float] | None:
    """A 95 % interval of the mean over server starts, from each start's prediction (``values``)
    and its own 95 % interval (``intervals``; None where it has none), on the log scale.

    The starts' predictions differ by the start's luck (its prefill cost, the machine's state)
    and by each prediction's own noise; their spread measures both, so the interval is the
    t interval of their mean (runs - 1 df). With few runs that spread is itself uncertain
    (two runs may happen to agree), so it is never taken below the runs' own intervals' mean
    variance. None with fewer than two predictions."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    m = len(logs)
    if m < 2:
        return None
    own = [
        ((math.log(c[1]) - math.log(c[0])) / (2 * _Z95)) ** 2
        for c in intervals
        if c and c[0] > 0 and c[1] > 0
    ]
    var = max(statistics.variance(logs), statistics.fmean(own) if own else 0.0)
    half = t_ppf(0.975, m - 1) * math.sqrt(var / m)
    centre = statistics.fmean(logs)
    return [math.exp(centre - half), math.exp(centre + half)]


def pool(preds: list[dict], runs: list[str]) -> dict:
    """One prediction from several runs of the same configuration (several server starts):
    each point's tokens/s, decode tokens/s, accept length and ratio are the medians over the
    runs' own predictions, ``ratio_ci95`` and ``tokens_per_s_ci95`` are :func:`pooled_interval`
    over the runs, and ``pooled`` keeps every run's figures. One start's luck (its prefill cost, a slow
    machine state) moves everything predicted from it; the median over starts does not follow
    one of them. The runs must agree on the engine, the profiled num-steps and the points."""
    import copy

    from patchkit.errors import InvalidInput

    first = preds[0]
    shape = (first["engine"], first["profiled"]["num_steps"], [p["num_steps"] for p in first["points"]])
    for path, pred in zip(runs, preds):
        other = (pred["engine"], pred["profiled"]["num_steps"], [p["num_steps"] for p in pred["points"]])
        if other != shape:
            raise InvalidInput(
                f"profile.predict: {path} is another configuration (engine {other[0]}, num-steps {other[1]}) "
                f"than {runs[0]} (engine {shape[0]}, num-steps {shape[1]}): pool runs of one configuration"
            )
    out = copy.deepcopy(first)

    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    for i, point in enumerate(out["points"]):
        each = [pred["points"][i] for pred in preds]
        for key in ("tokens_per_s", "decode_tokens_per_s", "accept_length", "ratio_to_profiled"):
            point[key] = med([e.get(key) for e in each])
        point["ratio_ci95"] = pooled_interval(
            [e.get("ratio_to_profiled") for e in each], [e.get("ratio_ci95") for e in each]
        )
        point["tokens_per_s_ci95"] = pooled_interval(
            [e.get("tokens_per_s") for e in each], [e.get("tokens_per_s_ci95") for e in each]
        )
        point["tokens_per_s_runs"] = [e.get("tokens_per_s") for e in each]
    out["profiled"]["tokens_per_s"] = med([pred["profiled"].get("tokens_per_s") for pred in preds])
    best = max(out["points"], key=lambda p: p["ratio_to_profiled"])
    out["best"] = {
        "num_steps": best["num_steps"],
        "tokens_per_s": best["tokens_per_s"],
        "ratio_to_profiled": best["ratio_to_profiled"],
    }
    out["cycles"] = sum(pred["cycles"] for pred in preds)
    out["timed_cycles"] = sum(pred["timed_cycles"] for pred in preds)
    out["pooled"] = {
        "runs": list(runs),
        "method": (
            "median over the runs' own predictions; ratio_ci95, tokens_per_s_ci95: t interval (runs - 1 df) "
            "of the mean of the runs' log predictions, its spread the larger of the runs' own and their "
            "intervals' (pooled_interval)"
        ),
        "profiled_tokens_per_s": [pred["profiled"].get("tokens_per_s") for pred in preds],
        "best_num_steps": [pred["best"]["num_steps"] for pred in preds],
    }
    return out


def render(pred: dict) -> str:
    """The terminal table of a prediction."""
    prof = pred["profiled"]
    pooled = pred.get("pooled")
    source = f"{len(pooled['runs'])} runs (medians of their predictions)" if pooled else "one run"
    drafts = (
        f"topk 1, --speculative-num-draft-tokens {prof['num_draft_tokens']}"
        if pred["engine"] == "sglang"
        else f"{prof['num_draft_tokens']} draft tokens per cycle"
    )
    lines = [
        f"what-if from {source} at num-steps {prof['num_steps']} ({drafts}), {pred['engine']}: "
        f"{pred['cycles']} decode cycles modelled (with a period and acceptance; the report's cycle counts "
        f"name the rest), {pred['timed_cycles']} of them timed",
        f"{'num-steps':>9}  {'accept len':>10}  {'decode tok/s':>12}  {'x profiled':>10}  {'95 % interval':>15}  {'tok/s':>9}",
    ]
    for p in pred["points"]:
        ci = p["ratio_ci95"]
        tps = "-" if p["tokens_per_s"] is None else f"{p['tokens_per_s']:.1f}"
        lines.append(
            f"{p['num_steps']:>9}  {p['accept_length']:>10.3f}  {p['decode_tokens_per_s']:>12.1f}  "
            f"{p['ratio_to_profiled']:>10.3f}  {(f'{ci[0]:.3f}..{ci[1]:.3f}' if ci else '-'):>15}  "
            f"{tps:>9}" + ("  (profiled)" if p["profiled"] else "")
        )
    lines.extend(_column_notes(pred))
    lines.append(f"95 % interval ({interval_coverage(pred)['covers']})")
    lines.extend(_replay_lines(pred))
    if pooled:
        lines.extend(_pooled_lines(pred))
    best = pred["best"]
    lines.append(
        f"predicted best: num-steps {best['num_steps']} ({best['ratio_to_profiled']:.3f} x the profiled point)"
    )
    for b in pred["by_batch_size"][-6:]:
        lines.append(
            f"  batch size {b['batch_size']} ({b['cycles']} cycles): best num-steps {b['best_num_steps']}"
        )
    c = pred["costs"]
    if c["draft_step_ms"] is not None:
        fitted = c["verify_us_per_token_fitted"]
        lines.append(
            f"costs: draft round {c['draft_step_ms']:.3f} ms; verify {c['verify_ms_mean']:.3f} ms mean; "
            f"slope {c['verify_us_per_token']:.2f} us per draft token ({c['verify_slope_source']})"
            + (
                f"; a fit over batch sizes says {fitted:.1f}: not used"
                if fitted is not None and c["verify_slope_source"].startswith("0")
                else ""
            )
        )
    lines.append("assumptions:")
    lines.extend(f"  - {a}" for a in pred["assumptions"])
    return "\n".join(lines) + "\n"


def _replay_lines(pred: dict) -> list[str]:
    """The benchmark replay's line, and the warning where the replay misses the run it was built from."""
    prof = pred["profiled"]
    pooled = pred.get("pooled")
    lines: list[str] = []
    sim = pred.get("simulation")
    if sim:
        load = sim["load"]
        lines.append(
            f"x profiled, tok/s: the benchmark replayed ({load['requests']} requests of {load['output_len']} tokens, "
            f"{load['concurrency']} at a time); at num-steps {prof['num_steps']} it takes {sim['simulated_s']:.2f} s "
            f"({sim['simulated_cycles']['decode']:.0f} decode + {sim['simulated_cycles']['prefill']:.0f} prefill cycles), "
            f"{'the first run' if pooled else 'the profiled run'}'s cycles {sim['profiled_s']:.2f} s "
            f"({sim['profiled_cycles']['decode']} + "
            f"{sim['profiled_cycles']['prefill']})"
        )
    miss = pred.get("replay_miss")
    if miss and miss["flagged"]:
        lines.append(
            f"WARNING: the replay of {'the first run' if pooled else 'the profiled run'} misses its measured time "
            f"by {miss['miss'] * 100:+.1f} % ({miss['replayed_s']:.2f} s replayed, {miss['measured_s']:.2f} s "
            f"measured; more than {miss['limit'] * 100:.0f} %): the replay does not reproduce the run it was "
            "built from, so its predictions at other num-steps are off by as much or more. Check that the "
            "benchmark command names the load that ran in the measured window; measure the points that "
            "matter (profile.remote --from-prediction) before trusting the best"
        )
    return lines


def _pooled_lines(pred: dict) -> list[str]:
    """A pooled prediction's spread over its runs: tok/s per point, profiled tok/s and best num-steps."""
    pooled = pred["pooled"]
    lines: list[str] = []
    for p in pred["points"]:
        runs = [v for v in p.get("tokens_per_s_runs") or [] if v is not None]
        if runs:
            lines.append(
                f"  num-steps {p['num_steps']}: tok/s over the runs {min(runs):.1f}..{max(runs):.1f} "
                f"({len(runs)} runs)"
            )
    lines.append(
        "  profiled tok/s of the runs: "
        + ", ".join("-" if v is None else f"{v:.1f}" for v in pooled["profiled_tokens_per_s"])
        + "; each run's predicted best: "
        + ", ".join(str(n) for n in pooled["best_num_steps"])
    )
    return lines


def _column_notes(pred: dict) -> list[str]:
    """What the columns count: accept len and decode tok/s over the modelled decode cycles
    alone; tok/s the whole run's throughput, measured at the profiled point."""
    every = pred.get("accept_length_recorded")
    also = (
        f"; the report's mean accepted length pools all {every['cycles']} cycles that carry acceptance "
        f"(stalls and cycles without a period among them): {every['pooled']:.3f}"
        if every
        else ""
    )
    how = (
        "the benchmark replayed at each num-steps"
        if pred.get("simulation")
        else "the decode ratio applied to the run's time in decode cycles, the rest unchanged"
    )
    return [
        f"accept len: tokens per request per verify step over the {pred['cycles']} modelled decode cycles{also}",
        "decode tok/s: the modelled decode cycles' tokens over their periods (start to start): decode alone, "
        "without prefill cycles, stalls and pauses",
        f"tok/s: the run's output tokens/s, measured at the profiled point ({how}), so prefill cycles, "
        "stalls and the time between requests lower it",
    ]


def predict_run(run_dir, bootstrap: int = BOOTSTRAP, verify_us_per_token: float | None = None) -> dict:
    """predict() on a run folder: ``profile.remote``'s or ``profile.run``'s output (its
    ``timing/`` and ``summary.json``), or a bare folder of timing files."""
    import json
    from pathlib import Path

    from patchkit.report.load import load_timing_dir, timing_folder
    from patchkit.report.summarize import select

    run = Path(run_dir)
    timing = timing_folder(run, option="profile.predict")
    meta: dict = {}
    for cand in (run / "summary.json", timing.parent / "summary.json"):
        if cand.is_file():
            try:
                meta = json.loads(cand.read_text(encoding="utf-8")).get("meta") or {}
            except (OSError, ValueError):
                meta = {}
            break
    procs = load_timing_dir(timing)
    pred = predict_selection(select(procs, str(timing)), meta, str(timing), bootstrap, verify_us_per_token)
    pred["run"] = str(run)
    pred["server_command"] = meta.get("server_command")
    return pred


def predict_selection(
    sel, meta: dict, where: str, bootstrap: int = BOOTSTRAP, verify_us_per_token: float | None = None
) -> dict:
    """predict() on a report's Selection (patchkit.report.summarize.select) and its meta;
    InvalidInput when the records cannot carry a prediction (`where` names them)."""
    from patchkit.errors import InvalidInput
    from patchkit.report.acceptance import server_spec

    if not sel.procs:
        raise InvalidInput(f"{where}: no process's records inside the measured window")
    lead_rank = min(p.rank for p in sel.procs)
    lead = next(p for p in sel.procs if p.rank == lead_rank)
    names = {r["name"] for r in lead.phases}
    engine = engine_of(names)
    if engine is None:
        raise InvalidInput(
            f"{where}: no verify phase in the records (target_verify or verify_forward): nothing to model"
        )
    stalls: set[int] = next((st for p, st in zip(sel.procs, sel.stall_sets) if p is lead), set())
    rows = cycle_rows(lead.cycles, lead.phases, sel.basis, stalls)
    if len(rows) < 10:
        raise InvalidInput(
            f"{where}: {len(rows)} decode cycles with per-request acceptance; at least 10 are needed "
            "(records of a series before acceptance was recorded have none: re-apply the current series)"
        )
    spec = server_spec([lead.header], meta)
    num_steps = spec.get("num_steps")
    if engine == "transformers" or not isinstance(num_steps, int):
        num_steps = max(max(r.drafted) if r.drafted else max(r.accepted) for r in rows)
    if spec.get("topk", 1) != 1:
        raise InvalidInput(
            f"{where}: profiled with topk {spec['topk']}; the what-if model needs topk 1 (a chain of drafts)"
        )
    if spec.get("adaptive"):
        raise InvalidInput(
            f"{where}: the server ran with --speculative-adaptive, so SGLang changed num-steps at run "
            "time and the records do not say which num-steps each cycle ran; the what-if model needs "
            "one num-steps: profile a server started without --speculative-adaptive"
        )
    ordered = sorted(lead.cycles, key=lambda c: c["cycle"])
    span = ordered[-1]["t1"] - ordered[0]["t0"] if len(ordered) > 1 else 0
    decode_ns = sum(
        nxt["t0"] - cur["t0"]
        for cur, nxt in pairwise(ordered)
        if (cur.get("attrs") or {}).get("kind", "decode") == "decode"
        and not (cur.get("attrs") or {}).get("prefill")
    )
    share = min(1.0, decode_ns / span) if span > 0 else None
    tps = meta.get("tokens_per_s")
    pred = predict(
        rows,
        engine,
        num_steps,
        tps if isinstance(tps, (int, float)) else None,
        share,
        bootstrap,
        verify_us_per_token=verify_us_per_token,
        bench=_bench(meta, lead.cycles, stalls),
    )
    pred["spec"] = spec
    if engine == "sglang" and isinstance(spec.get("num_draft_tokens"), int):
        pred["profiled"]["num_draft_tokens"] = spec["num_draft_tokens"]
    steps = [got[0] for c in lead.cycles if (got := request_accepts(c.get("attrs") or {})) and got[0]]
    if steps:
        # the report's mean accepted length (patchkit.report.acceptance: pooled over every cycle
        # that carries acceptance), beside the modelled cycles' own
        pred["accept_length_recorded"] = {
            "pooled": 1 + sum(map(sum, steps)) / sum(map(len, steps)),
            "cycles": len(steps),
        }
    return pred


def _bench(meta: dict, cycles: list[dict], stalls: set[int]) -> tuple[BenchShape, CycleCosts] | None:
    """The benchmark's load (from its command in the run's meta) and the cycle costs, when
    both are known: then predict() replays the benchmark."""
    shape = bench_shape(meta.get("benchmark_command"))
    costs = cycle_costs(cycles, stalls) if shape is not None else None
    return None if shape is None or costs is None else (shape, costs)


def load_prediction(path) -> dict:
    """predict.json, given as the file or the run folder holding it."""
    import json
    from pathlib import Path

    from patchkit.errors import InvalidInput

    p = Path(path)
    if p.is_dir():
        p = p / "predict.json"
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(
            f"--from-prediction {path}: cannot read {p} ({exc.strerror}); run profile.predict RUN first"
        ) from None
    except ValueError as exc:
        raise InvalidInput(f"--from-prediction {path}: {p} is not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not doc.get("points"):
        raise InvalidInput(f"--from-prediction {path}: {p} is not a {SCHEMA} prediction")
    return doc


def promising(pred: dict, top: int) -> list[int]:
    """The num-steps values worth measuring: the `top` best predicted, plus the profiled one,
    in ascending order."""
    ranked = sorted(pred["points"], key=lambda p: -p["ratio_to_profiled"])
    keep = {int(p["num_steps"]) for p in ranked[:top]}
    keep.add(int(pred["profiled"]["num_steps"]))
    return sorted(keep)


def matrix_with_steps(matrix: str | None, steps: list[int]) -> str:
    """A profile.remote --matrix with its speculative-num-steps axis replaced by `steps`."""
    axes = [
        a.strip()
        for a in (matrix or "").replace("\n", ";").split(";")
        if a.strip() and a.split("=", 1)[0].strip().replace("_", "-").lstrip("-") != "speculative-num-steps"
    ]
    return ";".join([f"speculative-num-steps={','.join(str(s) for s in steps)}", *axes])
