"""The shipped series for newer SGLang releases, on the real files of their PyPI wheels:
sglang-v0.5.10 and sglang-v0.5.12 (made by patch.rebase from v0.5.9 plus recorded hand fixes,
and their EAGLEWorkerV2 patches: 0.5.12's authored with patch.new, 0.5.10's appended by
patchkit.author.seriesgen) and sglang-v0.5.23 (EAGLEWorkerV2, authored with patch.new)."""

from __future__ import annotations

import ast
import json
import py_compile
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from patchkit import ops
from patchkit.author import authoring, rebase as rb, seriesgen, upstream
from patchkit.engine.diffparse import parse_patch
from support.ast_checks import is_inserted, strip_inserted
from support.series import patch_text
from support.upstream import (
    REPO,
    SERIES_059,
    V2_APPENDED,
    default_wheelhouse,
    sglang_checkout,
    sglang_installed,
    v1_part,
    without_also_versions,
)

pytestmark = [pytest.mark.wheels, pytest.mark.slow]

WH = default_wheelhouse()
SPEC = "python/sglang/srt/speculative/"
FILES = {
    "0.5.10": [SPEC + "eagle_worker.py", SPEC + "eagle_worker_v2.py"],
    "0.5.12": [SPEC + "eagle_worker.py", SPEC + "eagle_worker_v2.py"],
    "0.5.23": [SPEC + "eagle_worker_v2.py", SPEC + "eagle_worker_common.py"],
}
VERSIONS = list(FILES)
REBASED = ["0.5.10", "0.5.12"]
# Patches on top of what patch.rebase made from 0.5.9's eagle_worker.py series (its 0001-0007):
# the EAGLEWorkerV2 timers, in 0.5.12 written with patch.new (the default worker there), in
# 0.5.10 appended by patchkit.author.seriesgen (tests/author/test_seriesgen.py checks those).
AUTHORED = {"0.5.12": V2_APPENDED, "0.5.10": V2_APPENDED}
RUNTIME_PATCH = "0001-phase-timer-runtime.patch"
# the phases every release times (seriesgen's list, less the two cycle kinds)
PHASES = {p for p in seriesgen.EXPECTED if not p.startswith("cycle:")}


def series_dir(version: str) -> Path:
    return REPO / "patches" / f"sglang-v{version}"


def wheel_paths(version: str) -> list[str]:
    return [upstream.installed_path(p, "python/") for p in FILES[version]]


def pristine(version: str) -> Path:
    return upstream.pypi_tree("sglang", version, wheel_paths(version), layout="checkout", wheelhouse=WH)


