"""patch.rebase across long release jumps, both directions, on the real wheels.

Exact match and the checked merge leave many hunks of a long jump open; the structural step
(patchkit/author/structural.py) places the ones that only insert timer lines, by function and
neighbouring statement. Each pair's counts are fixed, and every line the rebase placed is
checked on the real release file, by an AST read independent of the placement: with the
rebased patches applied to the wheel's file, the line sits in the function (qualified name)
that the old series has it in on the old wheel's file (or that function's renamed / moved
counterpart, sglang_releases.rebase_aliases). The rebased series, marked hunks left out,
applies and reverts on a tree built from the release's wheel.
"""

from __future__ import annotations

import ast
import shutil

import pytest

from patchkit import ops
from patchkit.author import rebase as rb, upstream
from patchkit.author.merge3 import changed_lines, own_placement
from patchkit.author.relocate import apply_placements, join_lines, split_lines
from patchkit.author.sglang_releases import rebase_aliases
from support.rebase_oracle import _patches
from support.series import patch_text
from support.upstream import SERIES_059, default_wheelhouse

pytestmark = [pytest.mark.wheels, pytest.mark.slow]

WH = default_wheelhouse()
PATCHES = SERIES_059.parent

# (series, onto, exact, merge3, structural, refused), hunks of files the release lacks left out
PAIRS = [
    ("0.5.9", "0.5.12", 23, 13, 10, 2),
    ("0.5.12", "0.5.9", 23, 14, 10, 2),
    ("0.5.1", "0.5.12", 3, 6, 10, 4),
    ("0.5.23", "0.5.20", 9, 6, 6, 5),
    ("0.5.20", "0.5.23", 10, 4, 6, 6),
]


def _files(version: str, paths) -> dict[str, bytes | None]:
    wheel = upstream.fetch_wheel("sglang", version, wheelhouse=WH)
    out = {}
    for p in paths:
        inner = upstream.installed_path(p, "python/")
        try:
            out[p] = upstream.read_wheel_files(wheel.path, [inner])[inner]
        except upstream.UpstreamError:
            out[p] = None
    return out


def function_at(source: bytes, line: int) -> str:
    """Qualified name of the innermost def/class around 1-based ``line`` (AST)."""
    best = ""

    def walk(node, qual):
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{qual}.{child.name}" if qual else child.name
                if child.lineno <= line <= child.end_lineno:
                    best = name
                    walk(child, name)
            else:
                walk(child, qual)

    walk(ast.parse(source), "")
    return best or "<module>"


def placed_functions(series_dir, files: dict[str, bytes | None]) -> dict:
    """{(patch, path, hunk number): [function of each added line]} for every hunk without the
    rebase marker, the series applied hunk by hunk at its own numbers to ``files``."""
    state = {p: split_lines(d) for p, d in files.items() if d is not None}
    out = {}
    for patch in _patches(series_dir):
        for fd in patch.files:
            if fd.kind != "modify" or fd.path not in state:
                continue
            placed = []
            for number, h in enumerate(fd.hunks, 1):
                if any(rb.MARKER.encode() in ln.text for ln in h.lines):
                    continue
                p = own_placement(h)
                placed.append(p)
                after = join_lines(apply_placements(state[fd.path], [p]))
                out[(patch.name, fd.path, number)] = [function_at(after, n) for n in changed_lines(p)[1]]
            state[fd.path] = apply_placements(state[fd.path], placed)
    return out


