"""One real GPU run's report.html, kept in bench/results with a screenshot of it.

    .venv/bin/python bench/report_page_run.py RUN_FOLDER OUT_FOLDER

RUN_FOLDER is a profile.remote run as the GPU harness brought it back, with the report.html
profile.remote wrote there (`invoke profile.predict RUN_FOLDER` rewrites it with the prediction
on it). The page is copied to OUT_FOLDER/run/report.html, opened in headless Chromium
(tests/support/browser.py: nothing fetched, no console error) and photographed: OUT_FOLDER/run.png
and its first screen, run-top.png (report_pages_h200.small).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from report_pages_h200 import small  # noqa: E402

from support.browser import open_page  # noqa: E402


def main(argv: list[str]) -> int:
    run, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    page = run / "report.html"
    if not page.is_file():
        print(
            f"report_page_run: {page}: no page (profile.remote writes it; invoke profile.report RUN redraws it)"
        )
        return 2
    (out / "run").mkdir(parents=True, exist_ok=True)
    kept = out / "run" / "report.html"
    shutil.copyfile(page, kept)
    shot = out / "run.png"
    seen = open_page(kept, screenshot=shot)
    if seen.errors or seen.requests != [seen.url]:
        print(f"report_page_run: the page logged {seen.errors} and fetched {seen.requests}")
        return 1
    small(shot)
    print(f"{kept.relative_to(ROOT)}: {kept.stat().st_size / 1e3:,.0f} KB; {shot.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
