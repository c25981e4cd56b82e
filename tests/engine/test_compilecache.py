"""The compile cache: a hit gives the very same target program, any change to the series misses,
and a drift report from a cached compile is as precise as one from a fresh compile."""

from __future__ import annotations

import json

import pytest

from patchkit import ops
from patchkit.engine import compilecache
from patchkit.engine.series import load_series
from patchkit.engine.targetprog import build_program, compile_series
from support.engine import git_diff, make_series, write_tree

BEFORE = {"pkg/a.py": b"".join(b"a%d\n" % i for i in range(40)), "pkg/b.py": b"b0\nb1\n"}
AFTER = {"pkg/a.py": BEFORE["pkg/a.py"].replace(b"a7\n", b"a7\nNEW\n"), "pkg/b.py": b"b0\nB1\n"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PATCHKIT_COMPILE_CACHE", raising=False)
    return tmp_path / "cache" / "compiled"


@pytest.fixture
def series(tmp_path):
    return make_series(tmp_path / "s", BEFORE, [("1.patch", git_diff(BEFORE, AFTER, tmp_path))])


@pytest.mark.parametrize("op", ["apply", "verify", "revert", "status"])
def test_hit_builds_the_same_program(cache, series, op):
    full = op in ("apply", "verify")
    fresh = compile_series(load_series(str(series)), full=full)
    first = compilecache.compiled_series(str(series), full=full)  # miss: compiles, stores
    assert len(list(cache.glob("*.json"))) == 1
    second = compilecache.compiled_series(str(series), full=full)  # hit: read back
    assert second.series.patches == []  # really from the cache
    for c in (first, second):
        assert build_program(c, op, "/t") == build_program(fresh, op, "/t")
        assert [(p.path, p.kind, p.pinned) for p in c.plans] == [
            (p.path, p.kind, p.pinned) for p in fresh.plans
        ]


def test_any_change_misses(cache, series):
    compilecache.compiled_series(str(series))
    (series / "1.patch").write_bytes((series / "1.patch").read_bytes().replace(b"+NEW", b"+NEX"))
    c = compilecache.compiled_series(str(series))
    assert c.series.patches, "a changed patch must be compiled afresh"
    assert "NEX" in "".join(c.multi.values())
    assert len(list(cache.glob("*.json"))) == 2


def test_damaged_entry_is_ignored(cache, series):
    compilecache.compiled_series(str(series))
    (entry,) = cache.glob("*.json")
    entry.write_text(json.dumps({"format": compilecache.FORMAT, "digest": "x"}))
    c = compilecache.compiled_series(str(series))
    assert c.series.patches
    entry.write_text("{not json")
    assert compilecache.compiled_series(str(series)).series.patches


def test_off_switch(cache, series, monkeypatch):
    monkeypatch.setenv("PATCHKIT_COMPILE_CACHE", "off")
    compilecache.compiled_series(str(series))
    assert not cache.exists()


def test_drift_report_from_a_cached_compile(cache, series, tmp_path):
    compilecache.compiled_series(str(series))  # the apply below is a cache hit
    root = tmp_path / "t"
    write_tree(root, {**BEFORE, "pkg/a.py": BEFORE["pkg/a.py"].replace(b"a7\n", b"a7 changed\n")})
    res = ops.apply(str(series), [str(root)])
    assert res.exit_code == 1
    (fr,) = [f for f in res.hosts[0].files if f.path == "pkg/a.py"]
    assert fr.state == "drifted"
    assert "a7 changed" in fr.detail and "1.patch" in fr.detail, fr.detail


def test_bytes_that_are_not_utf8_survive_the_cache(cache, tmp_path):
    before = {"a.txt": b"caf\xe9\nx\n"}
    after = {"a.txt": b"caf\xe9\nX \xff\xfe\n"}
    series = make_series(tmp_path / "lat", before, [("1.patch", git_diff(before, after, tmp_path))])
    compilecache.compiled_series(str(series))
    hit = compilecache.compiled_series(str(series))
    assert hit.series.patches == []
    assert build_program(hit, "apply", "/t") == build_program(
        compile_series(load_series(str(series))), "apply", "/t"
    )
    root = tmp_path / "t"
    write_tree(root, before)
    assert ops.apply(str(series), [str(root)]).exit_code == 0
    assert (root / "a.txt").read_bytes() == after["a.txt"]


def test_a_cached_pin_keeps_every_field(cache, tmp_path):
    """A pin read back from the cache is the pin itself: also_versions included (the target's
    dist-info check accepts those releases too)."""
    folder = tmp_path / "sv"
    make_series(folder, BEFORE, [("1.patch", git_diff(BEFORE, AFTER, tmp_path))])
    pin = folder / "pin.toml"
    text = pin.read_text()
    pin.write_text(
        text.replace("[upstream]\n", '[upstream]\nversion = "1.0"\nalso_versions = ["1.0.post1"]\n', 1)
    )
    fresh = compile_series(load_series(str(folder)), full=True)
    compilecache.compiled_series(str(folder), full=True)
    cached = compilecache.compiled_series(str(folder), full=True)
    assert cached.series.patches == []
    assert cached.series.pin == fresh.series.pin
    assert cached.series.pin.versions == ("1.0", "1.0.post1")
