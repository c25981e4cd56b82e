"""Gather what the GPU harness's profile.remote runs left into bench/results/sglang_gpu.{json,md}.

    python bench/gpu/collect.py WORK OUT [--merge EARLIER.json]

WORK holds the harness's run folders (v1/, v2/, sweep/, e3v1/, e3v2/: each an ``invoke
profile.remote --out``), models_check.txt, models8b_check.txt and timer_bench.txt. Every figure written is read from those files: the
benchmark's output (sglang.bench_serving), summary.json of each report, sweep.json, and the
server log, whose "Decode batch" lines (one per decode forward, the harness serves with
--decode-log-interval 1) are SGLang's own count of decode cycles; ``lost_records`` is that count
minus the decode cycles the timing files hold. ``--merge`` keeps the parts of an earlier
sglang_gpu.json that this WORK has no run for (the 10-minute limit per device call can split
the harness over two calls), each part saying which call measured it.

The reports describe the measured window only (``window.json``: the warm-up pass's cycles are
counted in ``warmup_cycles``) and keep stall cycles out of the shares (summary.json ``stalls``).
For the EAGLE-3 runs the collector also rebuilds the report's summary over every recorded cycle
(a window spanning the whole file) to account for the stalls of a server started on a cold
kernel cache: how many, how long, and whether they fell in the warm-up or the measured window.
control/ (identical twins, ``--matrix 'env:PK_CONTROL=a,b' --repeat N``) gives the verdict's
false-positive check; control/, ovh_v1/ and ovh_v2/ give the timer's paired in-server overhead
(PATCHKIT_TIMER_AB) by worker and sampling, one figure per server.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

DECODE_LINE = re.compile(r"Decode batch[ ,\[]")
ALGORITHM = re.compile(r"--speculative-algorithm[ =](\S+)")
# run folders: worker key -> label (the EAGLE-3 runs serve the 8B-shaped pair)
WORKERS = {"v1": "v1", "v2": "v2", "e3v1": "EAGLE3 8B v1", "e3v2": "EAGLE3 8B v2"}
STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
VERSION_LINE = re.compile(r"sglang[ =](\d+\.\d+\.\d+\S*)")


def latest_run(folder: Path) -> Path | None:
    """The newest <timestamp>/ folder with a summary.json or sweep.json under ``folder``."""
    runs = sorted(p.parent for p in folder.glob("*/summary.json")) + sorted(
        p.parent for p in folder.glob("*/sweep.json")
    )
    return max(runs, key=lambda p: p.name) if runs else None


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def decode_lines(run: Path) -> int | None:
    """SGLang's decode forwards in the head node's saved server log (None if it was not saved
    whole: the log is kept up to 1 MiB, and a cut log would undercount)."""
    log = run / "node0" / "server.log"
    if not log.is_file():
        return None
    text = log.read_text(encoding="utf-8", errors="replace")
    if "server_args=" not in text:  # the start of the log was cut off
        return None
    return len(DECODE_LINE.findall(text))


def kind_breakdown(summary: dict, kind: str = "decode") -> dict:
    kinds = summary.get("cycle_kinds") or {}
    return kinds.get(kind) or (kinds.get("unspecified") if kind == "decode" else None) or {}


def top_phases(breakdown: dict) -> list[dict]:
    return [p for p in breakdown.get("phases", []) if (p.get("depth") or 0) == 0]


def decode_records(run: Path) -> int | None:
    """Decode cycle records in the run's fetched timing files, off blocks of
    PATCHKIT_TIMER_AB included (they are records too, with host times only)."""
    try:
        from patchkit.report import load_timing_dir
        from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind
    except ImportError:
        return None
    folder = run / "timing"
    if not folder.is_dir():
        return None
    return sum(
        1 for proc in load_timing_dir(folder) for c in proc.cycles if cycle_kind(c) in (KIND_PRIMARY, NO_KIND)
    )


STALL_FACTOR = 3.0


def steady_state(run: Path) -> dict | None:
    """Stalls kept apart from the breakdown, by this script's own rule: a decode cycle whose
    device time (host time where none) exceeds STALL_FACTOR x the median decode cycle is a stall
    (a cold kernel cache compiles in the first cycles at each new batch size). Returns the stall
    count, their time and batch sizes, and the top-level phase shares (and medians) over the
    remaining, steady-state cycles."""
    try:
        from patchkit.report import load_timing_dir
        from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind
    except ImportError:
        return None
    folder = run / "timing"
    if not folder.is_dir():
        return None
    cycles, phases = [], {}
    for proc in load_timing_dir(folder):
        wanted = {}
        for c in proc.timed_cycles:
            if cycle_kind(c) in (KIND_PRIMARY, NO_KIND):
                ns = c.get("dev_ns") if c.get("dev_ns") is not None else c.get("host_ns")
                if ns is not None:
                    wanted[c["cycle"]] = len(cycles)
                    cycles.append(
                        {"ns": ns, "batch_size": (c.get("attrs") or {}).get("batch_size"), "phases": {}}
                    )
        for p in proc.phases:
            if p.get("depth") == 0 and p.get("cycle") in wanted:
                ns = p.get("dev_ns") if p.get("dev_ns") is not None else p.get("host_ns")
                slot = cycles[wanted[p["cycle"]]]["phases"]
                slot[p["name"]] = slot.get(p["name"], 0) + (ns or 0)
                phases[p["name"]] = None
    if not cycles:
        return None
    durations = sorted(c["ns"] for c in cycles)
    median = durations[len(durations) // 2]
    stalls = [c for c in cycles if c["ns"] > STALL_FACTOR * median]
    steady = [c for c in cycles if c["ns"] <= STALL_FACTOR * median]
    total = sum(c["ns"] for c in cycles)
    steady_total = sum(c["ns"] for c in steady) or 1

    def med(values):
        values = sorted(values)
        return values[len(values) // 2] / 1e6 if values else None

    return {
        "rule": f"decode cycle > {STALL_FACTOR:g} x median ({median / 1e6:.3f} ms)",
        "cycles": len(cycles),
        "stalls": len(stalls),
        "stall_ms": round(sum(c["ns"] for c in stalls) / 1e6, 1),
        "stall_share_of_decode_time": round(100 * sum(c["ns"] for c in stalls) / total, 1),
        "stall_batch_sizes": [c["batch_size"] for c in stalls],
        "median_cycle_ms": round(median / 1e6, 3),
        "shares": {
            name: round(100 * sum(c["phases"].get(name, 0) for c in steady) / steady_total, 1)
            for name in phases
        },
        "median_ms": {
            name: round(med([c["phases"][name] for c in steady if name in c["phases"]]), 3) for name in phases
        },
    }


def decode_kind(per_kind: dict | None) -> dict:
    """The decode cycles' entry of a per-kind dict (``unspecified`` when cycles carry no kind)."""
    per_kind = per_kind or {}
    return per_kind.get("decode") or per_kind.get("unspecified") or {}


