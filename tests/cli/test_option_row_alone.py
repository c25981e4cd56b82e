"""An option is its row: a row added to the option table (patchkit/settings.py) and nothing else
is an option of its tasks under invoke and under the installed ``patchkit`` command, a config key,
a line of the example config and of ``--help``, checked by the row's check whichever way it came,
and a field of the settings the tasks build (PatchSettings, profile.remote's RemoteConfig).

The test copies the package, adds two throwaway rows to the copy's settings.py (one for the
patch tasks, one for profile.remote) and runs the copy's front ends in fresh interpreters."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.cli import REPO

ANCHOR = '    Option(\n        "jobs",\n        key="jobs",'
ROWS = """    Option(
        "probe_level",
        key="probe_level",
        default=3,
        help="a throwaway option of the patch tasks (default: patchkit.probe_level, {default})",
        check=whole_in(1, 9),
        fronts=PATCH_TASKS,
        doc="a throwaway key, 1..9",
    ),
    Option(
        "probe_wait_s",
        key="profile.remote.probe_wait_s",
        default=5.0,
        help="a throwaway option of profile.remote (seconds)",
        check=positive,
        fronts=("profile.remote",),
        doc="a throwaway key, seconds",
        commented=False,
    ),
"""


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The checkout's package, tasks.py and invoke.yaml, the two rows added to settings.py."""
    root = tmp_path_factory.mktemp("row-alone")
    shutil.copytree(REPO / "patchkit", root / "patchkit", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("tasks.py", "invoke.yaml"):
        shutil.copy(REPO / name, root / name)
    settings = root / "patchkit" / "settings.py"
    source = settings.read_text()
    assert source.count(ANCHOR) == 1, "the jobs row moved: update ANCHOR"
    settings.write_text(source.replace(ANCHOR, ROWS + ANCHOR))
    (root / "work").mkdir()
    return root


def run(root: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh interpreter that imports patchkit from ``root``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "PYTHONPATH"))}
    env.update(PYTHONPATH=str(root), XDG_CONFIG_HOME=str(root / "xdg"))
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd or root / "work",
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_the_rows_are_absent_from_the_real_table():
    """The control: the checkout itself has neither option (so the copy's are the rows' doing)."""
    from patchkit.settings import OPTIONS

    assert not {"probe_level", "probe_wait_s"} & {o.name for o in OPTIONS}


@pytest.mark.parametrize("front", ["invoke", "patchkit"])
def test_each_front_end_offers_and_explains_them(copy, front):
    for task, flag, words in (
        (
            "patch.apply",
            "--probe-level",
            "a throwaway option of the patch tasks (default: patchkit.probe_level, 3)",
        ),
        ("patch.revert", "--probe-level", "a throwaway option of the patch tasks"),
        ("profile.remote", "--probe-wait-s", "a throwaway option of profile.remote (seconds)"),
    ):
        argv = ["-m", "invoke", "-r", str(copy)] if front == "invoke" else ["-m", "patchkit.command"]
        proc = run(copy, *argv, task, "--help")
        assert proc.returncode == 0, proc.stderr
        assert flag in proc.stdout and " ".join(words.split()) in " ".join(proc.stdout.split()), proc.stdout


@pytest.mark.parametrize(
    "args, config, said",
    [
        (["patch.check", "--probe-level", "0"], "", "--probe-level '0': a whole number 1..9"),
        (
            ["patch.check"],
            "patchkit:\n  probe_level: 12\n",
            "patchkit.probe_level in {yaml} 12: a whole number 1..9",
        ),
        (["profile.remote", "--probe-wait-s", "-1"], "", "--probe-wait-s '-1' must be a positive number"),
        (
            ["profile.remote"],
            "patchkit:\n  profile:\n    remote:\n      probe_wait_s: soon\n",
            "profile.remote: probe_wait_s 'soon' must be a positive number",
        ),
    ],
)
def test_a_bad_value_is_refused_by_the_rows_check_from_either_place(copy, args, config, said):
    work = copy / "work"
    yaml = work / "patchkit.yaml"
    yaml.write_text(config or "patchkit: {}\n")
    given = ["--target", str(work), "--series", str(REPO / "patches" / "sglang-v0.5.9")]
    if args[0] == "profile.remote":
        given += ["--server", "serve", "--bench", "bench", "--no-chart"]
    proc = run(copy, "-m", "patchkit.command", *args, *given)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said.format(yaml=yaml) in proc.stderr
    assert os.listdir(work) == ["patchkit.yaml"]  # refused before anything was made


