"""One exit-code boundary (patchkit.boundary) maps every error class, Ctrl-C and SIGTERM
to the contract's codes; tasks.py and the main() functions hold no copy of that mapping."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import patchkit
from patchkit import errors
from patchkit.boundary import exit_boundary, main_boundary

REPO = Path(__file__).resolve().parents[2]


def _all_error_classes():
    for mod in pkgutil.walk_packages(patchkit.__path__, "patchkit."):
        if mod.name.endswith("__main__"):
            continue
        importlib.import_module(mod.name)
    seen, todo = [], [errors.PatchkitError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo += cls.__subclasses__()
    return seen


ERROR_CLASSES = _all_error_classes()


def test_codes_live_in_errors():
    assert (
        errors.EXIT_OK,
        errors.EXIT_REFUSED,
        errors.EXIT_INVALID,
        errors.EXIT_INTERRUPTED,
        errors.EXIT_TERMINATED,
    ) == (0, 1, 2, 130, 143)
    assert issubclass(errors.Terminated, KeyboardInterrupt)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_error_class_maps_to_its_code(cls, capsys):
    message = "what happened\nand a second line"
    try:
        exc = cls(message)
    except TypeError:  # e.g. InventoryError(path, line, message)
        n = len(inspect.signature(cls).parameters)
        exc = cls(*(["where"] * (n - 1)), message)
    assert exc.exit_code in (1, 2)
    with pytest.raises(SystemExit) as info, exit_boundary("prog"):
        raise exc
    assert info.value.code == exc.exit_code
    err = capsys.readouterr().err
    assert err == f"prog: {' | '.join(exc.message.splitlines())}\n" and err.count("\n") == 1
    if type(exc).__init__ is errors.PatchkitError.__init__:
        assert err == "prog: what happened | and a second line\n"


@pytest.mark.parametrize(
    "exc, code, said",
    [
        (KeyboardInterrupt(), 130, "prog: interrupted; cleaned\n"),
        (errors.Terminated(), 143, "prog: terminated (SIGTERM); cleaned\n"),
        (errors.InvalidInput("bad"), 2, "prog: bad\n"),
    ],
)
def test_interrupts_and_json(exc, code, said, capsys):
    with pytest.raises(SystemExit) as info, exit_boundary("prog", interrupted="cleaned", json_op="apply"):
        raise exc
    assert info.value.code == code
    out, err = capsys.readouterr()
    assert err == said
    doc = json.loads(out)
    assert doc["schema"] == "patchkit.result/2" and doc["exit_code"] == code
    assert doc["error"] == said.split(": ", 1)[1].strip() and doc["op"] == "apply"


def test_bugs_keep_their_traceback():
    with pytest.raises(ValueError), exit_boundary("prog"):
        int("not a number")


def test_main_boundary_returns_the_code(capsys):
    @main_boundary("m", interrupted="x")
    def main(kind):
        if kind == "ok":
            return 0
        raise {"refused": errors.Refused("no"), "int": KeyboardInterrupt(), "term": errors.Terminated()}[kind]

    assert [main(k) for k in ("ok", "refused", "int", "term")] == [0, 1, 130, 143]


def _handlers(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            yield ast.unparse(node.type), node


def test_no_copy_of_the_mapping_outside_the_boundary():
    """The 8 copies (tasks.py, profile/__main__.py, profile/remote.py) are gone: no code outside
    patchkit/boundary.py turns the error root or an interrupt into an exit code or invoke.Exit."""
    files = [REPO / "tasks.py", *sorted((REPO / "patchkit").rglob("*.py"))]
    offenders = []
    for path in files:
        if path == REPO / "patchkit" / "boundary.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for caught, node in _handlers(tree):
            body = ast.unparse(node)
            if ("PatchkitError" in caught or "KeyboardInterrupt" in caught) and (
                "Exit(" in body
                or "return exc.exit_code" in body
                or "return 130" in body
                or "sys.exit" in body
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
        if "from invoke import" in path.read_text() and path.name == "tasks.py":
            assert "task" not in path.read_text().split("from invoke import", 1)[1].split("\n")[0]
    assert offenders == []


def test_sigterm_and_ctrl_c_through_a_real_main(tmp_path):
    """A real process: the profile main() under SIGTERM exits 143 with one line (the boundary)."""
    script = tmp_path / "m.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from patchkit.boundary import main_boundary\n"
        "from patchkit.profile.site import sigterm_interrupts\n"
        "@main_boundary('profile', interrupted='the tree was reverted')\n"
        "def main():\n"
        "    with sigterm_interrupts():\n"
        "        print('ready', flush=True)\n"
        "        time.sleep(30)\n"
        "sys.exit(main())\n"
    )
    for sig, code, word in (
        (signal.SIGTERM, 143, "terminated (SIGTERM)"),
        (signal.SIGINT, 130, "interrupted"),
    ):
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        )
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == code
        assert err == f"profile: {word}; the tree was reverted\n"


def test_an_interrupt_that_says_what_was_left_is_still_130(capsys):
    with (
        pytest.raises(SystemExit) as info,
        exit_boundary("profile", interrupted="servers stopped, targets reverted"),
    ):
        raise KeyboardInterrupt("cleanup incomplete: revert: gpu1: no answer")
    assert info.value.code == 130
    assert capsys.readouterr().err == "profile: interrupted; cleanup incomplete: revert: gpu1: no answer\n"


def test_a_program_for_the_patchkit_command_exits_2_on_parse_errors(capsys):
    from patchkit.boundary import program_class

    program = program_class()(name="patchkit", binary="patchkit")
    with pytest.raises(SystemExit) as info:
        program.run(["patchkit", "-r", str(REPO), "patch.apply", "--jobz", "3"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobz" in err
