"""Every shipped SGLang series against its release's real wheel (fetched once by pinned sha256
into the ignored cache), in both layouts, plus the coverage table (``make series-check``).

One pristine tree pair (checkout, installed) per release, built once per session from the wheel's
worker files only. Per release: verify, apply, the patched files compile and equal the originals
by AST once the timer lines are removed, no timer line after a return, revert byte-exact; and
``--series auto`` picks that series, and refuses a drifted copy naming the closest release.
"""

from __future__ import annotations

import ast
import itertools
import zipfile
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.author import authoring, seriesgen, sglang_releases as rel, timerplace, upstream
from patchkit.engine import autoseries
from support.ast_checks import is_inserted, strip_inserted, timer_calls_by_function

pytestmark = [pytest.mark.wheels, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PATCHES = REPO / "patches"
# Shares a series another helper owns; its pin gains also_versions when that work is merged.
RELEASES = [r.version for r in rel.RELEASES]


def _worker_files(version: str) -> dict[str, bytes]:
    wheel = upstream.fetch_wheel("sglang", version)
    assert wheel.trust == "pinned", version
    with zipfile.ZipFile(wheel.path) as zf:
        names = set(zf.namelist())
    wanted = [p for p in rel.WORKER_FILES if rel.wheel_path(p) in names]
    data = upstream.read_wheel_files(wheel.path, [rel.wheel_path(p) for p in wanted])
    return {p: data[rel.wheel_path(p)] for p in wanted}


@pytest.fixture(scope="session")
def trees(tmp_path_factory):
    """version -> {"checkout": Path, "installed": Path, "files": {checkout path: bytes}}."""
    made: dict[str, dict] = {}

    def get(version: str) -> dict:
        if version not in made:
            files = _worker_files(version)
            base = tmp_path_factory.mktemp(f"sglang-{version}")
            wheel = upstream.fetch_wheel("sglang", version).path
            short = {rel.wheel_path(p): b for p, b in files.items()}
            made[version] = {
                "files": files,
                "checkout": upstream.build_checkout_tree(short, base / "checkout")[0],
                "installed": upstream.build_installed_tree(
                    short,
                    base / "installed",
                    name="sglang",
                    version=version,
                    dist_info=upstream.wheel_dist_info(wheel),
                ),
            }
        return made[version]

    return get


def _series(version: str) -> Path:
    return PATCHES / rel.by_version()[version].series


def test_the_release_table_lists_every_release_once():
    assert len(RELEASES) == len(set(RELEASES))
    minors = {".".join(v.split(".")[:3]) for v in RELEASES}
    assert minors == {f"0.5.{n}" for n in range(1, 24)}
    pinned = {w.split("-")[1] for w in upstream.KNOWN_WHEELS if w.startswith("sglang-")}
    assert set(RELEASES) - set(rel.NOT_ON_INDEX) == pinned


@pytest.mark.parametrize("version", [r.version for r in rel.RELEASES if rel.owner(r) is not r])
def test_a_release_shares_a_series_only_with_byte_identical_worker_files(version, trees):
    """The decision behind every shared folder (e.g. 0.5.12.post1 -> sglang-v0.5.12: both its
    eagle_worker.py and eagle_worker_v2.py equal 0.5.12's), checked on the wheels."""
    owner = rel.owner(rel.by_version()[version])
    mine, theirs = trees(version)["files"], trees(owner.version)["files"]
    assert set(mine) == set(theirs)
    for path in mine:
        assert mine[path] == theirs[path], (version, owner.version, path)


def test_inserted_calls_are_the_runtime_api():
    """Every inserted line calls a public function of the runtime with its known keywords."""
    allowed = {
        "begin": {"graph", "step"},
        "end": set(),
        "cycle_begin": {"kind", "batch_size"},
        "cycle_end": {"accepted", "accepted_per_req", "tokens"},
        "note": {"verify_graph"},
    }
    seen = set()
    for folder in rel.series_folders():
        for name in authoring.read_series_names(PATCHES / folder)[1:]:
            _, body = authoring.split_header((PATCHES / folder / name).read_text())
            for line in body.splitlines():
                if not line.startswith("+") or line.startswith("+++") or "_pt." not in line:
                    continue
                call = ast.parse(line[1:].strip()).body[0].value
                fn = call.func.attr
                assert fn in allowed, (folder, name, line)
                assert {k.arg for k in call.keywords} <= allowed[fn], (folder, name, line)
                seen.add(fn)
    runtime = (REPO / "patchkit" / "timing" / "phase_timer.py").read_text()
    for fn in seen:
        assert f"\ndef {fn}(" in runtime or f"\n{fn} = " in runtime or f"    def {fn}(" in runtime, fn


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in PATCHES.glob("*/series")))
def test_runtime_patch_is_generated_from_patchkit_timing(folder):
    results = authoring.regenerate_runtime_patches(PATCHES / folder, write=False)
    assert results and not any(changed for _, changed in results), (
        f"run `invoke patch.gen-runtime --series patches/{folder}`"
    )


