"""Copy the small files of the H200 timer-cost runs into bench/results/timer_cost_h200/callN/.

    python bench/gpu/import_runs.py WORK_OR_RUNS_TGZ bench/results/timer_cost_h200/callN [--log run.log] [--runtime REV]
        [--since YYYYMMDD-HHMMSS]

WORK_OR_RUNS_TGZ is run_h200.sh's $WORK folder or the runs.tgz its `pack` stage wrote. For every
run folder NAME/STAMP/ that has a summary.json it writes callN/NAME/: summary.json, table.txt
and what the stage added (diag.json, shares_ab.json, the trace's trace_summary.json), plus
  timing_records.json      decode/prefill cycle records, timed cycles (dev records) and timed cycle
                           records (each should have its dev record), whether the
                           cycle numbers run without a gap and whether the exit stats line is there
  sglang_decode_batches.txt  SGLang's own "Decode batch" log lines of the server (node0); when
                           profile.remote kept only the log's last MiB, the lines from its first
                           whole second, and timing_records.json then says from when
                           (server_log_from) and how many decode cycle records started since
  ab_pairs.json            every A/B pair of the run (bench/gpu/ab_pairs.py)
bench/gpu/timer_cost.py then builds the page from callN/.
"""

import argparse
import contextlib
import datetime
import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_pairs  # bench/gpu/ab_pairs.py: the report's own pairing (puts the repository on sys.path)

from patchkit.profile.remote.run import SERVER_LOG_MAX  # the server log's tail profile.remote keeps

SMALL = ("summary.json", "table.txt", "diag.json", "shares_ab.json")


def timing_records(run, since_wall_s=None):
    """since_wall_s: also count the decode cycle records that started at or after this wall
    clock second (the part of the run a cut server log still covers)."""
    cycles, timed, stats, kinds, timed_records = [], 0, False, {}, 0
    since, clock = 0, None
    for path in sorted(run.glob("timing/phase-timing.*.jsonl")):
        with path.open() as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a torn last line of a SIGKILLed process
                kind = rec.get("kind")
                if kind == "header":
                    clock = rec.get("clock") or {}
                elif kind == "cycle":
                    cycles.append(rec["cycle"])
                    k = (rec.get("attrs") or {}).get("kind")
                    kinds[k] = kinds.get(k, 0) + 1
                    if rec.get("ab") != "off" and rec.get("timed", True):
                        timed_records += 1
                    if since_wall_s is not None and k == "decode" and clock:
                        wall = (rec["t0"] - clock["host_t0_ns"] + clock["wall_t0_ns"]) / 1e9
                        since += wall >= since_wall_s
                elif kind == "dev":
                    timed += 1
                elif kind == "stats":
                    stats = True
    ordered = sorted(cycles)
    out = {
        "decode_cycles": kinds.get("decode", 0),
        "prefill_cycles": kinds.get("prefill", 0),
        "timed_cycles": timed,
        "timed_cycle_records": timed_records,
        "contiguous": bool(ordered) and ordered == list(range(ordered[0], ordered[0] + len(ordered))),
        "exit_stats": stats,
    }
    if since_wall_s is not None:
        out["server_log_from"] = datetime.datetime.fromtimestamp(since_wall_s, datetime.UTC).strftime(
            "%H:%M:%S"
        )
        out["decode_cycles_in_log"] = since
    return out


def decode_batches(run):
    """SGLang's "Decode batch" lines in the server log, and None, or when profile.remote kept
    only the log's last SERVER_LOG_MAX bytes (a long run), the lines from the first whole
    second the kept part covers and that second (UTC epoch seconds; SGLang's log stamps are
    the server's local time, UTC on the harness's machine)."""
    log = run / "node0" / "server.log"
    if not log.is_file():
        return None, None
    with log.open(errors="replace") as f:
        text = f.read().splitlines()
    stamps = [line[1:20] for line in text if "Decode batch" in line and line.startswith("[")]
    if log.stat().st_size < SERVER_LOG_MAX or not stamps:
        return len(stamps), None
    first = datetime.datetime.strptime(stamps[0], "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.UTC)
    since = first.timestamp() + 1  # the first logged second may be cut in its middle
    keep = [st for st in stamps if st > stamps[0]]
    return len(keep), since


def import_run(run, dest):
    dest.mkdir(parents=True, exist_ok=True)
    for name in SMALL:  # diag.json and shares_ab.json are the stage's, next to the run folders
        for where in (run, run.parent):
            if (where / name).is_file():
                shutil.copy2(where / name, dest / name)
                break
    prof = run.parent.parent / (run.parent.name + ".prof") / "trace_summary.json"
    if prof.is_file():
        shutil.copy2(prof, dest / "trace_summary.json")
    n, since = decode_batches(run)
    (dest / "timing_records.json").write_text(json.dumps(timing_records(run, since)) + "\n")
    if n is not None:
        (dest / "sglang_decode_batches.txt").write_text("%d\n" % n)
    with contextlib.redirect_stdout(io.StringIO()):
        rc = ab_pairs.main([str(run), str(dest / "ab_pairs.json")])
    if rc:
        (dest / "ab_pairs.json").unlink(missing_ok=True)  # no A/B blocks in that run
    return dest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", type=Path, help="$WORK of run_h200.sh or its runs.tgz")
    ap.add_argument("dest", type=Path, help="bench/results/timer_cost_h200/callN")
    ap.add_argument("--log", type=Path, help="the call's run.log, copied as callN/run.log")
    ap.add_argument(
        "--runtime", help="the timer runtime the call measured (a commit), kept in callN/runtime.txt"
    )
    ap.add_argument(
        "--since",
        metavar="YYYYMMDD-HHMMSS",
        help="only run folders stamped at or after this (a warm machine's $WORK keeps earlier calls' runs); "
        "default: call_start.txt next to the runs.tgz, which run_h200.sh writes",
    )
    a = ap.parse_args(argv)
    start = a.source.parent / "call_start.txt" if a.source.is_file() else a.source / "call_start.txt"
    if a.since is None and start.is_file():
        a.since = start.read_text().strip()
    with tempfile.TemporaryDirectory() as tmp:
        root = a.source
        if a.source.is_file():
            with tarfile.open(a.source) as tar:
                tar.extractall(tmp, filter="data")
            root = Path(tmp)
        runs = sorted(p.parent for p in root.glob("*/*/summary.json"))
        if a.since:
            for run in [r for r in runs if r.name < a.since]:
                print("%s: before --since %s, left out" % (run.relative_to(root), a.since))
            runs = [r for r in runs if r.name >= a.since]
        if not runs:
            print("import_runs: no NAME/STAMP/summary.json under %s" % a.source, file=sys.stderr)
            return 1
        stamps = {}
        for run in runs:
            stamps.setdefault(run.parent.name, []).append(run)
        for run in runs:
            # a stage that ran twice in one call: NAME-STAMP for each
            name = (
                run.parent.name
                if len(stamps[run.parent.name]) == 1
                else "%s-%s" % (run.parent.name, run.name)
            )
            out = import_run(run, a.dest / name)
            print("%s -> %s" % (run.relative_to(root), out))
    if a.log:
        shutil.copy2(a.log, a.dest / "run.log")
    if a.runtime:
        (a.dest / "runtime.txt").write_text(a.runtime + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
