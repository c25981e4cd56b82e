"""One rule for every on/off option and setting: a YAML boolean, or true/false, yes/no, on/off,
1/0 in any case; anything else (``"yes please"``, ``2``) is refused with exit 2, naming the key
and its file, the value and the spellings, before any target is touched. A quoted ``"false"``
is false (it used to be a non-empty string, so true). The revert says where a kept journal's
setting came from: the flag, or the key and its file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from patchkit import tasks
from patchkit.errors import InvalidInput
from patchkit.settings import FALSE_WORDS, OPTIONS, TRUE_WORDS, boolean
from support.cli import in_process
from support.failures import invoke, small_series, small_target, tree_digest
from support.invoke_yaml import site_context

SPELLINGS = "true/false, yes/no, on/off, 1/0"


def test_every_on_off_row_is_checked_by_the_one_rule():
    """Each option table row with a config key and an on/off default: its check is boolean."""
    rows = [o for o in OPTIONS if o.key is not None and isinstance(o.default, bool)]
    assert {o.key for o in rows} >= {"keep_journal", "profile.warmup", "profile.remote.chart"}
    assert [o.key for o in rows if o.check is not boolean] == []


@pytest.mark.parametrize("value", [True, "true", "TRUE", "Yes", "on", "ON", "1", 1, " yes "])
def test_true_spellings(value):
    assert boolean(value, "keep_journal") is True


@pytest.mark.parametrize("value", [False, "false", "False", "NO", "off", "Off", "0", 0, "no "])
def test_false_spellings(value):
    assert boolean(value, "keep_journal") is False


@pytest.mark.parametrize("value", ["yes please", "", "2", 2, "truee", None, [], {}, 0.5, "t", "n"])
def test_anything_else_is_refused_naming_key_value_and_spellings(value):
    with pytest.raises(InvalidInput) as info:
        boolean(value, "keep_journal", "patchkit.keep_journal in /srv/invoke.yaml")
    said = info.value.message
    assert said.startswith(f"patchkit.keep_journal in /srv/invoke.yaml {value!r}: ")
    assert said.endswith(f": true or false (any case: {SPELLINGS})")
    assert all(word in said for word in (*TRUE_WORDS, *FALSE_WORDS))


# -- through the real command line ------------------------------------------------------------------


@pytest.fixture
def world(tmp_path):
    tree = small_target(tmp_path / "target")
    series = small_series(tmp_path / "series")
    return tmp_path, tree, series


def _config(tmp_path: Path, patchkit: dict) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump({"patchkit": patchkit}))
    return path


def _revert(config: Path, series: Path, tree: Path, *flags: str):
    return invoke(
        "-f", str(config), "patch.revert", "--series", str(series), "--target", str(tree), *flags, "--json"
    )


def test_a_quoted_false_does_not_keep_the_journal(world):
    tmp, tree, series = world
    pristine = tree_digest(tree)
    config = _config(tmp, {"keep_journal": "false"})
    assert (
        invoke("-f", str(config), "patch.apply", "--series", str(series), "--target", str(tree)).returncode
        == 0
    )
    done = _revert(config, series, tree)
    assert done.returncode == 0, done.stderr
    host = json.loads(done.stdout)["hosts"][0]
    assert not any("journal kept" in m for m in host["messages"]), host["messages"]
    assert not (tree / ".patchkit").exists()
    assert tree_digest(tree) == pristine


@pytest.mark.parametrize("value", ["yes please", "2", 7])
def test_a_bad_keep_journal_is_refused_before_the_target_is_touched(world, value):
    tmp, tree, series = world
    assert invoke("patch.apply", "--series", str(series), "--target", str(tree)).returncode == 0
    applied = tree_digest(tree)
    config = _config(tmp, {"keep_journal": value})
    done = _revert(config, series, tree)
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert (
        line
        == f"patchkit: patchkit.keep_journal in {config} {value!r}: true or false (any case: {SPELLINGS})"
    )
    assert json.loads(done.stdout)["error"] == line.removeprefix("patchkit: ")
    assert tree_digest(tree) == applied  # still applied, byte for byte: nothing ran on it


@pytest.mark.parametrize("flag", [True, False])
def test_the_revert_says_where_keeping_the_journal_came_from(world, flag):
    tmp, tree, series = world
    config = _config(tmp, {} if flag else {"keep_journal": "Yes"})
    assert invoke("patch.apply", "--series", str(series), "--target", str(tree)).returncode == 0
    done = _revert(config, series, tree, *(["--keep-journal"] if flag else []))
    assert done.returncode == 0, done.stderr
    kept = [m for m in json.loads(done.stdout)["hosts"][0]["messages"] if "journal kept" in m]
    where = "--keep-journal" if flag else f"patchkit.keep_journal in {config}"
    assert kept == [f"journal kept on the target in .patchkit/journal ({where})"]
    assert (tree / ".patchkit" / "journal").is_file()


# -- the profile tasks' on/off settings ---------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [("false", False), ("Off", False), ("yes", True), (True, True)])
def test_profile_warmup_follows_the_rule(tmp_path, value, expected):
    c = site_context(tmp_path, {"profile": {"warmup": value}})
    assert tasks._warmup(c, True) is expected
    assert tasks._warmup(c, False) is False  # --no-warmup wins


# the on/off keys under patchkit.profile.remote
REMOTE = ["keep_remote_dir", "baseline", "warmup", "chart"]


@pytest.mark.parametrize("key", REMOTE)
def test_profile_remote_on_off_keys_refuse_anything_else(world, key):
    tmp, tree, _ = world
    pristine = tree_digest(tree)
    config = _config(tmp, {"profile": {"remote": {"targets": [str(tree)], key: "yes please"}}})
    code, out, err = in_process("-f", str(config), "profile.remote")
    assert code == 2, (out, err)
    assert (
        err.strip() == f"profile: profile.remote: {key} 'yes please': true or false (any case: {SPELLINGS})"
    )
    assert tree_digest(tree) == pristine


def test_profile_warmup_refuses_anything_else(tmp_path):
    config = _config(tmp_path, {"profile": {"warmup": "yes please"}})
    code, out, err = in_process("-f", str(config), "profile.run", "--out", str(tmp_path / "out"))
    assert code == 2, (out, err)
    assert f"patchkit.profile.warmup in {config} 'yes please': true or false (any case: {SPELLINGS})" in err
    assert not (tmp_path / "out").exists()
