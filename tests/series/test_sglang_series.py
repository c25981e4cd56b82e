"""The committed series patches/sglang-v0.5.9 against the real 0.5.9 (and 0.5.10) files.

0001-0007 (hand-made) time EAGLEWorker in eagle_worker.py; 0008-0013 (appended by
patchkit.author.seriesgen) time EAGLEWorkerV2 in eagle_worker_v2.py."""

from __future__ import annotations

import ast
import json
import py_compile
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from patchkit.author import authoring, upstream
from support.ast_checks import strip_inserted, timer_calls_by_function
from support.series import exported, patch_text
from support.upstream import (
    COMMIT_059,
    EAGLE_WORKER,
    EAGLE_WORKER_V2,
    PHASE_TIMER,
    REPO,
    SERIES_059,
    V2_APPENDED,
    git,
)

pytestmark = [pytest.mark.wheels]

RUNTIME_SOURCE = REPO / "patchkit" / "timing" / "phase_timer.py"
RUNTIME_PATCH = "0001-phase-timer-runtime.patch"
IMPORT_LINE = "from sglang.srt.speculative import phase_timer as _pt"


def series_names() -> list[str]:
    return authoring.read_series_names(SERIES_059)


def apply_series(tree: Path, *strip: str) -> list[str]:
    """git apply each patch in order; returns git's verbose output per patch."""
    outputs = []
    for name in series_names():
        proc = git(tree, "apply", "-v", *strip, str(exported(SERIES_059) / name), check=False)
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
        outputs.append(proc.stderr + proc.stdout)
    return outputs


def added_lines() -> list[str]:
    lines = []
    for name in series_names()[1:]:
        _, body = authoring.split_header(patch_text(SERIES_059, name))
        for line in body.splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                lines.append(line[1:])
    return lines


# ----------------------------------------------------------------------------- the files


def test_pin_is_what_upstream_pin_writes_for_the_real_file(sglang_059_pristine):
    pin = upstream.pin_from_tree(
        sglang_059_pristine, [EAGLE_WORKER, EAGLE_WORKER_V2], "sglang", "0.5.9", COMMIT_059, "python/"
    )
    assert upstream.format_pin(pin) == (SERIES_059 / "pin.toml").read_text()
    assert [f.lines for f in pin.files.values()] == [1032, 878]


def test_the_runtime_patch_puts_the_runtime_beside_the_eagle_worker():
    # the checkout holds the marker (rendered on every read), users a file; that both are the
    # runtime's bytes is checked once for all series: tests/engine/test_runtime_patch.py
    assert not (SERIES_059 / RUNTIME_PATCH).exists()
    assert (SERIES_059 / (RUNTIME_PATCH + ".runtime")).read_text().splitlines()[-1] == PHASE_TIMER
    assert authoring.created_paths(patch_text(SERIES_059, RUNTIME_PATCH)) == [PHASE_TIMER]


def test_series_order_headers_and_insert_only_patches():
    names = series_names()
    assert names[0] == RUNTIME_PATCH and len(names) >= 6
    assert names == sorted(names)
    for name in names:
        header, body = authoring.split_header(patch_text(SERIES_059, name))
        assert len(header.strip()) > 40, f"{name}: needs a header saying what it times"
        assert body.startswith("diff --git a/python/sglang/srt/speculative/")
        if name != RUNTIME_PATCH:
            removed = [ln for ln in body.splitlines() if ln.startswith("-") and not ln.startswith("---")]
            assert removed == [], f"{name} removes or changes upstream lines"
    assert names[7:] == V2_APPENDED
    for name in names[1:]:
        touched = {ln[6:] for ln in patch_text(SERIES_059, name).splitlines() if ln.startswith("+++ b/")}
        assert touched == {EAGLE_WORKER_V2 if name in V2_APPENDED else EAGLE_WORKER}, name
    added = added_lines()
    assert added.count(IMPORT_LINE) == 2  # once in each worker file
    for line in added:
        assert line == IMPORT_LINE or line.lstrip().startswith("_pt."), line
        assert len(ast.parse(line.strip()).body) == 1, line  # one statement per line