def added_lines(version: str) -> list[str]:
    out = []
    for name in authoring.read_series_names(series_dir(version))[1:]:
        _, body = authoring.split_header((series_dir(version) / name).read_text())
        out += [ln[1:] for ln in body.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return out


def final_state(version: str) -> dict[str, str]:
    return authoring.load_stack(series_dir(version), pristine(version)).states[-1]


# ----------------------------------------------------------------------------- on the releases


@pytest.mark.parametrize("version", VERSIONS)
def test_verify_accepts_the_series_in_both_layouts(version, tmp_path):
    checkout = sglang_checkout(version, tmp_path / "checkout", paths=wheel_paths(version))[0]
    installed = sglang_installed(version, tmp_path / "site", paths=wheel_paths(version))
    for tree in (checkout, installed):
        result = ops.verify(str(series_dir(version)), [str(tree)])
        assert result.exit_code == 0, (tree, result.hosts[0].messages, result.hosts[0].files)
        assert result.hosts[0].state == "pristine"


@pytest.mark.parametrize("version", VERSIONS)
def test_apply_compiles_equals_the_original_by_ast_and_reverts(version, tmp_path):
    tree = sglang_checkout(version, tmp_path / "tree", paths=wheel_paths(version))[0]
    originals = {p: (tree / p).read_bytes() for p in FILES[version]}
    assert ops.apply(str(series_dir(version)), [str(tree)]).exit_code == 0
    inserted = 0
    for path, before in originals.items():
        patched = (tree / path).read_text()
        py_compile.compile(str(tree / path), doraise=True, cfile=str(tmp_path / "x.pyc"))
        parsed = ast.parse(patched)
        inserted += strip_inserted(parsed)
        assert ast.dump(parsed) == ast.dump(ast.parse(before.decode())), path
    assert inserted == len(added_lines(version))
    runtime = tree / SPEC / "phase_timer.py"
    assert runtime.read_bytes() == authoring.runtime_source().read_bytes()
    assert ops.revert(str(series_dir(version)), [str(tree)]).exit_code == 0
    assert {p: (tree / p).read_bytes() for p in FILES[version]} == originals
    assert not runtime.exists()


@pytest.mark.parametrize("version", VERSIONS)
def test_refresh_reproduces_every_patch_byte_for_byte(version, tmp_path):
    sdir = tmp_path / "series"
    shutil.copytree(series_dir(version), sdir)
    before = {p.name: p.read_bytes() for p in sdir.iterdir()}
    base = pristine(version)
    for name in authoring.read_series_names(sdir):
        work = authoring.prepare_edit_tree(sdir, base, tmp_path / name, upto=name)
        assert authoring.refresh(sdir, work, base, patch=name)[1] is False, name
    assert {p.name: p.read_bytes() for p in sdir.iterdir()} == before


@pytest.mark.parametrize("version", VERSIONS)
def test_runtime_patch_is_the_current_runtime_and_the_pin_is_the_release(version):
    assert authoring.regenerate_runtime_patches(series_dir(version), write=False) == [
        (RUNTIME_PATCH, False)
    ], "run `invoke patch.gen-runtime` for this series"
    pin = upstream.read_pin(series_dir(version) / "pin.toml")
    fresh = upstream.pin_from_tree(pristine(version), FILES[version], "sglang", version, None, "python/")
    fresh.also_versions = pin.also_versions  # releases sharing the files (checked in test_series_matrix)
    assert upstream.format_pin(fresh) == upstream.format_pin(pin)


# ----------------------------------------------------------------------------- the calls


def _own_nodes(func: ast.AST):
    """Every node inside ``func`` that belongs to it (nested defs, classes and lambdas excluded)."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _calls(func: ast.AST) -> list[tuple[int, str, str]]:
    """(line, kind, phase) of the _pt calls directly in ``func`` (nested defs excluded)."""
    out = []
    for node in _own_nodes(func):
        if isinstance(node, ast.Expr) and is_inserted(node):
            call = node.value
            label = call.args[0].value if call.args else ""
            out.append((node.lineno, call.func.attr, label))
    return sorted(out)


def _returns(func: ast.AST) -> list[int]:
    return sorted(node.lineno for node in _own_nodes(func) if isinstance(node, ast.Return))


@pytest.mark.parametrize("version", VERSIONS)
def test_phases_close_in_their_function_before_every_return(version):
    phases, functions = set(), set()
    for path, text in final_state(version).items():
        if not path.endswith(tuple(FILES[version])):
            continue
        for func in ast.walk(ast.parse(text)):
            if not isinstance(func, ast.FunctionDef):
                continue
            calls = _calls(func)
            if not calls:
                continue
            functions.add(func.name)
            begun = {label for _, kind, label in calls if kind == "begin"}
            assert begun == {label for _, kind, label in calls if kind == "end"}, func.name
            phases |= begun
            for ret in _returns(func) + [func.end_lineno + 1]:
                before = [(kind, label) for line, kind, label in calls if line < ret]
                still_open = {lb for k, lb in before if k == "begin"} - {lb for k, lb in before if k == "end"}
                assert not still_open, (func.name, ret, still_open)
                kinds = [k for k, _ in before]
                if "cycle_begin" in kinds:
                    assert "cycle_end" in kinds, (func.name, ret)
    assert phases == PHASES, phases ^ PHASES
    if version == "0.5.23":
        assert functions >= {
            "forward_batch_generation",
            "_forward_prefill_batch",
            "draft",
            "draft_forward",
            "run_eagle_verify",
            "_draft_extend_for_decode",
            "_draft_extend_for_prefill",
        }


@pytest.mark.parametrize("version", VERSIONS)
def test_inserted_lines_use_only_names_the_release_has(version):
    """An inserted call may only read names that exist in the release's own file."""
    text = "\n".join(Path(pristine(version), p).read_text() for p in FILES[version])
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    for line in added_lines(version):
        tree = ast.parse(line.strip())
        if isinstance(tree.body[0], ast.ImportFrom):
            continue
        call = tree.body[0].value
        used = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)} - {"_pt", "sum"}
        used |= {
            n.attr
            for arg in [*call.args, *(k.value for k in call.keywords)]
            for n in ast.walk(arg)
            if isinstance(n, ast.Attribute)
        }
        assert used <= names, (line, used - names)