def stall_brief(stalls: dict) -> dict:
    cycles = stalls.get("cycles") or []
    return {
        "count": stalls.get("count"),
        "total_ms": stalls.get("total_ms"),
        "share_of_decode_time": stalls.get("share_of_kind_time"),
        "first_at_batch_size": stalls.get("first_at_batch_size"),
        "batch_sizes": [c.get("batch_size") for c in cycles],
        "main_phase_counts": stalls.get("main_phase_counts"),
        "median_cycle_ms": stalls.get("median_ms"),
        "rule": stalls.get("rule"),
    }


def stall_accounting(run: Path) -> dict | None:
    """The report's stall rule over every recorded decode cycle, warm-up included (the report
    itself describes the measured window only): the summary rebuilt with a window spanning the
    whole file, and each stall placed before, in or after the measured window."""
    try:
        from patchkit.report import load_timing_dir, summarize
        from patchkit.report.window import Window, read_window
    except ImportError:
        return None
    folder = run / "timing"
    if not folder.is_dir():
        return None
    procs = load_timing_dir(folder)
    window = read_window(folder)
    everything = None if window is None else Window(0, 2**63 - 1, source="every cycle")
    full = summarize(procs, str(folder), window=everything)
    stalls = decode_kind(full.stalls)
    out = stall_brief(stalls)
    out["decode_cycles"] = decode_kind(full.to_dict().get("cycle_kinds")).get("cycles")
    out["window"] = window is not None
    if window is None:
        return out
    where = {"warmup": 0, "window": 0, "after_window": 0}
    by_pid = {(p.header.get("pid"), p.rank): p for p in procs}
    for st in stalls.get("cycles") or []:
        proc = by_pid.get((st.get("pid"), st.get("rank")))
        cyc = next((c for c in proc.cycles if c["cycle"] == st["cycle"]), None) if proc else None
        if cyc is None:
            continue
        t = proc.wall_ns(cyc["t0"])
        key = "warmup" if t < window.start_unix_ns else "after_window" if t > window.end_unix_ns else "window"
        where[key] += 1
    out["where"] = where
    return out


def phase_rows(decode: dict) -> list[dict]:
    rows = []
    for p in decode.get("phases", []):
        per = p.get("per_cycle_dev_ms") or p.get("per_cycle_host_ms") or {}
        rows.append(
            {k: p.get(k) for k in ("name", "depth", "parent", "count", "share_of_cycle", "dev_ms", "host_ms")}
            | {"per_cycle_median_ms": per.get("p50"), "per_cycle_mean_ms": per.get("mean")}
        )
    return rows


def run_entry(worker: str, run: Path) -> dict:
    summary = read_json(run / "summary.json")
    meta = summary.get("meta") or {}
    base = summary.get("baseline") or {}
    decode = kind_breakdown(summary)
    recorded = decode_records(run)
    sglang_count = decode_lines(run)
    cover = decode.get("top_level_share")
    # summary.json's meta keys are snake_case since 358b920; older run folders have words
    algorithm = ALGORITHM.search(meta.get("server_command") or meta.get("server command") or "")
    top = top_phases(decode)
    verify = next((p for p in decode.get("phases", []) if p.get("name") == "target_verify"), None)
    entry = {
        "worker": worker,
        "label": WORKERS.get(worker, worker),
        "algorithm": algorithm.group(1) if algorithm else None,
        "tokens_per_s": meta.get("tokens_per_s"),
        "baseline_tokens_per_s": base.get("tokens_per_s"),
        "ratio_to_baseline": base.get("ratio"),
        "accept_length": meta.get("accept_length"),
        "cycles": recorded,
        "timed_cycles": decode.get("cycles"),
        "prefill_cycles": kind_breakdown(summary, "prefill").get("cycles"),
        "sglang_decode_forwards": sglang_count,
        "phases_cover_pct": round(cover, 2) if cover is not None else None,
        "lost_records": (sglang_count - recorded)
        if (sglang_count is not None and recorded is not None)
        else None,
        "unresolved_device_times": summary.get("unresolved"),
        "outside_cycles": summary.get("outside_cycles"),
        "overhead": summary.get("overhead"),
        "basis": summary.get("basis"),
        "decode_cycle_ms": (summary.get("cycle") or {}).get(
            "dev_ms" if summary.get("basis") == "device" else "host_ms"
        ),
        "phases": phase_rows(decode),
        "top_level_shares": {p["name"]: p.get("share_of_cycle") for p in top},
        "target_verify_share": verify.get("share_of_cycle") if verify else None,
        "server_started_s": started_after(run),
        # what the report describes: the measured window's steady decode cycles
        "window": summary.get("window") is not None,
        "warmup_cycles": summary.get("warmup_cycles"),
        "after_window_cycles": summary.get("after_window_cycles"),
        "steady_cycles": decode.get("steady_cycles"),
        "sampling": summary.get("sampling"),
        "decode_cycle_steady_ms": {
            k: (decode.get("cycle") or {})
            .get("dev_ms" if summary.get("basis") == "device" else "host_ms", {})
            .get(k)
            for k in ("mean", "p50")
        }
        if decode.get("cycle")
        else None,
        "stalls_window": (
            stall_brief(decode_kind(summary["stalls"])) if summary.get("stalls") is not None else None
        ),
        "server_command": meta.get("server_command") or meta.get("server command"),
        "baseline_server_command": base.get("server_command"),
        "speculative_worker_log": meta.get("worker") or meta.get("speculative worker (server log)"),
        "report": str(run),
    }
    if summary.get("stalls") is None:  # a report from before the stall rule: collect's own
        entry["steady_state"] = steady_state(run)
    if worker.startswith("e3"):
        try:
            entry["stalls_all_cycles"] = stall_accounting(run)
        except Exception as exc:  # one part's failure must not lose the rest of the collection
            print(f"collect: {run}: stalls over all cycles: {exc!r}", file=sys.stderr)
            entry["stalls_all_cycles"] = None
    return entry


