"""patch.rebase of the whole 0.5.9 / 0.5.10 series (0001-0007 eagle_worker.py, hand-made;
0008-0013 eagle_worker_v2.py, appended by patchkit.author.seriesgen) between real releases.

Two tools, one answer: every EAGLEWorkerV2 line that the rebase relocates (exact, or merged and
checked) sits exactly where seriesgen placed it in the target release's shipped series (by
function and anchor statement, with no knowledge of the other), among the pristine code lines.
"""

from __future__ import annotations

import pytest

from patchkit.author import rebase as rb, upstream
from support.rebase_oracle import hand_disagreements
from support.upstream import SERIES_059, V2_APPENDED, default_wheelhouse

pytestmark = [pytest.mark.wheels]

WH = default_wheelhouse()
PATCHES = SERIES_059.parent

# (series, onto, exact, merged+checked, needs attention) over the v2 hunks only
PAIRS = [("0.5.9", "0.5.10", 18, 3, 1), ("0.5.10", "0.5.9", 18, 3, 1), ("0.5.10", "0.5.11", 20, 2, 0)]


def _release_files(version: str, paths) -> dict[str, bytes]:
    wheel = upstream.fetch_wheel("sglang", version, wheelhouse=WH)
    inner = {p: upstream.installed_path(p, "python/") for p in paths}
    data = upstream.read_wheel_files(wheel.path, list(inner.values()))
    return {p: data[i] for p, i in inner.items()}


@pytest.mark.parametrize("series_ver,onto,n_exact,n_merged,n_attention", PAIRS)
def test_rebased_v2_lines_agree_with_the_generated_series(
    series_ver, onto, n_exact, n_merged, n_attention, tmp_path
):
    series = PATCHES / f"sglang-v{series_ver}"
    out = tmp_path / "out"
    result = rb.rebase(series, onto, out_dir=out, wheelhouse=WH, structural=False)
    v2 = [h for h in result.hunks if h.patch in V2_APPENDED]
    assert v2 and all(h.path.endswith("/eagle_worker_v2.py") for h in v2)
    methods = [h.method for h in v2]
    assert (methods.count("exact"), methods.count("merged+checked"), methods.count("needs attention")) == (
        n_exact,
        n_merged,
        n_attention,
    )
    paths = list(upstream.read_pin(series / "pin.toml").files)
    files = _release_files(onto, paths)
    shipped = PATCHES / f"sglang-v{onto}"
    assert [f.sha256 for f in upstream.read_pin(shipped / "pin.toml").files.values()] == [
        upstream.sha256_bytes(files[p]) for p in paths
    ]
    disagree = hand_disagreements(out, shipped, files)
    assert [d for d in disagree if d[0] in V2_APPENDED] == []
