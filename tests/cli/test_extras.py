"""A task that needs an optional extra checks for it before it touches anything.

`patchkit profile.run` from a wheel installed without the `profile` extra used to apply the
series, revert it, then fail (exit 1) with a ModuleNotFoundError folded onto one line, leaving
profile-out/ behind. Here the extra's modules are hidden from a real run of each entry point by
an import blocker (a sys.meta_path finder that refuses them, as a missing package would).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from patchkit.errors import EXIT_REFUSED
from patchkit.extras import EXTRAS, MissingExtra, missing, require
from support import cli

REPO = Path(__file__).resolve().parents[2]

# sitecustomize.py in a folder on PYTHONPATH: every Python started with it (the workload
# subprocess of profile.run included) cannot import the modules PATCHKIT_TEST_BLOCK names
BLOCKER = """
import os
import sys


class Blocked:
    names = set(os.environ.get("PATCHKIT_TEST_BLOCK", "").split(","))

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocked())
"""


@pytest.fixture(scope="module")
def blocker(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("blocker")
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return folder


def run_without(blocker: Path, modules: str, module: str, *args: str, cwd: Path):
    """``python -m module args`` with ``modules`` (comma-separated) not importable, in it and
    in every Python it starts."""
    env = dict(os.environ, PYTHONPATH=f"{blocker}{os.pathsep}{REPO}", PATCHKIT_TEST_BLOCK=modules)
    return cli.module(module, *args, cwd=cwd, env=env, fresh=True)  # the blocker is a sitecustomize


def test_the_blocker_blocks(blocker, tmp_path):
    proc = run_without(blocker, "torch", "json.tool", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    proc = run_without(blocker, "torch", "torch", cwd=tmp_path)
    assert "No module named 'torch'" in proc.stderr


def test_the_extras_match_pyproject():
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)
    assert missing("report") == []  # make setup installs every extra here


def test_require_names_the_extra_and_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` refuses
    with pytest.raises(MissingExtra) as info:
        require("profile", "profile.run")
    assert info.value.exit_code == EXIT_REFUSED
    message = info.value.message
    assert "profile.run needs patchkit's 'profile' extra: torch is not installed" in message
    assert "pip install 'patchkit[profile]'" in message and message.endswith("nothing was touched")


@pytest.mark.parametrize(
    "entry",
    [
        ("invoke", "-r", str(REPO), "profile.run"),
        ("invoke", "-r", str(REPO), "profile.sweep"),
        ("patchkit.profile", "run"),
    ],
    ids=["invoke profile.run", "invoke profile.sweep", "python -m patchkit.profile run"],
)
def test_profile_run_without_torch_stops_before_touching_anything(blocker, tmp_path, entry):
    site = tmp_path / "site"
    proc = run_without(blocker, "torch", *entry, "--size", "ci", "--site", str(site), cwd=tmp_path)
    assert proc.returncode == EXIT_REFUSED, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines  # one line, no traceback, no apply/revert progress
    assert "needs patchkit's 'profile' extra: torch is not installed" in lines[0]
    assert "pip install 'patchkit[profile]'" in lines[0]
    assert "ModuleNotFoundError" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == []  # no profile-out/, no site


def test_profile_remote_without_matplotlib_stops_before_any_target(blocker, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    proc = run_without(
        blocker,
        "matplotlib",
        *("invoke", "-r", str(REPO), "profile.remote", "--target", str(target)),
        *("--server", "true", "--bench", "true", "--out", str(tmp_path / "out")),
        cwd=tmp_path,
    )
    assert proc.returncode == EXIT_REFUSED, proc.stderr
    assert "profile.remote needs patchkit's 'report' extra: matplotlib is not installed" in proc.stderr
    assert "or give --no-chart" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["target"] and os.listdir(target) == []
