"""Every task with every kind of bad value for each of its options, and
every transport behind a failing prefix. Each case checks the exit code (2 invalid input, 1
refused), that the failure is one line (stderr, and `error` of the --json document where the task
has --json), and that the target tree is byte-identical afterwards (sha256 over paths, modes and
contents).

The tasks run in this process through invoke's own Program (the same parser and tasks.py as the
`invoke` command, without a Python start-up per case); test_failures.py runs the real command.
Which options exist is read from the tasks themselves, so a new option without bad values here
fails `test_every_option_has_bad_values`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest

from patchkit.transport import kind_settings
from support.cli import in_process
from support.failures import REPO, small_series, small_target, tree_digest

FLAGS = {
    "json",
    "dry_run",
    "show_script",
    "force",
    "keep_journal",
    "no_chart",
    "context_trim",
    "resume",
    "trust_new",
    "merge",
    "keep_remote_dir",
    "baseline",
    "check",
    "warmup",
    "all_",
}


def run_cli(*args: str) -> tuple[int, str, str]:
    return in_process(*args)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")
    tree = small_target(base / "target")
    series = small_series(base / "series")
    (base / "bad.ini").write_text("[gpu]\nhost1 ansible_port=notaport\n")
    (base / "afile").write_text("x\n")
    repo = base / "repo"  # a real git clone for upstream.fetch --upstream
    small_target(repo)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "v1"], ["tag", "v1"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )
    shutil.copytree(series, base / "pin-series")
    return {"tmp": str(base), "tree": str(tree), "series": str(series), "repo": str(repo)}


# option -> [(bad value, exit code, a fragment of the one-line message)]
TARGET_OPTIONS = {
    "series": [("{tmp}/no-series", 2, "no such directory"), ("", 2, "--series"), ("{tmp}", 2, "pin.toml")],
    "target": [
        ("docker://c", 2, "absolute path"),
        ("", 2, "--target"),
        ("{tmp}/no-tree", 1, "does not exist"),
        ("a\nb", 2, "newline"),
    ],
    "layout": [("sideways", 2, "--layout")],
    "container": [("", 2, "--container"), ("no such", 2, "container name")],
    "exec_": [("", 2, "--exec"), ("'unclosed", 2, "cannot split"), ("-x", 2, "start with a program")],
    "ssh_config": [("{tmp}/no-config", 2, "--ssh-config"), ("", 2, "--ssh-config")],
    "timeout": [
        ("abc", 2, "--timeout"),
        ("-5", 2, "--timeout"),
        ("0", 2, "--timeout"),
        ("inf", 2, "--timeout"),
        ("nan", 2, "--timeout"),
    ],
    "jobs": [("abc", 2, "--jobs"), ("0", 2, "--jobs"), ("-1", 2, "--jobs"), ("1.5", 2, "--jobs")],
    "ssh_persist": [("soon", 2, "--ssh-persist"), ("-1", 2, "--ssh-persist"), ("inf", 2, "--ssh-persist")],
    "inventory": [
        ("{tmp}/no.ini", 2, "cannot read"),
        ("", 2, "--inventory"),
        ("{tmp}/bad.ini", 2, "bad.ini:2"),
    ],
    "limit": [("gpu", 2, "--inventory")],  # without --inventory
    "root": [("/srv", 2, "--inventory")],
    # checked whatever the targets are (a k8s: target is not needed to say a typo)
    "k8s_container": [("Server_1", 2, "--k8s-container"), ("", 2, "--k8s-container")],
    "kube_context": [("-x", 2, "--kube-context"), ("ctx;id", 2, "--kube-context")],
    "kubectl": [("kubectl --insecure", 2, "--kubectl"), ("", 2, "--kubectl")],
}
TARGET_TASKS = ["patch.check", "patch.verify", "patch.apply", "patch.revert", "patch.status", "patch.unlock"]

PROFILE_OPTIONS = {
    "size": [("huge", 2, "--size")],
    "timer": [("bogus", 2, "--timer")],
    "device": [("tpu", 2, "--device")],
    "seed": [("x", 2, "--seed"), ("-1", 2, "--seed")],
    "timeout": [("abc", 2, "--timeout"), ("-5", 2, "--timeout")],
    "series": [("{tmp}/no-series", 2, "no-series"), ("", 2, "--series"), ("{tmp}/afile", 2, "--series")],
    "site": [("", 2, "--site"), ("{tmp}/afile", 2, "--site")],
    "wheelhouse": [("{tmp}/no-wheels", 2, "--wheelhouse")],
    "out": [("/proc/no/out", 2, "--out")],
}
RUN_OPTIONS = dict(
    PROFILE_OPTIONS,
    num_assistant_tokens=[("many", 2, "--num-assistant-tokens"), ("0", 2, "--num-assistant-tokens")],
    confidence=[("high", 2, "--confidence"), ("2", 2, "--confidence")],
    sample=[("0", 2, "--sample"), ("x", 2, "--sample"), ("1.5", 2, "--sample")],
    mode=[("memory", 2, "--mode")],
)
REPEAT_BAD = [("0", 2, "--repeat"), ("x", 2, "--repeat"), ("-2", 2, "--repeat")]
SWEEP_OPTIONS = dict(
    PROFILE_OPTIONS,
    matrix=[("bogus", 2, "--matrix"), ("k=a,b", 2, "--matrix"), ("", 2, "--matrix")],
    repeat=REPEAT_BAD,
)
# the target options profile.remote shares with the patch tasks (the same rows and checks): the
# first bad value of each in the fast subset, the others under the slow mark
REMOTE_TARGET_OPTIONS = ("inventory", "limit", "root", *kind_settings())  # the kinds' own from each kind
REMOTE_OPTIONS = {
    "target": [("", 2, "target"), ("docker://c", 2, "docker://")],
    "series": [("{tmp}/no-series", 2, "no-series"), ("", 2, "--series")],
    "server": [("", 2, "--server")],
    "bench": [("", 2, "--bench")],
    "env": [("NOEQUALS", 2, "NOEQUALS")],
    "out": [("/proc/no/out", 2, "--out")],
    "matrix": [("zz", 2, "zz"), ("", 2, "--matrix")],
    "sample": [("0", 2, "--sample"), ("x", 2, "--sample")],
    "repeat": REPEAT_BAD,
    "from_prediction": [("{tmp}/no-run", 2, "profile.predict RUN first"), ("", 2, "--from-prediction")],
    "top": [("0", 2, "--top"), ("x", 2, "--top")],
    "budget": [("0", 2, "--budget"), ("-3", 2, "--budget"), ("soon", 2, "--budget"), ("", 2, "--budget")],
    "min_effect": [("0", 2, "--min-effect"), ("101", 2, "--min-effect"), ("five", 2, "--min-effect")],
    "power": [("0.3", 2, "--power"), ("1", 2, "--power"), ("high", 2, "--power")],
    "until": [("forever", 2, "--until"), ("", 2, "--until")],
    "gpus": [("0,0", 2, "--gpus"), ("a;b", 2, "--gpus"), ("", 2, "--gpus"), ("0,,1", 2, "--gpus")],
    "blocks": [("gpus", 2, "--blocks"), ("", 2, "--blocks"), ("Hosts ", 2, "--blocks")],
    "cpus": [("a", 2, "--cpus"), ("7-3", 2, "--cpus"), ("", 2, "--cpus"), ("0;;1", 2, "--cpus")],
    # the patch tasks' target options, the same bad values refused the same way
    **{option: TARGET_OPTIONS[option] for option in REMOTE_TARGET_OPTIONS},
}
COLLECT_OPTIONS = {
    "target": [("", 2, "--target"), ("docker://c", 2, "docker://")],
    "from_": [("", 2, "--from")],
    "out": [("", 2, "--out"), ("{tmp}/afile", 2, "afile")],
    "max_mb": [("lots", 2, "--max-mb"), ("-1", 2, "--max-mb"), ("0", 2, "--max-mb")],
    "python": [("", 2, "--python")],
    "container": [("", 2, "--container")],
    "exec_": [("", 2, "--exec")],
    "ssh_config": [("{tmp}/no-config", 2, "--ssh-config")],
    "ssh_persist": [("soon", 2, "--ssh-persist"), ("-1", 2, "--ssh-persist")],
    "timeout": [("abc", 2, "--timeout"), ("0", 2, "--timeout")],
}
REPORT_OPTIONS = {
    "timing": [("{tmp}/no-timing", 2, "no such folder"), ("", 2, "--timing")],
    "out": [("", 2, "--out")],
    "bench": [("{tmp}/no-bench", 2, "--bench"), ("", 2, "--bench")],
}
# the valid rest of a profile.remote command line (each case replaces one option)
REMOTE_BASE = {"target": "{tree}", "series": "{series}", "server": "false", "bench": "false"}
REBASE_OPTIONS = {
    "series": [("{tmp}/no-series", 2, "no-series"), ("", 2, "--series")],
    "onto": [("", 2, "--onto")],
    "upstream": [("{tmp}/no-clone", 2, "--upstream")],
    "out": [("{tmp}/afile", 2, "afile")],
    "version": [("", 2, "--onto")],
    "wheelhouse": [("{tmp}/no-wheels", 2, "--wheelhouse")],
    "onto_target": [("docker://c", 2, "docker://")],
    "layout": [("sideways", 2, "--layout")],
    "container": [("", 2, "--container")],
    "exec_": [("", 2, "--exec")],
    "ssh_config": [("{tmp}/no-config", 2, "--ssh-config")],
    "timeout": [("abc", 2, "--timeout"), ("-5", 2, "--timeout")],
}
DIFF_OPTIONS = {"from_": [("{tmp}/no-series", 2, "no-series")], "to": [("{tmp}/no-series", 2, "no-series")]}

SERIES_BAD = [("{tmp}/no-series", 2, "no-series"), ("", 2, "--series")]
EDIT_OPTIONS = {
    "dest": [("", 2, "--dest")],
    "series": SERIES_BAD,
    "upto": [("nosuch.patch", 2, "nosuch.patch")],
    "pristine": [("{tmp}/no-tree", 2, "--pristine"), ("", 2, "--pristine")],
    "layout": [("weird", 2, "--layout")],
}
NEW_OPTIONS = {
    "name": [("", 2, "--name"), ("a/b.patch", 2, "patch name")],
    "edited": [("{tmp}/no-tree", 2, "--edited"), ("", 2, "--edited")],
    "series": SERIES_BAD,
    "pristine": [("{tmp}/no-tree", 2, "--pristine")],
    "header": [("", 2, "--header")],
    "new_file": [("/abs", 2, "--new-file"), ("", 2, "--new-file")],
}
REFRESH_OPTIONS = {
    "edited": [("{tmp}/no-tree", 2, "--edited")],
    "series": SERIES_BAD,
    "pristine": [("{tmp}/no-tree", 2, "--pristine")],
    "patch": [("nosuch.patch", 2, "nosuch.patch"), ("", 2, "--patch")],
}
GEN_RUNTIME_OPTIONS = {"series": SERIES_BAD}
FETCH_OPTIONS = {
    "series": [("{tmp}/no-series", 2, "no-series")],
    "name": [("", 2, "--name")],
    "version": [("", 2, "--version")],
    "path": [("../x", 2, "unsafe"), ("", 2, "--path")],
    "upstream": [("{tmp}/no-clone", 2, "--upstream")],
    "rev": [("", 2, "--rev")],
    "layout": [("weird", 2, "--layout")],
    "dest": [("{tmp}/afile", 2, "--dest"), ("", 2, "--dest")],
}
PIN_OPTIONS = {
    "series": [("", 2, "--series")],
    "tree": [("{tmp}/no-tree", 2, "--tree"), ("", 2, "--tree")],
    "path": [("/abs", 2, "unsafe"), ("", 2, "--path")],
    "name": [("", 2, "--name")],
    "version": [("", 2, "--version")],
    "commit": [("xyz", 2, "40 lowercase hex"), ("", 2, "--commit")],
    "package_prefix": [("/abs/", 2, "--package-prefix"), ("", 2, "--package-prefix")],
}
AUTHOR_BASE = {
    "patch.edit": {"dest": "{tmp}/edit-out", "series": "{series}", "pristine": "{tree}"},
    "patch.new": {"name": "0002-x.patch", "edited": "{tree}", "series": "{series}", "pristine": "{tree}"},
    "patch.refresh": {"edited": "{tree}", "series": "{series}", "pristine": "{tree}"},
    "patch.gen-runtime": {"series": "{series}"},
    "upstream.fetch": {"upstream": "{repo}", "rev": "v1", "path": "pkg/m.py", "dest": "{tmp}/fetched"},
    "upstream.pin": {"series": "{tmp}/pin-series", "tree": "{tree}"},
    "profile.collect": {"target": "{tree}", "out": "{tmp}/collected"},
    "profile.report": {"timing": "{tree}", "out": "{tmp}/report"},
}

TABLE = {
    **{t: TARGET_OPTIONS for t in TARGET_TASKS},
    "patch.apply": dict(
        TARGET_OPTIONS,
        mode=[("memory", 2, "--mode"), ("", 2, "--mode")],
        hook_dir=[("{tmp}/afile", 2, "--hook-dir")],
    ),
    "profile.run": RUN_OPTIONS,
    "profile.sweep": SWEEP_OPTIONS,
    "profile.remote": REMOTE_OPTIONS,
    "profile.collect": COLLECT_OPTIONS,
    "profile.report": REPORT_OPTIONS,
    "patch.rebase": REBASE_OPTIONS,
    "patch.diff": DIFF_OPTIONS,
    "patch.edit": EDIT_OPTIONS,
    "patch.new": NEW_OPTIONS,
    "patch.refresh": REFRESH_OPTIONS,
    "patch.gen-runtime": GEN_RUNTIME_OPTIONS,
    "upstream.fetch": FETCH_OPTIONS,
    "upstream.pin": PIN_OPTIONS,
}


def _flag(option: str) -> str:
    return "--" + option.rstrip("_").replace("_", "-")


def _task_options(name: str) -> set[str]:
    from invoke import Collection
    from invoke.loader import FilesystemLoader

    loaded = FilesystemLoader(start=str(REPO)).load()
    ns = Collection.from_module(loaded[0])
    task = ns[name]
    return {a.name for a in task.get_arguments()} - FLAGS


@pytest.mark.parametrize("task", sorted(TABLE))
def test_every_option_has_bad_values(task):
    names = {n.replace("-", "_").rstrip("_") for n in _task_options(task)}
    missing = sorted(names - {k.rstrip("_") for k in TABLE[task]})
    assert not missing, f"{task}: options without bad values in this table: {missing}"


def _cases():
    """Every task x option x bad value. The six target tasks share TARGET_OPTIONS (one row of
    the option table each): a value is checked on one of them in the fast subset, each task in
    turn, and on the other five under the slow mark (`make test` runs them all); profile.remote
    checks the first of each shared target option's values there, the rest under slow."""
    for task, options in TABLE.items():
        for k, (option, values) in enumerate(options.items()):
            for n, (value, code, fragment) in enumerate(values):
                elsewhere = task in TARGET_TASKS and TARGET_TASKS[(k + n) % len(TARGET_TASKS)] != task
                shared = task == "profile.remote" and option in REMOTE_TARGET_OPTIONS and n > 0
                marks = (pytest.mark.slow,) if elsewhere or shared else ()
                yield pytest.param(
                    task, option, value, code, fragment, id=f"{task}-{option}-{n}", marks=marks
                )