def started_after(run: Path) -> dict:
    """Seconds from a server log's first timestamped line to "ready to roll" (the Python
    imports before its first line not counted), for the run's server and its baseline's."""
    found = {}
    for key, folder in (("speculative", run), ("baseline", run / "baseline")):
        log = folder / "node0" / "server.log"
        if not log.is_file():
            continue
        stamps, ready = [], None
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            m = STAMP.match(line)
            if m:
                stamps.append(m.group(1))
                if "ready to roll" in line:
                    ready = m.group(1)
                    break
        if stamps and ready:
            fmt_ = "%Y-%m-%d %H:%M:%S"
            found[key] = time.mktime(time.strptime(ready, fmt_)) - time.mktime(time.strptime(stamps[0], fmt_))
    return found


def is_eagle3(run: dict) -> bool:
    return "EAGLE3" in f"{run.get('label')} {run.get('algorithm')}".upper()


def e3_baseline_from_v2(doc: dict) -> None:
    """An EAGLE-3 v1 run without a baseline of its own (the device call's time) is compared
    with the EAGLE-3 v2 run's baseline (overlap scheduling on there): said in baseline_from."""
    v2 = next((r for r in doc.get("runs", []) if r["worker"] == "e3v2"), None)
    for r in doc.get("runs", []):
        if (
            r["worker"] == "e3v1"
            and not r.get("baseline_tokens_per_s")
            and v2
            and v2.get("baseline_tokens_per_s")
            and r.get("tokens_per_s")
        ):
            r["baseline_tokens_per_s"] = v2["baseline_tokens_per_s"]
            r["ratio_to_baseline"] = r["tokens_per_s"] / v2["baseline_tokens_per_s"]
            r["baseline_from"] = (
                "the EAGLE3 8B v2 run's baseline (the same target without "
                "--speculative-*, overlap scheduling on), " + v2["report"]
            )


def sweep_entry(run: Path) -> tuple[list[dict], dict]:
    doc = read_json(run / "sweep.json")
    base = doc.get("baseline") or {}
    rows = []
    for row in doc.get("rows", []):
        rows.append(
            {
                "point": row.get("label"),
                "ok": row.get("ok"),
                "error": row.get("error"),
                "tokens_per_s": row.get("tokens_per_s"),
                "tokens_per_s_median": row.get("tokens_per_s_median"),
                "tokens_per_s_ci": row.get("tokens_per_s_ci"),
                "repeats": row.get("repeats"),
                "ratio_ci": row.get("ratio_ci"),
                "reports": row.get("reports"),
                "ratio_to_baseline": row.get("ratio_to_baseline"),
                "accept_length": row.get("accept_length"),
                "cycles": row.get("cycles"),
                "phase_shares": row.get("phase_shares"),
                "worker": row.get("worker"),
            }
        )
    info = {
        "matrix": doc.get("matrix"),
        "best": doc.get("best"),
        "baseline_tokens_per_s": base.get("tokens_per_s"),
        "baseline_tokens_per_s_ci": base.get("tokens_per_s_ci"),
        "baseline_repeats": base.get("repeats"),
        "baseline_server_command": base.get("server_command"),
        "repeat": doc.get("repeat"),
        "warmup": doc.get("warmup"),
        "verdict": doc.get("verdict"),
        "order": doc.get("order"),
        "interrupted": doc.get("interrupted"),
        "report": str(run),
    }
    return rows, info


def server_figures(summary: dict) -> dict:
    """One server's report, in brief: sampling, paired overhead, top-level decode shares."""
    decode = kind_breakdown(summary)
    sampling = summary.get("sampling") or {}
    return {
        "worker": (summary.get("meta") or {}).get("worker")
        or (summary.get("meta") or {}).get("speculative worker (server log)"),
        "sample": sampling.get("every") or 1,
        "timed_cycles": sampling.get("timed_cycles", decode.get("timed_cycles")),
        "decode_cycles": decode.get("cycles"),
        "overhead": summary.get("overhead"),
        "top_level_shares": {p["name"]: p.get("share_of_cycle") for p in top_phases(decode)},
        "tokens_per_s": (summary.get("meta") or {}).get("tokens_per_s"),
    }


def sweep_servers(run: Path, source: str) -> list[dict]:
    """Every server a sweep started (each repetition of each point): its report's figures."""
    doc = read_json(run / "sweep.json")
    out = []
    for row in doc.get("rows", []):
        for rep, report in enumerate(row.get("reports") or [row.get("report")], 1):
            path = run / report / "summary.json" if report else None
            if path is None or not path.is_file():
                continue
            fig = server_figures(read_json(path))
            fig.update(source=source, point=row.get("label"), rep=rep, report=str(run / report))
            out.append(fig)
    return out


def overhead_rows(run: Path) -> list[dict]:
    """Per server of the overhead sweep: the paired A/B overhead its report measured."""
    doc = read_json(run / "sweep.json")
    rows = []
    for row in doc.get("rows", []):
        for rep, report in enumerate(row.get("reports") or [row["report"]], 1):
            point = run / report / "summary.json"
            summary = read_json(point) if point.is_file() else {}
            reps = row.get("repeats") or [row.get("tokens_per_s")]
            rows.append(
                {
                    "point": row.get("label") + (f" (rep {rep})" if rep > 1 else ""),
                    "server_command": row.get("server_command"),
                    "tokens_per_s": reps[rep - 1] if rep <= len(reps) else None,
                    "error": row.get("error"),
                    "overhead": summary.get("overhead"),
                }
            )
    return rows


def control_entry(run: Path) -> dict:
    """The control sweep (identical twins): rows with median, interval and repetitions, the
    verdict (it should find no best), the run order and every server's figures."""
    rows, info = sweep_entry(run)
    info["rows"] = rows
    info["servers"] = sweep_servers(run, "control")
    verdict = info.get("verdict") or {}
    info["called_different"] = bool(verdict.get("significant"))
    return info


