"""Where a timed cycle's extra period goes: bench/gpu/diag/sitecustomize.py's per-cycle lines
paired by PATCHKIT_TIMER_AB block (timed block against the next off block), decode cycles only.

    python bench/gpu/diag_report.py DIAG_DIR TIMING_DIR [--json OUT]

For each pair of blocks: the median decode cycle period of each block and the mean per cycle of
the timer's own host time (self), the thread's CPU time, time not on the CPU (period - cpu) and
garbage collection; printed as medians over the pairs with IQRs.  A measuring aid of the harness.
"""

import argparse
import glob
import json
import os
import statistics
import sys

DECODE = ("decode", None)  # a cycle without a kind counts as decode (as in the report)


def _quartiles(xs):
    xs = sorted(xs)
    if not xs:
        return (float("nan"),) * 3
    if len(xs) < 4:
        return xs[0], statistics.median(xs), xs[-1]
    q = statistics.quantiles(xs, n=4)
    return q[0], q[1], q[2]


def load(diag_dir, timing_dir):
    kinds = {}
    for path in glob.glob(os.path.join(timing_dir, "**", "phase-timing*.jsonl"), recursive=True):
        with open(path) as fh:
            for line in fh:
                if '"kind":"cycle"' not in line:
                    continue
                rec = json.loads(line)
                kinds[(rec["cycle"])] = (rec.get("attrs") or {}).get("kind")
    rows = []
    for path in sorted(glob.glob(os.path.join(diag_dir, "diag.pid*.txt"))):
        with open(path) as fh:
            part = [ln.split() for ln in fh if not ln.startswith("#")]
        if len(part) > len(rows):  # the scheduler: the process with the most cycles
            rows = part
    out = []
    for r in rows:
        index, kind = int(r[0]), r[1]
        wall, self_ns, cpu, gc_ns, g0, g1, g2 = (int(x) for x in r[2:9])
        by = json.loads(r[9]) if len(r) > 9 else {}
        out.append(
            dict(
                index=index,
                kind=kind,
                wall=wall,
                self=self_ns,
                cpu=cpu,
                gc=gc_ns,
                gcs=(g0, g1, g2),
                cycle_kind=kinds.get(index),
                by=by,
            )
        )
    return out


def report(rows, ab):
    blocks = {}
    prev = None
    for r in rows:
        if (
            prev is not None
            and r["index"] == prev["index"] + 1
            and r["cycle_kind"] in DECODE
            and prev["cycle_kind"] in DECODE
        ):
            period = r["wall"] - prev["wall"]
            b = blocks.setdefault(r["index"] // ab, {"timed": r["kind"] != "O", "rows": []})
            b["rows"].append(
                dict(
                    period=period,
                    self=r["self"],
                    cpu=r["cpu"],
                    gc=r["gc"],
                    gcn=sum(r["gcs"]),
                    g2=r["gcs"][2],
                    kind=r["kind"],
                    by=r["by"],
                )
            )
        prev = r
    pairs = []
    for b, blk in sorted(blocks.items()):
        nxt = blocks.get(b + 1)
        if (
            not blk["timed"]
            or nxt is None
            or nxt["timed"]
            or len(blk["rows"]) < ab // 2
            or len(nxt["rows"]) < ab // 2
        ):
            continue

        def agg(rs):
            per = statistics.median(x["period"] for x in rs)
            return dict(
                period=per,
                **{k: statistics.fmean(x[k] for x in rs) for k in ("self", "cpu", "gc", "gcn", "g2")},
                wait=per - statistics.fmean(x["cpu"] for x in rs),
                timed=sum(1 for x in rs if x["kind"] == "T"),
                n=len(rs),
            )

        pairs.append((agg(blk["rows"]), agg(nxt["rows"])))
    if not pairs:
        return {"pairs": 0}
    res = {"pairs": len(pairs)}
    for key in ("period", "self", "cpu", "wait", "gc", "gcn", "g2"):
        d = [a[key] - b[key] for a, b in pairs]
        res[key] = dict(
            zip(("q1", "median", "q3"), _quartiles(d)),
            timed=statistics.median(a[key] for a, _ in pairs),
            off=statistics.median(b[key] for _, b in pairs),
        )
    res["timed_cycles_per_block"] = statistics.median(a["timed"] for a, _ in pairs)
    # the timer's own time per cycle by function (mean over the decode cycles of each state)
    by = {}
    for blk in blocks.values():
        for x in blk["rows"]:
            state = x["kind"]
            tally = by.setdefault(state, {"n": 0})
            tally["n"] += 1
            for k, v in x["by"].items():
                tally[k] = tally.get(k, 0) + v
    res["by_function_us"] = {
        state: {
            k: round(v / t["n"] / 1000.0, 2) for k, v in sorted(t.items(), key=lambda kv: -kv[1]) if k != "n"
        }
        | {"cycles": t["n"]}
        for state, t in by.items()
    }
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("diag_dir")
    ap.add_argument("timing_dir")
    ap.add_argument("--ab", type=int, default=int(os.environ.get("AB", 20)))
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = load(a.diag_dir, a.timing_dir)
    res = report(rows, a.ab)
    res["cycles"] = len(rows)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)
    if not res.get("pairs"):
        print("diag: no A/B pairs (%d cycle lines)" % len(rows))
        return 1
    us = lambda v: "%8.1f" % (v / 1000.0)  # noqa: E731
    print(
        "diag: %d A/B pairs, %d cycle lines, timed cycles per timed block %.0f"
        % (res["pairs"], len(rows), res["timed_cycles_per_block"])
    )
    print("  per decode cycle, us   timed-block  off-block   paired delta (median, IQR)")
    names = {
        "period": "cycle period (median)",
        "self": "timer's own host time",
        "cpu": "thread CPU time",
        "wait": "not on CPU (period-cpu)",
        "gc": "garbage collection",
    }
    for key, label in names.items():
        r = res[key]
        print(
            "  %-24s %s  %s   %s  (%s .. %s)"
            % (label, us(r["timed"]), us(r["off"]), us(r["median"]), us(r["q1"]), us(r["q3"]))
        )
    for state, fns in sorted(res.get("by_function_us", {}).items()):
        print(
            "  %s cycles (%d), us per cycle by function: %s"
            % (
                {"T": "timed", "U": "untimed", "O": "off"}.get(state, state),
                fns.get("cycles", 0),
                ", ".join("%s %.1f" % (k, v) for k, v in fns.items() if k != "cycles"),
            )
        )
    print(
        "  gc collections per cycle: timed %.3f, off %.3f (gen2: %.4f vs %.4f)"
        % (res["gcn"]["timed"], res["gcn"]["off"], res["g2"]["timed"], res["g2"]["off"])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
