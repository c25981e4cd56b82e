"""The runtime's timing budget, server by server: how many cycles it timed, how much of its
host time the device hid, and what the A/B pairs (PATCHKIT_TIMER_AB) measured it to cost.

    python bench/gpu/budget_check.py DIR [DIR...] [--json OUT.json]

Every run folder under each DIR whose timing files carry a budget (no PATCHKIT_TIMER_SAMPLE)
is read; the pairs are patchkit.report.overhead's (each timed block against the mean of the
off blocks on both sides, decode cycles), over every decode cycle the server recorded (its
warm-up pass included, as bench/gpu/ab_pairs.py does). The last lines pool the servers of each
worker: the median of the servers' medians, and the mean of every pair with a 95 % bootstrap
interval (pairs resampled within servers).
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from patchkit.report import load_timing_dir
from patchkit.report.overhead import paired_overhead


def _servers(root: Path):
    """(name, timing folder) of every server run under root: a folder named timing/ with
    phase-timing files, beside the run's summary.json (not the per-node copies)."""
    for timing in sorted(root.rglob("timing")):
        if (
            timing.is_dir()
            and (timing.parent / "summary.json").exists()
            and any(timing.glob("phase-timing.rank*.jsonl"))
        ):
            yield str(timing.parent.relative_to(root.parent)), timing


def _budget_header(timing: Path) -> dict | None:
    for f in sorted(timing.glob("phase-timing.rank*.jsonl")):
        with f.open() as fh:
            head = json.loads(fh.readline())
        return head.get("sampling") if isinstance(head.get("sampling"), dict) else None
    return None


def _worker(timing: Path) -> str:
    log = timing.parent / "node0" / "server.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return "v1" if "SGLANG_ENABLE_SPEC_V2=0" in text else "v2"


def server_row(name: str, timing: Path) -> dict | None:
    sampling = _budget_header(timing)
    if not sampling or sampling.get("budget_pct") is None:
        return None
    procs = load_timing_dir(timing)
    cycles = timed = 0
    last = {}
    for proc in procs:
        for c in proc.cycles:
            if (c.get("attrs") or {}).get("kind") == "decode" and c.get("ab") != "off":
                cycles += 1
                timed += c.get("timed") is not False
        last = (proc.stats or {}).get("sampling") or last
        if not last and proc.sampling_changes:  # no stats record (a killed scheduler): the last decision's
            last = proc.sampling_changes[-1]
    ov = paired_overhead(procs, "decode") or {}
    return {
        "server": name,
        "worker": _worker(timing),
        "controller": (sampling.get("controller") or {}).get("method"),
        "decode_cycles_on": cycles,
        "timed": timed,
        "timed_fraction": timed / cycles if cycles else None,
        "p_final": last.get("p"),
        "changes": last.get("changes"),
        "cost_us": None if last.get("cost_ns") is None else last["cost_ns"] / 1e3,
        "pairs": ov.get("pairs", 0),
        "median_pct": ov.get("median_pct"),
        "iqr_pct": ov.get("iqr_pct"),
        "pairs_pct": ov.get("pairs_pct") or [],
    }


def pooled(rows: list[dict], seed: int = 7, reps: int = 4000) -> dict:
    """The servers' pairs pooled: median of server medians; the median of all pairs with a
    bootstrap interval resampling pairs within each server."""
    groups = [r["pairs_pct"] for r in rows if r["pairs_pct"]]
    if not groups:
        return {"servers": len(rows), "pairs": 0}
    allp = [x for g in groups for x in g]
    rnd = random.Random(seed)
    means = []
    for _ in range(reps):
        s = [x for g in groups for x in rnd.choices(g, k=len(g))]
        means.append(statistics.median(s))
    means.sort()
    return {
        "servers": len(rows),
        "pairs": len(allp),
        "median_of_medians_pct": statistics.median(
            r["median_pct"] for r in rows if r["median_pct"] is not None
        ),
        "median_pct": statistics.median(allp),
        "median_ci95_pct": [means[int(0.025 * reps)], means[int(0.975 * reps) - 1]],
        "timed_fraction": [r["timed_fraction"] for r in rows],
    }


def _f(x, fmt):
    return "-" if x is None else format(x, fmt)


def _pct(x):
    return "-" if x is None else f"{100 * x:.0f}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = None
    if "--json" in argv:
        i = argv.index("--json")
        out = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    if not argv:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    rows = [r for d in argv for name, t in _servers(Path(d)) if (r := server_row(name, t))]
    print(
        "server | worker | timed / decode cycles (on blocks) | p final | cost us per timed cycle | pairs | median [IQR] %"
    )
    for r in rows:
        iqr = r["iqr_pct"] or [None, None]
        print(
            f"{r['server']} | {r['worker']} | {r['timed']} / {r['decode_cycles_on']} "
            f"({_pct(r['timed_fraction'])} %) | {_f(r['p_final'], '.4g')} | "
            f"{_f(r['cost_us'], '.0f')} | {r['pairs']} | "
            f"{_f(r['median_pct'], '+.2f')} [{_f(iqr[0], '+.2f')} .. {_f(iqr[1], '+.2f')}]"
        )
    summary = {}
    for worker in sorted({r["worker"] for r in rows}):
        mine = [r for r in rows if r["worker"] == worker]
        summary[worker] = p = pooled(mine)
        if p["pairs"]:
            lo, hi = p["median_ci95_pct"]
            print(
                f"{worker}: {p['servers']} servers, {p['pairs']} pairs: median of medians "
                f"{p['median_of_medians_pct']:+.2f} %, pooled pairs' median {p['median_pct']:+.2f} % "
                f"(95 % {lo:+.2f} .. {hi:+.2f})"
            )
    if out:
        out.write_text(json.dumps({"servers": rows, "pooled": summary}, indent=1) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
