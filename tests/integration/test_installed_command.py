"""The `patchkit` command: invoke's Program over the package's tasks, run from any directory.

The slow test builds the wheel from a copy of this checkout, installs it into a fresh virtual
environment (no system site-packages; its dependencies come from pip's configured index) and runs
the installed console script outside the checkout. The fast tests run the same Program
(`python -m patchkit.command`) from a scratch directory, for the configuration files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support import cli
from support.engine import read_tree
from support.upstream import sglang_installed

pytestmark = [pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
WORKER = "sglang/srt/speculative/eagle_worker.py"
TIMER = "sglang/srt/speculative/phase_timer.py"


def clean_env(tmp_path: Path, **extra) -> dict:
    """No PYTHONPATH (the checkout must not leak in), a private config and cache home."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PATCHKIT_CACHE", "VIRTUAL_ENV") and not k.startswith("INVOKE_")
    }
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.update(extra)
    return env


def run(argv, cwd, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
    )


# ---- the wheel, installed ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, wheel): the checkout's wheel installed into a fresh venv."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    listed = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    env = clean_env(base)
    built = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(src),
            "-w",
            str(base / "dist"),
        ],
        base,
        env,
    )
    assert built.returncode == 0, built.stderr
    wheel = next((base / "dist").glob("patchkit-*.whl"))
    venv = base / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], base, env)
    assert made.returncode == 0, made.stderr
    pip = run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], base, env, timeout=600
    )
    if pip.returncode != 0 and "No matching distribution" in pip.stderr:
        pytest.skip(f"the dependencies are not reachable from pip here: {pip.stderr[-300:]}")
    assert pip.returncode == 0, pip.stderr
    return venv, wheel


@pytest.mark.slow
def test_wheel_carries_the_series_and_the_script(installed):
    _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(p.name for p in (REPO / "patches").iterdir() if (p / "pin.toml").is_file())
    assert (
        sorted(
            {n.split("/")[2] for n in names if n.startswith("patchkit/_series/") and n.endswith("/pin.toml")}
        )
        == shipped
    )
    # every series as users get it: the folder's files, the runtime patch rendered from
    # patchkit/timing/phase_timer.py in place of its marker (what patch.export writes), byte for byte
    from patchkit.engine.runtime_patch import MARKER_SUFFIX, materialize

    archive = zipfile.ZipFile(wheel)
    for series in shipped:
        inside = f"patchkit/_series/{series}/"
        carried = {n[len(inside) :]: archive.read(n) for n in names if n.startswith(inside)}
        assert carried == materialize(str(REPO / "patches" / series)), series
        assert "0001-phase-timer-runtime.patch" in carried, series
    assert not any(n.endswith(MARKER_SUFFIX) for n in names)
    # how each series is proven travels with them (patch.verify reads it)
    assert archive.read("patchkit/_series/proofs.toml") == (REPO / "patches" / "proofs.toml").read_bytes()
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "patchkit = patchkit.command:main" in zipfile.ZipFile(wheel).read(entry).decode()
    assert not any(n.startswith(("tasks.py", "patches/", "tests/")) for n in names)


