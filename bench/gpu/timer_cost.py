"""The timer-cost figures as one page: bench/results/sglang_gpu_timer_cost.{md,json}.

    python bench/gpu/timer_cost.py bench/results/timer_cost_h200 [--out bench/results/sglang_gpu_timer_cost]

Reads what bench/gpu/run_h200.sh's stages left per run (copied into callN/RUN/: summary.json,
table.txt, diag.json, shares_ab.json, trace_summary.json, timing_records.json,
sglang_decode_batches.txt, ab_pairs.json from bench/gpu/ab_pairs.py; callN/run.log).
Every figure printed is read from those files.
"""

import argparse
import functools
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import shares_ab  # bench/gpu/shares_ab.py: the pooled comparison of full and sampled shares

WORKER = {"v1": "v1 (EAGLEWorker, no overlap)", "v2": "v2 (EAGLEWorkerV2, overlap)"}
ORDER = [
    "ovh16_v2",
    "ovh16_v1",
    "ovh1_v2",
    "ovh1_v1",
    "diag_v1",
    "diag_v2",
    "diag_v2top",
    "diag_v2all",
    "shares",
]


@functools.cache  # each run's files are read by several tables
def _load(path):
    return json.loads(path.read_text()) if path.is_file() else None


def runs(root):
    out = []
    for call in sorted(root.glob("call*"), key=lambda p: int(p.name[4:]) if p.name[4:].isdigit() else 0):
        for run in sorted(call.iterdir()):
            if run.is_dir():
                out.append((call.name, run.name, run))
    return out


def runtime_of(run):
    """The runtime a call measured: callN/runtime.txt (its first line), written at import."""
    f = run.parent / "runtime.txt"
    return f.read_text().splitlines()[0].strip() if f.is_file() else "?"


def variant_of(summary):
    """The runtime knobs a server ran with beyond the mode and the A/B blocks, e.g.
    PATCHKIT_TIMER_RESOLVE_BATCH=8 ('' for the defaults)."""
    env = ((summary or {}).get("meta") or {}).get("server environment") or ""
    knobs = [
        kv
        for kv in env.split()
        if kv.startswith("PATCHKIT_TIMER_") and not kv.startswith("PATCHKIT_TIMER_AB=")
    ]
    return " ".join(knobs)


def requests_of(summary):
    """The benchmark's request count (--num-prompts of its command), or None."""
    cmd = (((summary or {}).get("meta") or {}).get("benchmark command") or "").split()
    for i, word in enumerate(cmd[:-1]):
        if word == "--num-prompts" and cmd[i + 1].isdigit():
            return int(cmd[i + 1])
    return None


def partial(summary):
    """A run profile.remote reported as partial (interrupted): left out of every table."""
    return ((summary or {}).get("meta") or {}).get("partial")


def sampling_label(every):
    return "1 in %d" % every if every > 1 else "every cycle"


def model_of(summary):
    """'8B EAGLE-3' for the verify-bound pair (bench/gpu/make_models_eagle3.py), else 'tiny'."""
    cmd = ((summary or {}).get("meta") or {}).get("server command") or ""
    return "8B EAGLE-3" if "models-8b" in cmd or "EAGLE3" in cmd else "tiny"


def worker_label(row):
    """A table row's worker, with the model where it is not the tiny one: 'v1 (8B EAGLE-3)'."""
    return row["worker"] + ("" if row["model"] == "tiny" else " (%s)" % row["model"])


def worker_of(name):
    return "v1" if name.endswith("v1") or "_v1-" in name else "v2"


PAIRINGS = {
    True: "both sides",  # each timed block against the mean of the off blocks around it
    False: "next only",  # the earlier pairing: against the off block after it (reads drift)
}


def fresh_pairs(run):
    """The run's ab_pairs.json when it was written with the report's present pairing (it has
    "pairing"), else None (calls whose raw runs were not kept: only the earlier pairing)."""
    doc = _load(run / "ab_pairs.json")
    return doc if doc and doc.get("pairing") and doc.get("pairs") else None


