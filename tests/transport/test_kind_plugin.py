"""A target kind registers itself, with its settings and its inventory hook, from one module
outside patchkit: `toy_kind.py`, found through the ``patchkit.target_kinds`` entry point of a
distribution beside it (a ``.dist-info`` on PYTHONPATH, as ``pip install`` would leave it). With
no other edit, the installed ``patchkit`` command applies and reverts a series through it,
offers and checks its setting as an option and a config key, reads its inventory variable, and
profile.remote resolves its targets the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.cli import REPO
from support.failures import ORIG, small_series, small_target, tree_digest

TOY_KIND = '''
"""toy:NAME: the folder NAME under the toy_home setting (a stand-in for podman:// and friends)."""

import os

from patchkit.errors import InvalidInput
from patchkit.transport import KindSetting, LocalTransport, TargetKind, register_kind


def check_home(value, spec):
    if not os.path.isabs(value) or not os.path.isdir(value):
        raise InvalidInput(f"target {spec!r}: toy_home {value!r} (an existing absolute folder)")
    return value


def _targets(names, toy_home=None, label=None):
    if not toy_home:
        raise InvalidInput("toy: targets need --toy-home (or patchkit.toy_home)")
    return [LocalTransport(label=f"{label or 'toy'} {n}", root=os.path.join(toy_home, n)) for n in names]


def expand(spec, *, cwd=None, container=None, exec_prefix=None, toy_home=None, **_):
    names = spec[len("toy:"):].split("+")
    if not all(n.isidentifier() for n in names):
        raise InvalidInput(f"target {spec!r}: write toy:NAME")
    return _targets(names, toy_home)


def inventory(value, *, root, host, toy_home=None, **_):
    return _targets(value.split("+"), toy_home, label=host)


KIND = register_kind(
    TargetKind(
        "toy",
        prefix="toy:",
        options=("toy_home",),
        expand=expand,
        settings=(KindSetting("toy_home", "toy: targets: the folder they live in", check_home, "toy home"),),
        inventory_var="patchkit_toy",
        inventory=inventory,
    )
)
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    """A folder holding toy_kind.py and the metadata of a distribution whose entry point names it."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "toy_kind.py").write_text(TOY_KIND)
    info = root / "toy_kind-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-kind\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[patchkit.target_kinds]\ntoy = toy_kind\n")
    return root


@pytest.fixture
def world(tmp_path) -> dict:
    home = tmp_path / "home"
    for name in ("a", "b"):
        small_target(home / name)
    (tmp_path / "work").mkdir()
    return {"home": home, "series": small_series(tmp_path / "series"), "work": tmp_path / "work"}


def run(plugin: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh interpreter with the plugin's folder on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "PYTHONPATH"))}
    env.update(PYTHONPATH=f"{plugin}{os.pathsep}{REPO}", XDG_CONFIG_HOME=str(cwd / "xdg"))
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def patchkit(plugin: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run(plugin, cwd, "-m", "patchkit.command", *args)


def test_without_the_plugin_there_is_no_such_kind(world):
    """The control: toy: is no kind of patchkit's own (read as an scp-like host:path, refused)."""
    from patchkit.transport import target_kinds

    assert "toy" not in {k.name for k in target_kinds()}
    proc = patchkit(
        Path("/nonexistent"),
        world["work"],
        "patch.apply",
        "--series",
        str(world["series"]),
        "--target",
        "toy:a",
    )
    assert proc.returncode == 2 and "the remote path must be absolute" in proc.stderr


def test_patch_apply_and_revert_through_the_kind_and_its_option(plugin, world):
    home, series = world["home"], str(world["series"])
    before = [tree_digest(home / n) for n in ("a", "b")]
    applied = patchkit(
        plugin,
        world["work"],
        "patch.apply",
        "--series",
        series,
        "--target",
        "toy:a+b",
        "--toy-home",
        str(home),
    )
    assert applied.returncode == 0, applied.stderr
    assert "toy a" in applied.stdout and "toy b" in applied.stdout
    for name in ("a", "b"):
        assert (home / name / "pkg" / "m.py").read_bytes() == ORIG.replace(b"line 5\n", b"line 5\ninserted\n")
    # the setting from the config file instead of the option
    (world["work"] / "patchkit.yaml").write_text(f"patchkit:\n  toy_home: {home}\n")
    reverted = patchkit(plugin, world["work"], "patch.revert", "--series", series, "--target", "toy:a+b")
    assert reverted.returncode == 0, reverted.stderr
    assert [tree_digest(home / n) for n in ("a", "b")] == before


def test_its_setting_is_an_option_documented_and_checked(plugin, world):
    for task in ("patch.apply", "profile.remote"):
        helped = patchkit(plugin, world["work"], task, "--help")
        assert helped.returncode == 0 and "--toy-home" in helped.stdout, helped.stdout
        assert "toy: targets: the folder they live in" in " ".join(helped.stdout.split())
    series = str(world["series"])
    bad = patchkit(
        plugin, world["work"], "patch.status", "--series", series, "--target", "toy:a", "--toy-home", "rel"
    )
    assert bad.returncode == 2 and "--toy-home 'rel': bad toy home" in bad.stderr, bad.stderr
    (world["work"] / "patchkit.yaml").write_text("patchkit:\n  toy_home: rel\n")
    bad = patchkit(plugin, world["work"], "patch.status", "--series", series, "--target", "toy:a")
    assert bad.returncode == 2 and "patchkit.toy_home in " in bad.stderr and "bad toy home" in bad.stderr


def test_an_inventory_host_of_the_kind(plugin, world):
    (world["work"] / "hosts.ini").write_text("[boxes]\nshelf patchkit_toy=a+b patchkit_root=/unused\n")
    home, series = world["home"], str(world["series"])
    proc = patchkit(
        plugin,
        world["work"],
        "patch.verify",
        "--series",
        series,
        "--inventory",
        "hosts.ini",
        "--toy-home",
        str(home),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert [h["target"] for h in json.loads(proc.stdout)["hosts"]] == ["shelf a", "shelf b"]
    # the host's own patchkit_<setting> variable beats the option
    (world["work"] / "hosts.ini").write_text(
        f"[boxes]\nshelf patchkit_toy=a patchkit_root=/u patchkit_toy_home={home}\n"
    )
    proc = patchkit(
        plugin,
        world["work"],
        "patch.verify",
        "--series",
        series,
        "--inventory",
        "hosts.ini",
        "--toy-home",
        str(world["work"]),  # holds no a/: the host's own home is the one read
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert [h["target"] for h in json.loads(proc.stdout)["hosts"]] == ["shelf a"]


def test_profile_remote_resolves_the_kind_with_its_setting(plugin, world):
    """profile.remote's settings hold the kind's key (a row made from the kind), and its targets
    are the kind's, through the one resolution."""
    script = textwrap.dedent(
        f"""
        import json
        from patchkit.profile.remote import RemoteConfig
        cfg = RemoteConfig.from_mapping({{
            "targets": ["toy:a+b"], "server_command": "s", "bench_command": "b",
            "series": {str(world["series"])!r}, "toy_home": {str(world["home"])!r},
        }})
        targets = cfg.open_targets()
        print(json.dumps([t.root for t in targets]))
        """
    )
    proc = run(plugin, world["work"], "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [str(world["home"] / "a"), str(world["home"] / "b")]


def test_the_registry_names_no_kind():
    """patchkit/transport/__init__.py imports no kind's module by name: the kinds are found
    (the package's modules, the entry points), each registered by its own module."""
    import ast

    from patchkit.transport import target_kinds

    source = (REPO / "patchkit" / "transport" / "__init__.py").read_text()
    kinds = {
        p.stem for p in (REPO / "patchkit" / "transport").glob("*.py") if "register_kind(" in p.read_text()
    }
    assert {"docker", "execprefix", "k8s", "local", "ssh"} <= kinds
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            named = {module.rpartition(".")[2]} | {a.name.rpartition(".")[2] for a in node.names}
            assert not named & (kinds - {"__init__"}), ast.unparse(node)
    assert {"docker", "exec", "k8s", "local", "ssh"} <= {k.name for k in target_kinds()}
