"""Could the timing budget see that the device hides the runtime's host time? A check the
runtime could make at the end of each timed cycle, replayed on recorded runs.

    python bench/gpu/hidden_replay.py DIR [DIR...]

The check: after the runtime's own work for a cycle, query the cycle's events from the last one
back while they are still pending. From the first of that pending run on the device had work
queued all along, but what it had left is known only from below: the device time from that
event to the cycle's end. The runtime tried it (with the rule "hidden when the phases from
there on took at least half of the cycle's device time") and dropped it: on the H200's v2 8B
runs the device is inside the verify graph at the check (its start done, its end pending), so
the bound is the ~1 ms after verify, not the ~12 ms left, and no cycle qualifies.

Replay: for each timed decode cycle with device times, every phase's begin and end event
completes at (cycle start, host clock) + its device offset, which holds where the device is
idle as the cycle begins (SGLang's v2 worker on the H200: the first phase starts within a few
µs of the cycle's start event). The check runs at the cycle's host end + CHECK_AFTER_NS (the
rest of cycle_end's work). Printed per run: timed cycles, the share with a pending run at the
check, the mean share of the cycle's events in it, and the share of cycles the rule would
have called hidden. A replay, not a measurement.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

CHECK_AFTER_NS = 200_000


def replay(path: Path) -> tuple[int, float, float] | None:
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cycles = {r["cycle"]: r for r in recs if r.get("kind") == "cycle"}
    phases: dict[int, list[dict]] = {}
    for r in recs:
        if r.get("kind") == "phase" and r.get("cycle") is not None:
            phases.setdefault(r["cycle"], []).append(r)
    shares = []
    for d in (r for r in recs if r.get("kind") == "dev"):
        c = cycles.get(d["cycle"])
        ps = phases.get(d["cycle"], [])
        if not c or (c.get("attrs") or {}).get("kind") != "decode" or len(ps) != len(d.get("phases") or []):
            continue
        t0, check = c["t0"], c["t1"] + CHECK_AFTER_NS
        marks = []
        for p, (dev_ns, off) in zip(ps, d["phases"]):
            marks += [(p["t0"], t0 + off), (p["t1"], t0 + off + dev_ns)]
        order = sorted(range(len(marks)), key=lambda m: marks[m][0])
        pending = [marks[m][1] > check for m in order]
        k = len(pending) - 1
        while k >= 0 and pending[k]:
            k -= 1
        first = k + 1
        # the rule: the first phase begun at or after that run's first event, and
        # the share of the cycle's device time from its start on (at least half: hidden)
        span = max(off + dev_ns for dev_ns, off in d["phases"]) or 1
        begins = [order.index(2 * j) for j in range(len(ps))]
        i = next((j for j, b in enumerate(begins) if b >= first), None)
        left = (span - d["phases"][i][1]) / span if i is not None else 0.0
        shares.append(((len(pending) - first) / len(pending), left >= 0.5))
    if not shares:
        return None
    n = len(shares)
    return (
        n,
        sum(1 for s, _ in shares if s > 0) / n,
        statistics.mean(s for s, _ in shares),
        sum(h for _, h in shares) / n,
    )


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__.strip().splitlines()[3].strip())
        return 2
    found = 0
    for root in map(Path, argv):
        for f in sorted(root.rglob("phase-timing.rank*.jsonl")):
            got = replay(f)
            if got:
                found += 1
                n, any_pending, share, hidden = got
                print(
                    f"{f.parent.parent.relative_to(root)}: {n} timed decode cycles, "
                    f"{100 * any_pending:.0f} % with pending events at the check, "
                    f"{100 * share:.0f} % of their events in that run on average; "
                    f"hidden by the rule (half the device time left): {100 * hidden:.0f} %"
                )
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