def timer_overhead(doc: dict, work: Path) -> dict | None:
    """The paired in-server overhead (PATCHKIT_TIMER_AB) by worker and sampling, one figure per
    server: ovh_v1 (v1, sample 1 and 8), ovh_v2 (v2, sample 1), the control's servers (v2,
    sample 8); and how far sample 8's top-level decode shares are from sample 1's."""
    servers = []
    v1 = latest_run(work / "ovh_v1")
    if v1 is not None and (v1 / "sweep.json").is_file():
        servers += sweep_servers(v1, "ovh_v1")
    v2 = latest_run(work / "ovh_v2")
    if v2 is not None and (v2 / "summary.json").is_file():
        fig = server_figures(read_json(v2 / "summary.json"))
        fig.update(source="ovh_v2", point="--sample 1", rep=1, report=str(v2))
        servers.append(fig)
    servers += [dict(s) for s in (doc.get("control") or {}).get("servers", [])]
    if not servers:
        return None
    for s in servers:
        w = (s.get("worker") or "").lower()
        s["spec"] = "v1" if w.startswith("spec v1") else "v2" if w.startswith("spec v2") else w
    by = {}
    for s in servers:
        ov = s.get("overhead") or {}
        if ov.get("median_pct") is not None:
            by.setdefault(f"{s['spec']} sample {s['sample']}", []).append(ov["median_pct"])
    groups = {
        k: {
            "servers": len(v),
            "median_of_servers_pct": sorted(v)[len(v) // 2],
            "min_pct": min(v),
            "max_pct": max(v),
        }
        for k, v in sorted(by.items())
    }
    diffs = {}
    for spec in ("v1", "v2"):
        one = [s for s in servers if s["spec"] == spec and s["sample"] == 1 and s["top_level_shares"]]
        eight = [s for s in servers if s["spec"] == spec and s["sample"] == 8 and s["top_level_shares"]]
        if not one or not eight:
            continue
        ref = one[0]["top_level_shares"]
        per_server = []
        for s in eight:
            names = set(ref) | set(s["top_level_shares"])
            d = {n: (s["top_level_shares"].get(n) or 0) - (ref.get(n) or 0) for n in names}
            worst = max(d, key=lambda n: abs(d[n]))
            per_server.append(
                {
                    "report": s["report"],
                    "max_abs_pp": abs(d[worst]),
                    "phase": worst,
                    "timed_cycles": s.get("timed_cycles"),
                }
            )
        diffs[spec] = {
            "sample1_report": one[0]["report"],
            "sample1_shares": ref,
            "sample8": per_server,
            "max_abs_pp": max(p["max_abs_pp"] for p in per_server),
        }
    return {"servers": servers, "groups": groups, "share_diff_8_vs_1": diffs}


def with_baseline_from_runs(doc: dict) -> None:
    """A sweep whose own baseline did not run (the device call's time ran out) is compared
    with the v2 run's baseline when both served the same command: said in sweep_info."""
    info = doc.get("sweep_info") or {}
    if info.get("baseline_tokens_per_s") or not doc.get("sweep"):
        return
    for run in doc.get("runs", []):
        if run["worker"] == "v2" and run.get("baseline_tokens_per_s"):
            base = run["baseline_tokens_per_s"]
            info["baseline_tokens_per_s"] = base
            info["baseline_from"] = (
                "the v2 run's baseline (the same server command without "
                "--speculative-*), measured in " + run["report"]
            )
            for row in doc["sweep"]:
                if row.get("tokens_per_s"):
                    row["ratio_to_baseline"] = row["tokens_per_s"] / base
            return


def write_tp2(run: Path, out: Path, doc: dict) -> None:
    """sglang_gpu_tp2.{json,md}: the two-GPU sweep, and per point the ranks and rank skew."""
    rows, info = sweep_entry(run)
    sweep = read_json(run / "sweep.json")
    for row, raw in zip(rows, sweep.get("rows", [])):
        point = run / raw["report"] / "summary.json"
        summary = read_json(point) if point.is_file() else {}
        row["ranks"] = [r.get("rank") for r in summary.get("ranks", [])]
        row["rank_skew"] = summary.get("rank_skew")
    base = info.get("baseline_tokens_per_s")
    best = max((r for r in rows if r.get("tokens_per_s")), key=lambda r: r["tokens_per_s"], default=None)
    tp2 = {
        "sglang_version": doc.get("sglang_version"),
        "gpu": doc.get("gpu"),
        "collected": doc.get("collected"),
        "sweep": rows,
        "sweep_info": info,
        "best": best
        and {
            "point": best["point"],
            "tokens_per_s": best["tokens_per_s"],
            "ratio_to_baseline": best["tokens_per_s"] / base if base else None,
        },
    }
    (out / "sglang_gpu_tp2.json").write_text(json.dumps(tp2, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# SGLang with --tp 2: the NCCL sweep",
        "",
        f"Baseline (no speculation): {fmt(base)} tok/s; best: {best and best['point']}.",
        "",
        "| point | tok/s | ratio | ranks | phases flagged for rank skew (> 10 % of mean) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        skew = r.get("rank_skew") or {}
        flagged = skew.get("flagged") or []
        lines.append(
            f"| {r['point']} | {fmt(r['tokens_per_s'])} | {fmt(r['ratio_to_baseline'], '{:.3f}')} "
            f"| {r['ranks']} | {', '.join(flagged) or '-'} |"
        )
    (out / "sglang_gpu_tp2.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def gpu_name(work: Path) -> str | None:
    log = work.parent / "run.log"
    for path in (work / "gpu.txt", log):
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if "H200" in line or "NVIDIA" in line:
                    return line.split("] ")[-1].strip()
    return None


def sglang_version(work: Path) -> str | None:
    path = work / "versions.txt"
    if path.is_file():
        m = VERSION_LINE.search(path.read_text())
        if m:
            return m.group(1)
    return None


def fmt(v, spec="{:.1f}"):
    if v is None:
        return "-"
    if isinstance(v, (int, float)):
        return spec.format(v)
    return str(v)


def stall_text(st: dict | None) -> str:
    if not st or st.get("count") is None:
        return "-"
    return (
        f"{st['count']}, {fmt((st.get('total_ms') or 0) / 1000, '{:.2f}')} s "
        f"({fmt(st.get('share_of_decode_time'), '{:.1f}')} % of decode time)"
    )


def cold_start_lines(r: dict) -> list[str]:
    """The stall accounting of a server started on a cold kernel cache, in words."""
    full, win = r.get("stalls_all_cycles") or {}, r.get("stalls_window") or {}
    if full.get("count") is None:
        return []
    where = full.get("where") or {}
    if not full.get("window"):
        place = "no measured window was recorded (a run without warm-up)"
    elif full["count"] == 0:
        place = "none anywhere"
    elif where.get("warmup") == full["count"]:
        place = "all in the warm-up"
    else:
        place = (
            f"{where.get('warmup', 0)} in the warm-up, {where.get('window', 0)} in the "
            f"measured window, {where.get('after_window', 0)} after it"
        )
    line = (
        f"{r['label']} (collected {r.get('collected', '-')}), stalls over all {fmt(full.get('decode_cycles'), '{}')} recorded decode "
        f"cycles (warm-up included; the report's rule, {full.get('rule') or '-'}): "
        f"{stall_text(full)}, {place}"
    )
    if full.get("batch_sizes"):
        line += (
            f"; at batch sizes {', '.join(str(b) for b in full['batch_sizes'])} "
            f"({fmt(full.get('first_at_batch_size'), '{}')} the first cycle at their batch "
            f"size), mostly in {', '.join(f'{k} x{v}' for k, v in (full.get('main_phase_counts') or {}).items())}"
        )
    if win.get("count") is not None:
        line += (
            f". In the measured window ({fmt(r.get('steady_cycles'), '{}')} steady decode "
            f"cycles, {fmt(r.get('warmup_cycles'), '{}')} cycles before it): "
            + (stall_text(win) if win["count"] else "0 stalls")
        )
    return ["", line + "."]


def render_e3(doc: dict) -> list[str]:
    runs = [r for r in doc.get("runs", []) if is_eagle3(r)]
    if not runs:
        return []
    mc, built = doc.get("models8b") or {}, doc.get("models8b_build") or {}
    shape = mc.get("shape") or {}
    out = [
        "",
        "## EAGLE-3 on an 8B-shaped target: the verify-bound regime",
        "",
        f"Models: `bench/gpu/make_models_eagle3.py`, built on the GPU: Llama target "
        f"(hidden {shape.get('hidden')}, {shape.get('layers')} layers, {shape.get('heads')}/"
        f"{shape.get('kv_heads')} heads, intermediate {shape.get('intermediate')}, vocab "
        f"{shape.get('vocab')}; {fmt((mc.get('target_params') or 0) / 1e9, '{:.2f}')} B "
        f"parameters) and a one-layer `LlamaForCausalLMEagle3` head reading the target's layers "
        f"{mc.get('aux_layer_ids')}; draft agreement set to {mc.get('agree_asked')}, measured "
        f"{fmt(mc.get('draft_agreement'), '{:.3f}')} in plain torch, predicted accept length "
        f"{fmt(mc.get('expected_accept_length'), '{:.2f}')} of {(mc.get('steps') or 3) + 1} "
        f"(target follows its map on {fmt(mc.get('target_follows_its_map'), '{:.3f}')} of "
        f"positions). Built in {fmt(built.get('build_s'), '{}')} s, written in "
        f"{fmt(built.get('save_s'), '{}')} s ({built.get('gib')} GiB).",
        "",
        "The report describes the measured benchmark pass's decode cycles (a warm-up pass of "
        "the benchmark on the same server before it, where the run had one: its cycles are the "
        "warm-up column) and keeps stalls (a cycle > 4x the median and > median + 10 ms) out of "
        "the shares; 'stalls, all cycles' applies the same rule to every recorded cycle.",
        "",
        "| run | algorithm | tok/s (spec, patched) | tok/s (no spec, unpatched) | ratio "
        "| accept length | steady decode cycle ms, mean / median | target_verify share "
        "| decode cycles in window (steady) | warm-up cycles | stalls in window "
        "| stalls, all cycles | records | SGLang decode forwards | lost records "
        "| server ready s (spec / baseline) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        st = r.get("server_started_s") or {}
        old = r.get("steady_state") or {}
        cyc = r.get("decode_cycle_steady_ms") or {}
        if not cyc and old:  # an entry collected before the report had the stall rule
            cyc = {"mean": None, "p50": old.get("median_cycle_ms")}
        win = r.get("stalls_window")
        if win is None and old:
            win = {
                "count": old.get("stalls"),
                "total_ms": old.get("stall_ms"),
                "share_of_decode_time": old.get("stall_share_of_decode_time"),
            }
        verify = r.get("target_verify_share")
        if old and r.get("stalls_window") is None:
            verify = (old.get("shares") or {}).get("target_verify", verify)
        out.append(
            f"| {r['label']} | {r.get('algorithm')} | {fmt(r['tokens_per_s'])} "
            f"| {fmt(r['baseline_tokens_per_s'])}{' *' if r.get('baseline_from') else ''} "
            f"| {fmt(r.get('ratio_to_baseline'), '{:.3f}')} | {fmt(r['accept_length'], '{:.2f}')} "
            f"| {fmt(cyc.get('mean'), '{:.2f}')} / {fmt(cyc.get('p50'), '{:.2f}')} "
            f"| {fmt(verify, '{:.1f}')} % "
            f"| {fmt(r.get('timed_cycles'), '{}')} ({fmt(r.get('steady_cycles'), '{}')}) "
            f"| {fmt(r.get('warmup_cycles'), '{}')} | {stall_text(win)} "
            f"| {stall_text(r.get('stalls_all_cycles'))} "
            f"| {fmt(r['cycles'], '{}')} | {fmt(r.get('sglang_decode_forwards'), '{}')} "
            f"| {fmt(r['lost_records'], '{}')} | {fmt(st.get('speculative'), '{:.0f}')} / "
            f"{fmt(st.get('baseline'), '{:.0f}')} |"
        )
    for r in runs:
        out += cold_start_lines(r)
    for r in runs:
        if r.get("baseline_from"):
            out += ["", f"\\* {r['label']}: baseline from {r['baseline_from']}."]
    for r in runs:
        old = r.get("steady_state") or {}
        new = r.get("stalls_window") is not None
        out += [
            "",
            f"### Decode cycle, {r['label']} ({r.get('speculative_worker_log') or 'worker from the series'})",
            "",
        ]
        if new:
            samp = r.get("sampling") or {}
            out += [
                "Shares of the steady decode cycle (the report's: measured window, stalls "
                f"out; {fmt(r.get('steady_cycles'), '{}')} cycles"
                + (f", timing sampled 1 in {samp.get('every')}" if samp else ", every cycle timed")
                + "); per-cycle time of each phase (its calls summed within a cycle).",
                "",
                "| phase | calls | share of steady decode cycle | per cycle ms, median / mean |",
                "|---|---|---|---|",
            ]
            for p in r.get("phases", []):
                indent = "&nbsp;&nbsp;" * (p.get("depth") or 0)
                out.append(
                    f"| {indent}{p['name']} | {fmt(p.get('count'), '{}')} "
                    f"| {fmt(p.get('share_of_cycle'), '{:.1f}')} % "
                    f"| {fmt(p.get('per_cycle_median_ms'), '{:.3f}')} / "
                    f"{fmt(p.get('per_cycle_mean_ms'), '{:.3f}')} |"
                )
        else:
            out += [
                "Shares of the decode cycle from means over all cycles (the report's), and over "
                f"the steady-state cycles only (stall rule: {old.get('rule', '-')}; stalls at "
                f"batch sizes {old.get('stall_batch_sizes', '-')}); medians of the "
                "steady-state cycles.",
                "",
                "| phase | calls | share, all cycles | share, steady state | median ms, steady state |",
                "|---|---|---|---|---|",
            ]
            for p in r.get("phases", []):
                indent = "&nbsp;&nbsp;" * (p.get("depth") or 0)
                top = (p.get("depth") or 0) == 0
                out.append(
                    f"| {indent}{p['name']} | {fmt(p.get('count'), '{}')} "
                    f"| {fmt(p.get('share_of_cycle'), '{:.1f}')} % "
                    f"| {fmt((old.get('shares') or {}).get(p['name']) if top else None, '{:.1f} %')} "
                    f"| {fmt((old.get('median_ms') or {}).get(p['name']) if top else None, '{:.3f}')} |"
                )
        if r.get("overhead"):
            out += ["", overhead_sentence(r["overhead"])]
        if r.get("chart"):
            out += ["", f"![phases, {r['label']}]({r['chart']})"]
    return out


def overhead_sentence(ov: dict) -> str:
    """A run's paired in-server timer overhead (summary.json `overhead`) in one sentence."""
    iqr = ov.get("iqr_pct") or [None, None]
    periods = ""
    if ov.get("timed_period_ms") is not None:
        periods = (
            f"; {fmt(ov.get('timed_period_ms'), '{:.3f}')} ms timed vs "
            f"{fmt(ov.get('off_period_ms'), '{:.3f}')} ms off"
        )
    return (
        f"Timer overhead, paired inside this server (PATCHKIT_TIMER_AB="
        f"{ov.get('ab_cycles')}): median {fmt(ov.get('median_pct'), '{:+.2f}')} % of the "
        f"cycle period (IQR {fmt(iqr[0], '{:+.2f}')} .. {fmt(iqr[1], '{:+.2f}')} %, "
        f"{ov.get('pairs')} pairs{periods})."
    )


def verdict_lines(info: dict) -> list[str]:
    verdict = info.get("verdict") or {}
    if not verdict:
        return []
    cost = verdict.get("cost") or {}
    pv = ", ".join(f"{k} {fmt(v, '{:.3g}')}" for k, v in (verdict.get("p_values") or {}).items())
    if verdict.get("significant"):
        said = f"best **{verdict.get('best')}**, significantly faster than every other point"
    else:
        said = "no significant best; indistinguishable from the top: " + ", ".join(
            verdict.get("indistinguishable") or []
        )
    return [
        "",
        f"Verdict ({verdict.get('method')}, alpha {verdict.get('alpha')}): {said}; top "
        f"{verdict.get('top')}, one-sided p against it: {pv or '-'}. Cost: "
        f"{fmt(cost.get('server_starts'), '{}')} server starts ({fmt(cost.get('runs'), '{}')} "
        f"runs x {fmt(cost.get('targets'), '{}')} target, {fmt(cost.get('repeat'), '{}')} "
        f"repetitions, warm-up {'on' if cost.get('warmup') else 'off'}), "
        f"{fmt(cost.get('minutes'), '{:.1f}')} min.",
    ]


def ci_text(ci, spec: str = "{:.1f}") -> str:
    return f"{fmt(ci[0], spec)} .. {fmt(ci[1], spec)}" if ci else "-"


def render_control(doc: dict) -> list[str]:
    ctl = doc.get("control")
    if not ctl:
        return []
    rows = ctl.get("rows") or []
    out = [
        "",
        "## The verdict's control: identical twins",
        "",
        f"`profile.remote --matrix '{'; '.join(f'{k}={chr(44).join(v)}' for k, v in (ctl.get('matrix') or {}).items())}' "
        f"--repeat {ctl.get('repeat')}` on the v2 worker (tiny models): the two points serve the "
        "same command, only an environment variable SGLang never reads differs; every "
        "repetition starts each server afresh, in rotated order "
        f"({', '.join(o['label'] for o in ctl.get('order') or [])}). "
        + (
            "**The verdict called the twins different: a false positive.**"
            if ctl.get("called_different")
            else "The verdict did **not** call the twins different."
        ),
        "",
        f"(Collected {ctl.get('collected', '-')}.)",
        "",
        "| point | tok/s median | 95 % CI | repetitions (tok/s) | error |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['point']} | {fmt(r.get('tokens_per_s_median'))} | {ci_text(r.get('tokens_per_s_ci'))} "
            f"| {', '.join(fmt(v) for v in r.get('repeats') or [])} | {(r.get('error') or '-')[:80]} |"
        )
    out += verdict_lines(ctl)
    if ctl.get("interrupted"):
        out += ["", "The control sweep was interrupted (the device call's time)."]
    return out


def render_overhead(doc: dict) -> list[str]:
    ov = doc.get("timer_overhead")
    if not ov:
        return []
    out = [
        "",
        "## The timer's overhead by worker and sampling (paired inside each server)",
        "",
        "Every server alternates blocks of 20 cycles timed and off (PATCHKIT_TIMER_AB=20, "
        "events mode; with sampling the timed blocks are sampled); the figure is the median "
        "over the pairs of blocks of the timed block's cycle period against the next off "
        "block's, IQR over the pairs. Same workload in every server (tiny models, 32 "
        "concurrent requests). v1: EAGLEWorker, no overlap; v2: EAGLEWorkerV2, overlap on. "
        f"(Collected {ov.get('collected', '-')}.)",
        "",
        "| worker | sample | server | tok/s | paired overhead, median | IQR | pairs "
        "| timed / off cycle period ms | timed cycles |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sorted(
        ov.get("servers", []),
        key=lambda s: (s["spec"], s["sample"], s["source"], s.get("point") or "", s.get("rep") or 0),
    ):
        o = s.get("overhead") or {}
        iqr = o.get("iqr_pct") or [None, None]
        name = f"{s['source']} {s.get('point') or ''}" + (
            f" rep {s['rep']}" if (s.get("rep") or 1) > 1 else ""
        )
        out.append(
            f"| {s['spec']} | {s['sample']} | {name.strip()} | {fmt(s.get('tokens_per_s'))} "
            f"| {fmt(o.get('median_pct'), '{:+.2f}')} % | {fmt(iqr[0], '{:+.2f}')} .. "
            f"{fmt(iqr[1], '{:+.2f}')} % | {fmt(o.get('pairs'), '{}')} "
            f"| {fmt(o.get('timed_period_ms'), '{:.3f}')} / {fmt(o.get('off_period_ms'), '{:.3f}')} "
            f"| {fmt(s.get('timed_cycles'), '{}')} |"
        )
    if ov.get("groups"):
        out += [
            "",
            "Side by side (median over the servers of each one's paired median; range):",
            "",
            "| worker, sampling | servers | overhead | range |",
            "|---|---|---|---|",
        ]
        for k, g in ov["groups"].items():
            out.append(
                f"| {k} | {g['servers']} | {fmt(g['median_of_servers_pct'], '{:+.2f}')} % "
                f"| {fmt(g['min_pct'], '{:+.2f}')} .. {fmt(g['max_pct'], '{:+.2f}')} % |"
            )
    for spec, d in (ov.get("share_diff_8_vs_1") or {}).items():
        per = ", ".join(
            f"{fmt(p['max_abs_pp'], '{:.1f}')} pp ({p['phase']}, "
            f"{fmt(p.get('timed_cycles'), '{}')} timed cycles)"
            for p in d["sample8"]
        )
        out += [
            "",
            f"{spec}: top-level decode shares at sample 8 against sample 1 "
            f"({', '.join(f'{k} {fmt(v)} %' for k, v in d['sample1_shares'].items())}): "
            f"largest difference {fmt(d['max_abs_pp'], '{:.1f}')} percentage points "
            f"(per sample-8 server: {per}).",
        ]
    return out


def render_md(doc: dict) -> str:
    out = [
        "# Real SGLang on the H200: patchkit's GPU harness",
        "",
        f"SGLang {doc.get('sglang_version')} on {doc.get('gpu')}; collected "
        f"{doc['collected']} by `bench/gpu/collect.py` from the run folders of "
        "`bash bench/gpu/run_h200.sh` (every figure below is read from those files)"
        + (
            f"; runs this call did not make are kept from the collection of {doc['merged_from']}"
            if doc.get("merged_from")
            else ""
        )
        + ".",
        "",
    ]
    mc = doc.get("models") or {}
    if mc:
        out += [
            f"Models: `bench/gpu/make_models.py` (tiny Llama target, 2-layer standalone draft "
            f"agreeing on {fmt(mc.get('draft_agreement'), '{:.3f}')} of tokens; expected accept "
            f"length {fmt(mc.get('expected_accept_length'), '{:.2f}')} of "
            f"{(mc.get('steps') or 3) + 1}).",
            "",
        ]
    out += [
        "## Speculative decoding vs the same server without it",
        "",
        "| worker | tok/s (spec, patched) | tok/s (no spec, unpatched) | ratio | accept length "
        "| decode cycles | SGLang decode forwards | lost records | top-level phases cover |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc.get("runs", []):
        if is_eagle3(r):
            continue
        out.append(
            f"| {r['worker']} | {fmt(r['tokens_per_s'])} | {fmt(r['baseline_tokens_per_s'])} "
            f"| {fmt(r.get('ratio_to_baseline'), '{:.3f}')} | {fmt(r['accept_length'], '{:.2f}')} "
            f"| {fmt(r['cycles'], '{}')} | {fmt(r.get('sglang_decode_forwards'), '{}')} "
            f"| {fmt(r['lost_records'], '{}')} | {fmt(r['phases_cover_pct'], '{:.1f}')} % |"
        )
    for r in doc.get("runs", []):
        if is_eagle3(r):
            continue
        out += [
            "",
            f"### Decode cycle, {r['worker']} ({r.get('speculative_worker_log') or 'worker from the series'})",
            "",
            "| phase | calls | share of decode cycle |",
            "|---|---|---|",
        ]
        for p in r.get("phases", []):
            indent = "&nbsp;&nbsp;" * (p.get("depth") or 0)
            out.append(
                f"| {indent}{p['name']} | {fmt(p.get('count'), '{}')} "
                f"| {fmt(p.get('share_of_cycle'), '{:.1f}')} % |"
            )
        if r.get("outside_cycles"):
            out.append("")
            out.append(
                "Outside any cycle (CUDA-graph warm-up and capture passes): "
                + ", ".join(f"{k} x{v}" for k, v in sorted(r["outside_cycles"].items()))
            )
        if r.get("overhead"):
            out += ["", overhead_sentence(r["overhead"])]
        if r.get("chart"):
            out += ["", f"![phases, {r['worker']}]({r['chart']})"]
    out += render_e3(doc)
    if doc.get("sweep"):
        info = doc.get("sweep_info") or {}
        out += [
            "",
            "## The sweep (`profile.remote --matrix`)",
            "",
            f"Matrix `{info.get('matrix')}`, baseline (no speculation) "
            f"{fmt(info.get('baseline_tokens_per_s'))} tok/s; best point: **{info.get('best')}**.",
            "",
            "| point | tok/s | ratio to baseline | accept length | cycles | error |",
            "|---|---|---|---|---|---|",
        ]
        for s in doc["sweep"]:
            best = " **(best)**" if s["point"] == info.get("best") else ""
            out.append(
                f"| {s['point']}{best} | {fmt(s['tokens_per_s'])} "
                f"| {fmt(s['ratio_to_baseline'], '{:.3f}')} | {fmt(s['accept_length'], '{:.2f}')} "
                f"| {fmt(s['cycles'], '{}')} | {(s.get('error') or '-')[:80]} |"
            )
        out += verdict_lines(info)
        if any(s.get("repeats") for s in doc["sweep"]):
            out += ["", "| point | repetitions (tok/s) | 95 % CI | ratio 95 % CI |", "|---|---|---|---|"]
            out += [
                f"| {s['point']} | {', '.join(fmt(v) for v in s.get('repeats') or [])} "
                f"| {ci_text(s.get('tokens_per_s_ci'))} "
                f"| {ci_text(s.get('ratio_ci'), '{:.3f}')} |"
                for s in doc["sweep"]
            ]
        if doc.get("sweep_chart"):
            out += ["", f"![sweep]({doc['sweep_chart']})"]
    if info_from := (doc.get("sweep_info") or {}).get("baseline_from"):
        out += ["", f"Baseline of the sweep: {info_from}."]
    if doc.get("overhead_runs"):
        out += [
            "",
            "## Timer overhead inside one server (PATCHKIT_TIMER_AB, v2 default path)",
            "",
            "| point | tok/s | paired median | IQR | pairs | timed / off cycle period |",
            "|---|---|---|---|---|---|",
        ]
        for r in doc["overhead_runs"]:
            ov = r.get("overhead") or {}
            iqr = ov.get("iqr_pct") or [None, None]
            out.append(
                f"| {r['point']} | {fmt(r.get('tokens_per_s'))} | {fmt(ov.get('median_pct'), '{:+.2f}')} % "
                f"| {fmt(iqr[0], '{:+.2f}')} .. {fmt(iqr[1], '{:+.2f}')} % | {fmt(ov.get('pairs'), '{}')} "
                f"| {fmt(ov.get('timed_period_ms'), '{:.3f}')} / {fmt(ov.get('off_period_ms'), '{:.3f}')} ms |"
            )
    out += render_control(doc)
    out += render_overhead(doc)
    if doc.get("cuda_tests"):
        out += ["", "## The runtime's CUDA-only tests on this GPU", "", "```", doc["cuda_tests"], "```"]
    if doc.get("timer_bench"):
        out += [
            "",
            "## Timer host cost on this GPU (`bench/gpu_timer_bench.py`)",
            "",
            "```",
            doc["timer_bench"].rstrip(),
            "```",
        ]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's patchkit
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--merge", type=Path, help="an earlier sglang_gpu.json to complete")
    args = ap.parse_args(argv)
    work, out = args.work, args.out
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    doc = {
        "sglang_version": sglang_version(work),
        "gpu": gpu_name(work),
        "collected": stamp,
        "runs": [],
        "sweep": [],
    }
    if (work / "models_check.txt").is_file():
        text = (work / "models_check.txt").read_text().strip()
        if text.startswith("CHECK "):
            doc["models"] = json.loads(text[6:])
    if (work / "models8b_check.txt").is_file():
        for line in (work / "models8b_check.txt").read_text().splitlines():
            if line.startswith("CHECK "):
                doc["models8b"] = json.loads(line[6:])
            elif line.startswith("WROTE "):
                doc.setdefault("models8b_build", json.loads(line[6:]))
    for worker in WORKERS:
        run = latest_run(work / worker)
        if run is None:
            print(f"collect: no {worker} run under {work / worker}", file=sys.stderr)
            continue
        entry = run_entry(worker, run)
        if (run / "phases.png").is_file():
            shutil.copyfile(run / "phases.png", out / f"sglang_gpu_{worker}.png")
            entry["chart"] = f"sglang_gpu_{worker}.png"
        doc["runs"].append(entry)
    sweep_run = latest_run(work / "sweep")
    if sweep_run is not None and (sweep_run / "sweep.json").is_file():
        doc["sweep"], doc["sweep_info"] = sweep_entry(sweep_run)
        if (sweep_run / "sweep.png").is_file():
            shutil.copyfile(sweep_run / "sweep.png", out / "sglang_gpu_sweep.png")
            doc["sweep_chart"] = "sglang_gpu_sweep.png"
    over_run = latest_run(work / "overhead")
    if over_run is not None and (over_run / "sweep.json").is_file():
        doc["overhead_runs"] = overhead_rows(over_run)
    control_run = latest_run(work / "control")
    try:
        if control_run is not None and (control_run / "sweep.json").is_file():
            doc["control"] = control_entry(control_run)
        doc["timer_overhead"] = timer_overhead(doc, work)
    except Exception as exc:  # one part's failure must not lose the rest of the collection
        print(f"collect: control / timer overhead: {exc!r}", file=sys.stderr)
    for part in doc["runs"] + [doc.get("control"), doc.get("timer_overhead"), doc.get("sweep_info")]:
        if part:
            part["collected"] = stamp  # kept with the part when a later call merges it
    if (work / "cuda_tests.txt").is_file():
        doc["cuda_tests"] = (work / "cuda_tests.txt").read_text(errors="replace").strip()
    if (work / "timer_bench.txt").is_file():
        doc["timer_bench"] = (work / "timer_bench.txt").read_text(errors="replace")[-20000:]
    if args.merge and args.merge.is_file():
        old = read_json(args.merge)
        have = {r["worker"] for r in doc["runs"]}
        doc["runs"] += [r for r in old.get("runs", []) if r["worker"] not in have]
        doc["runs"].sort(key=lambda r: r["worker"])
        for key in (
            "sweep",
            "sweep_info",
            "sweep_chart",
            "timer_bench",
            "models",
            "gpu",
            "sglang_version",
            "overhead_runs",
            "cuda_tests",
            "models8b",
            "models8b_build",
            "control",
            "timer_overhead",
        ):
            if not doc.get(key) and old.get(key):
                doc[key] = old[key]
        doc["merged_from"] = old.get("collected")
    for r in doc["runs"]:  # runs merged from before these keys existed
        if "algorithm" not in r:
            m = ALGORITHM.search(r.get("server_command") or "")
            r["label"], r["algorithm"] = WORKERS.get(r["worker"], r["worker"]), m and m.group(1)
    with_baseline_from_runs(doc)
    e3_baseline_from_v2(doc)
    tp2_run = latest_run(work / "tp2")
    if tp2_run is not None and (tp2_run / "sweep.json").is_file():
        write_tp2(tp2_run, out, doc)
    if doc.get("sweep") and not doc.get("sweep_chart") and sweep_run is not None:
        # an interrupted sweep writes no chart: draw it from its recorded rows
        from patchkit.report.chart import write_sweep_chart

        rows = read_json(sweep_run / "sweep.json")["rows"]
        info = doc["sweep_info"]
        write_sweep_chart(
            [r for r in rows if r.get("ok")],
            out / "sglang_gpu_sweep.png",
            best_label=info.get("best"),
            baseline_tokens_per_s=info.get("baseline_tokens_per_s"),
            title=f"profile.remote --matrix on the H200 (v2 worker), SGLang {doc.get('sglang_version')}",
        )
        doc["sweep_chart"] = "sglang_gpu_sweep.png"
    (out / "sglang_gpu.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (out / "sglang_gpu.md").write_text(render_md(doc), encoding="utf-8")
    print(render_md(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