def test_series_applies_to_checkout_with_zero_offset_and_compiles(sglang_checkout_trees):
    tree = sglang_checkout_trees["0.5.9"]
    for out in apply_series(tree):
        assert "offset" not in out and "fuzz" not in out.lower(), out
    py_compile.compile(str(tree / EAGLE_WORKER), doraise=True, cfile=str(tree / "ew.pyc"))
    py_compile.compile(str(tree / PHASE_TIMER), doraise=True, cfile=str(tree / "pt.pyc"))
    assert (tree / PHASE_TIMER).read_bytes() == RUNTIME_SOURCE.read_bytes()


def test_patched_file_differs_from_the_original_only_by_inserted_statements(sglang_059_checkout):
    tmp = sglang_059_checkout
    originals = {p: (tmp / p).read_text() for p in (EAGLE_WORKER, EAGLE_WORKER_V2)}
    git(tmp, "init", "-q")
    apply_series(tmp)
    removed = 0
    for path, original in originals.items():
        patched = (tmp / path).read_text()
        assert patched != original
        patched_tree = ast.parse(patched)
        removed += strip_inserted(patched_tree)
        assert ast.dump(patched_tree) == ast.dump(ast.parse(original)), path
    assert removed == len(added_lines())


def test_series_applies_to_an_installed_tree(sglang_059_installed):
    site = sglang_059_installed
    git(site, "init", "-q")
    apply_series(site, "-p2")  # drops a/python/, i.e. the pin's package_prefix
    assert (site / "sglang/srt/speculative/phase_timer.py").is_file()
    assert "_pt.cycle_begin(" in (site / "sglang/srt/speculative/eagle_worker.py").read_text()


def test_series_does_not_apply_exactly_to_0510(sglang_0510_checkout):
    tree = sglang_0510_checkout
    assert upstream.count_lines((tree / EAGLE_WORKER).read_bytes()) == 1052
    git(tree, "init", "-q")
    problems = []
    for name in series_names():
        proc = git(tree, "apply", "-v", str(exported(SERIES_059) / name), check=False)
        out = proc.stdout + proc.stderr
        if proc.returncode != 0 or "offset" in out:
            problems.append(name)
    assert problems, "0.5.9's hunks should not land exactly on 0.5.10"
    assert set(problems) >= {"0002-cycle.patch"}
    # The exact applier (no offsets) refuses the first eagle_worker patch outright.
    files = {EAGLE_WORKER: (tree / EAGLE_WORKER).read_text()}
    files = authoring.apply_patch(files, patch_text(SERIES_059, RUNTIME_PATCH), "0001")
    with pytest.raises(authoring.AuthoringError, match="does not match"):
        authoring.apply_patch(files, (SERIES_059 / "0002-cycle.patch").read_text(), "0002")


# ----------------------------------------------------------------------------- the calls


def test_every_phase_that_begins_ends_in_the_same_function(sglang_059_pristine):
    state = authoring.load_stack(SERIES_059, sglang_059_pristine).states[-1]
    functions = {
        EAGLE_WORKER: {
            "forward_batch_generation",
            "draft",
            "draft_forward",
            "verify",
            "forward_draft_extend_after_decode",
            "forward_target_extend",
            "forward_draft_extend",
        },
        EAGLE_WORKER_V2: {
            "forward_batch_generation",
            "draft",
            "draft_forward",
            "verify",
            "_draft_extend_for_decode",
            "_draft_extend_for_prefill",
        },
    }
    for path, wanted in functions.items():
        calls = timer_calls_by_function(state[path])
        phases = set()
        for func, seq in calls.items():
            begun = {label for kind, label in seq if kind == "begin"}
            ended = {label for kind, label in seq if kind == "end"}
            assert begun == ended, func
            kinds = [kind for kind, _ in seq]
            assert kinds.count("cycle_begin") == kinds.count("cycle_end"), func
            phases |= begun
        assert phases >= {
            "draft_preprocess",
            "draft_forward",
            "draft_step",
            "build_tree",
            "target_verify",
            "accept",
            "draft_extend_after_decode",
            "target_extend",
            "draft_extend",
        }, path
        assert set(calls) >= wanted, path


