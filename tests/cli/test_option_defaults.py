"""An option's default is the same in every front end that offers it.

The defaults are defined once (patchkit.settings: PATCHKIT_DEFAULTS, and the option table
OPTIONS, of which PROFILE_DEFAULTS and REMOTE_DEFAULTS are views) and imported by the front ends. This test does not trust that: it reads each
front end's default from the front end itself, without the table:

- the invoke tasks: the signature (inspect) where it holds the default; where the signature says
  None ("not given") the task body runs on an empty config with its worker replaced, and the value
  that arrives is the default (profile.run/sweep -> run_default/run_sweep, profile.collect ->
  collect's FetchSettings, profile.remote -> RemoteConfig, patch.* -> PatchSettings);
- their help texts where they state a default;
- the argparse front ends (``python -m patchkit.profile``, ``python -m patchkit.profile.remote``);
- the library functions' own defaults (run_default, run_sweep, RemoteConfig, FetchSettings);
- invoke.yaml, the documented example config (``# jobs: 8`` and set keys alike).

Every option met in two or more places must have one value in all of them, so a default changed
in one place only fails here, naming each place and its value.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from invoke import Config, Context

from support.cli import invoke
from support.invoke_yaml import key_lines

REPO = Path(__file__).resolve().parents[2]
# a key line of invoke.yaml, set or commented out at its block's indentation: `  # jobs: 8  # why`


def documented_values(text: str) -> dict[tuple[str, ...], object]:
    """{dotted path: value} of every key of invoke.yaml with a value on its line, commented-out
    keys included (support.invoke_yaml.key_lines)."""
    return {path: yaml.safe_load(value) for path, value in key_lines(text) if value.strip()}


def _invoke_context() -> Context:
    """A context as `invoke` builds one for patchkit's tasks: the collection's own config (what
    tasks.py hands to ns.configure), no config file."""
    from patchkit import tasks

    config = Config(lazy=True)
    config.load_collection(tasks.ns.configuration())
    return Context(config=config)


def _signature_defaults(fn) -> dict:
    fn = getattr(fn, "body", fn)  # an invoke Task: its function
    return {
        name: p.default for name, p in inspect.signature(fn).parameters.items() if p.default is not p.empty
    }


def _run_tasks(tmp_path: Path, monkeypatch) -> dict[str, dict]:
    """What arrives at each task's worker when no option and no config key is given."""
    from patchkit import tasks
    from patchkit.profile import (
        collect as collect_module,
        local_run as default,
        local_sweep as sweep,
        remote as remote_package,
    )

    got: dict[str, dict] = {}

    def keep(name):
        def fake(out, **kw):
            got[name] = dict(kw, out=out)

        return fake

    monkeypatch.setattr(default, "run_default", keep("run"))
    monkeypatch.setattr(sweep, "run_sweep", keep("sweep"))
    monkeypatch.chdir(tmp_path)
    tasks.profile_run(_invoke_context())
    tasks.profile_sweep(_invoke_context())

    def fake_collect(transports, out, folder=None, settings=None):
        got["collect"] = {f.name: getattr(settings, f.name) for f in fields(settings)}
        return SimpleNamespace(per_target=[], files=[], bytes=0, out=out, window=None)

    monkeypatch.setattr(collect_module, "collect", fake_collect)
    (tmp_path / "target").mkdir()
    tasks.profile_collect(_invoke_context(), target=[str(tmp_path / "target")], out=str(tmp_path / "o"))

    def fake_remote(cfg):
        got["remote"] = cfg.to_dict()

    monkeypatch.setattr(remote_package, "run_remote", fake_remote)
    tasks.profile_remote(
        _invoke_context(), target=[str(tmp_path / "target")], server="true", bench="true", no_chart=True
    )
    from patchkit.settings import PatchSettings

    patch = PatchSettings.from_invoke(_invoke_context(), "apply", {"target": [str(tmp_path / "target")]})
    got["patch"] = {"jobs": patch.jobs, "layout": patch.layout}
    return got


def _help(task, option: str) -> str:
    return task.help[option]


