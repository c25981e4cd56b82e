"""The benchmark, replayed at another num-steps: a closed-loop simulation of its requests.

A decode-cycle model alone (predict.py) gets the cost of a cycle right but not how many cycles
and prefills a benchmark runs: at fewer steps every request needs more decode cycles, and the
requests' finishing times, which decide how many prefill cycles the replacements cost, bunch
differently. On the H200 a benchmark's time was its decode cycles plus its prefill cycles to
within 0.5 % (the rest is the client's own first request), so this module counts both:

- the load: ``requests`` requests of ``output_len`` tokens (the first comes from the prefill),
  at most ``concurrency`` in flight; a request that finishes in one decode cycle is replaced
  by the client, the replacement reaches the server during the next one, and every
  replacement that has arrived by a cycle boundary is prefilled in one prefill cycle;
- a decode cycle at n steps: ``a + b * batch_size - (N - n) * step`` ns (a, b: a least-squares
  line through the profiled run's decode-cycle periods; step: one draft round);
- a prefill cycle: the profiled run's mean prefill-cycle period;
- each request's accepted drafts per cycle: drawn from the profiled run's request steps at
  the replayed cycle's batch size, ``min(a, n)`` at n steps (topk 1: a chain). Acceptance can
  depend on the batch (which requests share a cycle, how far into their output they are), so
  a draw pooled over every batch size puts the tail of the load's acceptance into full batches
  and back. A batch size with fewer than MIN_POOL_STEPS recorded request steps draws from it and
  the nearest batch sizes recorded (the smaller first on a tie) until the pool holds that many
  (``Acceptance.at``).

Only sglang.bench_serving's ``random`` and ``random-ids`` datasets with ``--max-concurrency``
name their load in the command; anything else gets None from ``bench_shape`` and the caller
falls back to the decode-share scaling.
"""

from __future__ import annotations

import random
import shlex
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

SIM_SEEDS = tuple(range(1, 9))  # the replay's own spread: about 2.5 % of a benchmark's time per seed
SEED_STEPS = 60_000  # request steps one seed's replay may take (~0.1 s); a longer load gets fewer seeds
MAX_REQUEST_STEPS = 1_500_000  # a longer load (~3 s a replay) is replayed in part and extrapolated
IDLE_FACTOR = 20  # a gap longer than 20 x the median cycle is the client's pause, not a cycle
# request steps a batch size's own acceptance needs to be drawn from alone: at 200 the mean
# accepted length of a pool is known to about 0.07 tokens (sd ~1 token a step); fewer pool with
# the nearest batch sizes
MIN_POOL_STEPS = 200


class Acceptance:
    """The profiled run's accepted drafts per request step, by the batch size of their cycle;
    ``at(bs)`` is what a replayed cycle at batch size bs draws from (see the module docstring).
    A plain sequence (no batch sizes known) is one pool for every batch size."""

    def __init__(self, by_batch: Mapping[int, Sequence[int]] | Sequence[int]):
        if not isinstance(by_batch, Mapping):
            by_batch = {0: by_batch}
        self.by_batch = {bs: list(v) for bs, v in sorted(by_batch.items()) if v}
        self.all = [a for v in self.by_batch.values() for a in v]
        self._pools: dict[int, list[int]] = {}

    def at(self, batch_size: int) -> list[int]:
        pool = self._pools.get(batch_size)
        if pool is None:
            if len(self.by_batch) == 1:
                pool = self.all
            else:
                pool = []
                for bs in sorted(self.by_batch, key=lambda b: (abs(b - batch_size), b)):
                    if len(pool) >= MIN_POOL_STEPS:
                        break
                    pool.extend(self.by_batch[bs])
            self._pools[batch_size] = pool
        return pool


@dataclass(frozen=True)
class BenchShape:
    requests: int
    concurrency: int
    output_len: int
    range_ratio: float  # output lengths uniform in [output_len * range_ratio, output_len]

    @property
    def tokens(self) -> float:
        """Output tokens of the whole load (the mean length where lengths vary)."""
        lo = max(2, int(self.output_len * self.range_ratio))
        return self.requests * (lo + self.output_len) / 2


@dataclass(frozen=True)
class CycleCosts:
    """What one profiled run says a cycle costs (ns)."""

    decode_a: float  # decode period at batch size 0 (intercept)
    decode_b: float  # ns per request of the batch
    prefill: float  # mean prefill-cycle period
    decode_cycles: int
    prefill_cycles: int
    decode_total: float  # the profiled run's decode and prefill time, ns (the simulation's check)
    prefill_total: float

    def decode(self, batch_size: int) -> float:
        return self.decode_a + self.decode_b * batch_size


@dataclass(frozen=True)
class SimResult:
    decode_cycles: float
    prefill_cycles: float
    decode_ns: float
    prefill_ns: float
    scale: float = 1.0  # the factor a part of a long load was scaled up by
    seed_sd: float = 0.0  # one seed's replay: the sd of its total time over the seeds, relative
    seeds: int = 1  # the replays averaged

    @property
    def total_ns(self) -> float:
        return self.decode_ns + self.prefill_ns