def test_inserted_calls_run_against_the_real_runtime(tmp_path, monkeypatch):
    """Every inserted statement, evaluated with host values like upstream's, must not raise."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pt_under_test", RUNTIME_SOURCE)
    pt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pt)
    assert pt.configure(mode="host", directory=str(tmp_path)) == "host"
    env = {
        "_pt": pt,
        "i": 0,
        "can_cuda_graph": True,
        "can_run_cuda_graph": False,
        "batch": SimpleNamespace(batch_size=lambda: 4),
        "verify_output": SimpleNamespace(accept_length_per_req_cpu=[1, 0, 3, 2]),
        "model_worker_batch": SimpleNamespace(seq_lens=SimpleNamespace(shape=(4,))),  # v2
        "batch_output": SimpleNamespace(accept_lens=[2, 1, 4, 3]),
    }
    statements = [ln.strip() for ln in added_lines() if ln != IMPORT_LINE]
    for stmt in statements:
        exec(compile(stmt, "<inserted>", "exec"), {"__builtins__": __builtins__}, dict(env))
    assert pt.current_mode() == "host", "the runtime turned itself off"
    pt.shutdown()
    records = [json.loads(line) for f in tmp_path.glob("*.jsonl") for line in f.open()]
    cycles = [r for r in records if r["kind"] == "cycle"]
    assert any(r["attrs"].get("accepted") == 6 and r["attrs"].get("batch_size") == 4 for r in cycles)
    assert any(
        r["attrs"].get("tokens") == [2, 1, 4, 3] and r["attrs"].get("batch_size") == 4 for r in cycles
    )  # EAGLEWorkerV2's decode cycle
    assert {r["name"] for r in records if r["kind"] == "phase"} >= {"draft_preprocess", "accept"}


# ----------------------------------------------------------------------------- authoring


def test_refresh_reproduces_every_patch_byte_for_byte(tmp_path, sglang_059_pristine):
    sdir = tmp_path / "series"
    shutil.copytree(SERIES_059, sdir)
    before = {p.name: p.read_bytes() for p in sdir.iterdir()}
    for name in series_names():
        work = authoring.prepare_edit_tree(sdir, sglang_059_pristine, tmp_path / name, upto=name)
        assert authoring.refresh(sdir, work, sglang_059_pristine, patch=name)[1] is False
    assert {p.name: p.read_bytes() for p in sdir.iterdir()} == before


def test_user_timer_patch_goes_on_top_of_the_series(tmp_path, sglang_059_pristine):
    sdir = tmp_path / "series"
    shutil.copytree(SERIES_059, sdir)
    work = authoring.prepare_edit_tree(sdir, sglang_059_pristine, tmp_path / "work")
    path = work / EAGLE_WORKER
    text = path.read_text()
    anchor = "            self._mamba_verify_update(\n"
    assert text.count(anchor) == 1
    text = text.replace(anchor, '            _pt.begin("mamba_update")\n' + anchor)
    text = text.replace(
        "        if batch.return_logprob:\n            add_output_logprobs",
        '        _pt.end("mamba_update")\n        if batch.return_logprob:\n            add_output_logprobs',
    )
    path.write_text(text)
    patch = authoring.new_patch(
        sdir,
        "0100-mamba.patch",
        work,
        sglang_059_pristine,
        header="Times the mamba state update after verify.\n\n",
    )
    assert authoring.read_series_names(sdir)[-1] == "0100-mamba.patch"
    tree = tmp_path / "ck"
    shutil.copytree(sglang_059_pristine, tree)
    git(tree, "init", "-q")
    users = authoring.export_series(sdir, tmp_path / "exported")[0]  # as users get it: every patch a file
    for name in authoring.read_series_names(sdir):
        proc = git(tree, "apply", "-v", str(users / name), check=False)
        assert proc.returncode == 0 and "offset" not in proc.stderr, proc.stderr
    assert (tree / EAGLE_WORKER).read_text() == text
    added = [ln[1:] for ln in patch.read_text().splitlines() if ln.startswith("+") and ln[:3] != "+++"]
    assert added == ['            _pt.begin("mamba_update")', '        _pt.end("mamba_update")']