def _number_in(text: str, before: str) -> float:
    """The number that follows ``before`` in a help text, e.g. 'default 120' -> 120.0."""
    m = re.search(re.escape(before) + r"\s*(\d+(?:\.\d+)?)", text)
    assert m, f"no number after {before!r} in the help text {text!r}"
    return float(m[1])


def front_end_defaults(tmp_path: Path, monkeypatch) -> dict[str, dict[str, object]]:
    """{option: {where: default}} read from every front end (see the module docstring)."""
    from patchkit import tasks
    from patchkit.profile.__main__ import build_parser as profile_parser
    from patchkit.profile.collect import FetchSettings
    from patchkit.profile.local_run import run_default
    from patchkit.profile.local_sweep import run_sweep
    from patchkit.profile.remote.__main__ import build_parser as remote_parser
    from patchkit.profile.remote.config import RemoteConfig

    ran = _run_tasks(tmp_path, monkeypatch)
    run_args = vars(profile_parser().parse_args(["run"]))
    sweep_args = vars(profile_parser().parse_args(["sweep"]))
    remote_args = vars(remote_parser().parse_args(["--config", "x.yaml"]))
    remote_cls = {f.name: f.default for f in fields(RemoteConfig)}
    fetch_cls = {f.name: f.default for f in fields(FetchSettings)}
    run_fn, sweep_fn = _signature_defaults(run_default), _signature_defaults(run_sweep)
    signatures = {
        name: _signature_defaults(getattr(tasks, name)) for name in dir(tasks) if name.startswith("profile_")
    }
    yml = documented_values((REPO / "invoke.yaml").read_text())
    profile_yml = {p[2]: v for p, v in yml.items() if p[:2] == ("patchkit", "profile") and len(p) == 3}
    remote_yml = {
        p[3]: v for p, v in yml.items() if p[:3] == ("patchkit", "profile", "remote") and len(p) == 4
    }
    assert remote_args["out"] is None, (
        "python -m patchkit.profile.remote --out: None keeps RemoteConfig's out"
    )

    out = {
        "profile.run task": Path(ran["run"]["out"]).name,
        "profile.sweep task": Path(ran["sweep"]["out"]).name,
        "profile.run/sweep --out help": re.search(r"default: ([\w-]+)", _help(tasks.profile_run, "out"))[1],
        "python -m patchkit.profile run": run_args["out"],
        "python -m patchkit.profile sweep": sweep_args["out"],
        "run_default": run_fn["out_root"],
        "run_sweep": sweep_fn["out_root"],
        "RemoteConfig": remote_cls["out"],
        "profile.remote task": ran["remote"]["out"],
        "profile.remote --out help": re.search(r"default: ([\w-]+)", _help(tasks.profile_remote, "out"))[1],
        "invoke.yaml patchkit.profile.out": profile_yml["out"],
        "invoke.yaml patchkit.profile.remote.out": remote_yml["out"],
    }
    found: dict[str, dict[str, object]] = {"out": out}
    for option in ("size", "device", "seed"):
        found[option] = {
            "profile.run task": ran["run"][option],
            "profile.sweep task": ran["sweep"][option],
            "python -m patchkit.profile run": run_args[option],
            "python -m patchkit.profile sweep": sweep_args[option],
            "run_default": run_fn[option],
            "run_sweep": sweep_fn[option],
            f"invoke.yaml patchkit.profile.{option}": profile_yml[option],
        }
    found["warmup"] = {
        "profile.run task": ran["run"]["warmup"],
        "profile.sweep task": ran["sweep"]["warmup"],
        **{f"{name} signature": sig["warmup"] for name, sig in signatures.items() if "warmup" in sig},
        "python -m patchkit.profile run": run_args["warmup"],
        "python -m patchkit.profile sweep": sweep_args["warmup"],
        "run_default": run_fn["warmup"],
        "run_sweep": sweep_fn["warmup"],
        "RemoteConfig": remote_cls["warmup"],
        "profile.remote task": ran["remote"]["warmup"],
        "invoke.yaml patchkit.profile.warmup": profile_yml["warmup"],
        "invoke.yaml patchkit.profile.remote.warmup": remote_yml["warmup"],
    }
    # profile.run leaves these to run_default (its options default to None: "not given")
    assert "num_assistant_tokens" not in ran["run"] and "assistant_confidence_threshold" not in ran["run"]
    assert (
        signatures["profile_run"]["num_assistant_tokens"] is None is signatures["profile_run"]["confidence"]
    )
    found["num_assistant_tokens"] = {
        "run_default (profile.run task)": run_fn["num_assistant_tokens"],
        "profile.run --num-assistant-tokens help": _number_in(
            _help(tasks.profile_run, "num_assistant_tokens"), "default"
        ),
        "python -m patchkit.profile run": run_args["num_assistant_tokens"],
    }
    found["confidence"] = {
        "run_default (profile.run task)": run_fn["assistant_confidence_threshold"],
        "profile.run --confidence help": _number_in(_help(tasks.profile_run, "confidence"), "default"),
        "python -m patchkit.profile run": run_args["confidence"],
    }
    found["matrix"] = {
        "profile.sweep task": ran["sweep"]["matrix"],
        "python -m patchkit.profile sweep": sweep_args["matrix"],
        "invoke.yaml patchkit.profile.matrix": profile_yml["matrix"],
    }
    found["jobs"] = {
        "patch.* tasks (PatchSettings)": ran["patch"]["jobs"],
        "patch.* --jobs help": _number_in(tasks.TARGET_HELP["jobs"], "patchkit.jobs,"),
        "RemoteConfig": remote_cls["jobs"],
        "profile.remote task": ran["remote"]["jobs"],
        "invoke.yaml patchkit.jobs": yml[("patchkit", "jobs")],
        "invoke.yaml patchkit.profile.remote.jobs": remote_yml["jobs"],
    }
    found["layout"] = {
        "patch.* tasks (PatchSettings)": ran["patch"]["layout"],
        "RemoteConfig": remote_cls["layout"],
        "profile.remote task": ran["remote"]["layout"],
        "invoke.yaml patchkit.layout": yml[("patchkit", "layout")],
        "invoke.yaml patchkit.profile.remote.layout": remote_yml.get("layout") or yml[("patchkit", "layout")],
    }
    collect_help = tasks.profile_collect.help
    found["max_fetch_mb"] = {
        "RemoteConfig": remote_cls["max_fetch_mb"],
        "profile.remote task": ran["remote"]["max_fetch_mb"],
        "FetchSettings": fetch_cls["max_fetch_mb"],
        "profile.collect task": ran["collect"]["max_fetch_mb"],
        "profile.collect --max-mb help": _number_in(collect_help["max_mb"], "max_fetch_mb,"),
        "invoke.yaml patchkit.profile.remote.max_fetch_mb": remote_yml["max_fetch_mb"],
    }
    found["step_timeout_s"] = {
        "RemoteConfig": remote_cls["step_timeout_s"],
        "profile.remote task": ran["remote"]["step_timeout_s"],
        "FetchSettings": fetch_cls["step_timeout_s"],
        "profile.collect task": ran["collect"]["step_timeout_s"],
        "profile.collect --timeout help": _number_in(collect_help["timeout"], "default"),
        "invoke.yaml patchkit.profile.remote.step_timeout_s": remote_yml["step_timeout_s"],
    }
    found["python"] = {
        "RemoteConfig": remote_cls["python"],
        "profile.remote task": ran["remote"]["python"],
        "FetchSettings": fetch_cls["python"],
        "profile.collect task": ran["collect"]["python"],
        "profile.collect --python help": re.search(r"default: ([\w.-]+)\)", collect_help["python"])[1],
        "invoke.yaml patchkit.profile.remote.python": remote_yml["python"],
    }
    found["timer_sample"] = {
        "RemoteConfig": remote_cls["timer_sample"],
        "profile.remote task": ran["remote"]["timer_sample"],
        # no number: the help names what the default is instead (the runtime's budget)
        "profile.remote --sample help": None
        if "profile.remote.timer_sample, else the runtime's budget" in _help(tasks.profile_remote, "sample")
        else "help names no default",
        "invoke.yaml patchkit.profile.remote.timer_sample": remote_yml["timer_sample"],
    }
    return found


