"""Messages that name what was really read, refuse what was misspelled, and suggest
what was meant.

- "no --series given and no patchkit.series in invoke.yaml" was said by the installed command,
  which reads patchkit.yaml: the message names the config files read (or where it looked);
- a misspelled top-level section (`patchkt:`) was accepted silently: refused, exit 2, naming
  the section and the file (invoke's own sections, and other projects' sections in invoke's
  shared per-user file, stay accepted);
- `--serie` got invoke's `No idea what '--serie' is!` alone: patchkit's entry points add the
  closest option (the task's, difflib) or task name;
- "eagle_worker_v2.py match its pin exactly": one file matches.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import cli
from support.cli import patchkit_command
from support.failures import REPO, invoke, small_series, small_target


def patchkit(args, cwd: Path, home: Path | None = None) -> subprocess.CompletedProcess:
    """The installed command's Program (python -m patchkit.command) in ``cwd``."""
    return patchkit_command(args, cwd, config_home=cwd / "xdg", home=home)


@pytest.fixture
def work(tmp_path):
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


# -- the file actually read -------------------------------------------------------------------------


def test_no_series_names_the_file_read(work):
    (work / "patchkit.yaml").write_text("patchkit:\n  jobs: 2\n")
    proc = patchkit(["patch.verify", "--target", "site-packages"], work)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == f"patchkit: no --series given and no patchkit.series in {work}/patchkit.yaml"
    )
    assert "invoke.yaml" not in proc.stderr


def test_no_config_file_says_where_it_looked(work):
    proc = patchkit(["patch.verify", "--target", "site-packages"], work)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith(
        "patchkit: no --series given and no patchkit.series in any config file (none found;"
    )
    assert f"{work}/xdg/patchkit/patchkit.yaml" in line and f"{work}/patchkit.yaml" in line


def test_no_target_names_the_checkout_invoke_yaml(tmp_path):
    series = small_series(tmp_path / "series")
    proc = invoke("patch.verify", "--series", str(series))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "patchkit: no --target or --inventory given and no patchkit.targets or patchkit.inventory "
        f"in {REPO}/invoke.yaml"
    )


# -- unknown top-level sections ---------------------------------------------------------------------


def test_a_misspelled_section_is_refused_naming_it_and_the_file(work):
    (work / "patchkit.yaml").write_text("patchkt:\n  series: sglang-v0.5.9\n")
    proc = patchkit(["patch.verify", "--target", "site-packages"], work)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"patchkit: {work}/patchkit.yaml: unknown section patchkt (known: patchkit, run, runners, "
        "sudo, tasks, timeouts); did you mean patchkit?"
    )


def test_a_misspelled_section_in_an_invoke_f_file_is_refused(tmp_path):
    tree, series = small_target(tmp_path / "t"), small_series(tmp_path / "s")
    config = tmp_path / "site.yaml"
    config.write_text("patchkt:\n  jobs: 2\n")
    before = sorted(p.name for p in tree.rglob("*"))
    proc = invoke("-f", str(config), "patch.apply", "--series", str(series), "--target", str(tree))
    assert proc.returncode == 2
    assert f"{config}: unknown section patchkt" in proc.stderr
    assert sorted(p.name for p in tree.rglob("*")) == before
    # any task, also one that reads no setting
    proc = invoke("-f", str(config), "patch.diff", "--from", str(series), "--to", str(series))
    assert proc.returncode == 2 and "unknown section patchkt" in proc.stderr


def test_invoke_sections_and_shared_files_are_accepted(tmp_path, work):
    tree, series = small_target(tmp_path / "t"), small_series(tmp_path / "s")
    (work / "patchkit.yaml").write_text("run:\n  echo: false\npatchkit:\n  jobs: 2\n")
    proc = patchkit(["patch.verify", "--series", str(series), "--target", str(tree)], work)
    assert proc.returncode == 0, proc.stderr
    # invoke's per-user file serves every invoke project: another project's section is theirs
    home = tmp_path / "home"
    home.mkdir()
    (home / ".invoke.yaml").write_text("otherproject:\n  x: 1\n")
    env = {"HOME": str(home)}
    proc = invoke("patch.verify", "--series", str(series), "--target", str(tree), env=env)
    assert proc.returncode == 0, proc.stderr
    (home / ".invoke.yaml").write_text("patchkt:\n  x: 1\n")  # but a near miss of patchkit is ours
    proc = invoke("patch.verify", "--series", str(series), "--target", str(tree), env=env)
    assert proc.returncode == 2 and f"{home}/.invoke.yaml: unknown section patchkt" in proc.stderr


def test_an_unknown_key_gets_a_did_you_mean(work):
    (work / "patchkit.yaml").write_text("patchkit:\n  jobz: 2\n")
    proc = patchkit(["patch.verify", "--target", "site-packages"], work)
    assert proc.returncode == 2 and proc.stderr.rstrip().endswith("; did you mean patchkit.jobs?")


# -- did you mean ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, said",
    [
        (["patch.verify", "--serie", "x"], "No idea what '--serie' is! (did you mean --series?)"),
        (["patch.apply", "--dry-rum"], "No idea what '--dry-rum' is! (did you mean --dry-run?)"),
        (["patch.aply"], "No idea what 'patch.aply' is! (did you mean patch.apply?)"),
        (["--lisst"], "No idea what '--lisst' is! (did you mean --list?)"),
        (["patch.verify", "--zzzzzz"], "No idea what '--zzzzzz' is!"),
    ],
)
def test_the_installed_command_suggests_an_option(work, args, said):
    proc = patchkit(args, work)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"patchkit: {said}"


def test_python_m_entry_points_suggest_an_option(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for module, args, said in (
        (
            "patchkit.profile",
            ["run", "--sereis", "x"],
            "unrecognized arguments: --sereis x (did you mean --series?)",
        ),
        (
            "patchkit.profile.remote",
            ["--config", "x", "--sectoin", "y"],
            "unrecognized arguments: --sectoin y (did you mean --section?)",
        ),
    ):
        proc = cli.module(module, *args, cwd=tmp_path, env=env)
        assert proc.returncode == 2
        assert proc.stderr.rstrip().endswith(said), proc.stderr


# -- grammar --------------------------------------------------------------------------------------


@pytest.mark.parametrize("count, verb", [(1, "matches"), (2, "match")])
def test_series_auto_says_matches_for_one_file(tmp_path, count, verb):
    from patchkit.engine.autoseries import Candidate, Seen, _said
    from patchkit.pin import parse_pin

    names = ["eagle_worker_v2.py", "eagle_worker.py"][:count]
    toml = '[upstream]\nname = "sglang"\nversion = "0.5.14"\n' + "".join(
        f'[[file]]\npath = "python/sglang/srt/speculative/{n}"\nsha256 = "{"a" * 64}"\nlines = 3\n'
        for n in names
    )
    said = _said(
        [(Seen("gpu1:/x", [], {}), Candidate(tmp_path / "sglang-v0.5.14", parse_pin(toml, "pin.toml")))]
    )
    assert said.endswith(f"{', '.join(names)} {verb} its pin exactly")