def test_a_good_value_reaches_the_settings_from_option_config_or_default(copy, tmp_path):
    """PatchSettings and RemoteConfig carry the rows' values (the option beats the key, the key
    the default), checked: "4" comes back a number."""
    yaml = tmp_path / "site.yaml"
    yaml.write_text("patchkit:\n  probe_level: 7\n  profile:\n    remote:\n      probe_wait_s: 2.5\n")
    script = textwrap.dedent(
        f"""
        import json
        from invoke import Config, Context
        from patchkit.profile.remote import RemoteConfig
        from patchkit.settings import PATCHKIT_DEFAULTS, PatchSettings

        def context(path):
            config = Config(defaults={{"patchkit": dict(PATCHKIT_DEFAULTS)}})
            if path:
                config.set_runtime_path(path)
                config.load_runtime()
            return Context(config=config)

        base = {{"series": "s", "target": ["/t"]}}
        remote = {{"targets": ["/t"], "server_command": "s", "bench_command": "b", "series": {str(REPO / "patches" / "sglang-v0.5.9")!r}}}
        print(json.dumps([
            PatchSettings.from_invoke(context(None), "apply", base).probe_level,
            PatchSettings.from_invoke(context({str(yaml)!r}), "apply", base).probe_level,
            PatchSettings.from_invoke(context({str(yaml)!r}), "apply", dict(base, probe_level="4")).probe_level,
            RemoteConfig().probe_wait_s,
            RemoteConfig.from_mapping(dict(remote, probe_wait_s="2.5")).probe_wait_s,
        ]))
        """
    )
    proc = run(copy, "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [3, 7, 4, 5.0, 2.5]


def test_the_example_config_documents_them(copy, tmp_path):
    """patch.gen-config (make lint's --check) finds the example config behind the table, and
    writes each key with its default and its doc."""
    example = tmp_path / "invoke.yaml"
    shutil.copy(REPO / "invoke.yaml", example)
    check = run(copy, "-m", "patchkit.command", "patch.gen-config", "--check", "--file", str(example))
    assert check.returncode == 1 and "differs" in check.stdout, check.stdout + check.stderr
    write = run(copy, "-m", "patchkit.command", "patch.gen-config", "--file", str(example))
    assert write.returncode == 0, write.stderr
    lines = example.read_text().splitlines()
    assert any(
        line.startswith("  # probe_level: 3 ") and line.endswith("# a throwaway key, 1..9") for line in lines
    )
    assert any(
        line.startswith("      probe_wait_s: 5 ") and line.endswith("# a throwaway key, seconds")
        for line in lines
    )


def test_the_tasks_call_no_check_of_their_own():
    """patchkit/tasks.py takes its values through the resolve path (resolve, checked): it imports
    none of the checks the rows hold, so a check cannot be called beside its row by hand."""
    import ast

    from patchkit import settings

    checks = {settings.row_check(o) for o in settings.OPTIONS} - {None}
    checks |= {settings.text, settings.positive_int, settings.whole_number, settings.seconds, settings.number}
    tree = ast.parse((REPO / "patchkit" / "tasks.py").read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "patchkit.settings"
        for alias in node.names
    }
    assert "resolve" in imported and "checked" in imported
    assert not {name for name in imported if any(getattr(settings, name) is check for check in checks)}


def test_repeat_is_one_check():
    """profile.sweep's and profile.remote's --repeat: the same check, the same bound and words."""
    from patchkit.errors import InvalidInput
    from patchkit.settings import checked, offered

    assert offered("profile.sweep")["repeat"].check is offered("profile.remote")["repeat"].check
    said = set()
    for front in ("profile.sweep", "profile.remote"):
        assert checked(front, "repeat", "1000") == 1000
        with pytest.raises(InvalidInput) as bad:
            checked(front, "repeat", "1001")
        said.add(bad.value.message)
    assert said == {
        "--repeat '1001': a whole number of repetitions (--repeat must be a whole number of at least 1, at most 1000)"
    }
