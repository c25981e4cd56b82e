"""Import mode's in-memory result equals, byte for byte, what the sed engine writes.

For the embedded default (transformers 5.17.0, installed layout) and sglang releases (from
their pinned wheels, installed and checkout layouts): ``patched_texts`` reads the pristine tree
and patches in memory (the hook's own code, patchkit/timing/import_hook.py); ``patch.apply``
then writes the sed result into the same tree; every file must be equal. The target is
untouched by the in-memory pass (hashed before and after).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.engine.importmode import patched_texts
from patchkit.engine.series import load_series
from patchkit.errors import Refused
from patchkit.paths import strip_prefix
from support.importmode import tree_hashes
from support.upstream import REPO, sglang_checkout, sglang_installed

pytestmark = [pytest.mark.wheels]

SERIES = REPO / "patches"


def assert_same_as_sed(series_dir: Path, tree: Path, layout: str) -> None:
    before = tree_hashes(tree)
    in_memory = patched_texts(str(series_dir), str(tree), layout)
    assert tree_hashes(tree) == before  # reading only
    result = ops.apply(str(series_dir), [str(tree)], ops.Options(layout=layout))
    assert result.exit_code == 0, result.hosts[0].messages
    assert in_memory, "the series modifies no file?"
    for path, data in in_memory.items():
        assert (tree / path).read_bytes() == data, path


def test_embedded_default_equals_sed(transformers_site, tmp_path):
    series_dir = SERIES / "transformers-v5.17.0"
    tree = tmp_path / "site"
    for path in load_series(str(series_dir)).pin.files:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(transformers_site / path, tree / path)
    for info in transformers_site.glob("transformers-*.dist-info"):  # the version the pin names
        shutil.copytree(info, tree / info.name)
    assert_same_as_sed(series_dir, tree, "installed")


@pytest.mark.parametrize("version", ["0.5.9", "0.5.17"])
@pytest.mark.parametrize("layout", ["installed", "checkout"])
def test_sglang_releases_equal_sed(version, layout, tmp_path):
    series_dir = SERIES / f"sglang-v{version}"
    pin = load_series(str(series_dir)).pin
    if layout == "installed":
        paths = [strip_prefix(p, pin.package_prefix) for p in pin.files]
        tree = sglang_installed(version, tmp_path / "site", paths=paths)
    else:
        paths = [strip_prefix(p, pin.package_prefix) for p in pin.files]
        tree, _ = sglang_checkout(version, tmp_path / "checkout", paths=paths)
    assert_same_as_sed(series_dir, tree, layout)


def test_a_changed_file_is_refused_naming_it(tmp_path):
    series_dir = SERIES / "sglang-v0.5.9"
    pin = load_series(str(series_dir)).pin
    paths = [strip_prefix(p, pin.package_prefix) for p in pin.files]
    tree = sglang_installed("0.5.9", tmp_path / "site", paths=paths)
    changed = tree / paths[0]
    changed.write_bytes(changed.read_bytes() + b"# one more line\n")
    with pytest.raises(Refused, match=rf"{paths[0]}: not the pinned text"):
        patched_texts(str(series_dir), str(tree), "installed")
