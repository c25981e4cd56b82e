"""Full against sampled timing inside one server: PATCHKIT_TIMER_AB=N with PATCHKIT_TIMER_AB_B=sample
alternates blocks of N cycles where every cycle is timed ("ab": "events") and blocks sampled at
1/PATCHKIT_TIMER_SAMPLE ("ab": "sampled").  This compares the top-level phase shares of the
decode cycle (the report's definition: mean phase time over mean cycle time, device time where
the run has it) between the full blocks' cycles and the sampled blocks' timed cycles, with a
bootstrap interval of each difference (resampling cycles).  The first SKIP cycles of each block
are left out (a cycle next to the other kind of block may feel its neighbour), and so are
stalls (the report's own rule, patchkit.report.stalls).

    python bench/gpu/shares_ab.py TIMING_DIR|PROFILE_OUT_DIR [--skip 2] [--json OUT]

The JSON keeps the per-cycle figures too ("cycles"), so that bench/gpu/timer_cost.py can pool
several servers (pooled(): each server's difference weighted by its sampled timed cycles, a
bootstrap inside each server).
"""

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from patchkit.report import load_timing_dir
from patchkit.report.stalls import find_stalls


def timing_folder(path):
    """A timing folder, or a profile.remote --out folder (its newest run's timing/)."""
    root = Path(path)
    if any(root.glob("phase-timing*.jsonl")):
        return root
    runs = sorted(root.glob("*/timing"))
    return runs[-1] if runs else root


def collect(timing_dir, skip):
    procs = load_timing_dir(timing_folder(timing_dir))
    groups = {"events": [], "sampled": []}
    left_out = {"events": 0, "sampled": 0}  # stalls, per group
    ab = 0
    basis = "device" if all(p.mode in ("events", "sync") for p in procs) else "host"
    field = "dev_ns" if basis == "device" else "host_ns"
    _, stalls = find_stalls(procs, basis, [set() for _ in procs])  # the report's own rule
    for proc, stalled in zip(procs, stalls):
        ab = max(ab, int((proc.header or {}).get("ab_cycles") or 0))
        tops = {}
        for p in proc.phases:
            if p.get("cycle") is not None and p.get("depth") == 0:
                t = p.get(field)
                if t is not None:
                    tops.setdefault(p["cycle"], {}).setdefault(p["name"], 0)
                    tops[p["cycle"]][p["name"]] += t
        for c in proc.timed_cycles:
            kind = (c.get("attrs") or {}).get("kind", "decode")
            t = c.get(field)
            if kind != "decode" or c.get("ab") not in groups or t is None or not t:
                continue
            if ab and c["cycle"] % ab < skip:
                continue
            if c["cycle"] in stalled:
                left_out[c["ab"]] += 1
                continue
            groups[c["ab"]].append((t, tops.get(c["cycle"], {})))
    return groups, ab, left_out


def shares(rows, names):
    total = sum(t for t, _ in rows)
    return {n: 100.0 * sum(ph.get(n, 0) for _, ph in rows) / total for n in names}


def compare(groups, reps=1000, seed=1):
    """Full against sampled shares in one server: each share, and the difference with its
    bootstrap interval (pooled() over this one server)."""
    full, samp = groups["events"], groups["sampled"]
    names = sorted({n for _, ph in full + samp for n in ph})
    a, b = shares(full, names), shares(samp, names)
    diffs = {r["phase"]: r for r in pooled([groups], reps, seed)["phases"]}
    rows = [
        {"phase": n, "full": round(a[n], 2), "sampled": round(b[n], 2)}
        | {k: v for k, v in diffs[n].items() if k != "phase"}
        for n in names
    ]
    return {
        "full_cycles": len(full),
        "sampled_timed_cycles": len(samp),
        "phases": rows,
        "max_abs_diff_pp": max((abs(r["diff_pp"]) for r in rows), default=None),
    }


def cycles_doc(groups):
    """The per-cycle figures behind a comparison, compact (for pooling servers later):
    phase names once, then per group [cycle time, time of each named phase, ...] rows."""
    names = sorted({n for rows in groups.values() for _, ph in rows for n in ph})
    return {
        "names": names,
        **{g: [[t] + [ph.get(n, 0) for n in names] for t, ph in rows] for g, rows in groups.items()},
    }


def groups_of(doc):
    """The groups again from cycles_doc's form."""
    names = doc["names"]
    return {g: [(row[0], dict(zip(names, row[1:]))) for row in doc[g]] for g in ("events", "sampled")}


def pooled(servers, reps=1000, seed=1):
    """Full against sampled shares over several servers: each server's difference (sampled
    minus full, as compare()), averaged with the server's sampled timed cycles as weights (they
    carry nearly all of the variance); a bootstrap that resamples cycles inside each server and
    group gives the interval. servers: a list of groups (events/sampled rows) per server."""
    names = sorted({n for g in servers for rows in g.values() for _, ph in rows for n in ph})
    weights = [len(g["sampled"]) for g in servers]
    total = float(sum(weights))

    def diff(samples):
        out = dict.fromkeys(names, 0.0)
        for (full, samp), w in zip(samples, weights):
            a, b = shares(full, names), shares(samp, names)
            for n in names:
                out[n] += w / total * (b[n] - a[n])
        return out

    point = diff([(g["events"], g["sampled"]) for g in servers])
    rng = random.Random(seed)
    boots = {n: [] for n in names}
    for _ in range(reps):
        d = diff(
            [
                (
                    [rng.choice(g["events"]) for _ in g["events"]],
                    [rng.choice(g["sampled"]) for _ in g["sampled"]],
                )
                for g in servers
            ]
        )
        for n in names:
            boots[n].append(d[n])
    rows = []
    for n in names:
        b = sorted(boots[n])
        rows.append(
            {
                "phase": n,
                "diff_pp": round(point[n], 2) + 0.0,  # (no -0.0)
                "ci95_pp": [round(b[int(0.025 * reps)], 2), round(b[int(0.975 * reps) - 1], 2)],
            }
        )
    return {
        "servers": len(servers),
        "full_cycles": sum(len(g["events"]) for g in servers),
        "sampled_timed_cycles": int(total),
        "phases": rows,
        "max_abs_diff_pp": max((abs(r["diff_pp"]) for r in rows), default=None),
        "max_abs_ci95_pp": max((max(abs(x) for x in r["ci95_pp"]) for r in rows), default=None),
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("timing_dir")
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    groups, ab, left_out = collect(a.timing_dir, a.skip)
    if not groups["events"] or not groups["sampled"]:
        print("shares_ab: no full or no sampled timed decode cycles (PATCHKIT_TIMER_AB_B=sample?)")
        return 1
    res = compare(groups)
    res["ab_cycles"], res["skip"] = ab, a.skip
    res["stalls_left_out"] = left_out
    res["cycles"] = cycles_doc(groups)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    print(
        "shares_ab: %d full cycles, %d sampled timed cycles (blocks of %d, first %d of each left out;"
        " stalls left out: %d full, %d sampled)"
        % (
            res["full_cycles"],
            res["sampled_timed_cycles"],
            ab,
            a.skip,
            left_out["events"],
            left_out["sampled"],
        )
    )
    print("  %-30s %8s %8s %8s  %s" % ("top-level phase", "full %", "sampled", "diff pp", "95% bootstrap"))
    for r in res["phases"]:
        print(
            "  %-30s %8.2f %8.2f %+8.2f  [%+.2f, %+.2f]"
            % (r["phase"], r["full"], r["sampled"], r["diff_pp"], *r["ci95_pp"])
        )
    print("  largest difference: %.2f pp" % res["max_abs_diff_pp"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