def overhead_rows(root):
    rows = []
    for call, name, run in runs(root):
        s = _load(run / "summary.json")
        if not s or partial(s):
            continue
        fresh = fresh_pairs(run)
        if not fresh and not (s.get("overhead") or {}).get("pairs"):
            continue
        ov, samp = fresh or s["overhead"], s.get("sampling") or {}
        every = samp.get("every", 1)
        rows.append(
            {
                "call": call,
                "run": name,
                "runtime": runtime_of(run),
                "variant": variant_of(s),
                "pairing": PAIRINGS[bool(ov.get("pairing"))],
                "span": "whole run" if fresh else "measured window",
                "worker": worker_of(name),
                "model": model_of(s),
                "sample": every,
                "monitor": name.startswith("diag"),
                "tokens_per_s": (s.get("throughput") or {}).get("tokens_per_s"),
                "requests": requests_of(s),
                "median_pct": round(ov["median_pct"], 2),
                "iqr_pct": [round(x, 2) for x in ov["iqr_pct"]],
                "pairs": ov["pairs"],
                "timed_period_ms": ov["timed_period_ms"],
                "off_period_ms": ov["off_period_ms"],
                "timed_cycles": samp.get("timed_cycles"),
                "window_cycles": samp.get("cycles"),
            }
        )
    rows.sort(
        key=lambda r: (
            r["monitor"],
            r["model"] != "tiny",
            -r["sample"],
            r["worker"] != "v2",
            r["variant"],
            r["pairing"],
            r["call"],
        )
    )
    return rows