def bench_shape(command: str | None) -> BenchShape | None:
    """The load of an sglang.bench_serving command on a random dataset with a fixed concurrency,
    or None when the command does not say it."""
    if not command or "bench_serving" not in command:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    flags: dict[str, str] = {}
    for flag, value in pairwise(words):
        if flag.startswith("--"):
            flags[flag[2:].split("=", 1)[0]] = value
    for word in words:
        if word.startswith("--") and "=" in word:
            key, value = word[2:].split("=", 1)
            flags[key] = value
    if flags.get("dataset-name") not in ("random", "random-ids"):
        return None
    try:
        shape = BenchShape(
            requests=int(flags.get("num-prompts", "1000")),
            concurrency=int(flags["max-concurrency"]),
            output_len=int(flags.get("random-output-len", "1024")),
            range_ratio=float(flags.get("random-range-ratio", "0")),
        )
    except (KeyError, ValueError):
        return None
    if shape.requests < 1 or shape.concurrency < 1 or shape.output_len < 2 or not 0 <= shape.range_ratio <= 1:
        return None
    return shape


def periods_of(cycles: Sequence[dict]) -> list[tuple[dict, int]]:
    """(cycle, period: host start to the next cycle's start) for consecutive cycles. The last
    cycle of a generate() call has none: the next cycle (``prefill`` in its attrs: the first of
    the next call) starts after whatever the caller did between the calls."""
    ordered = sorted(cycles, key=lambda c: c["cycle"])
    return [
        (c, nxt["t0"] - c["t0"])
        for c, nxt in pairwise(ordered)
        if nxt["cycle"] == c["cycle"] + 1 and not (nxt.get("attrs") or {}).get("prefill")
    ]


