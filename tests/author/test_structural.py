"""patch.rebase's structural step on small upstreams made here (no wheels): a timer line whose
hunk neither exact match nor the checked merge can place is placed by its function and
neighbouring statement, or refused when that is ambiguous or would change the order of the
timer calls."""

from __future__ import annotations

from patchkit import ops
from patchkit.author import rebase as rb
from patchkit.author.structural import eligible, order_problem
from patchkit.engine.diffparse import parse_patch
from support.engine import git_diff, make_series, write_tree

MOD = "pkg/worker.py"
OLD = b"""def helper():
    return 1


def run(batch):
    prepare(batch)
    out = forward(batch, mode=1)
    finish(out)
    return out
"""
PATCHED = OLD.replace(b"    out = forward", b"    _pt.begin('fwd')\n    out = forward").replace(
    b"    finish(out)\n", b"    _pt.end('fwd')\n    finish(out)\n"
)
# upstream put a new statement on each side of the timed call and re-wrapped the call: the
# hunk's context occurs nowhere, and git's merge conflicts where a person has to choose (before
# or after the new statements); the timed statement itself is the same code
NEW = OLD.replace(
    b"    out = forward(batch, mode=1)\n",
    b"    log(batch)\n    out = forward(\n        batch,\n        mode=1,\n    )\n    check(out)\n",
)


def setup(tmp_path, old: bytes, patched: bytes, new: bytes):
    patch = git_diff({MOD: old}, {MOD: patched}, tmp_path / "diff", context=1)
    series = make_series(tmp_path / "series", {MOD: old}, [("0001-t.patch", patch)])
    write_tree(tmp_path / "old", {MOD: old})
    write_tree(tmp_path / "new", {MOD: new})
    return series, tmp_path / "old", tmp_path / "new"


def test_a_line_whose_neighbours_upstream_rewrote_is_placed_by_structure(tmp_path):
    # the merge step is left out here (merge=False) to see the structural step on its own
    series, old, new = setup(tmp_path, OLD, PATCHED, NEW)
    plain = rb.rebase(series, "2", new_tree=new, old_tree=old, write=False, merge=False)
    assert plain.exit_code == 1 and plain.attention
    result = rb.rebase(
        series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out", merge=False, structural=True
    )
    assert result.exit_code == 0, [h.reason for h in result.attention]
    assert [h.how for h in result.hunks] == ["structural"]
    placed = [h for h in result.hunks if h.how == "structural"]
    assert placed and all("same statement" in h.proof for h in placed)
    assert "| structural |" in (tmp_path / "out" / "REBASE.md").read_text()
    assert ops.apply(str(tmp_path / "out"), [str(new)]).exit_code == 0
    # the begin keeps to the statement it preceded, the end to the one it followed
    assert (new / MOD).read_bytes() == NEW.replace(
        b"    out = forward(\n", b"    _pt.begin('fwd')\n    out = forward(\n"
    ).replace(b"    check(out)\n", b"    _pt.end('fwd')\n    check(out)\n")


def test_two_equal_candidates_are_refused_with_the_reason(tmp_path):
    # upstream now runs the timed call in two branches: nothing tells which one it was
    twice = OLD.replace(
        b"    prepare(batch)\n    out = forward(batch, mode=1)\n",
        b"    if batch:\n        prepare(batch)\n        out = forward(batch, mode=1)\n"
        b"    else:\n        prepare(batch)\n        out = forward(batch, mode=1)\n",
    )
    series, old, new = setup(tmp_path, OLD, PATCHED, twice)
    result = rb.rebase(
        series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out", merge=False, structural=True
    )
    assert result.exit_code == 1
    reasons = " ".join(h.reason for h in result.attention)
    assert "structural placement:" in reasons and "2 candidates" in reasons
    assert (" " + rb.MARKER) in (tmp_path / "out" / "0001-t.patch").read_text()


def test_only_hunks_that_add_timer_lines_are_eligible():
    def hunk(body: bytes):
        text = b"--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,3 @@\n" + body
        return parse_patch("p", text).files[0].hunks[0]

    assert eligible(hunk(b" a = 1\n+_pt.begin('x')\n b = 2\n"))
    assert eligible(hunk(b" a = 1\n+from sglang.srt.speculative import phase_timer as _pt\n b = 2\n"))
    assert not eligible(hunk(b" a = 1\n+print('x')\n b = 2\n"))
    assert not eligible(hunk(b" a = 1\n+_pt.begin('x')\n-b = 2\n+c = 3\n"))


def test_the_order_check_sees_a_phase_that_would_open_before_the_one_it_followed():
    old = (
        "def run():\n    _pt.begin('a')\n    x()\n    _pt.end('a')\n    _pt.begin('b')\n"
        "    y()\n    _pt.end('b')\n"
    )
    swapped = (
        "def run():\n    _pt.begin('a')\n    x()\n    _pt.begin('b')\n    _pt.end('a')\n"
        "    y()\n    _pt.end('b')\n"
    )
    assert order_problem(old, old, {}) == ""
    assert "another order" in order_problem(old, swapped, {})
    elsewhere = old.replace("def run", "def other")
    assert "no such function" in order_problem(old, elsewhere, {})
    assert order_problem(old, elsewhere, {"run": "other"}) == ""
