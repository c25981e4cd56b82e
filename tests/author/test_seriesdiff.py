"""patch.diff between real series: 0.5.9 -> 0.5.10 (made by rebase), and small edits."""

from __future__ import annotations

import shutil

from patchkit.author import seriesdiff
from patchkit.engine.diffparse import parse_patch
from support.upstream import REPO, SERIES_059

SERIES_0510 = REPO / "patches" / "sglang-v0.5.10"


def test_diff_059_to_0510_shows_pin_moves_and_edited_context():
    text = seriesdiff.series_diff(SERIES_059, SERIES_0510)
    assert text.startswith("patch.diff sglang-v0.5.9 -> sglang-v0.5.10\n")
    assert "  version: 0.5.9 -> 0.5.10\n" in text
    assert "  commit: bbe9c7eeb520b0a67e92d133dfc137a3688dc7f2 -> (none)\n" in text
    assert "eagle_worker.py: 1032 -> 1052 lines" in text
    assert "series: the same 13 patches in the same order" in text
    # moved hunks: old and new header, the shift
    assert "    hunk 1: @@ -66,6 +66,7 @@ -> @@ -67,6 +67,7 @@, moved by +1 lines\n" in text
    # the hand-fixed hunks: context changed, with the body diff
    assert (
        "    hunk 4: @@ -759,6 +764,7 @@ -> @@ -773,6 +778,7 @@, moved by +14 lines, context changed:\n"
    ) in text
    assert "      -             detect_nan(logits_output)\n" in text
    assert (
        '      +         maybe_detect_nan(logits_output.next_token_logits, "verify: target model logits")\n'
    ) in text
    # exactly the four hunks fixed by hand are "edited"; the other 22 only moved (the runtime
    # patch is left out: it follows patchkit/timing/phase_timer.py, series by series)
    worker = text.split("\n0002-cycle.patch:\n", 1)[1]
    # 0001-0007 (eagle_worker.py, the rebase's); 0008-0013 time eagle_worker_v2.py (seriesgen's)
    worker, sep, v2 = worker.partition("\n0008-v2-cycle.patch:\n")
    assert sep and "eagle_worker_v2.py" in v2 and "eagle_worker_v2.py" not in worker
    assert worker.count("context changed") == 4 and "change edited" not in worker
    moved = [ln for ln in worker.splitlines() if ln.startswith("    hunk ") and ln.endswith(" lines")]
    assert len(moved) == 22


def test_identical_series_and_small_edits(tmp_path):
    same = seriesdiff.series_diff(SERIES_059, SERIES_059)
    assert "  unchanged" in same and same.count(": identical\n") == 13
    assert "hunks in changed patches: none" in same

    edited = tmp_path / "edited"
    shutil.copytree(SERIES_059, edited)
    # change an inserted line, drop a patch, add one, and reorder nothing else
    p = edited / "0004-draft-steps.patch"
    p.write_text(
        p.read_text().replace(
            '_pt.begin("draft_step", step=i)', '_pt.begin("draft_step", step=i, eager=True)'
        )
    )
    (edited / "series").write_text(
        (edited / "series").read_text().replace("0007-prefill.patch\n", "0008-extra.patch\n")
    )
    (edited / "0008-extra.patch").write_text(
        "Extra.\n\ndiff --git a/python/sglang/extra.py b/python/sglang/extra.py\n"
        "new file mode 100644\n--- /dev/null\n+++ b/python/sglang/extra.py\n@@ -0,0 +1 @@\n+x = 1\n"
    )
    text = seriesdiff.series_diff(SERIES_059, edited)
    assert "  -0007-prefill.patch\n" in text and "  +0008-extra.patch\n" in text
    assert "0007-prefill.patch: removed\n" in text and "0008-extra.patch: added (1 hunks)\n" in text
    assert "    hunk 1: @@ -663,6 +663,7 @@ -> @@ -663,6 +663,7 @@, in place, change edited:\n" in text
    assert '      -+            _pt.begin("draft_step", step=i)\n' in text
    assert "0003-draft.patch: identical\n" in text


def test_hunks_pair_by_their_change_not_their_position():
    def hunks(text):
        return parse_patch("p", text.encode()).files[0].hunks

    old = hunks("--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n+X\n b\n@@ -10,2 +11,3 @@\n c\n+Y\n d\n")
    new = hunks("--- a/f\n+++ b/f\n@@ -5,2 +5,3 @@\n c\n+Y\n d\n@@ -20,2 +21,3 @@\n e\n+Z\n f\n")
    changes = seriesdiff.pair_hunks(old, new)
    assert [c.status for c in changes] == ["removed", "moved", "added"]
    assert changes[1].shift == -5