def client_pauses(cycles: Sequence[dict]) -> set[int]:
    """The cycles whose period holds the client's pause (a gap over IDLE_FACTOR x the median
    period: between requests, between a benchmark's passes), none with fewer than 10 periods.
    Neither the time in cycles nor the what-if counts them as a cycle's cost."""
    pairs = periods_of(cycles)
    periods = sorted(p for _, p in pairs)
    if len(periods) < 10:
        return set()
    idle = IDLE_FACTOR * periods[len(periods) // 2]
    return {c["cycle"] for c, p in pairs if p > idle}


def _periods(cycles: Sequence[dict], stalls) -> tuple[list[tuple[int | None, int]], list[int]] | None:
    """(decode cycles as (batch size or None, period), prefill periods) of one process's
    cycle records, consecutive pairs only, stalls and the client's pauses (client_pauses)
    left out; None with fewer than 10 periods."""
    pairs = periods_of(cycles)
    if len(pairs) < 10:
        return None
    pauses = client_pauses(cycles)
    dec: list[tuple[int | None, int]] = []
    pre: list[int] = []
    for c, period in pairs:
        if c["cycle"] in stalls or c["cycle"] in pauses or period <= 0:
            continue
        attrs = c.get("attrs") or {}
        if attrs.get("kind", "decode") != "decode" or attrs.get("prefill"):
            pre.append(period)
        else:
            bs = attrs.get("batch_size")
            dec.append((bs if isinstance(bs, int) and bs > 0 else None, period))
    return dec, pre


def cycle_costs(cycles: Sequence[dict], stalls: set[int] | frozenset[int] = frozenset()) -> CycleCosts | None:
    """Decode and prefill cycle costs of one process's cycle records (see _periods), or None
    with fewer than 10 decode cycles that name their batch size."""
    got = _periods(cycles, stalls)
    if got is None:
        return None
    dec = [(b, p) for b, p in got[0] if b is not None]
    pre = got[1]
    if len(dec) < 10:
        return None
    n = len(dec)
    mx = sum(b for b, _ in dec) / n
    my = sum(p for _, p in dec) / n
    var = sum((b - mx) ** 2 for b, _ in dec) / n
    slope = max(0.0, sum((b - mx) * (p - my) for b, p in dec) / n / var if var > 0 else 0.0)
    return CycleCosts(
        decode_a=my - slope * mx,
        decode_b=slope,
        prefill=sum(pre) / len(pre) if pre else 0.0,
        decode_cycles=n,
        prefill_cycles=len(pre),
        decode_total=float(sum(p for _, p in dec)),
        prefill_total=float(sum(pre)),
    )


def time_split(cycles: Sequence[dict], stalls: set[int] | frozenset[int] = frozenset()) -> dict | None:
    """summary.json's ``time_split``: how the measured window's time divides between decode and
    prefill cycles (see _periods), or None without 10 periods or without a decode cycle."""
    got = _periods(cycles, stalls)
    if got is None or not got[0]:
        return None
    dec, pre = got
    return {
        "decode": _part(len(dec), float(sum(p for _, p in dec))),
        "prefill": _part(len(pre), float(sum(pre))),
    }


def _part(count: int, total_ns: float) -> dict:
    return {
        "cycles": count,
        "total_s": total_ns / 1e9,
        "period_mean_ms": total_ns / count / 1e6 if count else None,
    }


def simulate(
    shape: BenchShape,
    accepts: Acceptance | Sequence[int],
    n: int,
    costs: CycleCosts,
    step_ns: float,
    profiled_steps: int,
    seeds: Sequence[int] = SIM_SEEDS,
) -> SimResult:
    """The benchmark at num-steps n, averaged over `seeds` (see the module docstring)."""
    if not isinstance(accepts, Acceptance):
        accepts = Acceptance(accepts)
    if not accepts.all:
        raise ValueError("no request steps to draw acceptance from")
    shorter = (profiled_steps - n) * step_ns
    parts, steps = load_parts(shape, accepts, n)
    # a long load gets fewer seeds (its own draws average over more requests)
    seeds = list(seeds)[: max(1, int(len(seeds) * SEED_STEPS / max(steps, 1.0)))]

    spread = [0.0]

    def mean(requests: int) -> list[float]:
        run_shape = replace(shape, requests=requests)
        runs = [_replay(run_shape, accepts, n, costs, shorter, random.Random(seed)) for seed in seeds]
        totals = [r[2] + r[3] for r in runs]
        if len(totals) >= 2 and statistics.fmean(totals) > 0:
            spread[0] = statistics.stdev(totals) / statistics.fmean(totals)
        return [sum(r[i] for r in runs) / len(runs) for i in range(4)]

    if parts is None:
        decode_cycles, prefill_cycles, decode_ns, prefill_ns = mean(shape.requests)
        return SimResult(
            decode_cycles, prefill_cycles, decode_ns, prefill_ns, seed_sd=spread[0], seeds=len(seeds)
        )
    (r1, r2), (m1, m2) = parts, (mean(parts[0]), mean(parts[1]))
    # each further request costs what the second part added over the first (start and tail
    # of the load counted once, as in the whole load)
    out = [a + (shape.requests - r1) * (b - a) / (r2 - r1) for a, b in zip(m1, m2)]
    decode_cycles, prefill_cycles, decode_ns, prefill_ns = out
    # the second part's relative spread, shrunk as 1/sqrt(requests) to the whole load
    whole = spread[0] * (r2 / shape.requests) ** 0.5
    return SimResult(
        decode_cycles, prefill_cycles, decode_ns, prefill_ns, shape.requests / r2, whole, len(seeds)
    )


def load_parts(shape: BenchShape, accepts: Acceptance, n: int) -> tuple[tuple[int, int] | None, float]:
    """((r1, r2) requests to replay instead of the whole load, or None), and the request steps
    (requests x cycles each) a replay then runs. A load of more than MAX_REQUEST_STEPS is
    replayed twice in part, with r1 and r2 = 2 x r1 requests (r1 at least 4 waves of the
    concurrency), and extrapolated, so a prediction takes seconds whatever the benchmark.
    The extrapolation errs low on prefill cycles: the first wave's requests start together
    and drift apart over many waves (on the tests' stand-in, parts of 4 and 8 waves put the
    prefill cycles of a 25-wave load 11 % low and its time 4 %, parts of 8 and 16 waves 3 % and
    1 %)."""
    mean_tokens = 1.0 + sum(min(a, n) for a in accepts.all) / len(accepts.all)
    mean_len = (max(2, int(shape.output_len * shape.range_ratio)) + shape.output_len) / 2
    per_request = mean_len / mean_tokens
    steps = shape.requests * per_request
    if steps <= MAX_REQUEST_STEPS:
        return None, steps
    r1 = max(4 * shape.concurrency, int(MAX_REQUEST_STEPS / 3 / per_request))
    if 2 * r1 >= shape.requests:
        return None, steps
    return (r1, 2 * r1), 3 * r1 * per_request


def _replay(
    shape: BenchShape, accepts: Acceptance, n: int, costs: CycleCosts, shorter: float, rng: random.Random
) -> tuple[int, int, float, float]:
    """One pass of the load: (decode cycles, prefill cycles, decode ns, prefill ns)."""
    lo = max(2, int(shape.output_len * shape.range_ratio))

    def length() -> int:
        return shape.output_len if lo >= shape.output_len else rng.randint(lo, shape.output_len)

    started = min(shape.concurrency, shape.requests)
    # tokens still to decode per request in flight (the prefill gave the first)
    active = [length() - 1 for _ in range(started)]
    sent = 0  # replacements sent during the last decode cycle: on their way
    coming = 0  # sent the cycle before: arrived by this boundary
    decode_cycles = 0
    decode_ns = 0.0
    prefill_cycles, prefill_ns = 1, costs.prefill
    while active or sent or coming:
        if coming:
            active.extend(length() - 1 for _ in range(coming))
            prefill_cycles += 1
            prefill_ns += costs.prefill
        coming, sent = sent, 0
        if not active:
            continue
        bs = len(active)
        decode_cycles += 1
        decode_ns += max(costs.decode(bs) - shorter, 1.0)
        left = []
        for need, a in zip(active, rng.choices(accepts.at(bs), k=bs)):
            need -= min(a, n) + 1
            if need > 0:
                left.append(need)
            elif started < shape.requests:
                started += 1
                sent += 1
        active = left
    return decode_cycles, prefill_cycles, decode_ns, prefill_ns