def _argv(task: str, option: str, value: str, w: dict) -> list[str]:
    value = value.format(**w)
    if task in TARGET_TASKS:
        base = {"series": w["series"], "target": w["tree"]}
    elif task == "profile.remote":
        base = {k: v.format(**w) for k, v in REMOTE_BASE.items()}
    elif task == "patch.rebase":
        base = {"series": w["series"], "onto": "0.0.1"}
        if option == "onto_target":
            base = {"series": w["series"], "out": w["tmp"] + "/rebased"}
        if option in ("version",):
            base["onto"] = ""
    elif task == "patch.diff":
        base = {"from_": w["series"], "to": w["series"]}
    elif task in AUTHOR_BASE:
        base = {k: v.format(**w) for k, v in AUTHOR_BASE[task].items()}
    else:
        base = {"series": w["series"], "site": w["tree"]}
    if option.rstrip("_") in ("limit", "root") or option == "version":
        base.pop(option, None)
    base[option] = value
    argv = [task]
    for key, val in base.items():
        argv += [_flag(key), val]
    if task in TARGET_TASKS:
        argv.append("--json")
    return argv


@pytest.mark.parametrize("task, option, value, code, fragment", list(_cases()))
def test_bad_value(world, task, option, value, code, fragment):
    before = tree_digest(world["tree"])
    written = {k: tree_digest(world["tmp"] + "/" + k) for k in ("series", "pin-series", "repo")}
    argv = _argv(task, option, value, world)
    got, out, err = run_cli(*argv)
    assert got == code, (argv, out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if code == 2:
        assert len(lines) == 1 and fragment in lines[0], (argv, err)
        assert "Traceback" not in err
    if "--json" in argv:
        doc = json.loads(out)  # one document, even when nothing ran
        assert doc["exit_code"] == code and doc["error"] and "\n" not in doc["error"]
        assert fragment in doc["error"], doc["error"]
    assert tree_digest(world["tree"]) == before
    assert {k: tree_digest(world["tmp"] + "/" + k) for k in written} == written  # nothing written


# -- transports behind a failing prefix -------------------------------------------------------------

CODES = [1, 2, 126, 127, 255]


def _prefix(code: int) -> str:
    return f"sh -c {shlex.quote(f'echo prefix says no {code} >&2; exit {code}')}"


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("task", ["patch.verify", "patch.apply", "patch.revert", "patch.status"])
def test_exec_prefix_failing(world, task, code):
    before = tree_digest(world["tree"])
    got, out, err = run_cli(
        task, "--series", world["series"], "--target", world["tree"], "--exec", _prefix(code), "--json"
    )
    assert got == 1, (out, err)
    doc = json.loads(out)
    assert doc["exit_code"] == 1 and "\n" not in doc["error"]
    assert f"prefix says no {code}" in doc["error"] or f"exit {code}" in doc["error"], doc["error"]
    assert tree_digest(world["tree"]) == before


@pytest.mark.parametrize("code", CODES)
def test_docker_and_container_transports_failing(world, tmp_path, code, monkeypatch):
    """docker:// and --container run `docker exec -i NAME sh -s`: a stand-in `docker` on PATH
    (no container engine runs here) fails as the real one does for a missing container."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f"#!/bin/sh\necho 'Error: No such container: c9' >&2\nexit {code}\n")
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    before = tree_digest(world["tree"])
    for spec in (
        ["--target", "docker://c9" + world["tree"]],
        ["--target", world["tree"], "--container", "c9"],
    ):
        got, out, err = run_cli("patch.verify", "--series", world["series"], *spec, "--json")
        assert got == 1, (spec, out, err)
        doc = json.loads(out)
        assert "\n" not in doc["error"]
        assert "No such container: c9" in doc["error"] or f"exit {code}" in doc["error"], doc
    assert tree_digest(world["tree"]) == before


@pytest.mark.parametrize("code", CODES)
def test_ssh_with_a_failing_prefix(world, sshd, code):
    """A real sshd on loopback; the prefix runs on the far side (ssh host + --exec)."""
    before = tree_digest(world["tree"])
    got, out, err = run_cli(
        "patch.apply",
        "--series",
        world["series"],
        "--target",
        sshd.url(world["tree"]),
        "--ssh-config",
        str(sshd.client_config),
        "--exec",
        _prefix(code),
        "--json",
    )
    assert got == 1, (out, err)
    doc = json.loads(out)
    assert doc["exit_code"] == 1 and "\n" not in doc["error"]
    assert f"prefix says no {code}" in doc["error"] or f"exit {code}" in doc["error"], doc["error"]
    assert tree_digest(world["tree"]) == before


@pytest.mark.parametrize(
    "argv, option",
    [
        (["run", "--timeout", "-5"], "--timeout"),
        (["run", "--confidence", "3"], "--confidence"),
        (["run", "--num-assistant-tokens", "0"], "--num-assistant-tokens"),
        (["sweep", "--seed", "-1"], "--seed"),
        (["run", "--size", "huge"], "--size"),
    ],
)
def test_python_m_profile_checks_the_same(argv, option, capsys, tmp_path):
    """`python -m patchkit.profile` (machines without invoke) refuses what the tasks refuse."""
    from patchkit.profile.__main__ import main

    assert main([*argv, "--out", str(tmp_path / "out"), "--site", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and option in err
    assert not (tmp_path / "site").exists()


def test_gen_runtime_all_checks_every_shipped_series_and_refuses_series_with_it():
    from patchkit.locations import shipped_names

    rc, out, err = run_cli("patch.gen-runtime", "--all", "--check")
    assert rc == 0, err
    checked = {line.split("/", 1)[0] for line in out.splitlines()}
    assert checked == set(shipped_names()) and len(checked) > 20
    rc, out, err = run_cli("patch.gen-runtime", "--all", "--series", "patches/sglang-v0.5.9")
    assert rc == 2 and "--all or --series" in err and len(err.strip().splitlines()) == 1