def disagreements(found: dict[str, dict[str, object]]) -> list[str]:
    """One line per option whose front ends disagree, naming each place and its value."""
    bad = []
    for option, places in found.items():
        if len({repr(_same(v)) for v in places.values()}) > 1:
            where = "; ".join(f"{place}: {value!r}" for place, value in places.items())
            bad.append(f"{option}: {where}")
    return bad


def _same(value):
    """1024 (YAML, a help text) and 1024.0 (a float field) are one default."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        return front_end_defaults(tmp_path_factory.mktemp("defaults"), mp)


def test_every_front_end_has_the_same_defaults(found):
    assert not disagreements(found), "\n".join(disagreements(found))


def test_each_option_is_read_from_more_than_one_place(found):
    assert all(len(places) >= 3 for places in found.values()), {k: len(v) for k, v in found.items()}


def test_the_comparison_names_a_default_changed_in_one_place(found):
    changed = {option: dict(places) for option, places in found.items()}
    changed["max_fetch_mb"]["FetchSettings"] = 512.0
    assert disagreements(changed) == [
        "max_fetch_mb: " + "; ".join(f"{p}: {v!r}" for p, v in changed["max_fetch_mb"].items())
    ]


def test_the_documented_values_are_read():
    assert documented_values(
        "patchkit:\n  a: 1\n  # b: x  # why\n          # c: prose\n  d:\n    # e: [1]\n"
    ) == {
        ("patchkit", "a"): 1,
        ("patchkit", "b"): "x",
        ("patchkit", "d", "e"): [1],
    }


def test_one_positive_number_rule(monkeypatch):
    """The positive-seconds rule lives in settings.positive_number; every reader refuses alike."""
    from patchkit.errors import InvalidInput
    from patchkit.profile.collect import FetchSettings, collect
    from patchkit.settings import (
        positive as _positive,  # profile.remote's settings (REMOTE_CHECKS)
        positive_number,
        seconds,
    )

    for bad in (0, "0", -1, "-2.5", "soon", "", True, float("nan"), float("inf"), None, [1]):
        assert positive_number(bad) is None, bad
        with pytest.raises(InvalidInput, match="must be a positive number"):
            _positive(bad, "poll_s")
        if bad is not None:
            with pytest.raises(InvalidInput, match="a number of seconds, more than 0"):
                seconds(bad, "timeout")
    for good, number in ((1, 1.0), (" 2.5 ", 2.5), ("1e3", 1000.0)):
        assert positive_number(good) == number == _positive(good, "poll_s") == seconds(good, "timeout")
    assert positive_number(0, zero=True) == 0.0 == seconds("0", "ssh_persist", zero=True)
    with pytest.raises(InvalidInput, match=r"--max-mb must be positive, not 0"):
        collect([], "unused", settings=FetchSettings(max_fetch_mb=0))


def test_one_whole_number_rule():
    """Counts (--jobs, --seed, profile.sweep's repeat, --sample) share settings.whole_number."""
    from patchkit.errors import InvalidInput
    from patchkit.profile.local_sweep import run_sweep
    from patchkit.settings import checked, positive_int, whole_number

    for bad in (0, "0", -3, "x", "", "1.5", "2.0", 2.5, True, None):
        assert whole_number(bad) is None, bad
        with pytest.raises(InvalidInput, match="a whole number, 1 or more"):
            positive_int(bad, "jobs")
        with pytest.raises(InvalidInput, match=r"--sample .*: a whole number >= 1"):
            checked("profile.run", "sample", "" if bad is None else bad)
        if bad is not None:  # None: the default
            with pytest.raises(InvalidInput, match="--repeat must be a whole number of at least 1"):
                run_sweep("unused", repeat=bad, workload=object())
    for good, number in ((1, 1), (" 7 ", 7), ("12", 12)):
        assert (
            whole_number(good)
            == number
            == positive_int(good, "jobs")
            == checked("profile.run", "sample", good)
        )
    assert whole_number(0, 0) == 0 == positive_int("0", "seed", minimum=0)


def _task_params(task) -> set[str]:
    return set(inspect.signature(task.body).parameters) - {"c"}


def test_the_option_table_feeds_the_profile_tasks():
    """Every option of profile.run, profile.sweep, profile.remote, profile.collect and the
    patch.* target tasks is one row of settings' option table, and the task's help text is that
    row's (collect's target options are the patch.* tasks' rows)."""
    from patchkit import tasks
    from patchkit.settings import PATCH_TASKS, offered

    for front, task, own in (
        ("profile.run", tasks.profile_run, set()),
        ("profile.sweep", tasks.profile_sweep, set()),
        ("profile.remote", tasks.profile_remote, set()),
        ("profile.collect", tasks.profile_collect, set()),
        *((front, getattr(tasks, front.split(".")[1]), set()) for front in PATCH_TASKS),
    ):
        options = offered(front)
        assert _task_params(task) - own == set(options), front
        for name, option in options.items():
            assert task.help[name] == option.help_text, f"{front} --{name}"


def test_the_option_table_feeds_both_argparse_programs():
    """``python -m patchkit.profile run|sweep`` offer profile.run's / profile.sweep's rows (all
    but --sample), ``python -m patchkit.profile.remote`` its own; help and default from the row."""
    import argparse

    from patchkit.profile.__main__ import build_parser as profile_parser
    from patchkit.profile.remote.__main__ import PROG, build_parser as remote_parser
    from patchkit.settings import offered

    def actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
        return {a.dest: a for a in parser._actions if a.dest != "help" and a.option_strings}

    sub = next(a for a in profile_parser()._actions if isinstance(a, argparse._SubParsersAction))
    programs = {f"profile.{cmd}": actions(sub.choices[cmd]) for cmd in ("run", "sweep")}
    programs[PROG] = actions(remote_parser())
    for front, got in programs.items():
        options = offered(front)
        assert set(got) == set(options) - {"sample"}, front
        for name, action in got.items():
            assert action.help is not None and action.help.replace("%%", "%") == options[name].help_text
            if front != PROG:  # --out None there: RemoteConfig (or the config file) decides
                assert action.default == options[name].default, f"{front} --{name}"


def test_a_shared_key_has_one_default():
    """Options reading another's config key (profile.collect's --max-mb reads
    profile.remote.max_fetch_mb) take that key's default; no key is owned twice."""
    from patchkit.settings import OPTIONS, default

    for option in OPTIONS:
        if option.key is not None:
            assert option.default == default(option.key), option


def test_invoke_yaml_shows_the_tables_defaults():
    """invoke.yaml's commented patchkit.profile defaults are the option table's (make lint:
    invoke patch.gen-config --check), and the table documents every patchkit.profile key read."""
    from patchkit.settings import OPTIONS, PROFILE_KEYS, PROFILE_RENAMED, example_config

    text = (REPO / "invoke.yaml").read_text()
    assert example_config(text) == text, "run: invoke patch.gen-config"
    documented = {o.key.split(".")[1] for o in OPTIONS if o.doc and o.key and o.key.count(".") == 1}
    assert documented == PROFILE_KEYS - set(PROFILE_RENAMED) - {"remote"}


def test_gen_config_check_names_a_drift_and_rewrites_it(tmp_path):
    import subprocess

    original = (REPO / "invoke.yaml").read_text()
    copy = tmp_path / "invoke.yaml"
    copy.write_text(original.replace("    # seed: 0     ", "    # seed: 7     ", 1))
    assert copy.read_text() != original

    def gen(*args: str) -> subprocess.CompletedProcess:
        return invoke("patch.gen-config", "--file", str(copy), *args, timeout=60)

    got = gen("--check")
    assert (got.returncode, got.stdout) == (1, "invoke.yaml: differs\n"), got.stderr
    got = gen()
    assert (got.returncode, got.stdout) == (0, "invoke.yaml: rewritten\n"), got.stderr
    assert copy.read_text() == original
    got = gen("--check")
    assert (got.returncode, got.stdout) == (0, "invoke.yaml: up to date\n"), got.stderr
