"""patchkit's acceptance against SGLang's own count, for one profile.remote run.

    python3 bench/gpu/accept_check.py RUN_FOLDER META_JSON [--json OUT]

RUN_FOLDER is one ``invoke profile.remote --out`` run (its timing files under node0/timing or
timing/); META_JSON is what ``warmup.py --meta`` wrote for the benchmark's requests: the sum over
those requests of SGLang's ``meta_info["spec_correct_drafts_histogram"]`` (0.5.13+: a request's
verify steps by number of correct drafts, bonus token not counted).

patchkit's side is every decode cycle in the lead rank's timing files: each cycle's per-request
accepted draft tokens (``tokens`` - 1 for EAGLEWorkerV2, ``accepted_per_req`` for EAGLEWorker),
counted by value, after ``replay`` has named each entry's request (SGLang drops the step a
finished request runs under overlap scheduling). Every cycle must be timed for the two to be
comparable (the harness runs these servers with ``--sample 1`` and the benchmark as their only
load: no warm-up pass, or a warm-up that ``--meta`` counted too). Exit 0 when the replayed
histogram equals SGLang's and the replay reproduced every batch size, 1 when not (both printed,
with the difference per bin), 2 when either side is missing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from patchkit.report.acceptance import request_accepts  # noqa: E402
from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind  # noqa: E402
from patchkit.report.load import FILE_GLOB, load_timing_dir  # noqa: E402


def run_folder(path: Path) -> Path:
    """``path`` itself when it is one run (it holds timing/), else its newest run folder."""
    if (path / "timing").is_dir() or (path / "node0").is_dir():
        return path
    runs = sorted(p.parent for p in path.glob("*/timing"))
    return runs[-1] if runs else path


def timing_dirs(run: Path) -> list[Path]:
    """The run's timing folder: timing/ (what the report read), else each node's copy."""
    run = run_folder(run)
    if (run / "timing").is_dir():
        return [run / "timing"]
    return sorted({p.parent for p in run.rglob(FILE_GLOB)})


def lead_procs(run: Path) -> list:
    """The lead rank's (rank 0) processes of ``run``, each with its cycles and phases."""
    procs = []
    for folder in timing_dirs(run):
        procs += [p for p in load_timing_dir(folder) if p.rank == 0]
    return procs


def lead_cycles(procs: list) -> list[dict]:
    """Every cycle of ``procs``, in the order each process ran them."""
    return [c for proc in procs for c in sorted(proc.cycles, key=lambda c: c["cycle"])]


def overlap_scheduled(run: Path) -> bool | None:
    """Whether the run's server scheduled with overlap (SGLang logs its server_args at start)."""
    logs = sorted(run_folder(run).rglob("server.log"))
    if not logs:
        return None
    text = logs[0].read_text(encoding="utf-8", errors="replace")
    m = re.search(r"disable_overlap_schedule=(True|False)", text)
    return None if m is None else m.group(1) == "False"


def _count(hist: list[int], k: int) -> None:
    if k >= len(hist):
        hist += [0] * (k + 1 - len(hist))
    hist[k] += 1


def records_histogram(cycles: list[dict]) -> dict:
    """Acceptance histogram over every decode cycle of ``cycles`` (every recorded request step)."""
    hist: list[int] = []
    decode = with_acc = 0
    num_steps: set[int] = set()
    for c in cycles:
        if cycle_kind(c) not in (KIND_PRIMARY, NO_KIND):
            continue
        attrs = c.get("attrs") or {}
        decode += 1
        if isinstance(attrs.get("num_steps"), int):
            num_steps.add(attrs["num_steps"])
        got = request_accepts(attrs)
        if got is None:
            continue
        with_acc += 1
        for a in got[0]:
            _count(hist, a)
    return {
        "decode_cycles": decode,
        "cycles_with_acceptance": with_acc,
        "cycles_without": decode - with_acc,
        "histogram": hist,
        "num_steps_seen": sorted(num_steps),
    }


