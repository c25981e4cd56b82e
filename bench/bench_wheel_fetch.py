"""Time what a fresh CI machine pays for the series matrix: download every pinned sglang wheel
(by pinned sha256, through patchkit.upstream.fetch_wheel) and extract the EAGLE worker files.

    python bench/bench_wheel_fetch.py [--cache DIR] [--jobs N]

Without --cache a fresh temporary cache is used (nothing cached: the cold figure). With --cache
wheels already there are only hash-checked, and the line says "cached".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.author import upstream

SPEC = "sglang/srt/speculative/"


def sglang_versions() -> list[str]:
    return [w.split("-")[1] for w in upstream.KNOWN_WHEELS if w.startswith("sglang-")]


def fetch_one(version: str, cache: Path) -> tuple[str, float, float, int, bool]:
    before = bool(list(upstream.wheel_dir("sglang", version, cache).glob("*.whl")))
    t0 = time.perf_counter()
    wheel = upstream.fetch_wheel("sglang", version, cache=cache)
    t1 = time.perf_counter()
    with zipfile.ZipFile(wheel.path) as zf:
        names = [n for n in zf.namelist() if n.startswith(SPEC) and n.endswith(".py")]
        upstream.read_wheel_files(wheel.path, names)
    t2 = time.perf_counter()
    return version, t1 - t0, t2 - t1, wheel.path.stat().st_size, before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, help="cache root (default: a fresh temporary one)")
    ap.add_argument("--jobs", type=int, default=1, help="wheels downloaded in parallel")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wheel-bench-") as tmp:
        cache = args.cache or Path(tmp)
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(lambda v: fetch_one(v, cache), sglang_versions()))
        wall = time.perf_counter() - start
    total_mb = sum(r[3] for r in rows) / 1e6
    for version, dl, ex, size, cached in rows:
        print(
            f"{version:14} {size / 1e6:7.1f} MB  fetch {dl:6.1f} s  extract {ex:5.2f} s"
            + ("  (cached)" if cached else "")
        )
    fresh = [r for r in rows if not r[4]]
    print(
        f"{len(rows)} wheels, {total_mb:.0f} MB; {len(fresh)} downloaded; wall {wall:.1f} s "
        f"(jobs {args.jobs}); fetch sum {sum(r[1] for r in rows):.1f} s, "
        f"extract sum {sum(r[2] for r in rows):.2f} s"
    )


if __name__ == "__main__":
    main()
