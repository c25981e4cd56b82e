"""The static proof (patchkit/author/phaseproof.py) of every shipped sglang series, each applied
to its release's files from the pinned wheel; and the same proof failing on series made broken
here, from a shipped one, by deleting one timer line from one of its patches.

Its rules on small worker files: tests/author/test_phaseproof.py. The record of which series
it proves: patches/proofs.toml (tests/series/test_proofs.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from patchkit import proofs
from patchkit.author import authoring, phaseproof, sglang_releases as rel
from patchkit.engine.series import load_series
from patchkit.upstream import read_pin

pytestmark = pytest.mark.wheels

PATCHES = Path(__file__).resolve().parents[2] / "patches"
SERIES = phaseproof.proved_series()


@pytest.mark.parametrize("series", SERIES)
def test_every_shipped_sglang_series_is_proven(series):
    proof = phaseproof.prove(PATCHES / series)
    assert proof.ok, "\n".join(map(str, proof.findings))
    # the entry is the worker of each file the release ships: v1 up to 0.5.12, v2 from 0.5.3.post2
    pinned = {Path(p).name for p in read_pin(PATCHES / series / "pin.toml").files}
    workers = {e.split(".")[0] for e in proof.entries}
    assert workers == {
        w
        for w, f in (("EAGLEWorker", "eagle_worker.py"), ("EAGLEWorkerV2", "eagle_worker_v2.py"))
        if f in pinned
    }
    # every phase the series times sits in a function the proof reached
    assert len(proof.reached) >= 6, proof.reached
    assert proofs.read_proofs()[series].static == phaseproof.CHECKER_VERSION


def test_the_v2_only_releases_reach_verify_through_eagle_worker_common():
    """From 0.5.16 the verify phases live in eagle_worker_common.run_eagle_verify, a module
    function EAGLEWorkerV2.verify calls: the call graph follows the import."""
    for series in ("sglang-v0.5.16", "sglang-v0.5.23"):
        proof = phaseproof.prove(PATCHES / series)
        assert proof.reached["run_eagle_verify"] == (
            "EAGLEWorkerV2.forward_batch_generation -> EAGLEWorkerV2.verify -> run_eagle_verify"
        )


HUNK = re.compile(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@")


def broken_series(source: Path, patch: str, line: str, dest: Path) -> Path:
    """A copy of ``source`` whose ``patch`` lacks its added ``line`` (the first one equal to it,
    stripped), with every hunk header after it counted again, in this patch and in the later
    patches of the same file: a series the engine reads and applies as any other."""
    dest = dest / source.name
    shutil.copytree(source, dest)
    lines = (dest / patch).read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("+") and ln[1:].strip() == line)
    file_start = max(i for i in range(at) if lines[i].startswith("+++ "))
    path = lines[file_start][4:].strip()
    own = max(i for i in range(file_start, at) if HUNK.match(lines[i]))
    m = HUNK.match(lines[own])
    assert m is not None
    gone = int(m.group(3)) + sum(1 for ln in lines[own + 1 : at] if ln[:1] in (" ", "+"))
    del lines[at]
    lines[own] = _shifted(lines[own], new_count=-1)
    for i in range(own + 1, len(lines)):
        if lines[i].startswith("+++ "):
            break  # the next file's hunks keep their numbers
        lines[i] = _shifted(lines[i], new_start=-1)
    (dest / patch).write_text("".join(lines))
    names = authoring.read_series_names(dest)
    for later in names[names.index(patch) + 1 :]:  # they address the file with the line gone
        text = (dest / later).read_text().splitlines(keepends=True)
        current = None
        for i, ln in enumerate(text):
            if ln.startswith("+++ "):
                current = ln[4:].strip()
            elif current == path and (m := HUNK.match(ln)) and int(m.group(1)) > gone:
                text[i] = _shifted(ln, old_start=-1, new_start=-1)
        (dest / later).write_text("".join(text))
    return dest


def _shifted(header: str, old_start: int = 0, new_start: int = 0, new_count: int = 0) -> str:
    m = HUNK.match(header)
    if m is None:
        return header
    a, b, c, d = map(int, m.groups())
    return HUNK.sub(f"@@ -{a + old_start},{b} +{c + new_start},{d + new_count} @@", header, count=1)


BROKEN = [
    # (series, patch, deleted line, the finding's message)
    (
        "sglang-v0.5.17",
        "0005-verify.patch",
        '_pt.end("accept")',
        "leaves 'accept' open",
    ),
    (
        "sglang-v0.5.17",
        "0002-cycle.patch",
        "_pt.cycle_end()",
        "leaves 'cycle' open",
    ),
    (
        "sglang-v0.5.9",
        "0004-draft-steps.patch",
        '_pt.end("draft_step")',
        "an iteration of this loop begins 'draft_step' and does not end it",
    ),
]


@pytest.mark.parametrize(("series", "patch", "line", "message"), BROKEN, ids=lambda v: str(v)[:24])
def test_a_series_with_an_unbalanced_phase_fails_the_proof(series, patch, line, message, tmp_path, capsys):
    broken = broken_series(PATCHES / series, patch, line, tmp_path)
    load_series(str(broken))  # a valid series: the loader and the exact apply take it
    proof = phaseproof.prove(broken)
    assert not proof.ok
    assert any(message in f.message for f in proof.findings), "\n".join(map(str, proof.findings))
    assert phaseproof.main([str(broken)]) == 1
    out = capsys.readouterr().out
    assert f"{series} (sglang " in out and "FAILED" in out and message in out
    assert phaseproof.main([str(PATCHES / series)]) == 0


@pytest.mark.parametrize("series", ["sglang-v0.5.17", "sglang-v0.5.9"])
def test_deleting_any_one_timer_line_of_a_series_fails_the_proof(series):
    """Every begin, end, cycle_begin and cycle_end of a series (EAGLEWorkerV2 with
    eagle_worker_common.py; both workers), deleted one at a time from the patched files, leaves
    a finding: none of them is one the proof cannot miss."""
    name, version, files = phaseproof.patched_files(PATCHES / series)
    mutants = 0
    for path, text in files.items():
        lines = text.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if re.match(r"\s*_pt\.(begin|end|cycle_begin|cycle_end)\(", line):
                mutated = {**files, path: "".join(lines[:i] + lines[i + 1 :])}
                proof = phaseproof.prove_files("mutant", name, version, mutated)
                assert not proof.ok, f"{path}:{i + 1} {line.strip()} deleted, and the proof still holds"
                mutants += 1
    assert mutants >= 20


def test_the_release_table_and_the_proven_series_agree():
    """The proof runs on every series the release table names (none left out)."""
    assert set(SERIES) == set(rel.series_folders())
