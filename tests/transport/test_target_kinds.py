"""The target-kind registry (patchkit.transport.TargetKind).

A kind is declared in one place and registered; every caller then reaches it through the one
expansion (patchkit.transport.expand_targets / parse_target). Here a toy kind, `toy:NAME`, is
a folder NAME under the `toy_home` transport option (or TOY_HOME for the tasks, which pass the
site's options only). patch.apply and patch.revert run through it on a real folder; an unknown
prefix keeps today's message and exit code.
"""

from __future__ import annotations

import os

import pytest
from invoke import Config, Context

from patchkit import ops
from patchkit.errors import InvalidInput
from patchkit.settings import PATCHKIT_DEFAULTS
from patchkit.taskrun import run_patch_task
from patchkit.transport import (
    LocalTransport,
    TargetKind,
    expand_targets,
    option_names,
    parse_target,
    register_kind,
    target_kinds,
    unregister_kind,
)
from support.engine import git_diff, make_series, read_tree, write_tree

# ---- the toy kind: everything it is, in one place -------------------------------------------


def _toy_expand(spec: str, *, cwd=None, container=None, exec_prefix=None, toy_home=None, **_) -> list:
    """`toy:NAME` -> the folder NAME under toy_home (default: $TOY_HOME); `toy:A+B`: two."""
    home = toy_home or os.environ["TOY_HOME"]
    if container or exec_prefix:
        raise InvalidInput(f"target {spec!r}: toy: targets take no --container or --exec")
    names = spec[len("toy:") :].split("+")
    if not all(n.isidentifier() for n in names):
        raise InvalidInput(f"target {spec!r}: write toy:NAME")
    return [LocalTransport(label=f"toy {n}", root=os.path.join(home, n)) for n in names]


TOY = TargetKind("toy", prefix="toy:", options=("toy_home",), expand=_toy_expand)

# ---- a tiny series and its target -----------------------------------------------------------

ORIG = b"".join(b"line %d\n" % i for i in range(1, 13))
PATCHED = ORIG.replace(b"line 6\n", b"line 6\nadded by the toy series\n")
FILE = "pkg/m.py"


@pytest.fixture
def toy(monkeypatch, tmp_path):
    register_kind(TOY)
    monkeypatch.setenv("TOY_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    unregister_kind(TOY)


@pytest.fixture
def series(tmp_path):
    patch = git_diff({FILE: ORIG}, {FILE: PATCHED}, tmp_path / "diff")
    return make_series(tmp_path / "series", {FILE: ORIG}, [("0001-toy.patch", patch)])


def _tree(home, name="a"):
    root = home / name
    write_tree(root, {FILE: ORIG})
    return root


def _snapshot(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _task(tmp_path, op: str, **given):
    c = Context(config=Config(defaults={"patchkit": dict(PATCHKIT_DEFAULTS)}))
    return run_patch_task(c, op, {"json": False, "force": False, "dry_run": False, **given})


# ---- the registry ---------------------------------------------------------------------------


def test_a_registered_kind_is_listed_with_its_options(toy):
    assert TOY in target_kinds()
    assert target_kinds()[-1].name == "local"  # whatever is left is a local folder
    assert option_names()[-1] == "toy_home"  # and the whitelist takes its option
    with pytest.raises(ValueError, match="already registered"):
        register_kind(TargetKind("toy again", prefix="toy:", expand=_toy_expand))


def test_expand_and_resolve_go_through_the_kind(toy, tmp_path):
    a, b = _tree(toy, "a"), _tree(toy, "b")
    got = expand_targets(["toy:a+b", str(a)], toy_home=str(toy))
    assert [t.root for t in got[:2]] == [str(a), str(b)] and got[2] == str(a)
    opened = expand_targets(["toy:a", "rel"], open_all=True, cwd=str(tmp_path))
    assert [type(t) for t in opened] == [LocalTransport, LocalTransport]
    assert opened[1].root == str(tmp_path / "rel")
    assert parse_target("toy:b").root == str(b)
    with pytest.raises(InvalidInput, match=r"'toy:a\+b': it stands for 2 targets; here one target is needed"):
        parse_target("toy:a+b")
    with pytest.raises(InvalidInput, match="unknown transport option"):
        expand_targets(["toy:a"], toy_hom=str(toy))


def test_ops_apply_then_revert_through_the_kind(toy, series):
    root = _tree(toy)
    before = _snapshot(root)
    opts = ops.Options(transport_options={"toy_home": str(toy)})
    applied = ops.apply(str(series), ["toy:a"], opts)
    assert applied.exit_code == 0, applied.to_json()
    assert [h.target for h in applied.hosts] == ["toy a"]
    assert read_tree(root, [FILE]) == {FILE: PATCHED}
    reverted = ops.revert(str(series), ["toy:a"], opts)
    assert reverted.exit_code == 0, reverted.to_json()
    assert _snapshot(root) == before  # byte for byte, no trace


def test_patch_apply_and_revert_tasks_through_the_kind(toy, series, tmp_path, capsys):
    """The tasks' own body (what `invoke patch.apply` runs), a fleet of two toy folders."""
    roots = [_tree(toy, "a"), _tree(toy, "b")]
    before = [_snapshot(r) for r in roots]
    _task(tmp_path, "apply", series=str(series), target=["toy:a+b"])
    out = capsys.readouterr().out
    assert "toy a" in out and "toy b" in out
    assert all(read_tree(r, [FILE]) == {FILE: PATCHED} for r in roots)
    _task(tmp_path, "status", series=str(series), target=["toy:a", "toy:b"])
    _task(tmp_path, "revert", series=str(series), target=["toy:a+b"])
    assert [_snapshot(r) for r in roots] == before


def test_an_unknown_prefix_says_what_it_said_before(toy, series, tmp_path, capsys):
    """`slurm:` is no kind: read as an scp-like host:path, as it always was (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        _task(tmp_path, "apply", series=str(series), target=["slurm:1234"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "patchkit: target 'slurm:1234': the remote path must be absolute (host:/abs/path); "
        "for a local directory whose name has a colon write ./slurm:1234"
    )
    with pytest.raises(InvalidInput, match="the remote path must be absolute"):
        expand_targets(["slurm:1234"], open_all=True)
    with pytest.raises(InvalidInput, match="write toy:NAME"):  # a registered prefix is the kind's
        parse_target("toy:a/b")