@pytest.mark.parametrize("series_ver,onto,n_exact,n_merge3,n_structural,n_refused", PAIRS)
def test_long_jump_places_timer_lines_in_the_function_they_timed(
    series_ver, onto, n_exact, n_merge3, n_structural, n_refused, tmp_path
):
    series = PATCHES / f"sglang-v{series_ver}"
    paths = list(upstream.read_pin(series / "pin.toml").files)
    new_files, old_files = _files(onto, paths), _files(series_ver, paths)
    absent = {p for p, d in new_files.items() if d is None}
    out = tmp_path / "out"
    result = rb.rebase(series, onto, out_dir=out, wheelhouse=WH)
    hunks = [h for h in result.hunks if h.status != "carried" and h.path not in absent]
    hows = [h.how for h in hunks]
    assert (hows.count("exact"), hows.count("merge3"), hows.count("structural"), hows.count("refused")) == (
        n_exact,
        n_merge3,
        n_structural,
        n_refused,
    )
    # without the structural step those hunks stay for a person (and a few more: a placed hunk
    # gives a later patch its context)
    plain = rb.rebase(series, onto, write=False, wheelhouse=WH, structural=False)
    left = {(h.patch, h.path, h.number) for h in plain.attention if h.path not in absent}
    assert {(h.patch, h.path, h.number) for h in hunks if h.how == "structural"} <= left
    assert len(left) >= n_refused + n_structural

    report = (out / "REBASE.md").read_text()
    assert f"{n_structural} structural" in report and f"{n_refused} refused" in report
    for h in hunks:
        assert f"| {h.how} |" in report
        if h.how == "structural":
            assert h.proof and "placed by structure" in h.describe()

    # every placed line, on the real wheel's file, is in the function it timed before
    aliases = rebase_aliases()
    was = placed_functions(series, old_files)
    now = placed_functions(out, new_files)
    relocated = {(h.patch, h.path, h.number) for h in hunks if h.relocated}
    assert relocated == set(now)
    for key, functions in now.items():
        before = was[key]
        assert len(functions) == len(before), key
        for f_now, f_was in zip(functions, before):
            assert f_now == f_was or aliases.get(f_was) == f_now, (key, f_was, f_now)


def without_marked_hunks(text: str) -> str:
    """The patch with the hunks rebase left for a person taken out (the later patches were
    rebased without them, so they do not need them), headers recounted."""
    lines = rb._strip_note(text).split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("@@ "):
            j = i + 1
            while (
                j < len(lines)
                and lines[j][:1] in (" ", "-", "+", "\\")
                and not lines[j].startswith(("--- a/", "+++ b/"))
            ):
                j += 1
            if not any(rb.MARKER in ln for ln in lines[i:j]):
                out += lines[i:j]
            i = j
            continue
        out.append(lines[i])
        i += 1
    return rb.recount("\n".join(out))


def test_the_rebased_long_jump_applies_on_the_release(tmp_path):
    """0.5.9 -> 0.5.12, the hunks left for a person taken out: the series applies to a tree of
    the 0.5.12 wheel (patch.apply's own checks: every hunk exactly where its header says), each
    patched file compiles, and it reverts byte for byte."""
    series = PATCHES / "sglang-v0.5.9"
    out = tmp_path / "out"
    result = rb.rebase(series, "0.5.12", out_dir=out, wheelhouse=WH)
    assert sum(1 for h in result.hunks if h.how == "structural") >= 5
    keep = tmp_path / "clean"
    shutil.copytree(out, keep)
    for p in result.patches:
        text = patch_text(out, p.name)  # the runtime patch: its marker, carried, rendered
        cleaned = without_marked_hunks(text)
        assert rb.MARKER not in cleaned
        if cleaned != text:
            (keep / p.name).write_text(cleaned)
    paths = list(upstream.read_pin(keep / "pin.toml").files)
    files = _files("0.5.12", paths)
    tree = tmp_path / "tree"
    upstream.build_checkout_tree({upstream.installed_path(p, "python/"): d for p, d in files.items()}, tree)
    before = {p: (tree / p).read_bytes() for p in paths}
    applied = ops.apply(str(keep), [str(tree)])
    assert applied.exit_code == 0, applied.to_json()
    for p in paths:
        compile((tree / p).read_bytes(), p, "exec")
        assert b"_pt.begin(" in (tree / p).read_bytes()
    assert ops.revert(str(keep), [str(tree)]).exit_code == 0
    assert {p: (tree / p).read_bytes() for p in paths} == before