@pytest.mark.parametrize("version", VERSIONS)
def test_inserted_calls_run_against_the_real_runtime(version, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"pt_{version.replace('.', '_')}", authoring.runtime_source()
    )
    pt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pt)
    assert pt.configure(mode="host", directory=str(tmp_path)) == "host"
    env = {
        "_pt": pt,
        "i": 1,
        "can_cuda_graph": False,
        "can_run_cuda_graph": True,
        "batch": SimpleNamespace(batch_size=lambda: 3),
        "verify_output": SimpleNamespace(
            accept_length_per_req_cpu=[1, 2, 0], num_correct_drafts_per_req_cpu=[1, 2, 0]
        ),
        "batch_output": SimpleNamespace(accept_lens=[2, 3, 1]),
        "model_worker_batch": SimpleNamespace(seq_lens=_Lens([7, 8, 9])),
    }
    for line in added_lines(version):
        if not line.lstrip().startswith("_pt."):
            continue
        exec(compile(line.strip(), "<inserted>", "exec"), {"__builtins__": __builtins__}, dict(env))
    assert pt.current_mode() == "host", "the runtime turned itself off"
    pt.shutdown()
    records = [json.loads(x) for f in tmp_path.glob("*.jsonl") for x in f.open()]
    cycles = [r for r in records if r["kind"] == "cycle"]
    assert cycles and all(r["attrs"].get("batch_size") == 3 for r in cycles)
    if version in ("0.5.10", "0.5.12", "0.5.23"):  # v2: per-request committed tokens
        assert any(r["attrs"].get("tokens") == [2, 3, 1] for r in cycles)
    if version != "0.5.23":  # v1: accepted drafts from the host list
        assert any(r["attrs"].get("accepted") == 3 for r in cycles)
    assert {r["name"] for r in records if r["kind"] == "phase"} == PHASES


class _Lens(list):
    """seq_lens as the v2 lines read it: len() (0.5.12) or .shape[0] (0.5.10's appended lines)."""

    @property
    def shape(self):
        return (len(self),)


# ----------------------------------------------------------------------------- made by rebase


@pytest.fixture
def source_v1(tmp_path) -> Path:
    """What 0.5.10's and 0.5.12's 0001-0007 were rebased from: 0.5.9's eagle_worker.py part."""
    return v1_part(SERIES_059, tmp_path / "source")


def rebased_part(version: str, dest: Path) -> Path:
    """A copy of the shipped series without its AUTHORED patches: what patch.rebase made (and
    resumes), with the pin of the files those patches touch."""
    shutil.copytree(series_dir(version), dest)
    authored = AUTHORED.get(version, [])
    for name in authored:
        (dest / name).unlink()
    (dest / "series").write_text(
        "".join(
            ln for ln in (dest / "series").read_text().splitlines(keepends=True) if ln.strip() not in authored
        )
    )
    touched = {
        f.path
        for n in authoring.read_series_names(dest)
        for f in parse_patch(n, patch_text(dest, n).encode()).files
    }
    pin = upstream.read_pin(dest / "pin.toml")
    pin.files = {p: f for p, f in pin.files.items() if p in touched}
    (dest / "pin.toml").write_text(upstream.format_pin(pin))
    return dest


def _flagged(report: str) -> set[tuple[str, int]]:
    return {
        (m.group(1), int(m.group(2))) for m in re.finditer(r"^### (\S+\.patch), hunk (\d+) ", report, re.M)
    }


def _without_runtime_rows(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if "carried over unchanged" not in ln)