@pytest.mark.parametrize("version", RELEASES)
def test_series_pins_this_release(version, trees):
    pin = upstream.read_pin(_series(version) / "pin.toml")
    assert version in pin.versions
    files = trees(version)["files"]
    for entry in pin.files.values():
        assert upstream.sha256_bytes(files[entry.path]) == entry.sha256, (version, entry.path)


@pytest.mark.parametrize("layout", ["checkout", "installed"])
@pytest.mark.parametrize("version", RELEASES)
def test_verify_apply_compile_ast_revert(version, layout, trees, tmp_path):
    import shutil

    tree = tmp_path / layout
    shutil.copytree(trees(version)[layout], tree)
    sdir = str(_series(version))
    pin = upstream.read_pin(Path(sdir) / "pin.toml")
    prefix = "python/" if layout == "checkout" else ""
    paths = [prefix + upstream.installed_path(f.path, "python/") for f in pin.files.values()]
    before = {p: (tree / p).read_bytes() for p in paths}
    result = ops.verify(sdir, [str(tree)])
    assert result.exit_code == 0, result.hosts[0].messages
    assert ops.apply(sdir, [str(tree)]).exit_code == 0
    for p in paths:
        patched = (tree / p).read_text()
        compile(patched, p, "exec")
        parsed = ast.parse(patched)
        assert strip_inserted(parsed) > 0, p
        assert ast.dump(parsed) == ast.dump(ast.parse(before[p])), p
        _no_timer_after_a_return(ast.parse(patched), p)
        assert not timerplace.open_at_returns(patched), (p, timerplace.open_at_returns(patched))
        for fn, calls in timer_calls_by_function(patched).items():
            begins = sorted(lbl for c, lbl in calls if c == "begin")
            ends = sorted(lbl for c, lbl in calls if c == "end")
            assert set(begins) == set(ends), (p, fn, calls)
        for fn in ast.walk(ast.parse(patched)):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                _ends_follow_begins(_calls_in_order(fn), f"{p} {fn.name} (line {fn.lineno})")
    assert ops.revert(sdir, [str(tree)]).exit_code == 0
    assert {p: (tree / p).read_bytes() for p in paths} == before


def _calls_in_order(fn: ast.AST) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Expr) and is_inserted(node):
            call = node.value
            label = call.args[0].value if call.args else ""
            found.append((node.lineno, call.func.attr, label))
    return [(c, lbl) for _, c, lbl in sorted(found)]


def _ends_follow_begins(calls, where: str) -> None:
    """In source order no phase (or cycle) ends before it has begun, and phases nest: an end
    closes the innermost open phase (the runtime drops the phases above the one it ends).
    Repeated begins of one name (the graph / eager branches) count as one."""
    count: dict[str, int] = {}
    open_: list[str] = []
    for call, label in calls:
        name = "cycle" if call.startswith("cycle") else label
        if call in ("begin", "cycle_begin"):
            count[name] = count.get(name, 0) + 1
            if call == "begin" and (not open_ or open_[-1] != name):
                open_.append(name)
        elif call in ("end", "cycle_end"):
            assert count.get(name, 0) > 0, f"{where}: {call}({label!r}) before any begin"
            if call == "end" and open_:
                assert open_[-1] == name, f"{where}: end({label!r}) while {open_[-1]!r} is open"
                open_.pop()


