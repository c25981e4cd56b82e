"""patchkit/pin.py: one pin model read by the engine and written by authoring."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit import upstream
from patchkit.engine.series import load_series
from patchkit.errors import InvalidInput
from patchkit.pin import Pin, PinnedFile, format_pin, parse_pin, read_pin, write_pin

REPO = Path(__file__).resolve().parents[2]
SHA = "ab" * 32


def test_every_shipped_pin_round_trips_byte_for_byte():
    pins = sorted((REPO / "patches").glob("*/pin.toml"))
    assert len(pins) > 10
    for path in pins:
        pin = read_pin(path)
        assert format_pin(pin) == path.read_text(encoding="utf-8"), path
        assert parse_pin(format_pin(pin), str(path)) == pin


def test_engine_and_authoring_see_the_same_model():
    series = load_series(str(REPO / "patches" / "sglang-v0.5.9"))
    assert type(series.pin) is Pin and upstream.Pin is Pin and upstream.PinnedFile is PinnedFile
    assert series.pin == read_pin(REPO / "patches" / "sglang-v0.5.9" / "pin.toml")


def test_a_list_of_entries_is_kept_in_order_by_path(tmp_path):
    pin = Pin(
        "pkg",
        "1.0",
        None,
        "python/",
        [PinnedFile("python/pkg/b.py", SHA, 3), PinnedFile("python/pkg/a.py", SHA, 1)],
        ["1.0.post1"],
    )
    assert list(pin.files) == ["python/pkg/b.py", "python/pkg/a.py"]
    assert pin.versions == ("1.0", "1.0.post1")
    write_pin(tmp_path / "s" / "pin.toml", pin)
    assert read_pin(tmp_path / "s" / "pin.toml") == pin


@pytest.mark.parametrize(
    "text, needle",
    [
        ('[upstream]\nname = "p"\n\n[[file]]\npath = "a.py"\nsha256 = "xyz"\nlines = 1\n', "sha256"),
        (
            '[upstream]\nname = "p"\n\n[[file]]\npath = "../a.py"\nsha256 = "' + SHA + '"\nlines = 1\n',
            "unsafe path",
        ),
        ('[upstream]\nversion = "1"\n', "name"),
    ],
)
def test_the_writer_side_reads_with_the_engine_checks(tmp_path, text, needle):
    # before one model, authoring's reader accepted what the engine then refused
    (tmp_path / "pin.toml").write_text(text)
    with pytest.raises(InvalidInput) as e:
        read_pin(tmp_path / "pin.toml")
    assert e.value.exit_code == 2 and needle in str(e.value) and "pin.toml" in str(e.value)
