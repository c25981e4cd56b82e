"""Issue 30.2: profile.remote resolves its targets through the one function the patch tasks use
(patchkit.transport.resolve_targets): a registered kind, an inventory's hosts and the kinds' own
settings (patchkit.profile.remote.k8s_container, ...: the option table's rows) mean the same there
as in patch.apply. CPU only: a toy kind (as tests/transport/test_target_kinds.py), a stand-in run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchkit import tasks, transport
from patchkit.errors import InvalidInput
from patchkit.profile.remote import run as run_module
from patchkit.profile.remote.config import RemoteConfig
from patchkit.settings import REMOTE_FALLBACKS
from patchkit.transport import LocalTransport, TargetKind, kind_settings, register_kind, unregister_kind
from support.invoke_yaml import site_context

REPO = Path(__file__).resolve().parents[2]
SEEN: list[dict] = []


def _toy_expand(spec, *, cwd=None, container=None, exec_prefix=None, **options) -> list:
    """`toy:A+B` -> folders A and B under $TOY_HOME; records the options it was given."""
    SEEN.append(dict(options))
    names = spec[len("toy:") :].split("+")
    return [LocalTransport(label=f"toy {n}", root=os.path.join(os.environ["TOY_HOME"], n)) for n in names]


TOY = TargetKind("toy", prefix="toy:", expand=_toy_expand)


@pytest.fixture
def toy(monkeypatch, tmp_path):
    SEEN.clear()
    register_kind(TOY)
    monkeypatch.setenv("TOY_HOME", str(tmp_path / "home"))
    yield tmp_path / "home"
    unregister_kind(TOY)


class _Reached(Exception):
    pass


def _spy(monkeypatch) -> list[tuple]:
    """Every call of the one resolution: (specs, keywords)."""
    calls: list[tuple] = []
    real = transport.resolve_targets

    def spy(specs, **kw):
        calls.append((list(specs), kw))
        return real(specs, **kw)

    monkeypatch.setattr(transport, "resolve_targets", spy)
    return calls


def _remote_run(monkeypatch) -> dict:
    """profile.remote's run up to the servers: what RemoteRun would get (then stopped)."""
    got: dict = {}

    def fake_run(cfg, run_dir, progress, transports):
        got.update(cfg=cfg, transports=list(transports))
        raise _Reached

    monkeypatch.setattr(run_module, "RemoteRun", fake_run)
    return got


def test_profile_remote_expands_a_kind_through_the_registry(toy, tmp_path, monkeypatch):
    calls, got = _spy(monkeypatch), _remote_run(monkeypatch)
    monkeypatch.chdir(REPO)
    block = {
        "targets": ["toy:a+b"],
        "server_command": "serve",
        "bench_command": "b",
        "chart": False,
        "out": str(tmp_path / "out"),
        "k8s_container": "server",
    }
    with pytest.raises(_Reached):
        tasks.profile_remote(site_context(tmp_path, {"kube_context": "ctx-1", "profile": {"remote": block}}))
    assert [t.root for t in got["transports"]] == [str(toy / "a"), str(toy / "b")]
    assert [specs for specs, _ in calls] == [["toy:a+b"]]
    # the kinds' settings reach the kind: profile.remote's own, and patchkit.* where it sets none
    assert SEEN[-1]["k8s_container"] == "server" and SEEN[-1]["kube_context"] == "ctx-1"


def test_patch_apply_and_profile_remote_resolve_alike(toy, tmp_path, monkeypatch):
    """The same site settings give patch.apply's resolution and profile.remote's the same
    transport options (the kinds' settings included) and the same targets."""
    from patchkit.ops import options_from
    from patchkit.settings import PatchSettings
    from patchkit.taskrun import resolve_targets as patch_targets

    site = {"targets": ["toy:a+b"], "k8s_container": "server", "kubectl": "/opt/bin/kubectl"}
    c = site_context(tmp_path, {**site, "series": str(REPO / "patches" / "sglang-v0.5.9")})
    calls = _spy(monkeypatch)
    settings = PatchSettings.from_invoke(c, "apply", {})
    _, patch = patch_targets(settings, options_from(settings))
    got = _remote_run(monkeypatch)
    monkeypatch.chdir(REPO)
    block = {"server_command": "serve", "bench_command": "b", "chart": False, "out": str(tmp_path / "o")}
    with pytest.raises(_Reached):
        tasks.profile_remote(site_context(tmp_path, {**site, "profile": {"remote": block}}))
    assert [t.root for t in patch] == [t.root for t in got["transports"]]
    (patch_specs, patch_kw), (remote_specs, remote_kw) = calls
    assert patch_specs == remote_specs == ["toy:a+b"]
    options = {
        k: v for k, v in patch_kw.items() if k not in ("open_all", "cwd", "limit", "root") and v is not None
    }
    assert {k: v for k, v in remote_kw.items() if k in options} == options
    assert remote_kw["k8s_container"] == "server" and remote_kw["kubectl"] == "/opt/bin/kubectl"


def test_an_inventorys_hosts_are_profile_remote_targets(tmp_path, monkeypatch):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\ngpu1 ansible_host=10.0.0.1 patchkit_root=/opt/venv\n")
    cfg = RemoteConfig.from_mapping(
        {
            "inventory": "hosts.ini",
            "server_command": "serve",
            "bench_command": "b",
            "series": str(REPO / "patches" / "sglang-v0.5.9"),
        },
        cwd=tmp_path,
    )
    assert cfg.targets == [] and cfg.inventory == str(inventory)
    opened = cfg.open_targets()
    try:
        assert [(t.label, t.root) for t in opened] == [("gpu1:/opt/venv", "/opt/venv")]
    finally:
        for t in opened:
            t.close()


def test_patchkit_inventory_is_read_only_without_targets_of_its_own(tmp_path, monkeypatch):
    got = _remote_run(monkeypatch)
    monkeypatch.chdir(REPO)
    (tmp_path / "hosts.ini").write_text("[gpu]\ngpu1 patchkit_root=/opt/venv\n")
    (tmp_path / "t").mkdir()
    block = {"server_command": "serve", "bench_command": "b", "chart": False, "out": str(tmp_path / "o")}
    site = {"inventory": str(tmp_path / "hosts.ini"), "profile": {"remote": block}}
    with pytest.raises(_Reached):
        tasks.profile_remote(site_context(tmp_path, site), target=[str(tmp_path / "t")])
    assert got["cfg"].inventory is None and [t.root for t in got["transports"]] == [str(tmp_path / "t")]


def test_every_kind_setting_is_a_profile_remote_row_read_from_patchkit():
    for name in kind_settings():
        assert REMOTE_FALLBACKS[name] == name
        assert hasattr(RemoteConfig(), name)


def test_a_bad_kind_setting_is_refused_naming_the_key(tmp_path):
    base = {"targets": [str(tmp_path)], "server_command": "serve", "bench_command": "b"}
    with pytest.raises(InvalidInput, match=r"profile.remote: k8s_container 'Server_1': bad --k8s-container"):
        RemoteConfig.from_mapping({**base, "k8s_container": "Server_1"}, cwd=REPO)
