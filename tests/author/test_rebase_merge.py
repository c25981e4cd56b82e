"""The three-way merge step of patch.rebase: git merge-file, then the structural check.

Real release pairs (pinned wheels only), and two synthetic upstreams where git's merge is clean
but wrong: it puts a line into another function, or leaves code that does not compile. Both
must stay "needs attention"; the independent text oracle (rebase_oracle.py) confirms that no
relocated line moved.
"""

from __future__ import annotations

import ast
import shutil

import pytest

from patchkit import ops
from patchkit.author import merge3, rebase as rb, upstream
from patchkit.author.pystructure import spots
from patchkit.engine.series import load_series
from patchkit.errors import PatchkitError
from support.engine import git_diff, make_series, write_tree
from support.rebase_oracle import hand_disagreements, misplaced
from support.upstream import SERIES_059, default_wheelhouse, sglang_checkout, v1_part

pytestmark = [pytest.mark.wheels, pytest.mark.slow]

WH = default_wheelhouse()
MOD = "pkg/worker.py"

BODY = b"""    batch.prepare()
    batch.check()
    batch.plan()
    out = batch.run()
    batch.record(out)
    batch.finish(out)
    batch.release()
    return out
"""
OLD = b"def prefill(batch):\n" + BODY + b"\n\ndef decode(batch):\n" + BODY
# upstream swapped the two functions; their bodies are identical
SWAPPED = b"def decode(batch):\n" + BODY + b"\n\ndef prefill(batch):\n" + BODY

ASYNC_OLD = b"""import asyncio


async def fetch(client):
    request = client.build()
    client.log("start")
    response = await client.send(request)
    client.log("sent")
    body = response.read()
    client.log("done")
    return body
"""
ASYNC_PATCHED = ASYNC_OLD.replace(
    b'    client.log("sent")\n', b'    client.log("sent")\n    await client.flush()\n'
)
# upstream made fetch synchronous: a line away from the hunk, so git merges cleanly
SYNC_NEW = ASYNC_OLD.replace(b"async def fetch", b"def fetch").replace(
    b"await client.send(request)", b"client.send_sync(request)"
)


def _patched_decode_only() -> bytes:
    """OLD with a timer line in decode() only, in the middle of its body."""
    head, tail = OLD.split(b"\n\n\n")
    tail = tail.replace(b"    out = batch.run()\n", b"    out = batch.run()\n    _pt.end('run')\n")
    return head + b"\n\n\n" + tail


def verify_code(series, tree) -> int:
    """patch.verify's exit code; a marked hunk may also make the series invalid (exit 2)."""
    try:
        return ops.verify(str(series), [str(tree)]).exit_code
    except PatchkitError as exc:
        return exc.exit_code


def small_series(tmp_path, old: bytes, patched: bytes):
    patch = git_diff({MOD: old}, {MOD: patched}, tmp_path / "diff")
    return make_series(tmp_path / "series", {MOD: old}, [("0001-t.patch", patch)])


def trees(tmp_path, old: bytes, new: bytes):
    write_tree(tmp_path / "old", {MOD: old})
    write_tree(tmp_path / "new", {MOD: new})
    return tmp_path / "old", tmp_path / "new"


def function_of(source: bytes, needle: bytes) -> str:
    line = source.split(b"\n").index(next(ln for ln in source.split(b"\n") if needle in ln)) + 1
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= node.end_lineno:
            return node.name
    return "<module>"


