"""How often patch.rebase relocates a hunk without a person, and whether it ever misplaces one.

    python bench/bench_rebase.py [--pairs 0.5.9:0.5.10,...] [--part all|v1] [--no-trust-new] [--json FILE]

For each pair SERIES:RELEASE the shipped series patches/sglang-vSERIES is rebased onto
RELEASE twice, side by side: exact match only (--no-merge, the old engine) and the default:
exact match, then the checked three-way merge, then structural placement of timer lines
(patchkit/author/structural.py). Per pair it prints the hunks relocated by exact match, by merge
(merged+checked), by structure, left for a person (needs attention), the relocated hunks with
an added line outside the function it timed (text oracle, function by indentation; renamed and
moved functions of sglang_releases.rebase_aliases count as the same), and two independent checks of
every relocated hunk (tests/support/rebase_oracle.py): the text oracle (no AST: function by
indentation, the neighbouring statements by their first words, compared with the old patched
file; it flags a line whose neighbour upstream rewrote, which may still be right), and, where
patches/sglang-vRELEASE is a hand-made series pinned to the same text, whether each relocated
run of added lines sits exactly where that series has it (a misplacement). A pair whose
release lacks every file of the series is listed as not applicable, outside the totals; where
it lacks some of them, the hunks of those files are counted apart (n/a), outside the totals. ``--part v1``
rebases each series that has the EAGLEWorkerV2 patches 0008-0013 (0.5.9, 0.5.10, 0.5.12) without
them (and their pin entry; other series as they are), i.e. the
27-hunk eagle_worker.py series the figures before 0.5.9/0.5.10 timed v2 were measured on.

Wheels: releases outside patchkit.upstream.KNOWN_WHEELS are fetched into $PATCHKIT_CACHE with
trust on first use (their sha256 recorded beside the wheel and printed), unless --no-trust-new.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from patchkit.author import rebase as rb, upstream  # noqa: E402
from patchkit.author.sglang_releases import rebase_aliases  # noqa: E402
from patchkit.engine.series import load_series  # noqa: E402
from support.rebase_oracle import hand_disagreements, left_function, misplaced  # noqa: E402
from support.upstream import V2_APPENDED, v1_part  # noqa: E402

# Every shipped sglang series onto the releases either side of it.
PAIRS = "0.5.9:0.5.8,0.5.9:0.5.10,0.5.10:0.5.9,0.5.10:0.5.11,0.5.12:0.5.11,0.5.12:0.5.13,0.5.23:0.5.22"
# Long release jumps, both directions (--pairs long).
LONG = (
    "0.5.9:0.5.12,0.5.12:0.5.9,0.5.1:0.5.12,0.5.12:0.5.1,0.5.9:0.5.23,0.5.23:0.5.9,"
    "0.5.23:0.5.20,0.5.20:0.5.23,0.5.23:0.5.15,0.5.15:0.5.23,0.5.23:0.5.12,0.5.12:0.5.23,"
    "0.5.1:0.5.9,0.5.9:0.5.1"
)


def release_files(version: str, paths: list[str], prefix: str | None, trust_new: bool):
    wheel = upstream.fetch_wheel("sglang", version, trust_new=trust_new)
    out = {}
    for path in paths:
        inner = upstream.installed_path(path, prefix)
        try:
            out[path] = upstream.read_wheel_files(wheel.path, [inner])[inner]
        except upstream.UpstreamError:
            out[path] = None
    return out, wheel


def run_pair(
    series_ver: str,
    onto: str,
    trust_new: bool,
    work: Path,
    hand_root: Path,
    series_root: Path,
    part: str = "all",
) -> dict:
    series_dir = series_root / f"sglang-v{series_ver}"
    if part == "v1" and any((series_dir / n).is_file() for n in V2_APPENDED):
        series_dir = v1_part(series_dir, work / f"v1-{series_ver}-{onto}")
    pin = load_series(str(series_dir)).pin
    paths = list(pin.files)
    new_files, wheel = release_files(onto, paths, pin.package_prefix, trust_new)
    old_files, _ = release_files(pin.version, paths, pin.package_prefix, trust_new)
    row = {
        "series": series_ver,
        "onto": onto,
        "wheel": wheel.path.name,
        "sha256": wheel.sha256,
        "trust": wheel.trust,
    }
    absent = [p for p in paths if new_files[p] is None]
    if len(absent) == len(paths):
        row["not_applicable"] = f"{', '.join(Path(p).name for p in absent)} not in {onto}"
        return row
    start = time.perf_counter()
    exact = rb.rebase(series_dir, onto, write=False, merge=False, structural=False, trust_new=trust_new)
    t_exact = time.perf_counter() - start
    out = work / f"{series_ver}-{onto}"
    start = time.perf_counter()
    merged = rb.rebase(series_dir, onto, out_dir=out, trust_new=trust_new)
    t_merge = time.perf_counter() - start
    skipped = [h for h in merged.hunks if h.status != "carried" and h.path in absent]
    hunks = [h for h in merged.hunks if h.status != "carried" and h.path not in absent]
    methods = [h.method for h in hunks]
    wrong = misplaced(series_dir, old_files, out, new_files)
    outside = left_function(series_dir, old_files, out, new_files, rebase_aliases())
    hand_dir = hand_root / f"sglang-v{onto}"
    hand = None
    if hand_dir.is_dir() and all(
        f.sha256 == upstream.sha256_bytes(new_files[f.path])
        for f in load_series(str(hand_dir)).pin.files.values()
        if f.path in new_files
    ):
        hand = hand_disagreements(out, hand_dir, new_files)
    row.update(
        hunks=len(hunks),
        not_applicable_hunks=len(skipped),
        not_applicable_files=[Path(p).name for p in absent],
        exact_only=sum(
            1 for h in exact.hunks if h.status != "carried" and h.relocated and h.path not in absent
        ),
        exact=methods.count("exact"),
        merged=methods.count("merged+checked"),
        structural=methods.count("structural"),
        outside=len(outside),
        outside_detail=[f"{p} hunk {n}: {what}" for p, _, n, what in outside],
        attention=methods.count("needs attention"),
        misplaced=len(wrong),
        misplaced_detail=[f"{p} hunk {n}: {what}" for p, _, n, what in wrong],
        vs_hand=None if hand is None else len(hand),
        vs_hand_detail=[f"{p} hunk {n}: {what}" for p, n, what in hand or []],
        seconds_exact=round(t_exact, 3),
        seconds_merge=round(t_merge, 3),
        attention_detail=[f"{h.patch} hunk {h.number}: {h.reason}" for h in merged.attention],
    )
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--pairs",
        default=PAIRS,
        help="SERIES:RELEASE,... or 'long' for the long release jumps (%s) (default: %%(default)s)" % LONG,
    )
    ap.add_argument(
        "--no-trust-new", action="store_true", help="refuse wheels whose sha256 is not pinned or recorded"
    )
    ap.add_argument("--json", help="also write the rows as JSON here")
    ap.add_argument(
        "--series-dir",
        default=str(REPO / "patches"),
        help="folder of the series sglang-vX to rebase (default: %(default)s)",
    )
    ap.add_argument(
        "--hand-dir",
        default=str(REPO / "patches"),
        help="folder of hand-made series sglang-vX to compare with (default: %(default)s)",
    )
    ap.add_argument(
        "--part",
        choices=("all", "v1"),
        default="all",
        help="all: the shipped series; v1: without the v2 patches 0008-0013 (default: %(default)s)",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="list the hunks left over")
    args = ap.parse_args(argv)
    if args.pairs == "long":
        args.pairs = LONG
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-rebase-") as tmp:
        for pair in args.pairs.split(","):
            series_ver, onto = pair.split(":")
            rows.append(
                run_pair(
                    series_ver,
                    onto,
                    not args.no_trust_new,
                    Path(tmp),
                    Path(args.hand_dir),
                    Path(args.series_dir),
                    args.part,
                )
            )
    head = (
        f"{'series -> release':<22} {'hunks':>5} {'n/a':>3} {'exact-only':>10} | {'exact':>5} "
        f"{'merged+checked':>14} {'structural':>10} {'needs attention':>15} {'no person':>9} | "
        f"{'left its fn':>11} {'text oracle':>11} {'vs hand series':>14}"
    )
    print(head)
    print("-" * len(head))
    keys = (
        "hunks",
        "not_applicable_hunks",
        "exact_only",
        "exact",
        "merged",
        "structural",
        "attention",
        "outside",
        "misplaced",
    )
    tot = dict.fromkeys(keys, 0)
    tot_hand, hand_pairs = 0, 0
    for r in rows:
        name = f"{r['series']} -> {r['onto']}"
        if "not_applicable" in r:
            print(f"{name:<22} not applicable: {r['not_applicable']}")
            continue
        for k in keys:
            tot[k] += r[k]
        if r["vs_hand"] is not None:
            tot_hand += r["vs_hand"]
            hand_pairs += 1
        auto = r["exact"] + r["merged"] + r["structural"]
        hand = "no series" if r["vs_hand"] is None else str(r["vs_hand"])
        print(
            f"{name:<22} {r['hunks']:>5} {r['not_applicable_hunks']:>3} {r['exact_only']:>10} | "
            f"{r['exact']:>5} {r['merged']:>14} {r['structural']:>10} {r['attention']:>15} "
            f"{auto / r['hunks']:>9.0%} | {r['outside']:>11} {r['misplaced']:>11} {hand:>14}"
        )
        if r["not_applicable_files"]:
            print(f"    n/a: {', '.join(r['not_applicable_files'])} not in {r['onto']}")
        for line in r["outside_detail"]:
            print(f"    LEFT ITS FUNCTION: {line}")
        for line in r["misplaced_detail"]:
            print(f"    text oracle: {line}")
        for line in r["vs_hand_detail"]:
            print(f"    NOT AS IN THE HAND SERIES: {line}")
        if args.verbose:
            for line in r["attention_detail"]:
                print(f"    attention {line[:160]}")
    print("-" * len(head))
    auto = tot["exact"] + tot["merged"] + tot["structural"]
    print(
        f"{'total':<22} {tot['hunks']:>5} {tot['not_applicable_hunks']:>3} "
        f"{tot['exact_only']:>10} | {tot['exact']:>5} {tot['merged']:>14} "
        f"{tot['structural']:>10} {tot['attention']:>15} {auto / max(tot['hunks'], 1):>9.0%} | "
        f"{tot['outside']:>11} {tot['misplaced']:>11} {tot_hand:>14}"
    )
    merge_only = tot["exact"] + tot["merged"]
    print(
        f"\nwithout a person: exact only {tot['exact_only']}/{tot['hunks']} "
        f"({tot['exact_only'] / max(tot['hunks'], 1):.0%}), exact + checked merge "
        f"{merge_only}/{tot['hunks']} ({merge_only / max(tot['hunks'], 1):.0%}), + structural "
        f"{auto}/{tot['hunks']} ({auto / max(tot['hunks'], 1):.1%}); added lines outside "
        f"the function they timed: {tot['outside']}; relocated lines not where "
        f"the hand-made series has them: {tot_hand} ({hand_pairs} pair(s) with a hand series); "
        f"flagged by the text oracle: {tot['misplaced']}"
    )
    for r in rows:
        if r["trust"] != "pinned":
            print(f"wheel {r['wheel']}: not pinned, {r['trust']} on first use, sha256 {r['sha256']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
