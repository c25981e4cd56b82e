"""The committed series patches/transformers-v5.17.0 against the real 5.17.0 wheel's files."""

from __future__ import annotations

import ast
import json
import py_compile
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from patchkit import ops
from patchkit.author import authoring, upstream
from support.ast_checks import strip_inserted, timer_calls_by_function
from support.series import exported, patch_text
from support.upstream import REPO, default_wheelhouse, git

pytestmark = [pytest.mark.wheels]

SERIES = REPO / "patches" / "transformers-v5.17.0"
UTILS = "transformers/generation/utils.py"
CANDIDATES = "transformers/generation/candidate_generator.py"
PHASE_TIMER = "transformers/generation/phase_timer.py"
RUNTIME_SOURCE = REPO / "patchkit" / "timing" / "phase_timer.py"
RUNTIME_PATCH = "0001-phase-timer-runtime.patch"
IMPORT_LINE = "from . import phase_timer as _pt"
WHEEL = "transformers-5.17.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def pristine() -> Path:
    """The cached installed-layout tree of the two pinned files (read it, do not write to it)."""
    return upstream.pypi_tree(
        "transformers",
        "5.17.0",
        [UTILS, CANDIDATES],
        layout="installed",
        package_prefix="",
        wheelhouse=default_wheelhouse(),
    )


@pytest.fixture
def site(tmp_path, pristine) -> Path:
    dest = tmp_path / "site-packages"
    shutil.copytree(pristine, dest)
    return dest


def names() -> list[str]:
    return authoring.read_series_names(SERIES)


def added_lines(path: str | None = None) -> list[str]:
    """Lines the patches after the runtime add (to ``path`` only, when given)."""
    lines = []
    for name in names()[1:]:
        _, body = authoring.split_header(patch_text(SERIES, name))
        current = None
        for line in body.splitlines():
            if line.startswith("+++ b/"):
                current = line[6:]
            elif line.startswith("+") and not line.startswith("+++") and (path is None or current == path):
                lines.append(line[1:])
    return lines


def patched_state(pristine: Path) -> dict[str, str]:
    return authoring.load_stack(SERIES, pristine).states[-1]


# ----------------------------------------------------------------------------- pin and form


def test_pin_is_the_wheel_files_hash_and_line_count(pristine):
    wheel = upstream.fetch_wheel("transformers", "5.17.0", wheelhouse=default_wheelhouse())
    assert wheel.path.name == WHEEL and wheel.trust == "pinned"
    assert wheel.sha256 == upstream.KNOWN_WHEELS[WHEEL]
    pin = upstream.pin_from_tree(pristine, [UTILS, CANDIDATES], "transformers", "5.17.0")
    assert upstream.format_pin(pin) == (SERIES / "pin.toml").read_text()
    data = upstream.read_wheel_files(wheel.path, [UTILS])[UTILS]
    assert next(iter(pin.files.values())).lines == upstream.count_lines(data) == 4250
    assert pin.package_prefix is None and pin.commit is None


def test_the_runtime_patch_puts_the_runtime_beside_the_generation_utils():
    # that every series' runtime patch is the runtime's rendering, in the checkout and exported,
    # is checked once for all series: tests/engine/test_runtime_patch.py
    assert authoring.created_paths(patch_text(SERIES, RUNTIME_PATCH)) == [PHASE_TIMER]


def test_stale_runtime_patch_is_detected(tmp_path):
    # a folder holding the patch as a file (exported, installed, a user's copy) can go stale
    copy = tmp_path / "series"
    shutil.copytree(exported(SERIES), copy)
    source = tmp_path / "phase_timer.py"
    source.write_text(RUNTIME_SOURCE.read_text() + "# changed\n")
    assert authoring.regenerate_runtime_patches(copy, source, write=False) == [(RUNTIME_PATCH, True)]
    # the checkout's marker cannot: it is rendered from patchkit/timing on every read
    marker_form = tmp_path / "marker-form"
    shutil.copytree(SERIES, marker_form)
    assert not (marker_form / RUNTIME_PATCH).exists()
    assert authoring.regenerate_runtime_patches(marker_form, source, write=False) == [(RUNTIME_PATCH, False)]


def test_patches_only_insert_single_statements_with_headers():
    assert names()[0] == RUNTIME_PATCH and names() == sorted(names()) and len(names()) >= 6
    for name in names():
        header, body = authoring.split_header(patch_text(SERIES, name))
        assert len(header.strip()) > 40, f"{name}: needs a header saying what it times"
        removed = [ln for ln in body.splitlines() if ln.startswith("-") and not ln.startswith("---")]
        assert removed == [], f"{name} removes or changes upstream lines"
    for path in (UTILS, CANDIDATES):
        assert added_lines(path).count(IMPORT_LINE) == 1, path
    for line in added_lines():
        assert line == IMPORT_LINE or line.lstrip().startswith("_pt."), line
        assert len(ast.parse(line.strip()).body) == 1, line


# ----------------------------------------------------------------------------- the patched files


def test_patched_files_compile_and_ast_equal_the_originals(pristine, tmp_path):
    state = patched_state(pristine)
    assert state[PHASE_TIMER] == RUNTIME_SOURCE.read_text()
    total = 0
    for path in (UTILS, CANDIDATES):
        original = (pristine / path).read_text()
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(state[path])
        py_compile.compile(str(target), doraise=True, cfile=str(target) + "c")
        tree = ast.parse(state[path])
        removed = strip_inserted(tree)
        assert removed == len(added_lines(path)) > 0
        total += removed
        assert ast.dump(tree) == ast.dump(ast.parse(original)), path
    assert total == len(added_lines())


