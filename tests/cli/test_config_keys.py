"""Issue 28.2: every config key invoke.yaml documents is read by the task it is documented for.

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
from invoke import Config, Context

from patchkit import tasks
from patchkit.profile.remote.config import RemoteConfig
from patchkit.settings import OTHER_KEYS, PATCHKIT_DEFAULTS, PROFILE_KEYS, PROFILE_RENAMED, PatchSettings
from support.invoke_yaml import key_lines

REPO = Path(__file__).resolve().parents[2]
INVOKE_YAML = REPO / "invoke.yaml"


def documented_keys(text: str) -> set[tuple[str, ...]]:
    """The dotted paths of every key in the file, commented-out ones included."""
    return {path for path, _ in key_lines(text)}


DOCUMENTED = documented_keys(INVOKE_YAML.read_text())


def _under(*prefix: str) -> set[str]:
    return {p[len(prefix)] for p in DOCUMENTED if p[: len(prefix)] == prefix and len(p) == len(prefix) + 1}


def _context(tmp_path: Path, patchkit: dict) -> Context:
    config = Config(defaults={"patchkit": dict(PATCHKIT_DEFAULTS)})
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump({"patchkit": patchkit}))
    config.set_runtime_path(str(path))
    config.load_runtime()
    return Context(config=config)


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
    "kubectl": ("/opt/bin/kubectl", "/opt/bin/kubectl", "kubectl"),
    "k8s_container": ("server", "server", "k8s_container"),
    "kube_context": ("gke_p_z_c", "gke_p_z_c", "kube_context"),
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
        PatchSettings.from_invoke(_context(tmp_path, {"targets": ["/t"]}), "apply", {}), attribute
    )
    settings = PatchSettings.from_invoke(_context(tmp_path, config), "apply", {})
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
    c = _context(tmp_path, {"wheelhouse": str(wheels)})
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
    from patchkit.profile import default, sweep

    got: dict = {}

    def fake(out, **kw):
        got.update(kw, out=out)

    monkeypatch.setattr(default, "run_default", fake)
    monkeypatch.setattr(sweep, "run_sweep", fake)
    monkeypatch.chdir(tmp_path)
    c = _context(tmp_path, {"profile": profile})
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
    tasks.profile_remote(_context(tmp_path, {"profile": {"remote": block}}))
    cfg = got["cfg"]
    for key, value in block.items():
        if value is not None and key not in ("out", "stop_signals"):  # made absolute / upper-cased
            assert getattr(cfg, key) == value, key