@pytest.mark.parametrize("version", REBASED)
def test_rebase_reports_exactly_the_hunks_fixed_by_hand(version, tmp_path, source_v1):
    # these series were made by exact match and the checked merge (structural=False), then
    # the hunks left over fixed by hand
    fresh = rb.rebase(source_v1, version, out_dir=tmp_path / "new", wheelhouse=WH, structural=False)
    assert fresh.exit_code == (1 if fresh.attention else 0)  # 0.5.10: the merge places all
    shipped = (series_dir(version) / "REBASE.md").read_text()
    generated, sep, hand = shipped.partition("\n## Hand fixes\n")
    assert sep, "REBASE.md must say what was fixed by hand"
    assert _without_runtime_rows(generated) == _without_runtime_rows(fresh.report)
    flagged = {(h.patch, h.number) for h in fresh.attention}
    assert _flagged(generated) == flagged
    for patch, number in flagged:
        assert f"{patch}" in hand and re.search(rf"hunk {number}\b", hand), (patch, number)


@pytest.mark.parametrize("version", REBASED)
def test_shipped_series_is_rebase_output_plus_the_hand_fixed_patches(version, tmp_path, source_v1):
    out = tmp_path / "new"
    fresh = rb.rebase(source_v1, version, out_dir=out, wheelhouse=WH, structural=False)
    for patch in {h.patch for h in fresh.attention}:
        shutil.copyfile(series_dir(version) / patch, out / patch)
    resumed = rb.rebase(source_v1, version, out_dir=out, wheelhouse=WH, resume=True, structural=False)
    assert resumed.exit_code == 0
    made = rebased_part(version, tmp_path / "shipped")
    names = authoring.read_series_names(made)
    assert authoring.read_series_names(out) == names
    for name in ["pin.toml"] + [n for n in names if n != RUNTIME_PATCH]:
        assert without_also_versions(out / name) == without_also_versions(made / name), name


@pytest.mark.parametrize("version", REBASED)
def test_shipped_series_is_a_fixed_point_of_resume(version, tmp_path, source_v1):
    out = rebased_part(version, tmp_path / "copy")
    names = authoring.read_series_names(out)
    # resume writes the old series' comment line into `series`; the names are what must hold
    before = {
        p.name: without_also_versions(p) for p in out.iterdir() if p.name not in ("REBASE.md", "series")
    }
    again = rb.rebase(source_v1, version, out_dir=out, wheelhouse=WH, resume=True)
    assert again.exit_code == 0
    assert {h.status for h in again.hunks} == {"unchanged", "carried"}
    assert authoring.read_series_names(out) == names
    assert {
        p.name: without_also_versions(p) for p in out.iterdir() if p.name not in ("REBASE.md", "series")
    } == before


def test_0512_counts_accepted_drafts_under_their_new_name():
    lines = [ln.strip() for ln in added_lines("0.5.12") if "cycle_end(accepted" in ln]
    assert lines == [
        "_pt.cycle_end(accepted=sum(verify_output.num_correct_drafts_per_req_cpu), accepted_per_req=verify_output.num_correct_drafts_per_req_cpu)"
    ]


def test_0523_has_no_v1_worker_so_rebase_cannot_carry_the_series(tmp_path):
    files = upstream.read_wheel_files
    wheel = upstream.fetch_wheel("sglang", "0.5.23", wheelhouse=WH).path
    with pytest.raises(upstream.UpstreamError):
        files(wheel, ["sglang/srt/speculative/eagle_worker.py"])
    result = rb.rebase(SERIES_059, "0.5.23", out_dir=tmp_path / "x", wheelhouse=WH)
    worker = [h for h in result.hunks if h.path.endswith("/eagle_worker.py")]
    assert result.exit_code == 1 and worker and not any(h.relocated for h in worker)
    readme = (series_dir("0.5.23") / "README.md").read_text()
    for needle in (
        "EAGLEWorkerV2",
        "create_worker",
        "SGLANG_ENABLE_SPEC_V2",
        "--disable-overlap-schedule",
        "--enable-multi-layer-eagle",
    ):
        assert needle in readme, needle
    for name in authoring.read_series_names(series_dir("0.5.23")):
        header, _ = authoring.split_header(patch_text(series_dir("0.5.23"), name))
        assert len(header.strip()) > 40, name
        parse_patch(name, patch_text(series_dir("0.5.23"), name).encode())


# ----------------------------------------------------------------------------- 0.5.12: v1 and v2

V1_0512, V2_0512 = SPEC + "eagle_worker.py", SPEC + "eagle_worker_v2.py"


