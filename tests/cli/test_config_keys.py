"""Every config key invoke.yaml documents is read by the task it is documented for.

invoke.yaml documents a key either set (``series: patches/sglang-v0.5.9``) or commented out at
its place (``# jobs: 8``). The documented keys are walked here against what the tasks accept
(patchkit.settings) and, one key at a time, against what each task reads: the key is set in a
config file and the value must arrive where the task uses it. A documented key with no reader
(``patchkit.profile.series`` was read as ``series_dir`` only) fails; so does a new key nobody
added a check for below.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from patchkit import tasks
from patchkit.profile.remote.config import RemoteConfig
from patchkit.settings import (
    OTHER_KEYS,
    PATCHKIT_DEFAULTS,
    PROFILE_KEYS,
    PROFILE_RENAMED,
    REMOTE_CHECKS,
    PatchSettings,
)
from patchkit.transport import kind_settings
from support.invoke_yaml import key_lines, site_context

REPO = Path(__file__).resolve().parents[2]
INVOKE_YAML = REPO / "invoke.yaml"


def documented_keys(text: str) -> set[tuple[str, ...]]:
    """The dotted paths of every key in the file, commented-out ones included."""
    return {path for path, _ in key_lines(text)}


DOCUMENTED = documented_keys(INVOKE_YAML.read_text())


def _under(*prefix: str) -> set[str]:
    return {p[len(prefix)] for p in DOCUMENTED if p[: len(prefix)] == prefix and len(p) == len(prefix) + 1}


def test_the_walk_finds_the_documented_keys():
    assert documented_keys("patchkit:\n  a: 1\n  # b: 2  # x\n          # c: prose\n  d:\n    # e: 1\n") == {
        ("patchkit",),
        ("patchkit", "a"),
        ("patchkit", "b"),
        ("patchkit", "d"),
        ("patchkit", "d", "e"),
    }


def test_documented_keys_are_the_accepted_keys():
    """What invoke.yaml documents is what patchkit.settings accepts, and the reverse (old names
    aside: they are read, not documented)."""
    for where, documented, accepted in (
        ("patchkit", _under("patchkit"), set(PATCHKIT_DEFAULTS) | OTHER_KEYS),
        ("patchkit.profile", _under("patchkit", "profile"), PROFILE_KEYS - set(PROFILE_RENAMED)),
        (
            "patchkit.profile.remote",
            _under("patchkit", "profile", "remote"),
            {f.name for f in fields(RemoteConfig)},
        ),
    ):
        assert not accepted - documented, (
            f"accepted but not documented in invoke.yaml's {where}: {sorted(accepted - documented)}"
        )
        assert not documented - accepted, (
            f"documented in invoke.yaml's {where} but not accepted: {sorted(documented - accepted)}"
        )


def test_the_option_table_documents_exactly_invoke_yamls_keys():
    """Each documented key is one row of the option table with a doc (invoke.yaml's key lines are
    generated from them: invoke patch.gen-config), scope by scope, the profile.remote block
    included; and RemoteConfig's settings are the table's profile.remote rows, defaults and all."""
    from patchkit.settings import REMOTE_DEFAULTS, example_keys

    table = {tuple(["patchkit", *key.split(".")]) for key in example_keys()}
    scopes = {("patchkit",), ("patchkit", "profile"), ("patchkit", "profile", "remote")}
    walked = DOCUMENTED - scopes
    assert table == walked, (sorted(table - walked), sorted(walked - table))
    config = RemoteConfig()
    assert {f.name: getattr(config, f.name) for f in fields(RemoteConfig)} == REMOTE_DEFAULTS


def _doc_mentions() -> set[str]:
    """The ``patchkit.KEY`` names the docs (README.md, docs/*.md) write in backquotes."""
    import re

    found = set()
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for m in re.finditer(r"`patchkit\.([a-z0-9_]+(?:\.[a-z0-9_]+)*)", path.read_text(encoding="utf-8")):
            found.add(m[1])
    return found


def test_the_keys_the_docs_name_are_the_tables():
    """A config key the docs name (``patchkit.ssh_persist``, ``patchkit.profile.remote.jobs``) is a
    row of the option table (or a scope, or an old name read under its new one): the docs cannot
    name a key nobody reads. Names whose first part is no key (modules, patchkit.yaml, schema
    names such as patchkit.result/1, tools) are not keys."""
    from patchkit.settings import DEPRECATED, OPTIONS

    keys = {o.key for o in OPTIONS if o.key is not None}
    heads = {k.split(".")[0] for k in keys} | set(DEPRECATED)
    old = {f"{parent}.{name}" for parent, names in DEPRECATED.items() for name in names}
    old |= {f"profile.{name}" for name in PROFILE_RENAMED}
    named = {n for n in _doc_mentions() if n.split(".")[0] in heads}
    assert named, "the walk finds the keys the docs name"
    unknown = sorted(n for n in named if n not in keys | old | {"profile", "profile.remote"})
    assert not unknown, f"the docs name config keys the option table lacks: {unknown}"


# -- the patch.* keys: each one set alone must reach the settings object the tasks run with -----------

# key -> (the value in the config file, what PatchSettings holds then, its attribute)
PATCH_KEYS = {
    "series": ("s1", "s1", "series"),
    "targets": (["/x", "/y"], ["/x", "/y"], "targets"),
    "layout": ("checkout", "checkout", "layout"),
    "jobs": (3, 3, "jobs"),
    "timeout": (5, 5.0, "timeout"),
    "ssh_options": (["ProxyJump=bastion"], ["ProxyJump=bastion"], "ssh_options"),
    "ssh_persist": (0, 0.0, "ssh_persist"),
    "keep_journal": (True, True, "keep_journal"),
    "inventory": ("hosts.ini", "hosts.ini", "inventory"),
    # the target kinds' own settings (k8s: kubectl, k8s_container, kube_context), from each kind
    **{name: (setting.example, setting.example, name) for name, setting in kind_settings().items()},
    "container": ("c9", "c9", "container"),
    "exec": ("chroot /srv/root", "chroot /srv/root", "exec_prefix"),
}


@pytest.mark.parametrize("key", sorted(_under("patchkit") - OTHER_KEYS))
def test_each_documented_patch_key_is_read(tmp_path, monkeypatch, key):
    if key == "ssh_config":  # a file that must exist
        ssh_config = tmp_path / "ssh_config"
        ssh_config.write_text("Host *\n")
        PATCH_KEYS[key] = (str(ssh_config), str(ssh_config), "ssh_config")
    if key == "wheelhouse":  # read by patch.rebase
        _wheelhouse_reaches_the_rebase(tmp_path, monkeypatch)
        return
    assert key in PATCH_KEYS, f"patchkit.{key} is documented in invoke.yaml: add a check of what reads it"
    value, expected, attribute = PATCH_KEYS[key]
    config = {"targets": ["/t"], key: value}
    default = getattr(
        PatchSettings.from_invoke(site_context(tmp_path, {"targets": ["/t"]}), "apply", {}), attribute
    )
    settings = PatchSettings.from_invoke(site_context(tmp_path, config), "apply", {})
    assert getattr(settings, attribute) == expected != default


class _Reached(Exception):
    pass


def _wheelhouse_reaches_the_rebase(tmp_path, monkeypatch):
    from patchkit.author import rebase as rebase_mod

    got = {}

    def fake_rebase(series, onto, **kw):
        got.update(kw)
        raise _Reached

    monkeypatch.setattr(rebase_mod, "rebase", fake_rebase)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    c = site_context(tmp_path, {"wheelhouse": str(wheels)})
    with pytest.raises(_Reached):
        tasks.patch_rebase(c, series=str(REPO / "patches" / "sglang-v0.5.9"), onto="0.5.10")
    assert got["wheelhouse"] == str(wheels)


# -- the profile.run / profile.sweep keys ----------------------------------------------------------


def _profile_values(tmp_path: Path) -> dict:
    """key -> (the value in the config file, the task that reads it, the keyword its run gets,
    what the keyword holds then)."""
    for name in ("wheels", "site", "series"):
        (tmp_path / name).mkdir(exist_ok=True)
    return {
        "size": ("ci", "run", "size", "ci"),
        "timer": ("host", "run", "timer_mode", "host"),
        "device": ("cpu", "run", "device", "cpu"),
        "seed": (7, "run", "seed", 7),
        "timeout": (99, "run", "timeout", 99.0),
        "wheelhouse": (str(tmp_path / "wheels"), "run", "wheelhouse", str(tmp_path / "wheels")),
        "out": (str(tmp_path / "reports"), "run", "out", str(tmp_path / "reports")),
        "site": (str(tmp_path / "site"), "run", "site", str(tmp_path / "site")),
        "series": (str(tmp_path / "series"), "run", "series_dir", str(tmp_path / "series")),
        "sample": (3, "run", "timer_sample", 3),
        "warmup": (False, "run", "warmup", False),
        "matrix": ("num_assistant_tokens=3", "sweep", "matrix", "num_assistant_tokens=3"),
        "repeat": (2, "sweep", "repeat", 2),
    }


def _profile_call(tmp_path, monkeypatch, task: str, profile: dict) -> dict:
    from patchkit.profile import local_run as default, local_sweep as sweep

    got: dict = {}

    def fake(out, **kw):
        got.update(kw, out=out)

    monkeypatch.setattr(default, "run_default", fake)
    monkeypatch.setattr(sweep, "run_sweep", fake)
    monkeypatch.chdir(tmp_path)
    c = site_context(tmp_path, {"profile": profile})
    (tasks.profile_run if task == "run" else tasks.profile_sweep)(c)
    return got


@pytest.mark.parametrize("key", sorted(_under("patchkit", "profile") - {"remote"}))
def test_each_documented_profile_key_is_read(tmp_path, monkeypatch, key):
    values = _profile_values(tmp_path)
    assert key in values, f"patchkit.profile.{key} is documented in invoke.yaml: add a check of what reads it"
    value, task, keyword, expected = values[key]
    assert _profile_call(tmp_path, monkeypatch, task, {}).get(keyword) != expected
    assert _profile_call(tmp_path, monkeypatch, task, {key: value})[keyword] == expected


def test_the_old_profile_series_dir_is_still_read_and_named(tmp_path, monkeypatch, capsys):
    (tmp_path / "old").mkdir()
    got = _profile_call(tmp_path, monkeypatch, "run", {"series_dir": str(tmp_path / "old")})
    assert got["series_dir"] == str(tmp_path / "old")
    assert "patchkit.profile.series_dir is the old name of patchkit.profile.series" in capsys.readouterr().err
    # the documented name wins over the old one
    (tmp_path / "new").mkdir()
    both = {"series_dir": str(tmp_path / "old"), "series": str(tmp_path / "new")}
    assert _profile_call(tmp_path, monkeypatch, "run", both)["series_dir"] == str(tmp_path / "new")


def test_the_documented_profile_remote_block_is_read(tmp_path, monkeypatch):
    """invoke.yaml's own profile.remote block (targets and commands filled in) reaches the
    RemoteConfig profile.remote runs with, key by key."""
    from patchkit.profile import remote

    block = yaml.safe_load(INVOKE_YAML.read_text())["patchkit"]["profile"]["remote"]
    block.update(targets=[str(tmp_path)], server_command="true", bench_command="true")
    got = {}
    monkeypatch.setattr(remote, "run_remote", lambda cfg: got.update(cfg=cfg))
    monkeypatch.chdir(REPO)
    tasks.profile_remote(site_context(tmp_path, {"profile": {"remote": block}}))
    cfg = got["cfg"]
    for key, value in block.items():
        if value is not None and key not in ("out", "stop_signals"):  # made absolute / upper-cased
            assert getattr(cfg, key) == value, key


# -- the profile.remote keys: each one set alone must reach the RemoteConfig the run gets ----------------


def _remote_values(tmp_path: Path) -> dict:
    """key -> (the value in the config file, what RemoteConfig holds then, more settings it needs)."""
    from patchkit.profile.remote.server_args import parse_server_matrix

    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("Host *\n")
    sweep = {"matrix": "speculative-num-steps=1,2"}
    other = str(REPO / "patches" / "sglang-v0.5.10")
    return {
        "targets": ([str(tmp_path / "t2")], [str(tmp_path / "t2")], {}),
        "server_command": ("serve --speculative-num-steps 4", "serve --speculative-num-steps 4", {}),
        "bench_command": ("bench --n 2", "bench --n 2", {}),
        "env": ({"A": "1"}, {"A": "1"}, {}),
        "bench_env": ({"B": "2"}, {"B": "2"}, {}),
        "python": ("python3.11", "python3.11", {}),
        "port": (31000, 31000, {}),
        "health_url": ("http://127.0.0.1:30000/h", "http://127.0.0.1:30000/h", {}),
        "health_on": ("all", "all", {}),
        "health_timeout_s": (5, 5.0, {}),
        "bench_timeout_s": (6, 6.0, {}),
        "poll_s": (0.5, 0.5, {}),
        "stop_signals": (["TERM"], ["TERM"], {}),
        "stop_grace_s": (3, 3.0, {}),
        "timer": ("host", "host", {}),
        "timer_flush_s": (2, 2.0, {}),
        "timer_sample": (4, 4, {}),
        "timer_seed": (9, 9, {}),
        "remote_dir": ("/tmp/pk-elsewhere", "/tmp/pk-elsewhere", {}),
        "keep_remote_dir": (True, True, {}),
        "max_fetch_mb": (10, 10.0, {}),
        "step_timeout_s": (30, 30.0, {}),
        "out": (str(tmp_path / "reports"), str(tmp_path / "reports"), {}),
        "baseline": (True, True, {}),
        "matrix": (sweep["matrix"], parse_server_matrix(sweep["matrix"]), {}),
        "warmup": (False, False, {}),
        "warmup_command": ("bench --n 1", "bench --n 1", {}),
        "repeat": (2, 2, {}),
        "budget_minutes": (7, 7.0, sweep),
        "until": ("decided", "decided", sweep),
        "gpus": ("0,1", ["0", "1"], sweep),
        "blocks": ("hosts", "hosts", sweep),
        "cpus": ("0-3", ["0-3"], {}),
        "spread_cache": ("off", "off", {}),
        "sweep_seed": (5, 5, {}),
        "min_effect": (3, 3.0, sweep),
        "power": (0.8, 0.8, sweep),
        "series": (other, other, {}),
        "layout": ("installed", "installed", {}),
        "ssh_config": (str(ssh_config), str(ssh_config), {}),
        "ssh_options": (["ProxyJump=bastion"], ["ProxyJump=bastion"], {}),
        "ssh_persist": (0, 0.0, {}),
        "chart": (False, False, {}),
        "jobs": (3, 3, {}),
        "connect_timeout": (4, 4.0, {}),
        "inventory": (str(tmp_path / "hosts.ini"), str(tmp_path / "hosts.ini"), {}),
        "limit": ("gpu:!gpu3", "gpu:!gpu3", {"inventory": str(tmp_path / "hosts.ini")}),
        "root": ("/opt/venv", "/opt/venv", {"inventory": str(tmp_path / "hosts.ini")}),
        **{name: (setting.example, setting.example, {}) for name, setting in kind_settings().items()},
    }


def _remote_call(tmp_path, monkeypatch, block: dict):
    from patchkit.profile import remote
    from patchkit.profile.remote import sweep

    got = {}
    monkeypatch.setattr(remote, "run_remote", lambda cfg: got.update(cfg=cfg))
    monkeypatch.setattr(sweep, "run_remote_sweep", lambda cfg, **kw: got.update(cfg=cfg))
    monkeypatch.chdir(REPO)
    base = {
        "targets": [str(tmp_path)],
        "server_command": "serve --speculative-num-steps 3",
        "bench_command": "b",
    }
    tasks.profile_remote(site_context(tmp_path, {"profile": {"remote": {**base, **block}}}))
    return got["cfg"]


@pytest.mark.parametrize("key", sorted(_under("patchkit", "profile", "remote")))
def test_each_documented_profile_remote_key_is_read(tmp_path, monkeypatch, key):
    values = _remote_values(tmp_path)
    assert key in values, (
        f"patchkit.profile.remote.{key} is documented in invoke.yaml: add a check of what reads it"
    )
    value, expected, needs = values[key]
    default = getattr(_remote_call(tmp_path, monkeypatch, needs), key)
    got = getattr(_remote_call(tmp_path, monkeypatch, {**needs, key: value}), key)
    assert got == expected != default


def test_profile_remote_reaches_its_targets_as_the_patch_tasks_do(tmp_path, monkeypatch):
    """patchkit.ssh_options/ssh_persist/ssh_config, unset under profile.remote, give profile.remote
    the transport options the patch tasks get from them (one translation: settings.transport_options)."""
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("Host *\n")
    site = {"ssh_options": ["ProxyJump=bastion"], "ssh_persist": 5, "ssh_config": str(ssh_config)}
    from patchkit.profile import remote

    got = {}
    monkeypatch.setattr(remote, "run_remote", lambda cfg: got.update(cfg=cfg))
    monkeypatch.chdir(REPO)
    block = {"targets": [str(tmp_path)], "server_command": "serve", "bench_command": "b"}
    c = site_context(tmp_path, {**site, "targets": [str(tmp_path)], "profile": {"remote": block}})
    tasks.profile_remote(c)
    patch = PatchSettings.from_invoke(c, "apply", {}).transport_options()
    assert got["cfg"].transport_options() == patch
    assert patch["control_persist"] == 5 and patch["ssh_options"] == ["ProxyJump=bastion"]


@pytest.mark.parametrize("key", sorted(REMOTE_CHECKS))
def test_remote_config_runs_the_tables_check_of_each_key(tmp_path, key):
    """A profile.remote key with a check in the option table is refused by RemoteConfig through
    that check (one validator per key, in patchkit.settings), naming the key."""
    from patchkit.errors import InvalidInput

    base = {"targets": [str(tmp_path)], "server_command": "serve", "bench_command": "b"}
    with pytest.raises(InvalidInput, match=f"profile.remote: {key} ''"):
        RemoteConfig.from_mapping({**base, key: ""}, cwd=REPO)


def test_profile_collect_reads_profile_remote_keys_by_their_own_rule(tmp_path, monkeypatch, capsys):
    """profile.collect's --max-mb, --python and --timeout default to patchkit.profile.remote's
    max_fetch_mb, python and step_timeout_s, checked as profile.remote checks them (a 0 there was
    once taken for 'not set')."""
    from types import SimpleNamespace

    from patchkit.profile import collect as collect_module

    got = {}

    def fake_collect(transports, out, folder=None, settings=None):
        got.update(vars(settings))
        return SimpleNamespace(per_target=[], files=[], bytes=0, out=out, window=None)

    monkeypatch.setattr(collect_module, "collect", fake_collect)
    (tmp_path / "t").mkdir()
    given = dict(target=[str(tmp_path / "t")], out=str(tmp_path / "o"))
    remote = {"max_fetch_mb": 5, "step_timeout_s": 7, "python": "python3.12"}
    tasks.profile_collect(site_context(tmp_path, {"profile": {"remote": remote}}), **given)
    assert got == {"max_fetch_mb": 5.0, "step_timeout_s": 7.0, "python": "python3.12"}
    for key in ("step_timeout_s", "max_fetch_mb"):
        with pytest.raises(SystemExit) as exit_:  # the exit boundary: invalid input
            tasks.profile_collect(site_context(tmp_path, {"profile": {"remote": {key: 0}}}), **given)
        assert exit_.value.code == 2
        assert f"patchkit.profile.remote.{key} 0 must be a positive number" in capsys.readouterr().err
