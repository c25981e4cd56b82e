"""Warnings when a run's numbers cannot be taken at face value: stalls that took a large part of
the cycle time, a timer that cost more than a small part of the period, or cycle time that
drifted across the window (patchkit.report.drift: its own test and threshold).

The shares and phase statistics leave stalls out, but a run's tokens/s, its speedup and the
what-if's tokens/s pay for them; and every timed cycle pays for the timer. A warning names what
passed its threshold, by how much, and what to do. The thresholds (why these: docs/decisions.md):

- STALL_WARN_PCT: stalls over 5 % of a kind's cycle time. Between server starts on the H200 the
  whole time in cycles varied 0.6-9.3 % (docs/profiling.md, "Where the spread between starts
  lies") and the sweeps are sized to tell 5 % apart: stall time above 5 % moves tokens/s by as
  much as the differences the verdicts are asked to decide. A warm server's kernel compilations
  (the first cycle at a new batch size) stay well under it on the recorded H200 runs.
- TIMER_WARN_PCT: the timer's own cost above 2 % of the cycle period (the budget's estimate,
  ``spent_pct``, or the PATCHKIT_TIMER_AB median). The default budget is 1 %; twice that means the
  controller could not hold it (the period too short for the timer, or the host loaded). Where
  the runtime works as designed it costs less: on the H200, every cycle timed on the
  verify-bound 8B pair +0.29 % (v2) and +0.92 % (v1) with batched reads, 1 in 16 on host-bound
  small models under 0.5 % (docs/profiling.md); above 2 % the timer itself moves tokens/s by
  more than those, and by a third or more of a 5 % difference.
"""

from __future__ import annotations

from patchkit.report.drift import drift_finding
from patchkit.report.kinds import NO_KIND

STALL_WARN_PCT = 5.0
TIMER_WARN_PCT = 2.0


def _stall_warning(kind: str, st: dict) -> dict | None:
    share = st.get("share_of_kind_time")
    if not st.get("count") or share is None or share <= STALL_WARN_PCT:
        return None
    late = sum(1 for c in st.get("cycles", []) if not c.get("first_at_batch_size"))
    of = "cycle" if kind == NO_KIND else kind
    why = (
        f"{late} of them not the first cycle at their batch size (not kernel compilation: a busy "
        "machine, swapping, another job on the same cores)"
        if late
        else "each the first cycle at its batch size (kernel compilation or autotuning)"
    )
    return {
        "what": "stalls",
        "kind": kind,
        "value_pct": share,
        "threshold_pct": STALL_WARN_PCT,
        "text": (
            f"warning: {st['count']} stall{'s' if st['count'] != 1 else ''} took {share:.1f}% of {of} time "
            f"(over {STALL_WARN_PCT:g}%), {why}; the shares leave them out, but tokens/s, the speedup "
            "and the what-if's tok/s pay for them. Do: rerun on an idle machine (uptime, top), keep the "
            "warm-up pass (--warmup), pin the server's CPUs (profile.remote --cpus); compilation stalls "
            "go with a longer warm-up"
        ),
    }


def _timer_warning(sampling: dict | None, overhead: dict | None) -> dict | None:
    budget = (sampling or {}).get("budget") or {}
    spent = budget.get("spent_pct")
    source, value = None, None
    if spent is not None and spent > TIMER_WARN_PCT:
        source, value = f"the budget's estimate (budget {budget.get('pct'):g}%)", spent
    median = (overhead or {}).get("median_pct")
    if median is not None and median > TIMER_WARN_PCT and (value is None or median > value):
        source, value = "PATCHKIT_TIMER_AB's paired median", median
    if value is None:
        return None
    return {
        "what": "timer_cost",
        "value_pct": value,
        "threshold_pct": TIMER_WARN_PCT,
        "text": (
            f"warning: the timer's own cost was about {value:.2f}% of the cycle period ({source}; over "
            f"{TIMER_WARN_PCT:g}%): tokens/s are lowered by about as much. Do: time fewer cycles "
            "(--sample 16, or a smaller PATCHKIT_TIMER_BUDGET), rerun on an idle machine, or measure it "
            "with PATCHKIT_TIMER_AB"
        ),
    }


def _drift_warning(drift: dict | None) -> dict | None:
    finding = drift_finding(drift)
    if finding is None or drift is None:
        return None
    ratios = [s["ratio_to_rest"] for s in drift["segments"]]
    ratio = max(ratios, key=lambda r: max(r, 1 / r))
    return {
        "what": "drift",
        "kind": drift.get("kind"),
        "ratio": ratio,
        "threshold_ratio": drift.get("min_ratio"),
        "text": (
            f"warning: cycle time drifted: {finding} (another load on the machine?); shares in "
            "this window are less certain. Do: rerun on an idle machine (uptime, top), "
            "pin the server's CPUs (profile.remote --cpus)"
        ),
    }


def trust_warnings(summary) -> list[dict]:
    """summary.json's ``warnings``: [{what, kind?, value_pct, threshold_pct, text}] (a drift:
    ratio and threshold_ratio in place of the percentages)."""
    out = [w for kind, st in (summary.stalls or {}).items() if (w := _stall_warning(kind, st or {}))]
    timer = _timer_warning(summary.sampling, summary.overhead)
    drift = _drift_warning(summary.drift)
    return out + [w for w in (timer, drift) if w]