@pytest.mark.slow
def test_installed_command_from_another_directory(installed, tmp_path):
    venv, _ = installed
    patchkit = str(venv / "bin" / "patchkit")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(tmp_path)
    where = run(
        [str(venv / "bin" / "python"), "-c", "import patchkit; print(patchkit.__file__)"], elsewhere, env
    )
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr

    proc = run([patchkit, "--version"], elsewhere, env)
    assert proc.returncode == 0 and proc.stdout.strip() == "patchkit 0.1.0", proc.stdout
    proc = run([patchkit, "--list"], elsewhere, env)
    assert proc.returncode == 0, proc.stderr
    for name in (
        "patch.apply",
        "patch.verify",
        "patch.revert",
        "profile.collect",
        "profile.report",
        "profile.remote",
        "upstream.fetch",
    ):
        assert name in proc.stdout, name

    tree = sglang_installed("0.5.9", elsewhere / "site-packages")
    original = read_tree(tree, (WORKER, TIMER))
    proc = run(
        [patchkit, "patch.verify", "--series", "sglang-v0.5.9", "--target", "site-packages"], elsewhere, env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("patchkit verify: series sglang-v0.5.9 (")
    assert f"{tree}  pristine" in proc.stdout
    # the wheel carries patches/proofs.toml: how the series is proven
    assert "\nproven: static proof only (no GPU run recorded)" in proc.stdout

    proc = run(
        [patchkit, "patch.apply", "--series", "auto", "--target", "site-packages", "--json"], elsewhere, env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--series auto: chose sglang-v0.5.9" in proc.stderr
    answer = json.loads(proc.stdout)
    assert (answer["series"], [h["state"] for h in answer["hosts"]]) == ("sglang-v0.5.9", ["applied"])
    assert (tree / TIMER).is_file() and read_tree(tree, (WORKER,)) != {WORKER: original[WORKER]}
    assert (tmp_path / "cache" / "patchkit" / "compiled").is_dir()  # not in site-packages
    assert not list((venv / "lib").glob("python*/site-packages/.cache"))
    proc = run([patchkit, "patch.revert", "--series", "auto", "--target", "site-packages"], elsewhere, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_tree(tree, (WORKER, TIMER)) == original

    proc = run(
        [patchkit, "patch.verify", "--series", "no-such-series", "--target", "site-packages"], elsewhere, env
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--series no-such-series: no such folder" in proc.stderr and "no shipped series" in proc.stderr


# ---- configuration files (the same Program, from the checkout's package) -------------------------


def command(args, cwd, env) -> subprocess.CompletedProcess:
    """The checkout's command (``python -m patchkit.command``), through support.cli."""
    return cli.module("patchkit.command", *args, cwd=cwd, env=env, timeout=120)


@pytest.fixture
def scratch(tmp_path):
    """A directory outside the checkout holding a 0.5.9 tree, and the Program's environment."""
    work = tmp_path / "work"
    sglang_installed("0.5.9", work / "site-packages")
    return work, clean_env(tmp_path, PYTHONPATH=str(REPO))


def header(proc) -> str:
    return proc.stdout.splitlines()[0] if proc.stdout else proc.stderr


def test_project_file_in_the_current_directory(scratch):
    work, env = scratch
    (work / "patchkit.yaml").write_text("patchkit:\n  series: sglang-v0.5.9\n  targets: [site-packages]\n")
    proc = command(["patch.verify"], work, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert header(proc).startswith("patchkit verify: series sglang-v0.5.9 (")
    assert str(work / "site-packages") in proc.stdout  # the relative target, from the cwd


def test_invoke_yaml_is_read_when_there_is_no_patchkit_yaml(scratch):
    work, env = scratch
    (work / "invoke.yaml").write_text("patchkit:\n  series: sglang-v0.5.12\n")
    proc = command(["patch.check", "--target", "site-packages"], work, env)
    assert header(proc).startswith("patchkit check: series sglang-v0.5.12 (")
    assert proc.returncode == 1  # 0.5.9's files are not what 0.5.12 pins
    (work / "patchkit.yaml").write_text("patchkit:\n  series: sglang-v0.5.9\n")
    proc = command(["patch.check", "--target", "site-packages"], work, env)
    assert proc.returncode == 0 and header(proc).startswith("patchkit check: series sglang-v0.5.9 (")


def test_user_file_under_the_config_home_and_the_project_file_wins(scratch, tmp_path):
    work, env = scratch
    user = Path(env["XDG_CONFIG_HOME"]) / "patchkit"
    user.mkdir(parents=True)
    (user / "patchkit.yaml").write_text("patchkit:\n  series: sglang-v0.5.12\n")
    proc = command(["patch.check", "--target", "site-packages"], work, env)
    assert header(proc).startswith("patchkit check: series sglang-v0.5.12 (")
    (work / "patchkit.yaml").write_text("patchkit:\n  series: sglang-v0.5.9\n")
    proc = command(["patch.check", "--target", "site-packages"], work, env)
    assert proc.returncode == 0 and header(proc).startswith("patchkit check: series sglang-v0.5.9 (")
    proc = command(["patch.check", "--target", "site-packages", "--series", "sglang-v0.5.12"], work, env)
    assert header(proc).startswith("patchkit check: series sglang-v0.5.12 (")  # option wins


def test_no_series_anywhere_is_invalid_input(scratch):
    work, env = scratch
    proc = command(["patch.verify", "--target", "site-packages"], work, env)
    assert proc.returncode == 2 and "no --series given" in proc.stderr


def test_a_series_name_or_a_folder(scratch):
    work, env = scratch
    proc = command(["patch.check", "--series", "sglang-v0.5.99", "--target", "site-packages"], work, env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"patchkit: --series sglang-v0.5.99: no such folder in {work} "
        "and no shipped series of that name (close: sglang-v0.5.9, "
        "sglang-v0.5.19, sglang-v0.5.8)"
    )
    # a folder of that name in the current directory wins over the shipped series
    shutil.copytree(REPO / "patches" / "sglang-v0.5.12", work / "sglang-v0.5.9")
    proc = command(["patch.check", "--series", "sglang-v0.5.9", "--target", "site-packages"], work, env)
    from patchkit.engine.series import load_series

    digest = load_series(str(REPO / "patches" / "sglang-v0.5.12")).digest
    assert header(proc).startswith(f"patchkit check: series sglang-v0.5.9 ({digest[:12]})")
    assert proc.returncode == 1  # 0.5.12's pin, under that name, against a 0.5.9 tree


def test_parse_errors_and_unknown_settings_exit_2(scratch):
    """The command is patchkit.boundary.program_class(): an unknown option is invalid input (exit 2,
    not invoke's 1), and so is a misspelt key in patchkit.yaml, named with its file."""
    work, env = scratch
    before = sorted(p.name for p in (work / "site-packages").rglob("*"))
    cmd = ["patch.verify", "--series", "sglang-v0.5.9", "--target", "site-packages"]
    proc = command([*cmd, "--jobz", "3"], work, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--jobz" in proc.stderr and proc.stderr.count("\n") == 1
    (work / "patchkit.yaml").write_text("patchkit:\n  targts: [site-packages]\n")
    proc = command(cmd, work, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "unknown setting patchkit.targts" in proc.stderr and "patchkit.yaml" in proc.stderr
    proc = command(
        ["patch.diff", "--from", "x", "--to", "y"], work, env
    )  # reads no setting: refused all the same
    assert proc.returncode == 2 and "patchkit.targts" in proc.stderr, proc.stderr
    assert sorted(p.name for p in (work / "site-packages").rglob("*")) == before


def test_ctrl_c_exits_130(scratch):
    """SIGINT while a target's program runs (an --exec prefix that only sleeps): exit 130."""
    import signal
    import time

    work, env = scratch
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "patchkit.command",
            "patch.verify",
            "--series",
            "sglang-v0.5.9",
            "--exec",
            "sh -c 'sleep 60' --",
            "--target",
            str(work / "site-packages"),
        ],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait until the target's shell is running
            ps = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
            if ps.stdout.strip():
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    # one line: the task's boundary (patchkit.boundary) says what was (not) cleaned up
    assert err.strip().startswith("patchkit: interrupted") and err.strip().count("\n") == 0, err


def test_same_tasks_and_options_as_invoke_in_the_checkout(scratch):
    work, env = scratch
    in_checkout = cli.invoke(
        "--list", "--list-format", "json", env=dict(env, PYTHONPATH=str(REPO)), timeout=120
    )
    installed = command(["--list", "--list-format", "json"], work, env)
    assert in_checkout.returncode == 0 and installed.returncode == 0, in_checkout.stderr
    tree = json.loads(installed.stdout)
    checkout_tree = json.loads(in_checkout.stdout)
    for key in ("tasks", "collections", "default"):  # the root's name and help differ
        assert checkout_tree[key] == tree[key], key
    names = {f"{c['name']}.{t['name']}" for c in tree["collections"] for t in c["tasks"]}
    assert {"patch.apply", "profile.collect", "profile.report"} <= names
    for task in ("patch.apply", "profile.collect"):
        a = cli.invoke("--help", task, env=dict(env, PYTHONPATH=str(REPO)), timeout=120)
        b = command(["--help", task], work, env)
        assert a.returncode == b.returncode == 0
        usage_a, rest_a = a.stdout.split("\n", 1)
        usage_b, rest_b = b.stdout.split("\n", 1)
        assert usage_a.startswith("Usage: inv[oke] ") and usage_b.startswith("Usage: patchkit ")
        assert rest_a == rest_b and "--target" in rest_b, task