@pytest.mark.parametrize("layout", ["checkout", "installed"])
def test_0512_times_both_workers_in_both_layouts(layout, tmp_path):
    """verify, apply, compile, AST = original minus timer lines, revert: on the real wheel files,
    for eagle_worker.py (v1) and eagle_worker_v2.py (v2, the 0.5.12 default)."""
    paths = wheel_paths("0.5.12")
    if layout == "checkout":
        tree, rel = sglang_checkout("0.5.12", tmp_path / "t", paths=paths)[0], FILES["0.5.12"]
    else:
        tree, rel = sglang_installed("0.5.12", tmp_path / "t", paths=paths), paths
    originals = {p: (tree / p).read_bytes() for p in rel}
    series = str(series_dir("0.5.12"))
    assert ops.verify(series, [str(tree)]).exit_code == 0
    result = ops.apply(series, [str(tree)])
    assert result.exit_code == 0, result.hosts[0].messages
    per_file = {}
    for path, before in originals.items():
        patched = (tree / path).read_bytes()
        assert patched != before, path
        py_compile.compile(str(tree / path), doraise=True, cfile=str(tmp_path / "x.pyc"))
        parsed = ast.parse(patched.decode())
        per_file[Path(path).name] = strip_inserted(parsed)
        assert ast.dump(parsed) == ast.dump(ast.parse(before.decode())), path
    v2_added = 0
    for name in AUTHORED["0.5.12"]:  # the v2 patches touch eagle_worker_v2.py only
        _, body = authoring.split_header((series_dir("0.5.12") / name).read_text())
        assert body.count(f"+++ b/{V2_0512}\n") == body.count("+++ ") == 1, name
        v2_added += sum(1 for ln in body.splitlines() if ln.startswith("+") and ln[:3] != "+++")
    assert per_file["eagle_worker_v2.py"] == v2_added == 30
    assert per_file["eagle_worker.py"] == len(added_lines("0.5.12")) - v2_added
    assert ops.revert(series, [str(tree)]).exit_code == 0
    assert {p: (tree / p).read_bytes() for p in rel} == originals


def test_0512_v2_has_every_phase_balanced_in_its_function():
    text = final_state("0.5.12")[V2_0512]
    assert text.count("from sglang.srt.speculative import phase_timer as _pt") == 1
    phases = set()
    for func in ast.walk(ast.parse(text)):
        if isinstance(func, ast.FunctionDef) and _calls(func):
            calls = _calls(func)
            for name in {label for _, kind, label in calls if kind in ("begin", "end")}:
                kinds = [kind for _, kind, label in calls if label == name]
                assert kinds.count("begin") >= 1 and kinds.count("end") == 1, (func.name, name)
                phases.add(name)
    assert phases == PHASES, phases ^ PHASES
    by_func = {
        f.name: [(k, lb) for _, k, lb in _calls(f)]
        for f in ast.walk(ast.parse(text))
        if isinstance(f, ast.FunctionDef) and _calls(f)
    }
    cycle = by_func["forward_batch_generation"]
    assert [k for k, _ in cycle if k.startswith("cycle")] == [
        "cycle_begin",
        "cycle_end",
        "cycle_begin",
        "cycle_end",
    ]  # prefill, then decode branch
    assert ("begin", "target_extend") in cycle
    assert set(by_func) == {
        "forward_batch_generation",
        "draft",
        "draft_forward",
        "verify",
        "_draft_extend_for_decode",
        "_draft_extend_for_prefill",
    }


def test_0512_v2_decode_cycle_wraps_the_whole_decode_branch():
    """cycle_begin is the decode branch's first statement and cycle_end sits right before its
    return: everything EAGLEWorkerV2 does for a decode batch is inside the cycle."""
    tree = ast.parse(final_state("0.5.12")[V2_0512])
    func = next(
        f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "forward_batch_generation"
    )
    branch = func.body[0]
    assert isinstance(branch, ast.If)
    decode, prefill = branch.orelse, branch.body
    assert is_inserted(decode[0]) and decode[0].value.func.attr == "cycle_begin"
    assert isinstance(decode[-1], ast.Return)
    assert is_inserted(decode[-2]) and decode[-2].value.func.attr == "cycle_end"
    assert is_inserted(prefill[0]) and prefill[0].value.func.attr == "cycle_begin"
    assert {kw.arg: ast.literal_eval(kw.value) for kw in decode[0].value.keywords if kw.arg == "kind"} == {
        "kind": "decode"
    }
