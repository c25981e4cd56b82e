"""Every A/B pair of one profile.remote run, its whole run (warm-up pass and measured window):
the input of bench/gpu/timer_cost.py's tables.

    python bench/gpu/ab_pairs.py PROFILE_OUT_DIR|TIMING_DIR OUT.json

The pairs are the report's own (patchkit.report.overhead: each timed block against the mean of
the off blocks on both sides, decode cycles), over every cycle the run recorded, not only the
measured window that summary.json's `overhead` covers; OUT.json keeps the report's whole
overhead (median, IQR, periods, "pairing", and every block's median period in "blocks").
Files without "pairing" were written before 2026-12-01 20:50 by the earlier pairing (each timed
block against the off block after it), which reads a drifting cycle period as overhead.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from patchkit.report import load_timing_dir
from patchkit.report.overhead import paired_overhead

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shares_ab import timing_folder


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    ov = paired_overhead(load_timing_dir(timing_folder(argv[0])), "decode")
    if not ov or not ov["pairs"]:
        print("ab_pairs: no A/B pairs in %s" % argv[0])
        return 1
    doc = {**ov, "window": "every decode cycle of the run (warm-up pass and measured window)"}
    Path(argv[1]).write_text(json.dumps(doc) + "\n")
    print("ab_pairs: %d pairs, median %+.2f %%" % (ov["pairs"], ov["median_pct"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
