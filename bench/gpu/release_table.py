"""The release runs of the GPU harness as rows of bench/results/sglang_gpu.{json,md}.

    python3 bench/gpu/release_table.py RUNS_TGZ_OR_WORK... [--json bench/results/sglang_gpu.json]
        [--md bench/results/sglang_gpu.md] [--card NAME] [--date YYYY-MM-DD]

Each argument is what run_h200.sh's ``relpack`` stage returned (``rel_<release>_runs.tgz``) or
its $WORK folder: the release runs (``<release>_<name>/<stamp>/``) and checks/<release>_<name>.json
(bench/gpu/release_check.py's verdicts). For every run it reads the check, the run's
summary.json (tokens/s, cycles, the paired overhead where the run had A/B blocks) and the server
command (remote.json), and writes:
- ``releases`` in the JSON file: one row per run (release, name, worker flags, checks, figures,
  card, date); a run of the same release and name replaces its row, the others stay;
- a "Releases past 0.5.12" section in the Markdown file, replaced whole on every write: with
  --json, one row for every row of the JSON file (so adding one release keeps the others),
  each release with its own card and date.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path

SECTION = "## Releases past 0.5.12 (EAGLEWorkerV2 only)"
RUN_DIR = re.compile(r"^(\d+\.\d+\.\d+(?:\.post\d+)?)_([a-z0-9]+)$")
FLAGS = (
    "--speculative-algorithm",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
)


def _flags(command: str) -> str:
    words = command.split()
    out = []
    for i, w in enumerate(words[:-1]):
        if w in FLAGS:
            out.append(f"{w.removeprefix('--speculative-')} {words[i + 1]}")
    if "--disable-overlap-schedule" in words:
        out.append("overlap off")
    else:
        out.append("overlap on")
    return ", ".join(out)


def _get(d: dict, *path, default=None):
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def rows_from(work: Path) -> list[dict]:
    rows = []
    for folder in sorted(work.iterdir()):
        m = RUN_DIR.match(folder.name)
        if not m or not folder.is_dir():
            continue
        release, name = m.groups()
        runs = sorted(p.parent for p in folder.glob("*/summary.json"))
        run = runs[-1] if runs else None
        check_file = work / "checks" / f"{folder.name}.json"
        check = json.loads(check_file.read_text()) if check_file.is_file() else {}
        summary = json.loads((run / "summary.json").read_text()) if run else {}
        remote = {}
        if run and (run / "remote.json").is_file():
            remote = json.loads((run / "remote.json").read_text())
        command = str(_get(remote, "server_command") or _get(summary, "meta", "server_command") or "")
        rows.append(
            {
                "release": release,
                "name": name,
                "run": run.name if run else None,
                "worker": _flags(command) if command else None,
                "checks": check.get("checks", {}),
                "decode_cycles": check.get("decode_cycles"),
                "timed_decode_cycles": check.get("timed_decode_cycles"),
                "sglang_decode_lines": check.get("sglang_decode_lines"),
                "phases": sorted(check.get("phase_cycles", {})),
                "acceptance": check.get("acceptance"),
                "tokens_per_s": _get(summary, "throughput", "tokens_per_s"),
                "overhead": {k: v for k, v in (_get(summary, "overhead") or {}).items() if k != "blocks"}
                or None,
            }
        )
    return rows


def _where(rows: list[dict]) -> str:
    """'0.5.17, 0.5.13 on CARD, DATE; 0.5.14 on CARD, DATE': each release's card and date."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        releases = groups.setdefault((r.get("card") or "the GPU", r.get("date") or ""), [])
        if r["release"] not in releases:
            releases.append(r["release"])
    return "; ".join(
        f"{', '.join(rels)} on {card}{f', {date}' if date else ''}" for (card, date), rels in groups.items()
    )


def markdown(rows: list[dict]) -> str:
    lines = [SECTION, ""]
    lines.append(
        f"{_where(rows)}. `bash bench/gpu/build_carry.sh RELEASE`, then `FAILFAST=1 bash "
        "bench/gpu/run_h200.sh setup models relacc relnoov relab reltree relpredict relpack` "
        "(carry `.carry-site .carry-fi .carry-lib`); `--series auto` chose each release's series; "
        "each server checked by `bench/gpu/release_check.py` (records = SGLang's decode lines, "
        "every phase in every timed decode cycle, nesting, device times, acceptance histogram = "
        "SGLang's `spec_correct_drafts_histogram` summed over the same requests). Acceptance: the "
        "records' histogram of accepted drafts per request step after `accept_check.replay` names each "
        "entry's request, the steps of finished requests that SGLang drops, then SGLang's own; overhead: "
        "the default 1 % budget against off blocks in the same server (`PATCHKIT_TIMER_AB`)."
    )
    lines += [
        "",
        "| release | run | worker | checks | decode cycles (timed) | SGLang decode lines | acceptance: patchkit (dropped steps) / SGLang | tok/s | overhead |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        checks = ", ".join(
            f"{k} {'ok' if v else ('-' if v is None else 'FAILED')}" for k, v in r["checks"].items()
        )
        acc = r.get("acceptance") or {}
        rep = acc.get("replayed") or {}
        if rep:
            accs = f"{rep.get('histogram')} ({rep.get('extra_steps')}) / {acc.get('sglang')}"
        else:
            accs = f"{acc.get('patchkit')} / {acc.get('sglang')}" if acc else "-"
        tps = r.get("tokens_per_s")
        ovh = r.get("overhead") or {}
        ovhs = (
            f"{ovh['median_pct']:+.2f} % (IQR {ovh['iqr_pct'][0]:+.2f}..{ovh['iqr_pct'][1]:+.2f}, {ovh.get('pairs')} pairs)"
            if isinstance(ovh.get("median_pct"), (int, float)) and ovh.get("iqr_pct")
            else "-"
        )
        lines.append(
            f"| {r['release']} | {r['name']} | {r['worker'] or '-'} | {checks or 'no check'} | "
            f"{r['decode_cycles']} ({r['timed_decode_cycles']}) | {r['sglang_decode_lines']} | {accs} | "
            f"{f'{tps:.0f}' if isinstance(tps, (int, float)) else '-'} | {ovhs} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--card", default="the GPU")
    ap.add_argument("--date", default="")
    args = ap.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, src in enumerate(args.sources):
            work = src
            if src.is_file():
                work = Path(tmp) / str(i)
                work.mkdir()
                with tarfile.open(src) as tar:
                    tar.extractall(work, filter="data")
            rows += rows_from(work)
    rows = [{**r, "card": args.card, "date": args.date} for r in rows]
    if args.json:
        doc = json.loads(args.json.read_text()) if args.json.is_file() else {}
        new = {(x["release"], x["name"]) for x in rows}
        rows = [r for r in doc.get("releases", []) if (r["release"], r["name"]) not in new] + rows
        doc["releases"] = rows
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    text = markdown(rows)
    print(text)
    if args.md:
        old = args.md.read_text() if args.md.is_file() else ""
        head = old.split(SECTION)[0].rstrip("\n")
        args.md.write_text(head + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
