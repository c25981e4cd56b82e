"""Profile.remote resolves its targets through the one function the patch tasks use
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
    from patchkit.taskrun import series_and_targets as patch_targets

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


# -- the patch tasks' target options on profile.remote: --inventory, --limit, --root, the kinds' ------

INVENTORY = """\
[gpu]
gpu1 ansible_host=10.0.0.1 patchkit_root=/opt/a
gpu2 ansible_host=10.0.0.2 ansible_port=2222
gpu3 ansible_host=10.0.0.3
[rack1]
gpu2
gpu3
[cpu]
cpu1 ansible_host=10.0.1.1
"""
BLOCK = {"server_command": "serve", "bench_command": "b", "chart": False}


def _hosts(targets) -> list[tuple]:
    """What a resolved target is: its row's label, its root, and how it is reached (a --target
    folder patch.apply has not opened yet: its spec, the root profile.remote opened)."""
    return [
        t if isinstance(t, str) else (t.label, t.root, getattr(t, "host", None), getattr(t, "port", None))
        for t in targets
    ]


def _patch_hosts(c, given: dict) -> list[tuple]:
    """The targets patch.apply resolves for these options (PatchSettings, then the patch tasks'
    resolution: patchkit.taskrun.series_and_targets)."""
    from patchkit.ops import options_from
    from patchkit.settings import PatchSettings
    from patchkit.taskrun import series_and_targets as patch_targets

    settings = PatchSettings.from_invoke(c, "apply", given)
    _, targets = patch_targets(settings, options_from(settings))
    try:
        return _hosts(targets)
    finally:
        for t in targets:
            if not isinstance(t, str):
                t.close()


@pytest.mark.parametrize(
    "limit, root, expected",
    [
        ("gpu:!gpu3", "/opt/venv", [("gpu1", "/opt/venv"), ("gpu2", "/opt/venv")]),
        ("gpu:&rack1", None, None),  # gpu2 and gpu3 have no patchkit_root: refused alike
        ("gpu1", None, [("gpu1", "/opt/a")]),
        ("cpu:gpu2", "/srv/site", [("gpu2", "/srv/site"), ("cpu1", "/srv/site")]),
    ],
)
def test_inventory_limit_root_resolve_the_hosts_patch_apply_does(
    tmp_path, monkeypatch, capsys, limit, root, expected
):
    """profile.remote --inventory INI --limit PATTERN --root PATH: the hosts patch.apply resolves
    for the same options, host, port and root alike, and the same refusal where it refuses."""
    (tmp_path / "hosts.ini").write_text(INVENTORY)
    monkeypatch.chdir(tmp_path)  # --inventory relative to where invoke runs, for both
    series = str(REPO / "patches" / "sglang-v0.5.9")
    given = {"inventory": "hosts.ini", "limit": limit, "root": root}
    c = site_context(
        tmp_path, {"series": series, "profile": {"remote": {**BLOCK, "out": str(tmp_path / "o")}}}
    )
    calls, got = _spy(monkeypatch), _remote_run(monkeypatch)
    if expected is None:
        with pytest.raises(InvalidInput) as patch_refused:
            _patch_hosts(c, given)
        capsys.readouterr()
        with pytest.raises(SystemExit) as remote_refused:  # the task's exit boundary
            tasks.profile_remote(c, **given)
        assert remote_refused.value.code == patch_refused.value.exit_code == 2
        assert capsys.readouterr().err == f"profile: {patch_refused.value.message}\n"
        assert "has no patchkit_root" in patch_refused.value.message
        return
    patch = _patch_hosts(c, given)
    with pytest.raises(_Reached):
        tasks.profile_remote(c, **given)
    assert _hosts(got["transports"]) == patch
    assert [(label.partition(":")[0], t_root) for label, t_root, *_ in patch] == expected
    (_, patch_kw), (remote_specs, remote_kw) = calls
    assert remote_specs == []
    for key in ("limit", "root"):
        assert remote_kw[key] == patch_kw[key] == given[key]
    assert os.path.samefile(remote_kw["inventory"], tmp_path / "hosts.ini")


def test_the_flags_win_over_the_keys_and_inventory_comes_with_target(tmp_path, monkeypatch):
    """--limit/--root beat profile.remote.limit/root (read with patchkit.inventory when the run
    has no targets of its own); with --target an explicit --inventory is read (its hosts after
    the target, as patch.apply puts them)."""
    (tmp_path / "hosts.ini").write_text(INVENTORY)
    (tmp_path / "t").mkdir()
    monkeypatch.chdir(REPO)
    inventory = str(tmp_path / "hosts.ini")
    block = {**BLOCK, "out": str(tmp_path / "o"), "limit": "cpu", "root": "/from/key"}
    c = site_context(tmp_path, {"inventory": inventory, "profile": {"remote": block}})
    got = _remote_run(monkeypatch)
    with pytest.raises(_Reached):
        tasks.profile_remote(c)  # the keys
    assert [(t.label, t.root) for t in got["transports"]] == [("cpu1:/from/key", "/from/key")]
    with pytest.raises(_Reached):
        tasks.profile_remote(c, limit="gpu1", root="/from/flag")
    assert [(t.label, t.root) for t in got["transports"]] == [("gpu1:/from/flag", "/from/flag")]
    with pytest.raises(_Reached):
        tasks.profile_remote(c, target=[str(tmp_path / "t")], inventory=inventory, limit="gpu1")
    assert (got["cfg"].limit, got["cfg"].root) == ("gpu1", "/from/key")
    assert [(t.label, t.root) for t in got["transports"]] == [
        (str(tmp_path / "t"), str(tmp_path / "t")),
        ("gpu1:/from/key", "/from/key"),
    ]
    series = {"series": str(REPO / "patches" / "sglang-v0.5.9")}
    same = {"target": [str(tmp_path / "t")], "inventory": inventory, "limit": "gpu1", "root": "/from/key"}
    patch = _patch_hosts(site_context(tmp_path, series), same)
    assert patch[0] == str(tmp_path / "t") and patch[1:] == _hosts(got["transports"])[1:]


def test_limit_without_an_inventory_is_refused_as_patch_apply_refuses_it(tmp_path):
    """The same message (after each task's own prefix) and exit code, from the command line,
    with nothing touched on the target; and profile.remote.limit in a config names the key."""
    from support.cli import in_process
    from support.failures import tree_digest

    target = tmp_path / "t"
    target.mkdir()
    (target / "f").write_text("x\n")
    before = tree_digest(str(target))
    series = str(REPO / "patches" / "sglang-v0.5.9")
    for flag, value in (("--limit", "gpu"), ("--root", "/srv")):
        patch = in_process("patch.apply", "--series", series, "--target", str(target), flag, value)
        remote = in_process(
            *("profile.remote", "--series", series, "--target", str(target)),
            *("--server", "serve", "--bench", "b", "--no-chart", flag, value),
        )
        assert patch[0] == remote[0] == 2, (patch, remote)
        said = "--limit and --root choose hosts of an inventory: give --inventory FILE\n"
        assert patch[2] == f"patchkit: {said}" and remote[2] == f"profile: {said}", (patch, remote)
    assert tree_digest(str(target)) == before
    with pytest.raises(InvalidInput, match=r"^profile.remote: limit and root choose hosts of an inventory"):
        RemoteConfig.from_mapping({**BLOCK, "targets": [str(target)], "limit": "gpu"}, cwd=REPO)


def test_the_kinds_options_reach_the_kind(toy, tmp_path, monkeypatch):
    """--kube-context, --k8s-container and --kubectl reach the kind's expand, over the keys."""
    got = _remote_run(monkeypatch)
    monkeypatch.chdir(REPO)
    block = {**BLOCK, "out": str(tmp_path / "o"), "kube_context": "ctx-key", "k8s_container": "key"}
    c = site_context(tmp_path, {"kubectl": "/usr/bin/kubectl", "profile": {"remote": block}})
    given = {"kube_context": "ctx-flag", "k8s_container": "server", "kubectl": "/opt/bin/kubectl"}
    with pytest.raises(_Reached):
        tasks.profile_remote(c, target=["toy:a"], **given)
    assert [t.root for t in got["transports"]] == [str(toy / "a")]
    assert {k: SEEN[-1][k] for k in given} == given
    with pytest.raises(_Reached):  # the keys where no option is given
        tasks.profile_remote(c, target=["toy:a"])
    assert {k: SEEN[-1][k] for k in given} == {
        "kube_context": "ctx-key",
        "k8s_container": "key",
        "kubectl": "/usr/bin/kubectl",
    }


def test_series_auto_reads_the_inventorys_chosen_hosts(tmp_path, monkeypatch):
    """--series auto chooses the series from the targets the run will use: the inventory's hosts
    that --limit keeps, at --root."""
    (tmp_path / "hosts.ini").write_text(INVENTORY)
    monkeypatch.chdir(REPO)
    seen: list = []

    def auto_series(targets):
        seen.extend((t.label, t.root) for t in targets)
        raise _Reached

    monkeypatch.setattr(tasks, "_auto_series", auto_series)
    c = site_context(tmp_path, {"profile": {"remote": {**BLOCK, "out": str(tmp_path / "o")}}})
    with pytest.raises(_Reached):
        tasks.profile_remote(
            c, series="auto", inventory=str(tmp_path / "hosts.ini"), limit="gpu:!gpu3", root="/opt/venv"
        )
    assert seen == [("gpu1:/opt/venv", "/opt/venv"), ("gpu2:/opt/venv", "/opt/venv")]
