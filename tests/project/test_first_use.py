"""What a new user meets first: the task list, ``patchkit --help``, ``--series auto`` on a folder
that is not an install, the skips the installed extras leave, and ``mypy`` where only the lint
extra is installed.

- ``--list`` shows each task's first docstring line: a task whose first sentence runs onto a
  second line is listed cut off mid-phrase, so the first paragraph must be that one line;
- ``patchkit --help`` opens with the subcommands, and leaves out invoke's flags for its own
  ``run()``/``sudo()`` (``--pty``, ``--prompt-for-sudo-password``, ...), which no task uses;
- a folder holding nothing any shipped series pins is "not an install", not a far release;
- every package a test skips without (``importorskip``, ``requires``) is installed by an extra
  that ``make setup`` installs;
- ``mypy patchkit`` where the lint extra is all there is (no torch) finds nothing.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from patchkit.engine import autoseries
from patchkit.errors import Refused
from patchkit.tasks import ns
from support.cli import in_process, patchkit_command

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(ns.task_names))
def test_every_task_is_listed_by_a_whole_first_paragraph(name):
    doc = (ns[name].__doc__ or "").strip()
    first = doc.split("\n\n")[0]
    assert "\n" not in first, f"{name}: --list shows only {first.splitlines()[0]!r}"
    assert first.endswith((".", ")")), first


def test_the_list_shows_whole_sentences():
    code, out, _ = in_process("--list")
    assert code == 0
    listed = " ".join(out.split())
    assert "predicted from a run profiled at N." in listed and "(or the profile" not in listed


def test_patchkit_help_opens_with_the_subcommands_and_leaves_out_run_flags(tmp_path):
    proc = patchkit_command(["--help"], tmp_path, config_home=tmp_path / "xdg")
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines[0].startswith("Usage: patchkit")
    sections = [ln for ln in lines if ln.endswith(":") and not ln.startswith(" ")]
    assert sections == ["Subcommands:", "Core options:"]
    for hidden in ("--pty", "--prompt-for-sudo-password", "--echo", "--dry", "--warn-only", "--hide="):
        assert hidden not in proc.stdout
    assert "--config=STRING" in proc.stdout and "--list" in proc.stdout
    # still parsed as invoke parses them
    assert patchkit_command(["--pty", "--list"], tmp_path, config_home=tmp_path / "xdg").returncode == 0


def test_a_folder_that_is_not_an_install_is_called_so(tmp_path):
    folder = tmp_path / "home"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "eagle.txt").write_text("nothing here\n")
    with pytest.raises(Refused) as e:
        autoseries.resolve([str(folder)])
    text = str(e.value)
    assert "this is not an install of sglang or transformers" in text
    assert "closest" not in text and "is missing" not in text
    assert "site-packages" in text


def _made_extras() -> set[str]:
    """The extras make setup installs (the Makefile's pip install line)."""
    found = re.search(r"pip install .*-e '\.\[([^\]]+)\]'", (REPO / "Makefile").read_text())
    assert found, "no pip install -e '.[...]' in the Makefile"
    return set(found.group(1).split(","))


def _skipped_without() -> dict[str, str]:
    """package -> the test file that skips without it (importorskip / requires calls)."""
    out = {}
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in ("importorskip", "requires"):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.setdefault(arg.value.split(".")[0], str(path.relative_to(REPO)))
    return out


def _normalized(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("-", "_")


# import name -> distribution name, where they differ
DISTRIBUTIONS = {"ansible": "ansible_core", "yaml": "pyyaml"}


def test_every_package_a_test_skips_without_is_in_an_installed_extra():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    installed = {_normalized(r) for name in _made_extras() for r in extras[name]}
    installed |= {_normalized(r) for r in project["dependencies"]}
    for package, where in _skipped_without().items():
        dist = DISTRIBUTIONS.get(package, package)
        assert dist in installed, f"{where} skips without {package}, which no extra of make setup installs"
    assert "scipy" in {_normalized(r) for r in extras["test"]}


@pytest.mark.slow
def test_mypy_finds_nothing_where_only_the_lint_extra_is_installed(tmp_path):
    """A venv holding patchkit's dependencies and the lint extra only: no torch, numpy,
    matplotlib or ansible (pyproject's mypy overrides let them be absent)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "lint")], check=True)
    site = next((tmp_path / "lint" / "lib").glob("python3*/site-packages"))
    import git
    import gitdb
    import invoke
    import smmap
    import unidiff

    for module in (git, gitdb, invoke, smmap, unidiff):
        (site / Path(module.__file__).parent.name).symlink_to(Path(module.__file__).parent)
    import typing_extensions

    (site / "typing_extensions.py").symlink_to(typing_extensions.__file__)
    stubs = Path(invoke.__file__).parents[1] / "yaml-stubs"
    if stubs.is_dir():
        (site / "yaml-stubs").symlink_to(stubs)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--python-executable",
            str(tmp_path / "lint" / "bin" / "python"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "patchkit",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
