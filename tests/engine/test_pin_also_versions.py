"""pin.toml ``also_versions``: a .postN release shipping the pinned files byte for byte shares the
series; the installed layout's dist-info version may be any listed one, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit import ops
from patchkit.author import upstream
from patchkit.engine.series import parse_pin
from patchkit.errors import InvalidInput

pytestmark = [pytest.mark.wheels]

REPO = Path(__file__).resolve().parents[2]
SERIES = REPO / "patches" / "sglang-v0.5.5"
FILES = ("sglang/srt/speculative/eagle_worker.py", "sglang/srt/speculative/eagle_worker_v2.py")


def _tree(dest: Path, version_in_metadata: str) -> Path:
    wheel = upstream.fetch_wheel("sglang", "0.5.5")
    files = upstream.read_wheel_files(wheel.path, list(FILES))
    return upstream.build_installed_tree(files, dest, name="sglang", version=version_in_metadata)


@pytest.mark.parametrize("version", ["0.5.5", "0.5.4.post3"])
def test_listed_versions_pass(version, tmp_path):
    result = ops.verify(str(SERIES), [str(_tree(tmp_path / "site", version))])
    assert result.exit_code == 0, result.hosts[0].messages


@pytest.mark.parametrize("version", ["0.5.4.post2", "0.5.5.post1", "0.5.", "0.5.5 0.5.4.post3"])
def test_other_versions_are_refused_and_named(version, tmp_path):
    tree = _tree(tmp_path / "site", version)
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    result = ops.apply(str(SERIES), [str(tree)])
    assert result.exit_code == 1
    if " " not in version:  # a Version line of two words is refused on the target itself
        assert any("pinned 0.5.5 or 0.5.4.post3" in m for m in result.hosts[0].messages)
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("value", ['"0.5.4.post3"', "[1]", '["a b"]', '[""]'])
def test_malformed_also_versions_are_invalid_input(value):
    text = f'[upstream]\nname = "sglang"\nversion = "0.5.5"\nalso_versions = {value}\n'
    with pytest.raises(InvalidInput) as e:
        parse_pin(text)
    assert e.value.exit_code == 2 and "also_versions" in str(e.value)


def test_also_versions_needs_a_version():
    with pytest.raises(InvalidInput):
        parse_pin('[upstream]\nname = "sglang"\nalso_versions = ["0.5.1.post1"]\n')


def test_format_pin_round_trips_also_versions(tmp_path):
    pin = upstream.read_pin(SERIES / "pin.toml")
    assert pin.also_versions == ("0.5.4.post3",)
    assert upstream.format_pin(pin) == (SERIES / "pin.toml").read_text()