def _no_timer_after_a_return(tree: ast.AST, where: str) -> None:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for a, b in itertools.pairwise(block):
                if isinstance(a, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                    assert not is_inserted(b), f"{where}: timer line after line {a.lineno} never runs"


@pytest.mark.parametrize("version", RELEASES)
def test_series_auto_picks_the_release_and_refuses_a_drifted_copy(version, trees, tmp_path):
    import shutil

    tree = tmp_path / "site"
    shutil.copytree(trees(version)["installed"], tree)
    chosen, said = autoseries.resolve([str(tree)])
    assert Path(chosen) == _series(version), said
    assert Path(chosen).name in said
    pinned = next(iter(upstream.read_pin(_series(version) / "pin.toml").files))
    victim = tree / upstream.installed_path(pinned, "python/")
    victim.write_bytes(victim.read_bytes() + b"# local edit\n")
    with pytest.raises(autoseries.Refused) as info:
        autoseries.resolve([str(tree)])
    assert "closest" in str(info.value) and victim.name in str(info.value)


def test_every_worker_file_of_every_release_is_timed():
    """No release ships an EAGLE worker file its series does not pin (e.g. the
    eagle_worker_v2.py of 0.5.9 / 0.5.10 / 0.5.10.post1, appended as 0008-0013)."""
    untimed = [(r.version, Path(p).name) for r in rel.RELEASES for p in r.files if _cell(r, p) == "not timed"]
    assert not untimed, untimed
    shipped = {r.version: set(_worker_files(r.version)) for r in rel.RELEASES}
    assert {v: set(rel.by_version()[v].files) for v in shipped} == shipped


def _cell(r, path: str) -> str:
    pinned = {Path(p).name for p in upstream.read_pin(PATCHES / r.series / "pin.toml").files}
    return "—" if path not in r.files else ("not timed" if Path(path).name not in pinned else "timed")


def test_print_the_coverage_table(capsys):
    """The table ``make series-check`` prints: one row per release, in order; each row's worker
    files together time every phase seriesgen expects (both cycle kinds included), none untimed."""
    table = coverage_table()
    with capsys.disabled():
        print("\n" + table)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert [row[0] for row in rows] == RELEASES
    for version, _series, *cells in rows:
        assert "not timed" not in cells, version
        timed = {p.strip() for cell in cells if cell != "—" for p in cell.split(",")}
        assert timed >= set(seriesgen.EXPECTED), (version, sorted(set(seriesgen.EXPECTED) - timed))


def coverage_table() -> str:
    names = [Path(p).name for p in rel.WORKER_FILES]
    rows = ["| release | series | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for r in rel.RELEASES:
        sdir = PATCHES / r.series
        pin = upstream.read_pin(sdir / "pin.toml")
        pinned = {Path(p).name for p in pin.files}
        final = _final_phases(sdir)
        cells = []
        for path in rel.WORKER_FILES:
            name = Path(path).name
            if path not in r.files:
                cells.append("—")
            elif name not in pinned:
                cells.append("not timed")
            else:
                cells.append(", ".join(final.get(name, [])))
        rows.append(f"| {r.version} | {r.series} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _final_phases(sdir: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in authoring.read_series_names(sdir)[1:]:
        _, body = authoring.split_header((sdir / name).read_text())
        current = None
        for line in body.splitlines():
            if line.startswith("+++ b/"):
                current = Path(line[6:]).name
            elif line.startswith("+") and current:
                stmt = line[1:].strip()
                if stmt.startswith('_pt.begin("'):
                    phase = stmt.split('"')[1]
                elif stmt.startswith("_pt.cycle_begin("):
                    phase = "cycle:" + stmt.split('kind="')[1].split('"')[0]
                else:
                    continue
                if phase not in out.setdefault(current, []):
                    out[current].append(phase)
    return out
