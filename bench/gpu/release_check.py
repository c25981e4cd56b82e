"""What one profile.remote run on a real SGLang release proves, checked from its files.

    python3 bench/gpu/release_check.py RUN_FOLDER [--meta META_JSON] [--json OUT]

For the lead rank's timing files of RUN_FOLDER (an ``invoke profile.remote --out`` folder, or a
run inside it):
- records: decode cycles recorded against SGLang's own "Decode batch" lines in the saved server
  log (the harness serves with --decode-log-interval 1: one line per decode forward);
- phases: for every timed decode cycle, which phases it holds; every phase seen in any timed
  decode cycle must be in every one (a timer line in a branch that some cycles skip shows here);
- nesting: every phase of a cycle lies inside the cycle's host interval, ends after it begins,
  and a phase of depth d > 0 lies inside a phase of depth d - 1 of the same cycle;
- device times: the timed cycles that carry them (events mode);
- acceptance (with --meta, the file ``warmup.py --meta`` wrote): the histogram of accepted
  drafts per request step from the records equals SGLang's summed
  ``spec_correct_drafts_histogram`` for the same requests, exactly, after bench/gpu/accept_check.py's
  replay names the request of every per-request entry (with overlap scheduling, read from the
  server_args line of the log, a finished request runs one step more, which SGLang drops); the
  replay must reproduce the recorded batch size of every decode cycle.
Prints one line per check and exits 0 when every check that could run passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accept_check import against_sglang, describe, lead_cycles, lead_procs, run_folder  # noqa: E402

from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind  # noqa: E402

DECODE_LINE = re.compile(r"Decode batch[ ,\[]")


def decode_lines(run: Path) -> int | None:
    logs = sorted(run_folder(run).rglob("server.log"))
    if not logs:
        return None
    return sum(
        1
        for line in logs[0].read_text(encoding="utf-8", errors="replace").splitlines()
        if DECODE_LINE.search(line)
    )


def check(run: Path, meta: Path | None) -> dict:
    procs = lead_procs(run)
    out: dict = {"run": str(run_folder(run)), "processes": len(procs), "checks": {}}
    checks = out["checks"]
    decode = [c for p in procs for c in p.cycles if cycle_kind(c) in (KIND_PRIMARY, NO_KIND)]
    timed = [c for p in procs for c in p.timed_cycles if cycle_kind(c) in (KIND_PRIMARY, NO_KIND)]
    lines = decode_lines(run)
    out["decode_cycles"] = len(decode)
    out["timed_decode_cycles"] = len(timed)
    out["sglang_decode_lines"] = lines
    checks["records"] = None if lines is None else (lines == len(decode) and lines > 0)
    # phases per timed decode cycle
    by_cycle: dict = {}
    for p in procs:
        for ph in p.phases:
            if ph.get("cycle") is not None and not ph.get("captured"):
                by_cycle.setdefault((str(p.path), ph["cycle"]), []).append(ph)
    present: Counter = Counter()
    bad_nesting = 0
    examples: list[str] = []
    for p in procs:
        for c in p.timed_cycles:
            if cycle_kind(c) not in (KIND_PRIMARY, NO_KIND):
                continue
            phases = by_cycle.get((str(p.path), c["cycle"]), [])
            for name in {ph["name"] for ph in phases}:
                present[name] += 1
            for ph in phases:
                ok = c["t0"] <= ph["t0"] <= ph["t1"] <= c["t1"]
                if ok and ph.get("depth", 0) > 0:
                    ok = any(
                        q.get("depth", 0) == ph["depth"] - 1 and q["t0"] <= ph["t0"] and ph["t1"] <= q["t1"]
                        for q in phases
                    )
                if not ok:
                    bad_nesting += 1
                    if len(examples) < 3:
                        examples.append(f"cycle {c['cycle']} {ph['name']} depth {ph.get('depth')}")
    out["phase_cycles"] = dict(sorted(present.items()))
    missing = {k: len(timed) - n for k, n in present.items() if n != len(timed)}
    out["phases_missing_in_cycles"] = missing
    checks["phases_in_every_cycle"] = bool(present) and not missing
    out["bad_nesting"] = bad_nesting
    out["bad_nesting_examples"] = examples
    checks["nesting"] = bool(present) and bad_nesting == 0
    with_dev = sum(1 for c in timed if c.get("dev_ns") is not None)
    out["timed_with_device_time"] = with_dev
    if procs and procs[0].mode == "events":
        checks["device_times"] = with_dev >= 0.95 * len(timed) and with_dev > 0
    if meta is not None and meta.is_file():
        meta_doc = json.loads(meta.read_text(encoding="utf-8"))
        out["acceptance"] = against_sglang(run, lead_cycles(procs), meta_doc)
        checks["acceptance_equals_sglang"] = out["acceptance"]["equal"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--meta", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    try:
        out = check(args.run, args.meta)
    except Exception as exc:  # no timing files, unreadable records: said, not a traceback
        print(f"release_check: {args.run}: {exc}")
        return 1
    for name, ok in out["checks"].items():
        print(f"release_check: {name}: {'ok' if ok else ('not checked' if ok is None else 'FAILED')}")
    print(
        f"release_check: {out['decode_cycles']} decode cycles recorded ({out['timed_decode_cycles']} timed, "
        f"{out['timed_with_device_time']} with device times), SGLang decode lines {out['sglang_decode_lines']}; "
        f"phases {out['phase_cycles']}; missing {out['phases_missing_in_cycles']}; bad nesting {out['bad_nesting']} "
        f"{out['bad_nesting_examples']}"
    )
    if "acceptance" in out:
        print(f"release_check: acceptance: {describe(out['acceptance'])}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0 if all(v is not False for v in out["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