def test_git_alone_would_put_the_line_in_the_wrong_function_rebase_refuses(tmp_path):
    patched = _patched_decode_only()
    assert function_of(patched, b"_pt.end") == "decode"
    merged, conflicts = merge3.merge_file(patched, OLD, SWAPPED)
    assert conflicts == 0 and function_of(merged, b"_pt.end") == "prefill", (
        "the premise: git's clean merge moves the line into prefill()"
    )
    series = small_series(tmp_path, OLD, patched)
    old, new = trees(tmp_path, OLD, SWAPPED)
    result = rb.rebase(series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out", structural=False)
    assert result.exit_code == 1 and len(result.attention) == 1
    hunk = result.attention[0]
    assert hunk.method == "needs attention"
    assert "occur 2 times" in hunk.reason and len(hunk.candidates) == 2
    assert "would put a added line elsewhere" in hunk.reason
    assert "`decode`" in hunk.reason and "`prefill`" in hunk.reason
    assert (" " + rb.MARKER) in (tmp_path / "out" / "0001-t.patch").read_text()
    assert verify_code(tmp_path / "out", new) in (1, 2)
    # the oracle agrees that git's own placement is a misplacement
    raw = small_series(tmp_path / "raw", SWAPPED, merged)
    (raw / "pin.toml").write_text((tmp_path / "out" / "pin.toml").read_text())
    assert misplaced(series, {MOD: OLD}, raw, {MOD: SWAPPED})
    # the structural step (on by default) finds decode() by name and puts the line after the
    # same statement there: the right function, where git's merge chose the wrong one
    placed = rb.rebase(series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out2")
    (hunk,) = placed.hunks
    assert placed.exit_code == 0 and hunk.how == "structural"
    assert ops.apply(str(tmp_path / "out2"), [str(new)]).exit_code == 0
    assert function_of((new / MOD).read_bytes(), b"_pt.end") == "decode"
    assert (
        b"    out = batch.run()\n    _pt.end('run')\n    batch.record(out)"
        in (new / MOD).read_bytes().split(b"def prefill")[0]
    )


def test_a_merge_that_does_not_compile_is_refused(tmp_path):
    merged, conflicts = merge3.merge_file(ASYNC_PATCHED, ASYNC_OLD, SYNC_NEW)
    assert conflicts == 0 and b"await client.flush()" in merged
    with pytest.raises(SyntaxError):
        compile(merged, MOD, "exec")
    # the line's place is unchanged by structure: only compiling catches it
    line = merged.split(b"\n").index(b"    await client.flush()") + 1
    old_line = ASYNC_PATCHED.split(b"\n").index(b"    await client.flush()") + 1
    assert spots(merged, [line]) == spots(ASYNC_PATCHED, [old_line])
    series = small_series(tmp_path, ASYNC_OLD, ASYNC_PATCHED)
    old, new = trees(tmp_path, ASYNC_OLD, SYNC_NEW)
    result = rb.rebase(series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out")
    assert result.exit_code == 1 and len(result.attention) == 1
    assert "does not compile" in result.attention[0].reason
    assert "'await' outside async function" in result.attention[0].reason
    assert verify_code(tmp_path / "out", new) in (1, 2)


def test_a_clean_structural_merge_is_accepted_and_verifies(tmp_path):
    # upstream changed a context line two lines above the insertion: exact match fails, the
    # merge places it, the check passes, and verify accepts the written series
    new_text = ASYNC_OLD.replace(b'client.log("start")', b'client.log("begin", level=2)')
    series = small_series(tmp_path, ASYNC_OLD, ASYNC_PATCHED)
    old, new = trees(tmp_path, ASYNC_OLD, new_text)
    result = rb.rebase(series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out")
    assert result.exit_code == 0, [h.reason for h in result.attention]
    (hunk,) = result.hunks
    assert hunk.method == "merged+checked" and hunk.status == "merged"
    assert "| merge3 |" in (tmp_path / "out" / "REBASE.md").read_text()
    assert ops.verify(str(tmp_path / "out"), [str(new)]).exit_code == 0
    applied = ops.apply(str(tmp_path / "out"), [str(new)])
    assert applied.exit_code == 0
    assert (new / MOD).read_bytes() == new_text.replace(
        b'    client.log("sent")\n', b'    client.log("sent")\n    await client.flush()\n'
    )
    exact_only = rb.rebase(series, "2", new_tree=new, old_tree=old, write=False, merge=False)
    assert exact_only.exit_code == 1


def _release_files(version: str, paths) -> dict[str, bytes]:
    wheel = upstream.fetch_wheel("sglang", version, wheelhouse=WH)
    assert wheel.trust == "pinned"
    inner = {p: upstream.installed_path(p, "python/") for p in paths}
    data = upstream.read_wheel_files(wheel.path, list(inner.values()))
    return {p: data[i] for p, i in inner.items()}


# (series, onto, exact, merged+checked, needs attention), hunks creating files left out; the
# eagle_worker.py part of each series (0001-0007: 0.5.10's and 0.5.12's made by rebase from
# 0.5.9's), without the EAGLEWorkerV2 patches 0008-0013 (upstream_fixtures.v1_part)
PAIRS = [
    ("0.5.9", "0.5.10", 22, 4, 0),
    ("0.5.10", "0.5.9", 22, 4, 0),
    ("0.5.9", "0.5.12", 10, 9, 7),
    ("0.5.12", "0.5.10", 12, 7, 7),
]


@pytest.mark.parametrize("series_ver,onto,n_exact,n_merged,n_attention", PAIRS)
def test_real_release_pairs_relocate_more_and_misplace_nothing(
    series_ver, onto, n_exact, n_merged, n_attention, tmp_path
):
    series = v1_part(SERIES_059.parent / f"sglang-v{series_ver}", tmp_path / "old")
    out = tmp_path / "out"
    result = rb.rebase(series, onto, out_dir=out, wheelhouse=WH, structural=False)
    methods = [h.method for h in result.hunks if h.status != "carried"]
    assert (methods.count("exact"), methods.count("merged+checked"), methods.count("needs attention")) == (
        n_exact,
        n_merged,
        n_attention,
    )
    exact = rb.rebase(series, onto, write=False, wheelhouse=WH, merge=False)
    assert len(exact.attention) == n_attention + n_merged
    paths = list(upstream.read_pin(series / "pin.toml").files)
    new_files = _release_files(onto, paths)
    # the hand-made series of the release (shipped, pinned to the same text) has every
    # relocated line exactly where rebase put it
    hand = v1_part(SERIES_059.parent / f"sglang-v{onto}", tmp_path / "hand")
    assert [f.sha256 for f in upstream.read_pin(hand / "pin.toml").files.values()] == [
        upstream.sha256_bytes(new_files[p]) for p in paths
    ]
    assert hand_disagreements(out, hand, new_files) == []
    # the text oracle flags only lines whose neighbouring statement upstream rewrote
    flagged = misplaced(series, _release_files(series_ver, paths), out, new_files)
    rewritten = {(h.patch, h.number) for h in result.hunks if "upstream rewrote" in h.proof}
    assert {(p, n) for p, _, n, _ in flagged} <= rewritten
    report = (out / "REBASE.md").read_text()
    assert f"{n_merged} merge3" in report
    for h in result.hunks:
        if h.method == "merged+checked":
            assert h.proof and "| merge3 |" in report
    # the merged hunks verify on the real release once the flagged ones are out of the way
    if not n_attention:
        tree = sglang_checkout(onto, tmp_path / "tree")[0]
        assert ops.verify(str(out), [str(tree)]).exit_code == 0


def test_the_hand_series_oracle_sees_a_line_moved_by_one(tmp_path):
    files = _release_files("0.5.10", ["python/sglang/srt/speculative/eagle_worker.py"])
    moved = tmp_path / "moved"
    shutil.copytree(SERIES_059.parent / "sglang-v0.5.10", moved)
    text = (moved / "0005-verify.patch").read_text()
    old = '+        _pt.begin("verify_prepare")\n         seq_lens_pre_verify = batch.seq_lens.clone()\n'
    new = '         seq_lens_pre_verify = batch.seq_lens.clone()\n+        _pt.begin("verify_prepare")\n'
    assert text.count(old) == 1
    (moved / "0005-verify.patch").write_text(rb.recount(text.replace(old, new)))
    got = hand_disagreements(moved, SERIES_059.parent / "sglang-v0.5.10", files)
    assert [(p, n) for p, n, _ in got] == [("0005-verify.patch", 1)]
    assert (
        hand_disagreements(SERIES_059.parent / "sglang-v0.5.10", SERIES_059.parent / "sglang-v0.5.10", files)
        == []
    )


RUN_OLD = b"""def run(batch):
    prepare(batch)
    out = forward(batch)
    finish(out)
    return out
"""
RUN_PATCHED = RUN_OLD.replace(b"    out = forward", b"    _pt.begin('fwd')\n    out = forward")


def test_conflict_on_a_rewritten_neighbour_is_placed_before_the_rewrite(tmp_path):
    rewritten = RUN_OLD.replace(
        b"    out = forward(batch)\n", b"    out, extra = forward(\n        batch, mode=2\n    )\n"
    )
    assert merge3.merge_file(RUN_PATCHED, RUN_OLD, rewritten)[1] == 1
    series = small_series(tmp_path, RUN_OLD, RUN_PATCHED)
    old, new = trees(tmp_path, RUN_OLD, rewritten)
    result = rb.rebase(series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out")
    assert result.exit_code == 0, [h.reason for h in result.attention]
    (hunk,) = result.hunks
    assert hunk.method == "merged+checked" and "upstream rewrote" in hunk.proof
    assert ops.apply(str(tmp_path / "out"), [str(new)]).exit_code == 0
    assert (new / MOD).read_bytes() == rewritten.replace(
        b"    out, extra", b"    _pt.begin('fwd')\n    out, extra"
    )


def test_conflict_on_an_inserted_statement_is_left_for_a_person(tmp_path):
    # upstream put a new statement right where the line goes: before or after it is a choice
    inserted = RUN_OLD.replace(b"    prepare(batch)\n", b"    prepare(batch)\n    log(batch)\n")
    assert merge3.merge_file(RUN_PATCHED, RUN_OLD, inserted)[1] == 1
    series = small_series(tmp_path, RUN_OLD, RUN_PATCHED)
    old, new = trees(tmp_path, RUN_OLD, inserted)
    result = rb.rebase(series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out", structural=False)
    assert result.exit_code == 1
    assert "no place in it keeps" in result.attention[0].reason
    assert verify_code(tmp_path / "out", new) in (1, 2)
    # by structure a begin keeps to the statement it timed (it opened right before it)
    placed = rb.rebase(series, "2", new_tree=new, old_tree=old, out_dir=tmp_path / "out2")
    assert [h.how for h in placed.hunks] == ["structural"]
    assert ops.apply(str(tmp_path / "out2"), [str(new)]).exit_code == 0
    assert (new / MOD).read_bytes() == inserted.replace(
        b"    out = forward", b"    _pt.begin('fwd')\n    out = forward"
    )


def test_a_hunk_of_two_runs_is_merged_run_by_run(tmp_path):
    old = b"""def run(batch):
    prepare(batch)
    out = forward(batch)
    check(out)
    finish(out)
    return out
"""
    patched = old.replace(b"    out = forward", b"    _pt.begin('fwd')\n    out = forward").replace(
        b"    finish(out)", b"    _pt.end('fwd')\n    finish(out)"
    )
    # upstream rewrote the statement after the first run: the whole hunk conflicts
    new_text = old.replace(
        b"    out = forward(batch)\n", b"    out, extra = forward(\n        batch, mode=2\n    )\n"
    )
    series = small_series(tmp_path, old, patched)
    assert len(load_series(str(series)).patches[0].files[0].hunks) == 1
    old_dir, new = trees(tmp_path, old, new_text)
    result = rb.rebase(series, "2", new_tree=new, old_tree=old_dir, out_dir=tmp_path / "out")
    assert result.exit_code == 0, [h.reason for h in result.attention]
    (hunk,) = result.hunks
    assert hunk.method == "merged+checked" and hunk.proof.startswith("run by run: ")
    assert ops.apply(str(tmp_path / "out"), [str(new)]).exit_code == 0
    assert (new / MOD).read_bytes() == new_text.replace(
        b"    out, extra", b"    _pt.begin('fwd')\n    out, extra"
    ).replace(b"    finish(out)", b"    _pt.end('fwd')\n    finish(out)")
