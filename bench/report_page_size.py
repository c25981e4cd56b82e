"""How big report.html gets, and what it costs to write, as a run grows.

    .venv/bin/python bench/report_page_size.py [--cycles 400,2000,10000]

Each size is a server-like run on the tests' fake clock (tests/support/server_run.py: an
EAGLE-like worker, batch sizes 1..8, prefill cycles, a stall, acceptance per request, warm-up),
reported by build_report; the page is then written again alone to time it. Printed per size:
the page, the part of it that is the gzipped trace (the data: link), the inline SVG figures,
trace.json beside it, and the seconds.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from patchkit.report import build_report  # noqa: E402
from patchkit.report.html import write_run_page_from_folder  # noqa: E402
from support.server_run import server_run  # noqa: E402


def measure(cycles: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        build_report(server_run(out / "timing", cycles=cycles), out, meta={"tokens_per_s": 1000.0})
        start = time.perf_counter()
        page = write_run_page_from_folder(out).read_text(encoding="utf-8")
        seconds = time.perf_counter() - start
        link = re.search(r'href="data:[^"]*"', page)
        svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
        return {
            "cycles": cycles,
            "page": len(page.encode()),
            "trace_link": len(link.group(0)) if link else 0,
            "figures": sum(len(s.encode()) for s in svgs),
            "trace_json": (out / "trace.json").stat().st_size,
            "seconds": seconds,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", default="400,2000,10000")
    args = parser.parse_args()
    print(
        f"{'cycles':>7}  {'page KB':>8}  {'trace link KB':>13}  {'figures KB':>10}  {'trace.json KB':>13}  {'page s':>6}"
    )
    for n in (int(x) for x in args.cycles.split(",")):
        m = measure(n)
        print(
            f"{m['cycles']:>7,}  {m['page'] / 1e3:>8,.0f}  {m['trace_link'] / 1e3:>13,.0f}  "
            f"{m['figures'] / 1e3:>10,.0f}  {m['trace_json'] / 1e3:>13,.0f}  {m['seconds']:>6.2f}"
        )


if __name__ == "__main__":
    main()
