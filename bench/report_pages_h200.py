"""report.html of real H200 runs, drawn from the files bench/results keeps, with a screenshot each.

    .venv/bin/python bench/report_pages_h200.py      # -> bench/results/report_h200/

The run: the 8B-shaped EAGLE-3 pair on SGLang 0.5.12 (bench/results/s3_h200.md, call 6: the
profiled run at num-steps 5 and its prediction). Its timing files were not kept, so its page
has no timeline and no bars per batch size; everything summary.json and predict.json hold is
there. The sweep: s4's num-steps sweep of the same pair (call 2). Screenshots come from headless
Chromium (tests/support/browser.py), each checked to have fetched nothing and logged no error;
the sweep's points' own folders were not kept, so its page names them without a link.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from patchkit.profile.remote.spread import plan_lines  # noqa: E402
from patchkit.report.html import write_prediction_page  # noqa: E402
from patchkit.report.html_sweep import write_sweep_page  # noqa: E402
from support.browser import open_page  # noqa: E402

RESULTS = ROOT / "bench" / "results"
OUT = RESULTS / "report_h200"
RUN = {
    "summary.json": RESULTS / "s3_h200" / "call6_pred_a08_summary.json",
    "table.txt": RESULTS / "s3_h200" / "call6_pred_a08_table.txt",
    "predict.json": RESULTS / "s3_h200" / "call6_predict_a08.json",
}
SWEEP = {
    "sweep.json": RESULTS / "s4_h200" / "call2_sweep_meas_a05_s4.json",
    "sweep.txt": RESULTS / "s4_h200" / "call2_sweep_meas_a05_s4.txt",
}


def small(png: Path) -> None:
    """The screenshot in 256 colours (a page is flat colour and text: a third of the bytes), and
    its first screen beside it (``-top.png``, the README's)."""
    from PIL import Image  # matplotlib's own dependency

    image = Image.open(png).convert("RGB")
    image.quantize(256).save(png, optimize=True)
    top = image.crop((0, 0, image.width, min(image.height, 1080)))
    top.quantize(256).save(png.with_name(png.stem + "-top.png"), optimize=True)


def main() -> None:
    run, sweep = OUT / "run", OUT / "sweep"
    for folder, files in ((run, RUN), (sweep, SWEEP)):
        folder.mkdir(parents=True, exist_ok=True)
        for name, source in files.items():
            shutil.copyfile(source, folder / name)
    pred = json.loads((run / "predict.json").read_text())
    pages = [
        write_prediction_page(run, pred, plan_lines(pred["plan"])),
        write_sweep_page(
            sweep, json.loads((sweep / "sweep.json").read_text()), (sweep / "sweep.txt").read_text()
        ),
    ]
    for page in pages:
        shot = OUT / f"{page.parent.name}.png"
        seen = open_page(page, screenshot=shot)
        assert seen.errors == [] and seen.requests == [seen.url], (seen.errors, seen.requests)
        small(shot)
        print(f"{page.relative_to(ROOT)}: {page.stat().st_size / 1e3:,.0f} KB; {shot.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
