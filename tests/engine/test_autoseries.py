"""``--series auto``: one round trip reads the target's version and files, picks the shipped series
pinned to exactly that text, or refuses naming the closest release (real wheels, real sshd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit import ops
from patchkit.author import upstream
from patchkit.engine import autoseries
from patchkit.errors import Refused
from support.cli import invoke

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
V2 = "sglang/srt/speculative/eagle_worker_v2.py"
COMMON = "sglang/srt/speculative/eagle_worker_common.py"
V1 = "sglang/srt/speculative/eagle_worker.py"


def _files(version: str, paths) -> dict[str, bytes]:
    wheel = upstream.fetch_wheel("sglang", version)
    return upstream.read_wheel_files(wheel.path, list(paths))


def installed(version: str, dest: Path, paths=(V2, COMMON)) -> Path:
    wheel = upstream.fetch_wheel("sglang", version).path
    return upstream.build_installed_tree(
        _files(version, paths),
        dest,
        name="sglang",
        version=version,
        dist_info=upstream.wheel_dist_info(wheel),
    )


def test_picks_the_series_for_an_installed_tree_and_says_so(tmp_path):
    tree = installed("0.5.20", tmp_path / "site")
    chosen, said = autoseries.resolve([str(tree)])
    assert Path(chosen).name == "sglang-v0.5.20"
    assert "sglang-v0.5.20" in said and "eagle_worker_v2.py" in said


def test_a_post_release_sharing_files_gets_the_shared_series(tmp_path):
    tree = installed("0.5.4.post3", tmp_path / "site", paths=(V1, V2))
    chosen, _ = autoseries.resolve([str(tree)])
    assert Path(chosen).name == "sglang-v0.5.5"
    assert ops.verify(chosen, [str(tree)]).exit_code == 0  # also_versions lets the version pass


def test_checkout_layout_in_a_git_repo(tmp_path):
    tree, _ = upstream.build_checkout_tree(_files("0.5.13", (V2,)), tmp_path / "co", git_repo=True)
    chosen, _ = autoseries.resolve([str(tree)])
    assert Path(chosen).name == "sglang-v0.5.13"


def test_drifted_file_is_refused_naming_the_closest_release_and_the_difference(tmp_path):
    tree = installed("0.5.21", tmp_path / "site")
    (tree / COMMON).write_bytes((tree / COMMON).read_bytes() + b"# hot fix\n")
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    with pytest.raises(Refused) as info:
        autoseries.resolve([str(tree)])
    text = str(info.value)
    assert "closest: sglang-v0.5.21" in text and "eagle_worker_common.py has sha256" in text
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


def test_unknown_release_is_refused_with_its_version(tmp_path):
    tree = installed("0.5.21", tmp_path / "site")
    info = next(tree.glob("*.dist-info"))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.21.dev7\n")
    with pytest.raises(Refused) as e:
        autoseries.resolve([str(tree)])
    assert "0.5.21.dev7" in str(e.value) and "closest: sglang-v0.5.21" in str(e.value)


def test_fleet_needing_two_series_is_refused(tmp_path):
    a = installed("0.5.22", tmp_path / "a")
    b = installed("0.5.23", tmp_path / "b")
    with pytest.raises(Refused) as e:
        autoseries.resolve([str(a), str(b)])
    assert "sglang-v0.5.22" in str(e.value) and "sglang-v0.5.23" in str(e.value)


def test_missing_root_is_refused(tmp_path):
    with pytest.raises(Refused):
        autoseries.resolve([str(tmp_path / "nope")])


def test_over_ssh_in_one_connection(sshd, tmp_path):
    tree = installed("0.5.19", tmp_path / "site")
    before = sshd.connections()
    chosen, _ = autoseries.resolve([sshd.url(str(tree))], ssh_config=str(sshd.client_config))
    sshd.wait_log(lambda s: s.connections() > before, timeout=3)
    assert Path(chosen).name == "sglang-v0.5.19"
    assert sshd.connections() - before == 1


def test_cli_says_which_series_it_chose_and_refuses_with_exit_1(tmp_path):
    tree = installed("0.5.18", tmp_path / "site")
    ok = invoke("patch.verify", "--series", "auto", "--target", str(tree))
    assert ok.returncode == 0, ok.stderr
    assert "chose sglang-v0.5.18" in ok.stderr
    applied = invoke("patch.apply", "--series", "auto", "--target", str(tree))
    assert applied.returncode == 0, applied.stderr
    # Applied files no longer hash as the pin: the series patchkit recorded on the target is used.
    status = invoke("patch.status", "--series", "auto", "--target", str(tree))
    assert status.returncode == 0 and "applied" in status.stdout, status.stderr
    assert "the series patchkit applied" in status.stderr
    reverted = invoke("patch.revert", "--series", "auto", "--target", str(tree))
    assert reverted.returncode == 0, reverted.stderr
    assert ops.verify(str(REPO / "patches" / "sglang-v0.5.18"), [str(tree)]).exit_code == 0
    # A hand-edited file after revert: refused, naming the difference.
    (tree / V2).write_bytes((tree / V2).read_bytes().replace(b"import", b"import ", 1))
    refused = invoke("patch.apply", "--series", "auto", "--target", str(tree))
    assert refused.returncode == 1 and "closest: sglang-v0.5.18" in refused.stderr


def test_a_target_carrying_another_version_of_a_series_is_refused(tmp_path):
    import shutil

    tree = installed("0.5.17", tmp_path / "site")
    mine = tmp_path / "sglang-v0.5.17"
    shutil.copytree(REPO / "patches" / "sglang-v0.5.17", mine)
    draft = mine / "0003-draft.patch"
    draft.write_text("My own copy of the draft timers.\n" + draft.read_text())
    assert ops.apply(str(mine), [str(tree)]).exit_code == 0
    with pytest.raises(Refused) as e:
        autoseries.resolve([str(tree)])
    assert "not the shipped sglang-v0.5.17" in str(e.value)


def test_profile_tasks_resolve_auto_against_the_site(tmp_path, capsys):
    from invoke import Config, Context

    import tasks

    site = installed("0.5.19", tmp_path / "site")
    ctx = Context(Config(overrides={"patchkit": {"profile": {}}}))
    _, kw = tasks._profile_kwargs(ctx, None, None, str(site), "auto", None, None, None, None, None, False)
    assert Path(kw["series_dir"]).name == "sglang-v0.5.19"
    assert "chose sglang-v0.5.19" in capsys.readouterr().err