def test_phases_balance_within_their_functions(pristine):
    state = patched_state(pristine)
    utils = timer_calls_by_function(state[UTILS])
    cands = timer_calls_by_function(state[CANDIDATES])
    assert set(utils) == {"_assisted_decoding"} and set(cands) == {"get_candidates"}
    seq = utils["_assisted_decoding"]
    assert seq[0] == ("cycle_begin", "") and seq[-1] == ("cycle_end", "")
    phases = [label for kind, label in seq if kind == "begin"]
    assert phases == [
        "draft",
        "verify",
        "verify_forward",
        "accept",
        "kv_crop",
        "update_strategy",
        "bookkeeping",
    ]
    assert sorted(phases) == sorted(label for kind, label in seq if kind == "end")
    depth = 0
    for kind, _ in seq[1:-1]:  # properly nested: never below zero, back to zero at the end
        depth += 1 if kind == "begin" else -1
        assert depth >= 0
    assert depth == 0
    assert cands["get_candidates"] == [
        ("begin", "draft_cache"),
        ("end", "draft_cache"),
        ("begin", "draft_generate"),
        ("end", "draft_generate"),
    ]


def test_inserted_calls_use_only_host_values(pristine):
    """No .item()/.tolist()/.cpu()/int(tensor) in an inserted line: nothing adds a sync."""
    for line in added_lines():
        for bad in (".item(", ".tolist(", ".cpu(", "int(", "float(", "synchronize"):
            assert bad not in line, line
    ends = [ln.strip() for ln in added_lines(UTILS) if "cycle_end" in ln]
    assert ends == [
        "_pt.cycle_end(accepted=valid_tokens.shape[1] - 1, "
        "tokens=valid_tokens.shape[1], drafted=candidate_length)"
    ]


def test_inserted_calls_run_against_the_real_runtime(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("pt_under_test_tf", RUNTIME_SOURCE)
    pt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pt)
    assert pt.configure(mode="host", directory=str(tmp_path)) == "host"
    env = {
        "_pt": pt,
        "batch_size": 1,
        "is_first_iteration": False,
        "candidate_length": 4,
        "valid_tokens": SimpleNamespace(shape=(1, 3)),
    }
    for stmt in [ln.strip() for ln in added_lines(UTILS) if ln != IMPORT_LINE]:
        exec(compile(stmt, "<inserted>", "exec"), {"__builtins__": __builtins__}, dict(env))
    assert pt.current_mode() == "host"
    pt.shutdown()
    records = [json.loads(line) for f in tmp_path.glob("*.jsonl") for line in f.open()]
    (cycle,) = [r for r in records if r["kind"] == "cycle"]
    assert cycle["attrs"] == {"batch_size": 1, "prefill": False, "accepted": 2, "tokens": 3, "drafted": 4}
    assert {r["name"] for r in records if r["kind"] == "phase"} == {
        "draft",
        "verify",
        "verify_forward",
        "accept",
        "kv_crop",
        "update_strategy",
        "bookkeeping",
    }


# ----------------------------------------------------------------------------- through the engine


def test_git_apply_lands_every_hunk_at_zero_offset(site):
    git(site, "init", "-q")
    for name in names():
        proc = git(site, "apply", "-v", str(exported(SERIES) / name), check=False)
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
        assert "offset" not in proc.stderr and "fuzz" not in proc.stderr.lower(), proc.stderr


def test_engine_verify_apply_revert_on_an_installed_tree(site, pristine):
    opts = ops.Options(layout="installed")
    before = {p: (site / p).read_bytes() for p in (UTILS, CANDIDATES)}
    assert ops.verify(str(SERIES), [str(site)], opts).exit_code == 0
    applied = ops.apply(str(SERIES), [str(site)], opts)
    assert applied.exit_code == 0, applied.hosts[0].messages
    assert sorted(applied.hosts[0].written) == sorted([PHASE_TIMER, UTILS, CANDIDATES])
    state = patched_state(pristine)
    for path in (PHASE_TIMER, UTILS, CANDIDATES):
        assert (site / path).read_text() == state[path]
    assert ops.status(str(SERIES), [str(site)], opts).hosts[0].state == "applied"
    assert ops.revert(str(SERIES), [str(site)], opts).exit_code == 0
    assert not (site / PHASE_TIMER).exists()
    assert {p: (site / p).read_bytes() for p in (UTILS, CANDIDATES)} == before
    assert ops.status(str(SERIES), [str(site)], opts).hosts[0].state == "pristine"


def test_engine_refuses_a_tree_with_another_version(site):
    meta = next(site.glob("transformers-*.dist-info")) / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 5.17.0", "Version: 5.18.0"))
    text = (site / UTILS).read_text()
    (site / UTILS).write_text(
        text.replace(
            "        cache.activate_past_recording()\n", "        cache.activate_past_recording()\n\n", 1
        )
    )
    result = ops.verify(str(SERIES), [str(site)], ops.Options(layout="installed"))
    assert result.exit_code == 1
    text = " ".join(result.hosts[0].messages + [f.detail for f in result.hosts[0].files])
    assert "5.17.0" in text and UTILS in " ".join(f.path for f in result.hosts[0].files)


def test_refresh_reproduces_every_patch_byte_for_byte(tmp_path, pristine):
    copy = tmp_path / "series"
    shutil.copytree(SERIES, copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    for name in names()[1:]:
        work = authoring.prepare_edit_tree(copy, pristine, tmp_path / name, upto=name, layout="installed")
        assert authoring.refresh(copy, work, pristine, patch=name)[1] is False
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before