def pooled(root):
    """Every pair of every server of one worker and sampling (ab_pairs.json: the whole run, the
    warm-up pass included), with 95 % bootstrap intervals of the median and the mean."""
    groups = {}
    for call, name, run in runs(root):
        doc = _load(run / "ab_pairs.json")
        s = _load(run / "summary.json")
        if not doc or not s or name.startswith("diag") or partial(s):
            continue
        every = (s.get("sampling") or {}).get("every", 1)
        key = (
            runtime_of(run),
            worker_of(name),
            every,
            variant_of(s),
            PAIRINGS[bool(doc.get("pairing"))],
            model_of(s),
        )
        g = groups.setdefault(key, {"servers": [], "pairs": []})
        g["servers"].append("%s/%s" % (call, name))
        g["pairs"] += doc["pairs_pct"]
    rng = random.Random(1)
    out = []
    order = {}
    for _call, _name, run in runs(root):
        order.setdefault(runtime_of(run), len(order))
    for (runtime, worker, every, variant, pairing, model), g in sorted(
        groups.items(),
        key=lambda kv: (kv[0][5] != "tiny", -kv[0][2], kv[0][1] != "v2", kv[0][3], kv[0][4], order[kv[0][0]]),
    ):
        ps = g["pairs"]
        meds = sorted(statistics.median([rng.choice(ps) for _ in ps]) for _ in range(2000))
        means = sorted(statistics.fmean([rng.choice(ps) for _ in ps]) for _ in range(2000))
        out.append(
            {
                "runtime": runtime,
                "worker": worker,
                "model": model,
                "sample": every,
                "variant": variant,
                "pairing": pairing,
                "servers": g["servers"],
                "pairs": len(ps),
                "median_pct": round(statistics.median(ps), 2),
                "median_ci95": [round(meds[50], 2), round(meds[1949], 2)],
                "mean_pct": round(statistics.fmean(ps), 2),
                "mean_ci95": [round(means[50], 2), round(means[1949], 2)],
            }
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--out", default="bench/results/sglang_gpu_timer_cost")
    a = ap.parse_args(argv)
    root = Path(a.root)
    doc = {
        "source": str(root),
        "overhead": overhead_rows(root),
        "pooled": pooled(root),
        "left_out": [
            {"run": "%s/%s" % (call, name), "partial": partial(_load(run / "summary.json"))}
            for call, name, run in runs(root)
            if partial(_load(run / "summary.json"))
        ],
        "diag": {},
        "records": [],
        "traces": {},
    }
    per_cycle = {}  # runtime -> [(run, shares_ab's per-cycle figures)]
    for call, name, run in runs(root):
        d = _load(run / "diag.json")
        if d:
            doc["diag"]["%s/%s" % (call, name)] = d
        rec = _load(run / "timing_records.json")
        batches = run / "sglang_decode_batches.txt"
        if rec and batches.is_file():
            doc["records"].append(
                dict(run="%s/%s" % (call, name), sglang_decode_batches=int(batches.read_text()), **rec)
            )
        t = _load(run / "trace_summary.json")
        if t:
            doc["traces"]["%s/%s" % (call, name)] = t
        sh = _load(run / "shares_ab.json")
        if sh:
            sh = dict(sh)
            cycles = sh.pop("cycles", None)
            if cycles:
                per_cycle.setdefault(runtime_of(run), []).append(("%s/%s" % (call, name), cycles))
            doc.setdefault("shares", []).append(
                dict(run="%s/%s" % (call, name), runtime=runtime_of(run), **sh)
            )
    for runtime, servers in sorted(per_cycle.items()):
        res = shares_ab.pooled([shares_ab.groups_of(c) for _, c in servers])
        res.update(runtime=runtime, runs=[r for r, _ in servers])
        doc.setdefault("shares_pooled", []).append(res)
    md = ["# The timer's cost on the H200", ""]
    md += [
        "Real SGLang 0.5.12 on one H200, the harness's tiny models (`bench/gpu/make_models.py`: host-bound",
        "cycles of 3-6 ms), STANDALONE speculation with 3 steps, 128 requests x 512 output tokens (more",
        "where the server column says so: the same load, longer); rows marked 8B EAGLE-3: the verify-bound",
        "pair of `bench/gpu/make_models_eagle3.py` (stage `e3ovh`: EAGLE3 with 3 steps, 13-18 ms cycles,",
        "768 requests x 256 output tokens). 32 requests at a time (batch 32), a warm-up pass before the",
        "measured window. Each server alternates blocks of 20",
        "decode cycles timed and off (`PATCHKIT_TIMER_AB=20`): the figure is the median over the timed",
        "blocks of the timed block's median cycle period against the mean of the off blocks on both sides",
        "(pairing 'both sides', the report's own since 2026-12-01; over the whole run from ab_pairs.json,",
        "else over summary.json's measured window), IQR over them.",
        "'next only' rows are the earlier pairing (against the off block after it, over the measured",
        "window), kept where the raw runs were not: the decode cycle slows down as sequences grow, and",
        "that pairing read the drift as overhead (v1: -1.57 % next only, +0.36 % both sides, the same run).",
        "One server per row; servers differ from each other by more than the figures below (tok/s column), so",
        "every comparison here is inside one server. Rerun: `bash bench/gpu/run_h200.sh setup models ovh16",
        "shares ovh1 pack` (and `diag`, `diagv2`, `trace`, `trace_stack`, `trace_nvtx`; the 8B rows:",
        "`setup models8b e3ovh e3ovhb e3ovhrb pack`), then",
        "`bench/gpu/import_runs.py runs.tgz bench/results/timer_cost_h200/callN --runtime REV`, then this script.",
        "runtime: the timer runtime a call measured (callN/runtime.txt); knobs: the server's PATCHKIT_TIMER_*",
        "settings beyond the mode and the A/B blocks.",
        "",
        "## Paired overhead by worker and sampling",
        "",
        "| worker | sample | runtime | knobs | pairing | server | tok/s | overhead, median | IQR | pairs | timed / off period ms | timed cycles in window |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["overhead"]:
        md.append(
            "| %s | %s | %s | %s | %s | %s/%s%s | %s | %+.2f %% | %+.2f .. %+.2f %% | %d | %.3f / %.3f | %s of %s |"
            % (
                worker_label(r),
                sampling_label(r["sample"]),
                r["runtime"],
                r["variant"] or "-",
                r["pairing"],
                r["call"],
                r["run"],
                (" (diag monitor on)" if r["monitor"] else "")
                + (" (%d requests)" % r["requests"] if r["requests"] not in (None, 128) else ""),
                "%.0f" % r["tokens_per_s"] if r["tokens_per_s"] else "-",
                r["median_pct"],
                r["iqr_pct"][0],
                r["iqr_pct"][1],
                r["pairs"],
                r["timed_period_ms"],
                r["off_period_ms"],
                r["timed_cycles"] if r["timed_cycles"] is not None else "all",
                r["window_cycles"] if r["window_cycles"] is not None else "the window",
            )
        )
    md += [
        "",
        "Pooled over every server of a row kind and over the whole run (warm-up pass and measured window,",
        "the same load), 95 % bootstrap intervals:",
        "",
        "| worker | sample | runtime | knobs | pairing | servers | pairs | median | 95 % interval | mean | 95 % interval |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["pooled"]:
        md.append(
            "| %s | %s | %s | %s | %s | %d | %d | %+.2f %% | %+.2f .. %+.2f | %+.2f %% | %+.2f .. %+.2f |"
            % (
                worker_label(r),
                sampling_label(r["sample"]),
                r["runtime"],
                r["variant"] or "-",
                r["pairing"],
                len(r["servers"]),
                r["pairs"],
                r["median_pct"],
                r["median_ci95"][0],
                r["median_ci95"][1],
                r["mean_pct"],
                r["mean_ci95"][0],
                r["mean_ci95"][1],
            )
        )
    for r in doc["left_out"]:
        md += ["", "Left out: %s, which profile.remote reported as partial (%s)." % (r["run"], r["partial"])]
    md += [
        "",
        "The off blocks still record each cycle's host start and end (that is how their period is known), so",
        "these pairs measure what timing adds on top of recording cycles; what recording a cycle costs is in the",
        "next table (the off cycles' own time).",
        "",
        "## Where a timed cycle's cost goes (`bench/gpu/diag/`, in the scheduler process)",
        "",
        "Per decode cycle, paired by block like the overhead: the cycle period, the time spent inside the",
        "timer's own functions (sys.monitoring on the runtime's code objects only), the scheduler thread's CPU",
        "time, and garbage collection. `top`: only the functions SGLang calls are monitored (the same number",
        "of monitored calls in timed and off cycles); `all`: every function of the runtime (the monitor's own",
        "cost then inflates timed cycles more). Times in microseconds.",
        "",
        "| server | scope | period delta (IQR) | timer's own time, timed / off | CPU time delta | off-CPU delta | GC |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, d in doc["diag"].items():
        if not d.get("pairs"):
            continue
        scope = "all" if (key.endswith("all") or key.startswith("call1")) else "top"

        def us(v):
            return "%.0f" % (v / 1000.0)

        md.append(
            "| %s | %s | %s (%s .. %s) | %s / %s | %s | %s | %s |"
            % (
                key,
                scope,
                us(d["period"]["median"]),
                us(d["period"]["q1"]),
                us(d["period"]["q3"]),
                us(d["self"]["timed"]),
                us(d["self"]["off"]),
                us(d["cpu"]["median"]),
                us(d["wait"]["median"]),
                us(d["gc"]["median"]),
            )
        )
    for key, d in doc["diag"].items():
        for state, fns in sorted((d.get("by_function_us") or {}).items()):
            md.append("")
            md.append(
                "%s, %s cycles (%d): %s"
                % (
                    key,
                    {"T": "timed", "O": "off", "U": "untimed"}.get(state, state),
                    fns.get("cycles", 0),
                    ", ".join("%s %.1f us" % (k, v) for k, v in fns.items() if k != "cycles"),
                )
            )
    for sh in doc.get("shares", []):
        md += [
            "",
            "## Full against sampled timing in one server (`PATCHKIT_TIMER_AB_B=sample`, `bench/gpu/shares_ab.py`)",
            "",
            "Server %s (runtime %s). Blocks of %d cycles alternate every cycle timed and 1 in 16 timed;"
            % (sh["run"], sh["runtime"], sh["ab_cycles"]),
            "top-level shares of the decode cycle's device time from %d full cycles against %d sampled timed"
            % (sh["full_cycles"], sh["sampled_timed_cycles"]),
            "cycles (the first %d cycles of each block left out), 95 %% bootstrap interval of each difference."
            % sh["skip"],
            "",
            "| phase | full % | sampled % | difference pp | 95 % interval |",
            "|---|---|---|---|---|",
        ]
        for r in sh["phases"]:
            md.append(
                "| %s | %.2f | %.2f | %+.2f | %+.2f .. %+.2f |"
                % (r["phase"], r["full"], r["sampled"], r["diff_pp"], r["ci95_pp"][0], r["ci95_pp"][1])
            )
        md.append("")
        md.append("Largest difference: %.2f percentage points." % sh["max_abs_diff_pp"])
    for sp in doc.get("shares_pooled", []):
        md += [
            "",
            "## Full against sampled timing, pooled over servers (runtime %s)" % sp["runtime"],
            "",
            "Servers %s: each server's difference (sampled minus full) weighted by its sampled timed"
            % ", ".join(sp["runs"]),
            "cycles (%d of them, against %d full cycles); the 95 %% interval from a bootstrap that resamples"
            % (sp["sampled_timed_cycles"], sp["full_cycles"]),
            "cycles inside each server and block kind (`shares_ab.pooled`). Servers whose per-cycle figures",
            "were not kept (before call 5) are not in it.",
            "",
            "| phase | difference pp | 95 % interval |",
            "|---|---|---|",
        ]
        for r in sp["phases"]:
            md.append("| %s | %+.2f | %+.2f .. %+.2f |" % (r["phase"], r["diff_pp"], *r["ci95_pp"]))
        md += [
            "",
            "Largest difference: %.2f points; the widest interval reaches %.2f points from zero."
            % (sp["max_abs_diff_pp"], sp["max_abs_ci95_pp"]),
        ]
    md += ["", "## Records against SGLang's own decode count", ""]
    md += [
        "| server | SGLang decode batches | decode cycle records | dev records | timed cycle records | contiguous | exit record |",
        "|---|---|---|---|---|---|---|",
    ]
    cut = [r for r in doc["records"] if r.get("server_log_from")]
    for r in doc["records"]:
        md.append(
            "| %s | %d | %s | %d | %s | %s | %s |"
            % (
                r["run"],
                r["sglang_decode_batches"],
                "%d of %d *" % (r["decode_cycles_in_log"], r["decode_cycles"])
                if r.get("server_log_from")
                else "%d" % r["decode_cycles"],
                r["timed_cycles"],
                r.get("timed_cycle_records", "-"),
                r["contiguous"],
                r["exit_stats"],
            )
        )
    md += [
        "",
        "A server the harness stopped while SGLang hung (the trace runs) can differ by the batch in",
        "flight when it was killed. dev records: cycles whose device times were read (events mode);",
        "timed cycle records: cycles timed in the chosen mode (prefill included; not counted before",
        "call 9, '-'): the two are equal when no device time was lost, also when SGLang's SIGKILL ended",
        "the server (exit record False).",
    ]
    if cut:
        md += [
            "",
            "\\* profile.remote keeps the last MiB of a server log, and these longer runs' logs were cut: both",
            "columns count from the first whole second the kept log covers (%s), the records by their start,"
            % ", ".join("%s from %s" % (r["run"], r["server_log_from"]) for r in cut),
            "the log by its stamp (a cycle that starts in the second before and is logged after can differ by 1-2).",
        ]
    md += ["", "## SGLang's own profiler (`/start_profile`) on a patched v2 server", ""]
    for key, t in doc["traces"].items():
        req = t.get("request", {})
        stack = (
            "stack and shapes off"
            if req.get("with_stack") is False
            else "SGLang's defaults: stack and shapes on"
        )
        stack += ", patchkit's NVTX on" if req.get("nvtx") else ", NVTX off"
        if t.get("phases_present"):
            md.append(
                "- %s (%s, %d steps): trace written, %d decode cycles; phase ranges: %s."
                % (
                    key,
                    stack,
                    req.get("num_steps", 0),
                    t.get("decode_cycles") or 0,
                    ", ".join("%s %d" % kv for kv in t["phases_present"].items()),
                )
            )
        else:
            md.append(
                "- %s (%s, %d steps): the benchmark stopped answering (exit %s) while SGLang wrote the trace; %s"
                % (
                    key,
                    stack,
                    req.get("num_steps", 0),
                    t.get("bench_rc"),
                    t.get("error") or "no trace file",
                )
            )
    Path(a.out + ".json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(a.out + ".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
