"""profile.remote's choices and lists are checked by their rows of the option table
(patchkit.settings), one check per setting: RemoteConfig (a config file) and the profile.remote
task (an option) refuse a bad value in the same words, each naming where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.errors import InvalidInput
from patchkit.profile.remote.config import RemoteConfig
from patchkit.settings import REMOTE_CHECKS, offered, one_of

REPO = Path(__file__).resolve().parents[2]

# key -> a bad value (what the key's row refuses)
BAD = {
    "health_on": "some",
    "timer": "cuda",
    "until": "forever",
    "blocks": "gpus",
    "stop_signals": ["INT", "STOP"],
    "gpus": "0,0",
    "cpus": "7-3",
    "remote_dir": "relative/dir",
    "health_url": "ftp://x",
    "python": "-c",
    "spread_cache": " ",
    "budget_minutes": "0",
}


def _base(tmp_path) -> dict:
    return {"targets": [str(tmp_path)], "server_command": "serve", "bench_command": "b"}


@pytest.mark.parametrize("key", sorted(BAD))
def test_each_choice_is_a_rows_check(tmp_path, key):
    assert key in REMOTE_CHECKS, f"profile.remote.{key}: no check in the option table"
    with pytest.raises(InvalidInput) as from_table:
        REMOTE_CHECKS[key](BAD[key], key, f"profile.remote: {key}")
    with pytest.raises(InvalidInput) as from_config:
        RemoteConfig.from_mapping({**_base(tmp_path), key: BAD[key]}, cwd=REPO)
    assert from_config.value.message == from_table.value.message
    assert from_config.value.exit_code == 2


@pytest.mark.parametrize(
    "option, key",
    [
        ("until", "until"),
        ("blocks", "blocks"),
        ("gpus", "gpus"),
        ("cpus", "cpus"),
        ("budget", "budget_minutes"),
    ],
)
def test_the_task_option_and_the_key_share_the_check(option, key):
    row = offered("profile.remote")[option]
    assert row.key == f"profile.remote.{key}" and row.check is REMOTE_CHECKS[key]
    with pytest.raises(InvalidInput) as by_option:
        row.check(BAD[key], option)
    with pytest.raises(InvalidInput) as by_key:
        REMOTE_CHECKS[key](BAD[key], key, f"profile.remote: {key}")
    said = by_option.value.message
    assert said.startswith(f"--{option}")
    assert said.removeprefix(f"--{option}") == by_key.value.message.removeprefix(f"profile.remote: {key}")


def test_a_config_files_word_is_folded_an_options_is_not():
    check = one_of("fleet", "hosts", fold=True)
    assert check(" Hosts", "blocks", "patchkit.profile.remote.blocks in x.yaml") == "hosts"
    with pytest.raises(InvalidInput, match=r"--blocks 'Hosts ': fleet or hosts"):
        check("Hosts ", "blocks")


def test_stop_signals_text_naming_none_is_refused_a_list_is_kept(tmp_path):
    with pytest.raises(InvalidInput, match=r"profile.remote: stop_signals ' ,': signals such as INT, TERM"):
        RemoteConfig.from_mapping({**_base(tmp_path), "stop_signals": " ,"}, cwd=REPO)
    assert RemoteConfig.from_mapping(
        {**_base(tmp_path), "stop_signals": "sigint term"}, cwd=REPO
    ).stop_signals == ["INT", "TERM"]