def replay(cycles: list[dict], requests: int, output_len: int, overlap: bool) -> dict:
    """SGLang's own count rebuilt from the records: which request each per-request entry is.

    The records hold, per decode cycle, one committed-token count per request in batch order.
    The replay keeps the running batch: a prefill cycle appends its requests (in their order);
    a decode cycle credits each request its tokens; a request whose output reaches
    ``output_len`` has finished. Without overlap scheduling a finished request leaves the batch
    at once. With it (SGLang 0.5.13+'s default) the next batch is launched before the finish is
    known, so when that batch is a decode the finished request runs once more (SGLang drops that
    step's result: ``req.finished()`` in its result processor); when it is a prefill the finish is
    known by the decode after it. Requests prefilled before the benchmark's ``requests`` (SGLang's
    /health generates one token per call in 0.5.17) finish at their prefill.
    The replay proves itself: its batch size must equal the recorded one in every decode cycle.
    Returns {histogram (counted steps by accepted drafts), extra_steps, batch_size_mismatches}."""
    running: list[dict] = []
    prefilled = [c["attrs"].get("batch_size") or 0 for c in cycles if cycle_kind(c) == "prefill"]
    early = max(0, sum(prefilled) - requests)
    seen = 0
    hist: list[int] = []
    extra = mismatches = 0
    first_mismatch = None
    for n, c in enumerate(cycles):
        attrs = c.get("attrs") or {}
        if cycle_kind(c) == "prefill":
            running = [r for r in running if r["done"] is None]
            for _ in range(attrs.get("batch_size") or 0):
                target = 1 if seen < early else output_len
                seen += 1
                if target <= 1 and not overlap:
                    continue  # finished at its prefill, known before the next batch
                running.append({"out": 1, "target": target, "done": n if target <= 1 else None})
            continue
        if cycle_kind(c) not in (KIND_PRIMARY, NO_KIND):
            continue
        got = request_accepts(attrs)
        if got is None or len(got[0]) != len(running) or attrs.get("batch_size") != len(running):
            mismatches += 1
            if first_mismatch is None:
                first_mismatch = {
                    "cycle": c["cycle"],
                    "recorded": attrs.get("batch_size"),
                    "replayed": len(running),
                }
            if got is None:
                continue
        for r, acc in zip(running, got[0]):
            if r["done"] is not None:
                extra += 1  # a finished request's step: recorded, dropped by SGLang
                continue
            _count(hist, acc)
            r["out"] += acc + 1
            if r["out"] >= r["target"]:
                r["done"] = n
        # with overlap, a request finished in this cycle runs once more in the next decode
        running = [r for r in running if r["done"] is None or (overlap and r["done"] == n)]
    return {
        "histogram": hist,
        "extra_steps": extra,
        "batch_size_mismatches": mismatches,
        "first_mismatch": first_mismatch,
        "requests_replayed": seen,
    }


def compare(ours: list[int], theirs: list[int]) -> list[int]:
    n = max(len(ours), len(theirs))
    a = ours + [0] * (n - len(ours))
    b = theirs + [0] * (n - len(theirs))
    return [x - y for x, y in zip(a, b)]


def against_sglang(run: Path, cycles: list[dict], meta: dict) -> dict:
    """The records' acceptance against SGLang's summed histogram (``meta``: warmup.py --meta's
    file), raw and replayed. ``equal``: the replay reproduced every batch size and its
    histogram equals SGLang's in every bin."""
    theirs = [int(n) for n in meta.get("spec_correct_drafts_histogram") or []]
    ours = records_histogram(cycles)["histogram"]
    requests = int(meta.get("requests") or 0)
    overlap = overlap_scheduled(run)
    out: dict = {
        "patchkit": ours,
        "sglang": theirs,
        "difference": compare(ours, theirs),
        "overlap": overlap,
        "requests": requests,
        "equal": False,
    }
    if requests and meta.get("completion_tokens"):
        # every request of warmup.py --meta asks for the same output length (ignore_eos)
        rep = replay(cycles, requests, int(meta["completion_tokens"]) // requests, overlap is not False)
        diff = compare(rep["histogram"], theirs)
        out.update(replayed=rep, replayed_difference=diff)
        out["equal"] = bool(theirs) and rep["batch_size_mismatches"] == 0 and not any(diff)
        out["pooled_accept_length"] = {"patchkit": _pooled(rep["histogram"]), "sglang": _pooled(theirs)}
    return out


def _pooled(hist: list[int]) -> float | None:
    """Tokens per request step: 1 + accepted drafts per step."""
    steps = sum(hist)
    return 1 + sum(k * n for k, n in enumerate(hist)) / steps if steps else None


def describe(a: dict) -> str:
    """One line of what against_sglang found."""
    rep = a.get("replayed") or {}
    return (
        f"every recorded request step {a['patchkit']}; replayed (overlap {a.get('overlap')}) "
        f"{rep.get('histogram')} with {rep.get('extra_steps')} steps of finished requests and "
        f"{rep.get('batch_size_mismatches')} batch-size mismatches; SGLang {a['sglang']}; "
        f"difference {a.get('replayed_difference')}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("meta", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not args.meta.is_file():
        print(f"accept_check: {args.meta}: no SGLang counts (warmup.py --meta)")
        return 2
    meta = json.loads(args.meta.read_text(encoding="utf-8"))
    try:
        cycles = lead_cycles(lead_procs(args.run))
    except Exception as exc:  # a run without timing files: said, exit 2
        print(f"accept_check: {args.run}: {exc}")
        return 2
    result = {"run": str(args.run), **against_sglang(args.run, cycles, meta)}
    print(f"accept_check: {'EQUAL' if result['equal'] else 'DIFFERENT'}: {describe(result)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not result["sglang"] or not result["patchkit"]:
        return 2
    return 0 if result["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
