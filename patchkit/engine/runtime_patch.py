"""A series' runtime patch: rendered from patchkit/timing/phase_timer.py, stored once.

Every shipped series starts with the patch that creates the timing runtime
(``0001-phase-timer-runtime.patch``), listed in ``series`` like any other patch. The repository
does not store that patch in each folder: beside the listed name lies a **marker**,
``<patch>.runtime``, whose one line is the path the patch creates (checkout spelling, e.g.
``python/sglang/srt/speculative/phase_timer.py``). The patch is rendered from that path and
``patchkit/timing/phase_timer.py`` whenever the series is read (``patch_data``): the fixed
header below, then the new-file diff of the runtime's exact bytes. The rendering is the file
users get, byte for byte, wherever they get it: ``read_series`` (and so the digest, apply,
``--series auto``, status, the Ansible collection, profile runs), the authoring tools, the
wheel (setup.py writes it in place of the marker) and ``patch.export`` (``materialize``).

A folder may hold the patch file itself instead (an installed or exported series, a user's
own): then that file is read as it is. A folder holding both is read only when the file is the
rendering; a stale copy beside a marker is refused, never preferred.

Standard library only (the wheel build imports this module before any dependency exists).
"""

from __future__ import annotations

import os

from patchkit.engine.difftext import new_file_patch
from patchkit.errors import InvalidInput
from patchkit.paths import path_problem, strip_prefix
from patchkit.pin import parse_pin
from patchkit.timing import RUNTIME_PATH

MARKER_SUFFIX = ".runtime"
# A series folder's authoring notes (README.md: how seriesgen placed each line; REBASE.md: what
# patch.rebase did): in the checkout, not in the wheel (pyproject.toml) or patch.export's folder.
NOTE_SUFFIX = ".md"
RUNTIME_FILE_NAME = RUNTIME_PATH.name  # phase_timer.py: the later patches import it by this name
RUNTIME_PATCH = "0001-phase-timer-runtime.patch"  # the name every shipped series lists it under

# The header every shipped runtime patch carries (its own words and its place in the bytes
# users get): {installed} is the path the patch creates, without the pin's package_prefix.
HEADER = (
    "Adds the patchkit phase timer runtime as {installed}.\n"
    "\n"
    "Generated from patchkit/timing/phase_timer.py (invoke patch.gen-runtime); do not edit here.\n"
    "The later patches import it as _pt and call cycle_begin/cycle_end, begin/end on it.\n"
    "\n"
)


def runtime_text() -> str:
    """The runtime's exact text (bytes decoded, line endings untouched)."""
    return RUNTIME_PATH.read_bytes().decode("utf-8")


def render(path: str, package_prefix: str | None, source: str | None = None) -> bytes:
    """The runtime patch creating ``path``: the header, then the new-file diff of the runtime
    (``source``, default patchkit/timing/phase_timer.py)."""
    text = runtime_text() if source is None else source
    header = HEADER.format(installed=strip_prefix(path, package_prefix))
    return (header + new_file_patch(path, text)).encode("utf-8")


def marker_path(directory: str, name: str) -> str:
    return os.path.join(directory, name + MARKER_SUFFIX)


def marker_text(path: str) -> str:
    """What a marker for a runtime patch creating ``path`` holds."""
    return (
        "# The runtime patch is rendered from patchkit/timing/phase_timer.py, not stored: it creates\n"
        "# the file named below (patchkit/engine/runtime_patch.py, docs/formats.md).\n"
        f"{path}\n"
    )


def read_marker(marker: str) -> str:
    """The path a marker names; refused unless it is one safe path ending in phase_timer.py."""
    with open(marker, encoding="utf-8") as fh:
        lines = [ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) != 1:
        raise InvalidInput(f"{marker}: must name exactly one path (the file the runtime patch creates)")
    path = lines[0]
    problem = path_problem(path)
    if problem:
        raise InvalidInput(f"{marker}: {path!r}: {problem}")
    if path.rsplit("/", 1)[-1] != RUNTIME_FILE_NAME:
        raise InvalidInput(f"{marker}: {path!r}: the runtime patch creates a {RUNTIME_FILE_NAME}")
    return path


def is_rendered(directory: str, name: str) -> bool:
    """Whether the folder holds patch ``name`` as a marker (rendered on read)."""
    return os.path.isfile(marker_path(directory, name))


def _package_prefix(directory: str, pin_bytes: bytes | None) -> str | None:
    pin_path = os.path.join(directory, "pin.toml")
    if pin_bytes is None:
        try:
            with open(pin_path, "rb") as fh:
                pin_bytes = fh.read()
        except OSError as exc:
            raise InvalidInput(f"series {directory}: missing pin.toml ({exc.strerror})") from exc
    return parse_pin(pin_bytes.decode("utf-8", "replace"), pin_path).package_prefix


def patch_data(directory: str, name: str, pin_bytes: bytes | None = None) -> bytes:
    """The bytes of patch ``name`` of the series in ``directory``: the file, or the rendering of
    its marker. ``pin_bytes``: pin.toml as already read (its package_prefix spells the header)."""
    path = os.path.join(directory, name)
    marker = marker_path(directory, name)
    if os.path.isfile(marker):
        data = render(read_marker(marker), _package_prefix(directory, pin_bytes))
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                if fh.read() != data:
                    raise InvalidInput(
                        f"{path}: differs from what {name + MARKER_SUFFIX} renders from "
                        f"patchkit/timing/{RUNTIME_FILE_NAME} (a stale copy?); delete it, the "
                        "series renders the patch itself"
                    )
        return data
    if not os.path.isfile(path):
        raise InvalidInput(f"{os.path.join(directory, 'series')}: lists {name}, which does not exist")
    with open(path, "rb") as fh:
        return fh.read()


def materialize(directory: str) -> dict[str, bytes]:
    """The series folder as users get it: {file name: bytes} of every file at its top level but
    its authoring notes (``NOTE_SUFFIX``), each marker replaced by the patch it renders (what
    the wheel and ``patch.export`` hold)."""
    directory = os.path.abspath(directory)
    if not os.path.isfile(os.path.join(directory, "pin.toml")):
        raise InvalidInput(f"series {directory}: missing pin.toml")
    out: dict[str, bytes] = {}
    rendered = []
    for entry in sorted(os.listdir(directory)):
        full = os.path.join(directory, entry)
        if not os.path.isfile(full) or entry.endswith(NOTE_SUFFIX):
            continue
        if entry.endswith(MARKER_SUFFIX) and len(entry) > len(MARKER_SUFFIX):
            rendered.append(entry[: -len(MARKER_SUFFIX)])
            continue
        with open(full, "rb") as fh:
            out[entry] = fh.read()
    for name in rendered:
        out[name] = patch_data(directory, name)
    return dict(sorted(out.items()))


def materialize_in_place(directory: str) -> list[str]:
    """Write each marker's patch into the folder and remove the marker (the wheel build's step,
    on its own copy of the folder). Returns the patches written."""
    files = materialize(directory)
    written = []
    for entry in sorted(os.listdir(directory)):
        if entry.endswith(MARKER_SUFFIX) and entry[: -len(MARKER_SUFFIX)] in files:
            name = entry[: -len(MARKER_SUFFIX)]
            with open(os.path.join(directory, name), "wb") as fh:
                fh.write(files[name])
            os.remove(os.path.join(directory, entry))
            written.append(name)
    return written
