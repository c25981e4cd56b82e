"""patch.rebase on real SGLang files: PyPI releases, and a local git clone made here with
commits that move, duplicate or delete the lines the 0.5.9 series anchors on."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.author import rebase as rb, relocate, upstream
from patchkit.author.authoring import read_series_names
from patchkit.engine.diffparse import parse_patch
from patchkit.errors import InvalidInput, PatchkitError
from support.cli import invoke
from support.series import patch_text
from support.upstream import (
    EAGLE_WORKER,
    PHASE_TIMER,
    SERIES_059,
    V2_APPENDED,
    default_wheelhouse,
    git,
    sglang_checkout,
    sglang_files,
    v1_part,
)

pytestmark = [pytest.mark.wheels]

WH = default_wheelhouse()
# What these tests relocate: 0.5.9's hand-made eagle_worker.py series (0001-0007, 27 hunks),
# without the EAGLEWorkerV2 patches seriesgen appended (upstream_fixtures.v1_part).
V1_PATCHES = [n for n in read_series_names(SERIES_059) if n not in V2_APPENDED]
SERIES_FILES = ["series", "pin.toml"] + V1_PATCHES
FLAGGED_0510 = {
    ("0002-cycle.patch", 2),
    ("0002-cycle.patch", 4),
    ("0005-verify.patch", 4),
    ("0006-draft-extend-after-decode.patch", 4),
}  # by exact match alone


def stored(folder: Path, name: str) -> bytes:
    """A file of the folder as it is stored there: a patch's marker (the runtime patch, rendered on
    read) or the file itself."""
    marker = folder / (name + ".runtime")
    return marker.read_bytes() if marker.is_file() else (folder / name).read_bytes()


def folder_digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def refusal(series: Path, tree: Path) -> tuple[int, str]:
    """(exit code, text) of patch.verify: a marked hunk does not fit the new release's pinned
    text, so the series is inconsistent (exit 2), found on the target or, where the hunk
    overlaps lines another patch names, while the series is read."""
    try:
        verdict = ops.verify(str(series), [str(tree)])
    except PatchkitError as exc:
        return exc.exit_code, str(exc)
    host = verdict.hosts[0]
    return verdict.exit_code, " ".join([*host.messages, *(f.detail for f in host.files)])


def attention(result) -> set[tuple[str, int]]:
    return {(h.patch, h.number) for h in result.attention}


def hunk_of(result, patch: str, number: int, path: str = EAGLE_WORKER):
    return next(h for h in result.hunks if (h.patch, h.number, h.path) == (patch, number, path))


@pytest.fixture
def series_copy(tmp_path) -> Path:
    """The 0.5.9 series' eagle_worker.py part (0001-0007) copied to tmp/patches/sglang-v0.5.9
    (default outputs land beside it)."""
    return v1_part(SERIES_059, tmp_path / "patches")


# ----------------------------------------------------------------------------- a local clone


def _old_block(patch: str, number: int) -> list[str]:
    parsed = parse_patch(patch, (SERIES_059 / patch).read_bytes())
    hunk = parsed.files[0].hunks[number - 1]
    return [ln.text.decode() + "\n" for ln in hunk.source]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> dict:
    """A git repo with sglang 0.5.9's eagle_worker.py and variants, one tagged commit each:
    v0.5.9 (the release), v0.5.9.shift (3 lines added near the top), dup (shift + a second copy
    of 0005 hunk 1's lines at the end), gone (shift without the `# Forward` comment that 0005
    hunk 2 uses as context), timer (shift + a phase_timer.py of upstream's own), nofile (the
    file deleted)."""
    repo = tmp_path_factory.mktemp("clone")
    text = sglang_files("0.5.9")[upstream.installed_path(EAGLE_WORKER, "python/")].decode()
    lines = text.splitlines(keepends=True)
    shifted = lines[:10] + ["# one\n", "# two\n", "# three\n"] + lines[10:]
    target = repo / EAGLE_WORKER
    target.parent.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    commits = {}

    def commit(tag: str, content: str | None, extra: dict[str, str] | None = None) -> None:
        if content is None:
            git(repo, "rm", "-q", EAGLE_WORKER)
        else:
            target.write_text(content)
        for rel, data in (extra or {}).items():
            (repo / rel).write_text(data)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", tag)
        git(repo, "tag", tag)
        commits[tag] = git(repo, "rev-parse", "HEAD").stdout.strip()

    commit("v0.5.9", text)
    commit("v0.5.9.shift", "".join(shifted))
    commit("dup", "".join(shifted) + "\n\n" + "".join(_old_block("0005-verify.patch", 1)))
    gone = "".join(shifted)
    anchor = "            ).cpu()\n\n        # Forward\n"
    assert gone.count(anchor) == 1
    commit("gone", gone.replace(anchor, "            ).cpu()\n\n"))
    commit("timer", "".join(shifted), {PHASE_TIMER: "# upstream's own module\n"})
    git(repo, "rm", "-q", PHASE_TIMER)
    commit("nofile", None, {"README": "no eagle worker here\n"})
    git(repo, "checkout", "-q", "v0.5.9")
    return {"repo": repo, "commits": commits}


def checkout_tree(clone: dict, tag: str, dest: Path) -> Path:
    """A separate clone of the test repo checked out at ``tag`` (HEAD = that commit)."""
    git(dest.parent, "clone", "-q", str(clone["repo"]), str(dest))
    git(dest, "checkout", "-q", tag)
    return dest


# ----------------------------------------------------------------------------- PyPI releases


def test_same_release_is_a_noop_with_identical_bytes(series_copy, tmp_path):
    before = folder_digest(series_copy)
    result = rb.rebase(series_copy, "0.5.9", wheelhouse=WH)
    assert result.noop and not result.written and result.exit_code == 0
    assert folder_digest(series_copy) == before
    assert sorted(p.name for p in series_copy.parent.iterdir()) == ["sglang-v0.5.9"]

    out = tmp_path / "same"
    result = rb.rebase(series_copy, "0.5.9", out_dir=out, wheelhouse=WH)
    assert result.written and result.exit_code == 0
    assert {h.status for h in result.hunks} == {"unchanged", "carried"}
    for name in SERIES_FILES:
        assert stored(out, name) == stored(series_copy, name), name
    assert patch_text(out, V1_PATCHES[0]) == patch_text(series_copy, V1_PATCHES[0])
    assert "27 hunks, 0 moved, 27 unchanged, 0 need attention" in (out / "REBASE.md").read_text()


def test_rebase_onto_0510_relocates_what_it_can_and_marks_the_rest(series_copy, tmp_path):
    """Exact match only (--no-merge): 4 hunks flagged, marked, refused by verify."""
    before = folder_digest(series_copy)
    result = rb.rebase(series_copy, "0.5.10", wheelhouse=WH, merge=False)
    assert result.exit_code == 1
    assert attention(result) == FLAGGED_0510
    out = series_copy.parent / "sglang-v0.5.10"
    assert result.out_dir == out and result.written
    assert folder_digest(series_copy) == before, "the old series must not be written"
    # relocated hunks: new numbers, same lines; the runtime patch is carried byte for byte, stored
    # as the old series stores it (its marker: rendered from patchkit/timing on every read)
    assert patch_text(out, "0001-phase-timer-runtime.patch") == patch_text(
        SERIES_059, "0001-phase-timer-runtime.patch"
    )
    assert stored(out, "0001-phase-timer-runtime.patch") == stored(
        SERIES_059, "0001-phase-timer-runtime.patch"
    )
    assert not (out / "0001-phase-timer-runtime.patch").exists()
    assert hunk_of(result, "0002-cycle.patch", 1).delta == 1
    assert hunk_of(result, "0007-prefill.patch", 3).delta == 16
    assert (out / "0004-draft-steps.patch").read_text().count("@@") == 4
    pin = upstream.read_pin(out / "pin.toml")
    assert (pin.version, pin.commit, next(iter(pin.files.values())).lines) == ("0.5.10", None, 1052)
    # the report: hunk by hunk, with the upstream change around each flagged hunk
    report = (out / "REBASE.md").read_text()
    assert (
        "| 0002-cycle.patch | eagle_worker.py | 1 | `@@ -66,6 +66,7 @@` | "
        "`@@ -67,6 +67,7 @@` | exact | moved by +1 lines |" in report
    )
    assert "three-way merge: off" in report
    assert "### 0006-draft-extend-after-decode.patch, hunk 4 `@@ -996,6 +999,7 @@`" in report
    assert (
        "-        if self.enable_nan_detection:\n-            detect_nan(logits_output)\n"
        "+        maybe_detect_nan(" in report
    )
    assert "Candidates (line numbers" in report
    # flagged patches carry the marker; verify refuses the folder until they are edited
    for name in ("0002-cycle.patch", "0005-verify.patch", "0006-draft-extend-after-decode.patch"):
        text = (out / name).read_text()
        assert text.startswith(rb.NOTE_FIRST) and (" " + rb.MARKER + "\n") in text
    assert rb.MARKER not in (out / "0003-draft.patch").read_text()
    tree = sglang_checkout("0.5.10", tmp_path / "t510")[0]
    code, text = refusal(out, tree)
    assert code == 2 and "patchkit rebase" in text, text


def test_rebase_onto_0510_with_the_merge_needs_no_person(series_copy, tmp_path):
    """The default (exact, then the checked merge) relocates all four: two merge cleanly, two
    conflict where upstream rewrote the neighbouring statement; the result verifies, applies
    and compiles, and equals the shipped hand-fixed sglang-v0.5.10 patch for patch."""
    out = tmp_path / "v0510"
    result = rb.rebase(series_copy, "0.5.10", wheelhouse=WH, out_dir=out)
    assert result.exit_code == 0 and not result.attention
    merged = {(h.patch, h.number): h for h in result.hunks if h.method == "merged+checked"}
    assert set(merged) == FLAGGED_0510
    assert "upstream rewrote" in merged[("0002-cycle.patch", 2)].proof
    assert "upstream rewrote" not in merged[("0005-verify.patch", 4)].proof
    assert hunk_of(result, "0007-prefill.patch", 3).delta == 19  # + 3 merged lines before it
    report = (out / "REBASE.md").read_text()
    assert (
        "| 0005-verify.patch | eagle_worker.py | 4 | `@@ -759,6 +764,7 @@` | "
        "`@@ -773,6 +778,7 @@` | merge3 | merged+checked, moved by +14 lines" in report
    )
    assert "how the hunks moved: 23 exact, 4 merge3, 0 structural, 0 by hand, 0 refused" in report
    shipped = v1_part(SERIES_059.parent / "sglang-v0.5.10", tmp_path / "shipped")
    pin = upstream.read_pin(shipped / "pin.toml")
    pin.also_versions = []  # 0.5.10.post1 shares the folder (recorded by hand)
    (shipped / "pin.toml").write_text(upstream.format_pin(pin))
    for name in V1_PATCHES + ["pin.toml", "series"]:
        assert stored(out, name) == stored(shipped, name), name
    tree = sglang_checkout("0.5.10", tmp_path / "t510")[0]
    assert ops.verify(str(out), [str(tree)]).exit_code == 0
    assert ops.apply(str(out), [str(tree)]).exit_code == 0
    compile((tree / EAGLE_WORKER).read_text(), EAGLE_WORKER, "exec")


def test_rebase_onto_0512_with_and_without_context_trim(series_copy, tmp_path):
    plain = rb.rebase(series_copy, "0.5.12", out_dir=tmp_path / "plain", wheelhouse=WH, merge=False)
    assert plain.exit_code == 1 and len(plain.attention) == 16
    assert not any(h.trimmed for h in plain.hunks)
    trimmed = rb.rebase(
        series_copy, "0.5.12", out_dir=tmp_path / "trim", wheelhouse=WH, context_trim=True, merge=False
    )
    assert trimmed.exit_code == 1 and len(trimmed.attention) == 4
    assert attention(trimmed) < attention(plain)
    placed = [h for h in trimmed.hunks if h.trimmed]
    assert len(placed) == 12 and all(h.status == "moved" for h in placed)
    report = (tmp_path / "trim" / "REBASE.md").read_text()
    assert report.count("context trimmed:") == 12
    # the import hunk: 0.5.12 added `_is_musa = is_musa()` where 0.5.9 had a blank line; the
    # trimmed trailing line is refilled from the new file
    imp = hunk_of(trimmed, "0002-cycle.patch", 1)
    assert imp.trimmed == (0, 1)
    assert " _is_musa = is_musa()\n" in (tmp_path / "trim" / "0002-cycle.patch").read_text()
    # a relocated hunk whose inserted line uses a name 0.5.12 dropped is warned about
    cycle_end = hunk_of(trimmed, "0002-cycle.patch", 5)
    assert cycle_end.relocated and any("accept_length_per_req_cpu" in w for w in cycle_end.warnings)
    assert "## Warnings" in report and "`accept_length_per_req_cpu`" in report
    # verify refuses while four hunks are marked
    code, text = refusal(tmp_path / "trim", sglang_checkout("0.5.12", tmp_path / "t")[0])
    assert code in (1, 2) and "patchkit rebase" in text


def test_existing_out_dir_is_refused(series_copy, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(InvalidInput, match="already exists"):
        rb.rebase(series_copy, "0.5.10", out_dir=out, wheelhouse=WH)
    assert [p.name for p in out.iterdir()] == ["keep"]
    with pytest.raises(InvalidInput, match="overwrite"):
        rb.rebase(series_copy, "0.5.10", out_dir=series_copy, wheelhouse=WH)


# ----------------------------------------------------------------------------- a git clone


def test_clone_tag_moves_every_hunk_and_pins_the_commit(series_copy, clone, tmp_path):
    result = rb.rebase(series_copy, "v0.5.9.shift", upstream_clone=clone["repo"])
    assert result.exit_code == 0 and not result.attention
    out = series_copy.parent / "sglang-v0.5.9.shift"
    assert result.out_dir == out
    moved = [h for h in result.hunks if h.path == EAGLE_WORKER]
    assert {h.delta for h in moved} == {3} and len(moved) == 26
    pin = upstream.read_pin(out / "pin.toml")
    assert pin.commit == clone["commits"]["v0.5.9.shift"] and pin.version == "0.5.9.shift"
    assert "git clone" in (out / "REBASE.md").read_text()
    tree = checkout_tree(clone, "v0.5.9.shift", tmp_path / "work")
    assert ops.verify(str(out), [str(tree)]).exit_code == 0
    applied = ops.apply(str(out), [str(tree)])
    assert applied.exit_code == 0
    compile((tree / EAGLE_WORKER).read_text(), EAGLE_WORKER, "exec")
    # a bare commit (no tag): no version, the folder is named after the commit
    sha = clone["commits"]["v0.5.9.shift"]
    bare = rb.rebase(series_copy, sha, upstream_clone=clone["repo"], write=False)
    assert bare.out_dir.name == f"sglang-{sha[:12]}" and bare.exit_code == 0


def test_induced_ambiguity_is_reported_not_guessed(series_copy, clone, tmp_path):
    result = rb.rebase(
        series_copy, "dup", upstream_clone=clone["repo"], out_dir=tmp_path / "dup", context_trim=True
    )
    assert result.exit_code == 1
    assert attention(result) == {("0005-verify.patch", 1)}
    hunk = hunk_of(result, "0005-verify.patch", 1)
    assert "occur 2 times" in hunk.reason
    assert len(hunk.candidates) == 2 and all(c.matching == c.of == 6 for c in hunk.candidates)
    first, second = (c.line for c in hunk.candidates)
    assert first == 703 + 3 and second > 1032
    report = (tmp_path / "dup" / "REBASE.md").read_text()
    assert f"line {first} (all 6 lines match); line {second} (all 6 lines match)" in report
    assert "upstream changed nothing within 8 lines of its old location" in report
    assert (" " + rb.MARKER) in (tmp_path / "dup" / "0005-verify.patch").read_text()
    tree = checkout_tree(clone, "dup", tmp_path / "work")
    code, text = refusal(tmp_path / "dup", tree)
    assert code in (1, 2) and "patchkit rebase" in text


def test_deleted_anchor_then_context_trim_then_resume(series_copy, clone, tmp_path):
    out = tmp_path / "gone"
    result = rb.rebase(series_copy, "gone", upstream_clone=clone["repo"], out_dir=out, merge=False)
    assert result.exit_code == 1
    assert attention(result) == {("0005-verify.patch", 2)}
    hunk = hunk_of(result, "0005-verify.patch", 2)
    assert "occur nowhere" in hunk.reason and hunk.candidates
    assert hunk.candidates[0].matching >= 3 and hunk.candidates[0].of == 6
    assert "-        # Forward\n" in hunk.upstream_diff
    tree = checkout_tree(clone, "gone", tmp_path / "work")
    code, text = refusal(out, tree)
    assert code in (1, 2) and "patchkit rebase" in text

    # --context-trim: the block without its trailing context is unique: placed, refilled, said
    trim = rb.rebase(
        series_copy,
        "gone",
        upstream_clone=clone["repo"],
        out_dir=tmp_path / "trim",
        context_trim=True,
        merge=False,
    )
    assert trim.exit_code == 0
    placed = hunk_of(trim, "0005-verify.patch", 2)
    assert placed.trimmed is not None and placed.trimmed[0] == 0 and placed.status == "moved"
    assert "context trimmed" in (tmp_path / "trim" / "REBASE.md").read_text()
    assert ops.verify(str(tmp_path / "trim"), [str(tree)]).exit_code == 0

    # by hand: drop the marker and the vanished context line, leave the header counts and
    # line numbers stale (resume recounts and relocates), strip a blank context line's space
    # the way editors do
    path = out / "0005-verify.patch"
    text = path.read_text()
    assert text.count("\n         # Forward\n") == 1
    text = text.replace(" " + rb.MARKER + "\n", "").replace("\n         # Forward\n", "\n")
    text = text.replace(
        "             ).cpu()\n \n+        _pt.end", "             ).cpu()\n\n+        _pt.end"
    )
    path.write_text(text)
    resumed = rb.rebase(series_copy, "gone", upstream_clone=clone["repo"], out_dir=out, resume=True)
    assert resumed.exit_code == 0, [h.describe() for h in resumed.attention]
    assert {h.patch for h in resumed.hunks if h.edited} >= {"0005-verify.patch"}
    fixed = path.read_text()
    assert not fixed.startswith(rb.NOTE_FIRST) and rb.MARKER not in fixed
    report = (out / "REBASE.md").read_text()
    assert "## Resume" in report
    first_run = report.split("## Resume")[0]  # its top says what holds now
    assert "**Now, after --resume:**" in first_run and "exit code 0 (see the Resume" in first_run
    assert "\n- result:" not in first_run and "- result of the first run:" in first_run
    assert ops.verify(str(out), [str(tree)]).exit_code == 0
    again = rb.rebase(series_copy, "gone", upstream_clone=clone["repo"], out_dir=out, resume=True)
    assert {h.status for h in again.hunks} == {"unchanged", "carried"}


def test_file_gone_and_created_file_taken(series_copy, clone, tmp_path):
    gone = rb.rebase(series_copy, "nofile", upstream_clone=clone["repo"], out_dir=tmp_path / "a")
    assert gone.exit_code == 1
    worker = [h for h in gone.hunks if h.path == EAGLE_WORKER]
    assert len(worker) == 26 and not any(h.relocated for h in worker)
    assert all("is not in sglang nofile" in h.reason for h in worker)
    pin = upstream.read_pin(tmp_path / "a" / "pin.toml")
    assert next(iter(pin.files.values())).lines == 1032, (
        "an entry for a file the release lacks is kept as it was"
    )

    taken = rb.rebase(series_copy, "timer", upstream_clone=clone["repo"], out_dir=tmp_path / "b")
    assert taken.exit_code == 1
    assert attention(taken) == {("0001-phase-timer-runtime.patch", 1)}
    assert "has such a file" in taken.attention[0].reason


# ----------------------------------------------------------------------------- small pieces


def _hunk(text: str):
    return parse_patch("t.patch", text.encode()).files[0].hunks[0]


def _lines(*texts: str) -> list:
    return [(t.encode(), True) for t in texts]


def test_trim_refuses_when_trimmed_blocks_point_at_different_places():
    hunk = _hunk("--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n+new\n b\n")
    lines = _lines("a", "x", "q", "b")
    assert not relocate.place_hunk(lines, hunk).ok
    p = relocate.place_hunk(lines, hunk, context_trim=True)
    assert not p.ok and "several places" in p.reason
    lines = _lines("a", "x", "b", "q", "b")
    p = relocate.place_hunk(lines, hunk, context_trim=True)
    assert p.ok and p.index == 0 and p.trimmed == (0, 1)
    assert [(ln.tag, ln.text) for ln in p.lines] == [(" ", b"a"), ("+", b"new"), (" ", b"x")]


def test_recount_fixes_counts_and_target_starts():
    text = (
        "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -5,9 +5,9 @@ def f():\n a\n+b\n c\n"
        "@@ -20,1 +20,1 @@\n x\n+y\n"
    )
    fixed = rb.recount(text)
    assert "@@ -5,2 +5,3 @@ def f():\n" in fixed and "@@ -20,1 +21,2 @@\n" in fixed
    parse_patch("f.patch", fixed.encode())


def test_tasks_patch_rebase_and_patch_diff(series_copy, tmp_path):
    out = tmp_path / "cli"
    run = invoke(
        "patch.rebase",
        "--series",
        str(series_copy),
        "--onto",
        "0.5.10",
        "--out",
        str(out),
        "--no-merge",
        *(["--wheelhouse", WH] if WH else []),
    )
    assert run.returncode == 1, run.stderr
    assert "4 need attention" in run.stdout and run.stdout.count("needs attention: ") == 4
    merged = invoke(
        "patch.rebase",
        "--series",
        str(series_copy),
        "--onto",
        "0.5.10",
        "--out",
        str(tmp_path / "merged"),
        *(["--wheelhouse", WH] if WH else []),
    )
    assert merged.returncode == 0, merged.stderr
    assert "4 merged+checked, 0 need attention" in merged.stdout
    assert f"report: {out / 'REBASE.md'}" in run.stdout
    again = invoke(
        "patch.rebase",
        "--series",
        str(series_copy),
        "--onto",
        "0.5.10",
        "--out",
        str(out),
        *(["--wheelhouse", WH] if WH else []),
    )
    assert again.returncode == 2 and "already exists" in again.stderr
    assert invoke("patch.rebase", "--series", str(series_copy)).returncode == 2
    diff = invoke("patch.diff", "--from", str(series_copy), "--to", str(out))
    assert diff.returncode == 0 and "version: 0.5.9 -> 0.5.10" in diff.stdout


def test_a_marked_hunk_between_close_neighbours_keeps_the_patch_well_formed(tmp_path):
    from support.engine import make_series, write_tree

    old = "".join(f"l{n:02}\n" for n in range(1, 25))
    patch = (
        "diff --git a/pkg/data.txt b/pkg/data.txt\n--- a/pkg/data.txt\n+++ b/pkg/data.txt\n"
        "@@ -1,6 +1,7 @@\n l01\n l02\n l03\n+X1\n l04\n l05\n l06\n"
        "@@ -7,6 +8,7 @@\n l07\n l08\n l09\n+X2\n l10\n l11\n l12\n"
        "@@ -13,6 +15,7 @@\n l13\n l14\n l15\n+X3\n l16\n l17\n l18\n"
    )
    series = make_series(tmp_path / "s", {"pkg/data.txt": old.encode()}, [("0001.patch", patch.encode())])
    cases = {
        "changed": old.replace("l09\n", "L09\n"),  # 6 lines of room
        "deleted": old.replace("".join(f"l{n:02}\n" for n in range(7, 13)), ""),
    }  # none
    for name, new in cases.items():
        write_tree(tmp_path / name / "old", {"pkg/data.txt": old.encode()})
        write_tree(tmp_path / name / "new", {"pkg/data.txt": new.encode()})
        out = tmp_path / name / "out"
        result = rb.rebase(
            series, "2", old_tree=tmp_path / name / "old", new_tree=tmp_path / name / "new", out_dir=out
        )
        assert attention(result) == {("0001.patch", 2)}, name
        written = parse_patch("0001.patch", (out / "0001.patch").read_bytes())  # well-formed
        assert [len(h.source) for h in written.files[0].hunks][1] == 1  # marker line only
        code, text = refusal(out, tmp_path / name / "new")
        assert code == 2 and "patchkit rebase" in text, name
