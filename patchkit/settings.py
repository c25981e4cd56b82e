"""The settings of the ``patch.*`` tasks: one typed object, built once from invoke's config and
the command-line options, every default in one place (the option table below), every value checked.

An option beats the config; a bad value is InvalidInput (exit 2) naming the option (``--jobs``)
or the config key and the file it came from (``patchkit.jobs in /srv/invoke.yaml``). Unknown
``patchkit.*`` keys in any config file are refused the same way, so a typo is never ignored.
``patchkit.engine.series`` (the name older help texts used) is read as ``patchkit.series`` with
one line on stderr saying so.

The option table (OPTIONS: Option records) holds each option once, with its config key,
default, help text and check: the patch.* target options and patchkit.* keys, the profile
tasks' options and patchkit.profile.* keys, and every patchkit.profile.remote key. The invoke
tasks (their signatures too, for the patch.* target tasks), ``python -m patchkit.profile``,
``python -m patchkit.profile.remote``, RemoteConfig and the example config (invoke.yaml, through
``invoke patch.gen-config``) take their help texts and defaults from it.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from patchkit.errors import InvalidInput
from patchkit.transport import kind_settings
from patchkit.transport.ssh import CONNECT_TIMEOUT_S

# The patch.* defaults (PATCHKIT_DEFAULTS, handed to invoke by tasks.py: ns.configure) are the
# option table's rows keyed at the top of ``patchkit:`` (below, after the table).
# Keys read by other tasks (their own objects check their values), and the deprecated alias.
OTHER_KEYS = {"profile"}
DEPRECATED = {"engine": {"series": "series"}}
# patchkit.profile keys read under their new name, with a line asking to rename them
PROFILE_RENAMED = {"series_dir": "series"}
LAYOUTS = ("auto", "checkout", "installed")


# -- invoke's config, file by file ---------------------------------------------------------------


def config_layers(config) -> list[tuple[str, dict]]:
    """(where, patchkit mapping) for each of invoke's config levels, lowest precedence first."""
    layers = []
    for name, where in (
        ("_system", "_system_path"),
        ("_user", "_user_path"),
        ("_project", "_project_path"),
        ("_runtime", "_runtime_path"),
    ):
        data = getattr(config, name, None) or {}
        node = data.get("patchkit") if isinstance(data, dict) else None
        if node is not None:
            layers.append((str(getattr(config, where, None) or name.strip("_")), node))
    return layers


def config_files(config) -> list[str]:
    """The config files invoke read, lowest precedence first (files without a patchkit section
    included)."""
    read = []
    for name in ("system", "user", "project", "runtime"):
        path = getattr(config, f"_{name}_path", None)
        # invoke counts a missing *.py config as found (it loads it as empty): existing files only
        if getattr(config, f"_{name}_found", None) and path and os.path.isfile(path):
            read.append(str(path))
    return read


def config_places(config) -> list[str]:
    """The config files invoke looks for (YAML spelling), whether they exist or not."""
    midfix = getattr(config, "file_prefix", None) or getattr(config, "prefix", None) or "invoke"
    places = []
    for name in ("system", "user", "project"):
        prefix = getattr(config, f"_{name}_prefix", None)
        if prefix is None:
            continue
        names = getattr(config, "PROJECT_NAMES", None) if name == "project" else None
        for base in names or (midfix,):
            places.append(f"{prefix}{base}.yaml")
    return places


def config_where(config) -> str:
    """Where a setting would have come from, for "no patchkit.series in …" messages: the files
    read, or the places looked at when none was found."""
    read = config_files(config)
    if read:
        return ", ".join(read)
    places = config_places(config)
    return "any config file (none found" + (f"; looked for {', '.join(places)}" if places else "") + ")"


# the top-level sections a config file may hold besides patchkit: invoke's own (Config.global_defaults)
INVOKE_SECTIONS = ("run", "runners", "sudo", "tasks", "timeouts")


def did_you_mean(word: str, known, prefix: str = "") -> str:
    """ " (did you mean X?)" for the closest of ``known``, or ""."""
    import difflib

    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def check_sections(config) -> None:
    """Refuse a top-level section that is neither patchkit nor one of invoke's own (a misspelled
    ``patchkt:`` would otherwise leave every setting under it unread), naming section and file.
    invoke's per-user and system files (~/.invoke.yaml, /etc/invoke.yaml) serve every invoke
    project: there only a near miss of ``patchkit`` is refused."""
    import difflib

    known = ("patchkit", *INVOKE_SECTIONS)
    for name in ("system", "user", "project", "runtime"):
        data = getattr(config, f"_{name}", None)
        path = str(getattr(config, f"_{name}_path", None) or name)
        if not isinstance(data, dict):
            continue
        shared = name in ("system", "user") and os.path.basename(path).lstrip(".").startswith("invoke.")
        for key in data:
            if key in known:
                continue
            near = difflib.get_close_matches(str(key), ["patchkit"], n=1, cutoff=0.6)
            if shared and not near:
                continue
            raise InvalidInput(
                f"{path}: unknown section {key} (known: {', '.join(known)})" + did_you_mean(str(key), known)
            )


def check_config(config) -> list[str]:
    """Refuse unknown top-level sections and ``patchkit.*`` keys (InvalidInput naming key and
    file); return notes for deprecated names (printed once by the caller)."""
    check_sections(config)
    notes = []
    for where, node in config_layers(config):
        if not isinstance(node, dict):
            raise InvalidInput(f"{where}: patchkit must be a mapping of settings, not {node!r}")
        for key, value in node.items():
            if key in DEPRECATED:
                inner = value if isinstance(value, dict) else {}
                bad = sorted(set(inner) - set(DEPRECATED[key])) if isinstance(value, dict) else [""]
                if bad:
                    raise InvalidInput(
                        f"{where}: unknown setting patchkit.{key}{'.' + bad[0] if bad[0] else ''}"
                    )
                for old, new in DEPRECATED[key].items():
                    if old in inner:
                        notes.append(
                            f"patchkit: {where}: patchkit.{key}.{old} is the old name "
                            f"of patchkit.{new}; read as patchkit.{new} (rename it)"
                        )
            elif key not in PATCHKIT_DEFAULTS and key not in OTHER_KEYS:
                known = sorted(set(PATCHKIT_DEFAULTS) | OTHER_KEYS)
                raise InvalidInput(
                    f"{where}: unknown setting patchkit.{key} (known: {', '.join(known)})"
                    + did_you_mean(str(key), known, "patchkit.")
                )
            elif key == "profile" and value is not None:
                if not isinstance(value, dict):
                    raise InvalidInput(f"{where}: patchkit.profile must be a mapping")
                unknown = sorted(set(value) - PROFILE_KEYS)
                if unknown:
                    raise InvalidInput(
                        f"{where}: unknown setting patchkit.profile.{unknown[0]}"
                        + did_you_mean(str(unknown[0]), sorted(PROFILE_KEYS), "patchkit.profile.")
                    )
                remote = value.get("remote")
                if remote is not None and not isinstance(remote, dict):
                    raise InvalidInput(f"{where}: patchkit.profile.remote must be a mapping")
                unknown = sorted(set(remote or {}) - set(REMOTE_DEFAULTS))
                if unknown:  # the option table's keys (RemoteConfig refuses the same, later)
                    raise InvalidInput(
                        f"{where}: unknown setting patchkit.profile.remote.{unknown[0]}"
                        + did_you_mean(str(unknown[0]), sorted(REMOTE_DEFAULTS), "patchkit.profile.remote.")
                    )
                for old, new in PROFILE_RENAMED.items():
                    if old in value:
                        notes.append(
                            f"patchkit: {where}: patchkit.profile.{old} is the old name of "
                            f"patchkit.profile.{new}; read as patchkit.profile.{new} (rename it)"
                        )
    return notes


_SAID: set[str] = set()


def say_notes(config, stream=None) -> None:
    """Check the config (check_config) and print each deprecation note once per process."""
    for note in check_config(config):
        if note not in _SAID:
            _SAID.add(note)
            print(note, file=stream or sys.stderr)


def config_value(config, key: str, default=None):
    """A checked ``patchkit.<key>`` for tasks without a settings object of their own."""
    say_notes(config)
    value, _ = _configured(config, key)
    return default if value is None else value


def _configured(config, key: str) -> tuple[Any, str]:
    """(value, where) of a patchkit key: the highest config level that sets it, deprecated
    aliases read at their own level; (default, "") when no file sets it."""
    value, where = None, ""
    for layer_where, node in config_layers(config):
        for old_parent, names in DEPRECATED.items():
            for old, new in names.items():
                inner = node.get(old_parent)
                if new == key and isinstance(inner, dict) and inner.get(old) is not None:
                    value, where = inner[old], f"patchkit.{old_parent}.{old} in {layer_where}"
        if node.get(key) is not None:
            value, where = node[key], f"patchkit.{key} in {layer_where}"
    if where:
        return value, where
    node = config.get("patchkit", {}) or {}  # defaults and the environment
    got = node.get(key) if hasattr(node, "get") else None
    return (PATCHKIT_DEFAULTS.get(key) if got is None else got), (
        f"patchkit.{key}" if got is not None else ""
    )


# -- value checks, shared by every task ------------------------------------------------------------


def _name(option: str, where: str) -> str:
    return where or f"--{option.rstrip('_').replace('_', '-')}"


def whole_number(value, minimum: int = 1) -> int | None:
    """The one rule for counts given as options or keys (positive_int here, profile.sweep's
    repeat, --sample): a whole number written as one (text is stripped; a bool, 2.5 or "2.0" is
    not one), ``minimum`` or more. The number, or None: each caller words its own refusal."""
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    return None if number is None or number < minimum else number


def positive_int(value, option: str, where: str = "", minimum: int = 1) -> int:
    number = whole_number(value, minimum)
    if number is None:
        raise InvalidInput(f"{_name(option, where)} {value!r}: a whole number, {minimum} or more")
    return number


def positive_number(value, zero: bool = False) -> float | None:
    """The one rule for seconds, minutes and sizes, wherever they are read (seconds() here,
    RemoteConfig's timeouts, --budget, profile.collect's max_fetch_mb): a finite number (text
    is stripped; a bool is not a number) more than 0 (``zero``: 0 allowed too). The number, or
    None when ``value`` breaks the rule: each caller words its own refusal."""
    try:
        got = float(str(value).strip()) if not isinstance(value, bool) else math.nan
    except ValueError:
        got = math.nan
    if not math.isfinite(got) or got < 0 or (got == 0 and not zero):
        return None
    return got


def seconds(value, option: str, where: str = "", zero: bool = False) -> float | None:
    """A positive, finite number of seconds (``zero``: 0 allowed); None stays None."""
    if value is None:
        return None
    number = positive_number(value, zero)
    if number is None:
        limit = "0 or more" if zero else "more than 0"
        raise InvalidInput(f"{_name(option, where)} {value!r}: a number of seconds, {limit}")
    return number


def number(value, option: str, where: str = "", low: float | None = None, high: float | None = None) -> float:
    try:
        got = float(str(value).strip()) if not isinstance(value, bool) else math.nan
    except ValueError:
        got = math.nan
    if not math.isfinite(got) or (low is not None and got < low) or (high is not None and got > high):
        span = (
            f" from {low:g} to {high:g}"
            if low is not None and high is not None
            else f", {low:g} or more"
            if low is not None
            else ""
        )
        raise InvalidInput(f"{_name(option, where)} {value!r}: a number{span}")
    return got


def positive(value, option: str, where: str = "") -> float:
    """More than 0 (positive_number's rule): profile.remote's seconds, minutes and sizes."""
    got = positive_number(value)
    if got is None:
        raise InvalidInput(f"{_name(option, where)} {value!r} must be a positive number")
    return got


def minutes(value, option: str, where: str = "") -> float:
    """A number of minutes, more than 0 (positive_number's rule): profile.remote's budget."""
    got = positive_number(value)
    if got is None:
        raise InvalidInput(f"{_name(option, where)} {value!r}: a number of minutes, more than 0")
    return got


def whole_in(low: int, high: int) -> Callable[..., int]:
    """The check of a whole number from ``low`` to ``high`` (whole_number's rule)."""

    def check(value, option: str, where: str = "") -> int:
        got = whole_number(value, low)
        if got is None or got > high:
            raise InvalidInput(f"{_name(option, where)} {value!r}: a whole number {low}..{high}")
        return got

    return check


# the one rule of every on/off option and setting: a YAML boolean, or one of these words in any case
# (a quoted "false" in a config file is false, never a non-empty and therefore true string)
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


def boolean(value, option: str, where: str = "") -> bool:
    """true or false: a YAML boolean, or TRUE_WORDS / FALSE_WORDS in any case (the number 1 or 0
    too); anything else is InvalidInput naming the option or key, the value and the spellings."""
    if isinstance(value, bool):
        return value
    said = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if said in TRUE_WORDS:
        return True
    if said in FALSE_WORDS:
        return False
    raise InvalidInput(
        f"{_name(option, where)} {value!r}: true or false "
        f"(any case: {', '.join(f'{t}/{f}' for t, f in zip(TRUE_WORDS, FALSE_WORDS))})"
    )


def choice(value, option: str, choices, where: str = "") -> str:
    if value not in choices:
        raise InvalidInput(f"{_name(option, where)} {value!r}: one of {', '.join(choices)}")
    return value


def text(value, option: str, where: str = "") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{_name(option, where)} {value!r}: a non-empty string")
    return value


def existing_file(value, option: str, where: str = "", cwd: str = "") -> str | None:
    """A file that exists (~ and paths relative to ``cwd`` resolved); None stays None."""
    if value is None:
        return None
    path = os.path.join(cwd, os.path.expanduser(text(value, option, where) or ""))
    if not os.path.isfile(path):
        raise InvalidInput(f"{_name(option, where)} {value!r}: no such file")
    return path


def existing_dir(value, option: str, where: str = "", cwd: str = "") -> str | None:
    """A folder that exists (~ and paths relative to ``cwd`` resolved); None stays None."""
    if value is None:
        return None
    path = os.path.abspath(os.path.join(cwd, os.path.expanduser(text(value, option, where) or "")))
    if not os.path.isdir(path):
        raise InvalidInput(f"{_name(option, where)} {value!r}: no such folder")
    return path


def output_dir(value, option: str, where: str = "") -> str:
    """A folder outputs go into: made now (it would be anyway), so a bad one fails first."""
    path = os.path.abspath(os.path.expanduser(text(value, option, where) or ""))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"{_name(option, where)} {value!r}: cannot create it ({exc.strerror})") from None
    return path


def strings(value, option: str, where: str = "") -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidInput(f"{_name(option, where)} {value!r}: a list of non-empty strings")
    return list(value)


# -- profile.remote's choices and lists (the rows' checks; RemoteConfig keeps the checks that
# join several settings) ------------------------------------------------------------------------

STOP_SIGNALS = ("INT", "TERM", "HUP", "QUIT", "USR1", "USR2")
TIMER_MODES = ("events", "sync", "host", "off")
HEALTH_ON = ("first", "all")
UNTIL = ("decided",)
BLOCKS = ("fleet", "hosts")  # several targets: one fleet serving together, or each a block
# a GPU index or UUID, optionally "@label": one GPU named twice as 0@a,0@b serves two servers
# at once (they share it: to exercise a blocked sweep, not to measure)
GPU_ID = re.compile(r"(\d{1,4}|(GPU|MIG)-[A-Za-z0-9/-]{1,120})(@[A-Za-z0-9_-]{1,16})?\Z")
CPU_LIST = re.compile(r"\d{1,5}(-\d{1,5})?(,\d{1,5}(-\d{1,5})?)*\Z")


def one_of(*choices: str, fold: bool = False) -> Callable[..., str]:
    """The check of a word out of ``choices`` ("a or b", or "a, b, c"). ``fold``: a config
    file's value is stripped and lower-cased first (YAML and TOML spell it loosely: Decided,
    Hosts); an option's value is taken as typed."""
    said = " or ".join(choices) if len(choices) <= 2 else ", ".join(choices)

    def check(value, option: str, where: str = "") -> str:
        if fold and where:
            value = str(value).strip().lower()
        if value not in choices:
            raise InvalidInput(f"{_name(option, where)} {value!r}: {said}")
        return value

    return check


def stop_signals(value, option: str, where: str = "") -> list[str]:
    """Signals sent in turn before KILL: a list, or text with commas or spaces between them;
    each out of STOP_SIGNALS, with or without SIG, any case. Text naming none is refused (an
    empty list given as a list: KILL at once)."""
    if isinstance(value, str):
        items = [s for s in re.split(r"[,\s]+", value) if s]
        if not items:
            raise InvalidInput(f"{_name(option, where)} {value!r}: signals such as INT, TERM")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise InvalidInput(f"{_name(option, where)} {value!r}: signals such as INT, TERM")
    signals = [str(s).upper().removeprefix("SIG") for s in items]
    bad = [s for s in signals if s not in STOP_SIGNALS]
    if bad:
        raise InvalidInput(
            f"{_name(option, where)} {bad}: choose from {', '.join(STOP_SIGNALS)} (KILL always comes last)"
        )
    return signals


def gpu_list(value, option: str, where: str = "") -> list[str]:
    """``"0,1,2,3"`` (or a list) -> ["0", "1", "2", "3"]: CUDA_VISIBLE_DEVICES values, one per
    server (indices or GPU-/MIG- UUIDs, each optionally "@label": one GPU labelled twice serves
    two servers), none twice."""
    name = _name(option, where)
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    gpus = [str(g).strip() for g in items]
    if not gpus or not all(gpus):
        raise InvalidInput(f"{name} {value!r}: a comma-separated list such as 0,1,2,3")
    bad = [g for g in gpus if not GPU_ID.match(g)]
    if bad:
        raise InvalidInput(f"{name} {', '.join(map(repr, bad))}: GPU indices (0,1,...) or GPU-/MIG- UUIDs")
    twice = sorted({g for g in gpus if gpus.count(g) > 1})
    if twice:
        raise InvalidInput(
            f"{name}: {', '.join(twice)} given twice (two servers on one GPU on purpose: "
            "label them, e.g. 0@a,0@b)"
        )
    return gpus


def cpu_lists(value, option: str, where: str = "") -> list[str]:
    """``"0-15"`` -> ["0-15"]; ``"0-15;16-31"`` (or a list) -> one CPU list per block of a
    sweep; each as taskset -c writes it, ranges rising."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(";")
    lists = [str(c).strip().replace(" ", "") for c in items]
    for said in lists:
        ok = bool(CPU_LIST.match(said))
        if ok:
            for part in said.split(","):
                low, _, high = part.partition("-")
                ok = ok and (not high or int(low) <= int(high))
        if not ok:
            raise InvalidInput(
                f"{_name(option, where)} {said!r}: a CPU list such as 0-15 or 0,2,4-7 "
                "(one per block, ';' between them)"
            )
    return lists


def absolute_path(value, option: str, where: str = "") -> str:
    """An absolute path on a target (no NUL or line break)."""
    said = str(value)
    if not said.startswith("/") or any(ch in said for ch in "\0\n\r"):
        raise InvalidInput(f"{_name(option, where)} {value!r} must be an absolute path")
    return said


def http_url(value, option: str, where: str = "") -> str:
    if not re.match(r"https?://[^\s]+\Z", str(value)):
        raise InvalidInput(f"{_name(option, where)} {value!r} is not an http(s) URL")
    return str(value)


def program(value, option: str, where: str = "") -> str:
    """A command line naming a program first (shell words), e.g. ``python3`` or ``uv run python``."""
    import shlex

    said = text(value, option, where)
    try:
        words = shlex.split(str(said))
    except ValueError as exc:
        raise InvalidInput(f"{_name(option, where)} {value!r}: {exc}") from None
    if not words or words[0].startswith("-"):
        raise InvalidInput(f"{_name(option, where)} {value!r} must name a program")
    return str(said)


def file_or_off(value, option: str, where: str = "") -> str:
    said = str(value)
    if not said.strip() or "\0" in said:
        raise InvalidInput(f"{_name(option, where)} {value!r}: a file or off")
    return said


def kind_option(value, where: str, option: str) -> str | None:
    """A target kind's own setting (--k8s-container, --kube-context, --kubectl), checked as its
    kind checks it for a target, whatever the targets are (a typo is said before anything runs)."""
    setting = kind_settings()[option]
    check, what = setting.check, setting.what
    value = text(value, option, where)
    if value is None:
        return None
    try:
        return check(value, "")
    except InvalidInput as exc:
        explain = exc.message[exc.message.rfind(" (") :] if " (" in exc.message else ""
        raise InvalidInput(f"{_name(option, where)} {value!r}: bad {what}{explain}") from None


# -- the option table ------------------------------------------------------------------------------
# Each option once, with its config key, default, help text and check. The invoke
# tasks take their help texts from here (task_help), the argparse front ends their add_argument
# calls (add_argument), the library functions and RemoteConfig their defaults (default,
# PROFILE_DEFAULTS, REMOTE_DEFAULTS). A help text is formatted with the option's default
# (``{default}``, ``{default:g}``), so the number it states is the one used.

SAME = object()  # an Option's default: the default of the option that owns its key (listed earlier)


@dataclass(frozen=True)
class DefaultOf:
    """An Option's default: the default of another config key (its owner listed earlier), e.g.
    profile.remote.jobs defaults to patchkit.jobs's default."""

    key: str


@dataclass(frozen=True)
class Option:
    """One option: ``name`` on the command line (--name, the task's parameter), the config key
    under ``patchkit:`` it reads (dotted; None: an option only), its default (None: not given,
    decided where the help says), its help text, its check ``check(value, option, where)``
    (returns the value; InvalidInput naming the option or the key), and the front ends offering
    it (invoke task names, or an argparse program's name)."""

    name: str
    key: str | None = None
    default: Any = None
    help: str = ""
    check: Callable[..., Any] | None = None
    fronts: tuple[str, ...] = ()
    doc: str | None = None  # its comment in the example config (invoke.yaml; a newline continues
    # it on the next line); None: not shown there
    example: Any = SAME  # the value the example config shows (SAME: the default)
    commented: bool = True  # the example config shows it commented out (``# jobs: 8``), else set
    fallback: str | None = None  # a top-level key read when this key is not set (profile.remote's
    # series, targets, layout, ssh_*: patchkit.series, ...)

    @property
    def shown(self) -> Any:
        return self.default if self.example is SAME else self.example

    @property
    def help_text(self) -> str:
        return self.help.format(default=self.default)


def repeat_count(value, option: str, where: str = "") -> int:
    """Repetitions (profile.sweep's passes per point, profile.remote's starts per point or
    rounds): a whole number from 1 to 1000 (whole_number's rule)."""
    got = whole_number(value, 1)
    if got is None or got > 1000:
        raise InvalidInput(
            f"{_name(option, where)} {value!r}: a whole number of repetitions "
            f"({_name(option, '')} must be a whole number of at least 1, at most 1000)"
        )
    return got


def sample_count(value, option: str, where: str = "") -> int:
    """PATCHKIT_TIMER_SAMPLE: time about one cycle in N, a whole number from 1 (every cycle)."""
    got = whole_number(value, 1)
    if got is None or got > 1 << 30:
        raise InvalidInput(f"{_name(option, where)} {value!r}: a whole number >= 1 (1 = time every cycle)")
    return got


def command_line(value, option: str, where: str = "") -> str:
    """A shell command line run by ``sh -c`` on a target (a list is joined with shlex.join)."""
    import shlex

    if isinstance(value, (list, tuple)):
        value = shlex.join(str(v) for v in value)
    if value == "":
        raise InvalidInput(f"{_name(option, where)} '': an empty value (a shell command line)")
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{_name(option, where)} is missing (a shell command line)")
    if "\0" in value:
        raise InvalidInput(f"{_name(option, where)} contains a NUL byte")
    return value


def folder_path(value, option: str, where: str = "") -> str:
    """A folder to write into, made later (patch.export, patch.rebase --out): a non-empty path
    that is not a file."""
    said = text(value, option, where) or ""
    if os.path.exists(os.path.expanduser(said)) and not os.path.isdir(os.path.expanduser(said)):
        raise InvalidInput(f"{_name(option, where)} {value!r}: a file, not a folder")
    return said


def relative_paths(value, option: str, where: str = "") -> list[str]:
    """Paths inside a tree (patch.new --new-file): non-empty, not absolute."""
    paths = list(value or [])
    for path in paths:
        if not isinstance(path, str) or not path.strip() or os.path.isabs(path):
            raise InvalidInput(f"{_name(option, where)} {path!r}: a path relative to the tree")
    return paths


def package_prefix(value, option: str, where: str = "") -> str:
    """The folder an installed layout drops (upstream.pin --package-prefix): relative, ending in '/'."""
    said = str(value)
    if said.startswith("/") or ".." in said.split("/") or not said.endswith("/"):
        raise InvalidInput(f"{_name(option, where)} {value!r}: a relative folder ending in '/', e.g. python/")
    return said


def _zero_or_more(value, option: str, where: str = "") -> float:
    return number(value, option, where, low=0)


def _count0(value, option: str, where: str = "") -> int:
    return positive_int(value, option, where, minimum=0)


def _fraction(value, option: str, where: str = "") -> float:
    return number(value, option, where, low=0, high=1)


def _size_mb(value, option: str, where: str = "") -> float:
    return number(value, option, where, low=0)


def _layout(value, option: str, where: str = "") -> str:
    return choice(value, option, LAYOUTS, where)


def _kind(value, option: str, where: str = "") -> str | None:
    return kind_option(value, where, option)


def need_inventory(inventory, limit, root, where: str = "") -> None:
    """--limit and --root choose hosts of an inventory: refused (exit 2) without one, the same
    for the patch tasks and profile.remote. ``where``: the settings' name when they came from a
    config (RemoteConfig: ``profile.remote``), so the message names the keys."""
    if (limit or root) and not inventory:
        if where:
            raise InvalidInput(
                f"{where}: limit and root choose hosts of an inventory: give inventory (or --inventory FILE)"
            )
        raise InvalidInput("--limit and --root choose hosts of an inventory: give --inventory FILE")


# the inventory options' help texts, the patch tasks' and profile.remote's (``default``: where the
# value comes from when the option is not given)
def _inventory_help(default: str) -> str:
    return (
        "Ansible inventory (INI, or YAML as .yml/.yaml): its hosts become SSH targets "
        f"of the fleet, besides any --target (default: {default})"
    )


def _limit_help(default: str) -> str:
    return (
        "with --inventory: Ansible host pattern, e.g. 'gpu', 'gpu1:gpu2', 'gpu:!gpu3', "
        f"'gpu:&rack1' (default: {default})"
    )


def _root_help(default: str) -> str:
    return f"with --inventory: the target path on every host (default: {default})"


# the defaults of counts left to the code that uses them (their options default to None: "not
# given"), stated here so that help texts and the example config say the number used
EMBEDDED_SERIES = "transformers-v5.17.0"  # profile.run/sweep's series (the embedded default)
REMOTE_SERIES = "sglang-v0.5.9"  # profile.remote's series when none is set (nor patchkit.series)
SWEEP_REPEAT = 3  # profile.sweep: measured passes per point (one warm process: less spread)
REMOTE_REPEAT = 5  # profile.remote --matrix: server starts per point
SPREAD_CACHE = (
    "~/.cache/patchkit/spread.json"  # profile.remote.spread_cache when neither it nor the variable is set
)
MAX_ROUNDS = 20  # profile.remote --budget/--until: a sequential sweep's rounds at most

_RUN_SWEEP = ("profile.run", "profile.sweep")
_REMOTE_MAIN = "python -m patchkit.profile.remote"
# the patch tasks that take the target options (tasks.py builds their signatures from these rows)
# the authoring tasks that read a series and a pristine tree
_AUTHOR = ("patch.edit", "patch.new", "patch.refresh")
TREE_LAYOUTS = ("checkout", "installed")  # patch.edit's and upstream.fetch's --layout
PREDICT_BOOTSTRAP = 400  # profile.predict --bootstrap: resamples (patchkit.report.predict.BOOTSTRAP)
PROFILE_SIZES = ("default", "cpu", "gpu", "ci")  # profile.run --size (patchkit.profile.workload's SIZES)
DEVICES = ("auto", "cpu", "cuda")
APPLY_MODES = ("sed", "import")  # patch.apply / profile.run --mode (patchkit.engine.importmode)
PATCH_TASKS = ("patch.check", "patch.verify", "patch.apply", "patch.revert", "patch.status", "patch.unlock")

_TABLE: tuple[Option, ...] = (
    # the patch.* tasks (and the target options of patch.rebase and profile.collect), patchkit.*
    Option(
        "series",
        key="series",
        help="series folder (pin.toml + series + patches), a shipped series' name (e.g. "
        "sglang-v0.5.9), or 'auto': the shipped series pinned to exactly the target's files (per "
        "host on a fleet); default: patchkit.series in invoke.yaml (patchkit.yaml when installed)",
        check=text,
        fronts=PATCH_TASKS,
        doc="",
        example=f"patches/{REMOTE_SERIES}",
        commented=False,
    ),
    Option(
        "target",
        key="targets",
        default=[],
        help="target: a directory, ssh://[user@]host[:port]/path, host:/path, docker://C/path or "
        "k8s:NAMESPACE/SELECTOR:/path (every running pod the label selector matches); "
        "repeat for a fleet (default: patchkit.targets in invoke.yaml / patchkit.yaml)",
        check=strings,
        fronts=PATCH_TASKS,
        doc='e.g. ["ssh://gpu1/opt/sglang", "ssh://gpu2/opt/sglang"]',
    ),
    Option(
        "json",
        default=False,
        help="print the outcome as JSON (stable keys) instead of a table",
        fronts=PATCH_TASKS,
    ),
    Option(
        "layout",
        key="layout",
        default="auto",
        help="auto, checkout (paths as in the patches) or installed (drop package_prefix); "
        "default: patchkit.layout, {default}",
        check=_layout,
        fronts=(*PATCH_TASKS, "patch.rebase"),
        doc="auto | checkout | installed",
    ),
    Option(
        "jobs",
        key="jobs",
        default=8,
        help="hosts worked on in parallel (fleets; default: patchkit.jobs, {default})",
        check=positive_int,
        fronts=PATCH_TASKS,
        doc="hosts worked on in parallel",
    ),
    Option(
        "timeout",
        key="timeout",
        help="seconds allowed per target for the whole operation (default: patchkit.timeout, none)",
        check=seconds,
        fronts=(*PATCH_TASKS, "patch.rebase"),
        doc="seconds per target and operation",
    ),
    Option(
        "ssh_config",
        key="ssh_config",
        help="ssh_config file to use (ssh -F); default: your own ~/.ssh/config",
        check=existing_file,
        fronts=(*PATCH_TASKS, "patch.rebase", "profile.collect"),
        doc="e.g. ~/.ssh/config.d/gpu-fleet",
    ),
    Option("ssh_options", key="ssh_options", default=[], check=strings, doc='e.g. ["ProxyJump=bastion"]'),
    Option(
        "keep_journal",
        key="keep_journal",
        default=False,
        check=boolean,
        help="keep the operation journal on the target in .patchkit/journal (default: it is printed in "
        "the answer and removed, leaving no trace; patchkit.keep_journal in invoke.yaml / patchkit.yaml)",
        fronts=("patch.revert",),
        doc="revert: true keeps .patchkit/journal on the target (else it goes into the answer)",
    ),
    Option(
        "ssh_persist",
        key="ssh_persist",
        default=60,
        help="seconds an idle SSH connection stays up for the next command to that host "
        "(default: patchkit.ssh_persist, {default}); 0: one connection per command",
        check=lambda value, option, where="": seconds(value, option, where, zero=True),
        fronts=(*PATCH_TASKS, "profile.collect"),
        doc="seconds an idle SSH connection waits for the next command (one\n"
        "ControlMaster per host in a private 0700 directory); 0: off",
    ),
    Option(
        "inventory",
        key="inventory",
        help=_inventory_help("patchkit.inventory"),
        check=text,
        fronts=PATCH_TASKS,
        doc="Ansible inventory (INI or .yml) used when no --target is given",
    ),
    Option("limit", help=_limit_help("all hosts"), check=text, fronts=PATCH_TASKS),
    Option("root", help=_root_help("each host's patchkit_root variable"), check=text, fronts=PATCH_TASKS),
    # the target kinds' own settings (k8s: targets: kubectl, k8s_container, kube_context),
    # declared by each kind (patchkit.transport.TargetKind.settings)
    *(
        Option(
            name,
            key=name,
            help=setting.help_after(f"patchkit.{name}"),
            check=_kind,
            fronts=PATCH_TASKS,
            doc=setting.help_after(),
        )
        for name, setting in kind_settings().items()
    ),
    Option(
        "container",
        key="container",
        help="run inside this container on the target (docker exec -i NAME), e.g. with ssh://",
        check=text,
        fronts=(*PATCH_TASKS, "patch.rebase", "profile.collect"),
        doc="run inside this container on each target (docker exec -i NAME)",
    ),
    Option(
        "exec_",
        key="exec",
        help="run through this command prefix, e.g. 'kubectl exec -i POD --' or 'chroot /srv/root'",
        check=text,
        fronts=(*PATCH_TASKS, "patch.rebase", "profile.collect"),
        doc='run through this command prefix, e.g. "kubectl exec -i POD --"',
    ),
    Option(
        "wheelhouse",
        key="wheelhouse",
        help="a folder of wheels pip reads instead of the package index (default: patchkit.wheelhouse)",
        check=existing_dir,
        fronts=("patch.rebase",),
        doc="patch.rebase: a folder of wheels pip reads instead of the package index",
    ),
    Option(
        "dry_run",
        default=False,
        help="verify only: stage into a temporary directory on the target, check the result, write "
        "nothing under the root",
        fronts=("patch.apply",),
    ),
    Option(
        "show_script",
        default=False,
        help="print the exact shell program (sed scripts included) sent to each target",
        fronts=("patch.apply",),
    ),
    Option(
        "mode",
        default="sed",
        help="sed: write the patched files on the target (revert restores them); import: write "
        "nothing in the target, only a hook folder the server gets first on its PYTHONPATH, which "
        "applies the series in memory as Python imports the pinned modules (read-only images)",
        check=one_of(*APPLY_MODES),
        fronts=("patch.apply", "profile.run"),
    ),
    Option(
        "hook_dir",
        help="--mode import: the folder to write the hook into (new or empty; default: a fresh "
        "temporary folder); never inside the target",
        check=folder_path,
        fronts=("patch.apply",),
    ),
    Option(
        "force",
        default=False,
        help="discard files modified after apply (they are kept in .patchkit/trash) instead of refusing",
        fronts=("patch.revert",),
    ),
    # profile.run / profile.sweep (the embedded default; also `python -m patchkit.profile`),
    # patchkit.profile.* in invoke.yaml
    Option(
        "size",
        key="profile.size",
        default="default",
        help="default (gpu where CUDA is available, else cpu) | cpu | gpu | ci (seconds)",
        check=one_of(*PROFILE_SIZES),
        fronts=_RUN_SWEEP,
        doc="default (gpu where CUDA is available, else cpu) | cpu | gpu | ci",
    ),
    Option(
        "timer",
        key="profile.timer",
        help="events | sync | host | off (default: events on CUDA, host otherwise)",
        check=one_of(*TIMER_MODES),
        fronts=_RUN_SWEEP,
        doc="events | sync | host | off (null: events on CUDA, host otherwise)",
    ),
    Option(
        "device",
        key="profile.device",
        default="auto",
        help="auto | cpu | cuda",
        check=one_of(*DEVICES),
        fronts=_RUN_SWEEP,
        doc="auto | cpu | cuda",
    ),
    Option(
        "seed",
        key="profile.seed",
        default=0,
        help="seed for the random models and prompts",
        check=_count0,
        fronts=_RUN_SWEEP,
        doc="seed for the random models and prompts",
    ),
    Option(
        "timeout",
        key="profile.timeout",
        help="seconds allowed for the workload",
        check=seconds,
        fronts=_RUN_SWEEP,
        doc="seconds allowed for the workload",
    ),
    Option(
        "wheelhouse",
        key="profile.wheelhouse",
        help="folder of wheels to install from instead of the package index",
        check=existing_dir,
        fronts=_RUN_SWEEP,
        doc="a folder of wheels to install transformers from instead of the index",
    ),
    Option(
        "out",
        key="profile.out",
        default="profile-out",
        help="reports go to OUT/<timestamp>/ (default: {default})",
        check=text,
        fronts=_RUN_SWEEP,
        doc="reports in OUT/<timestamp>/",
    ),
    Option(
        "site",
        key="profile.site",
        help="installed tree to patch (default: .work/tf-site, installed from the pinned wheel)",
        check=folder_path,
        fronts=_RUN_SWEEP,
        doc="the installed tree to patch (null: .work/tf-site, from the pinned wheel)",
    ),
    Option(
        "series",
        key="profile.series",
        help=f"series folder, a shipped series' name, or 'auto' (chosen from --site's files); default: "
        f"patches/{EMBEDDED_SERIES}",
        check=folder_path,
        fronts=_RUN_SWEEP,
        doc=f"series folder or auto (null: patches/{EMBEDDED_SERIES})",
    ),
    Option(
        "matrix",
        key="profile.matrix",
        default="num_assistant_tokens=2,4,8",
        help="points, e.g. 'num_assistant_tokens=2,4,8;assistant_confidence_threshold=0,0.4' "
        "(keys: num_assistant_tokens|k, assistant_confidence_threshold|conf, schedule)",
        fronts=("profile.sweep",),
        doc="profile.sweep: its points",
    ),
    Option(
        "sample",
        key="profile.sample",
        help="time about one cycle in N, chosen at random (PATCHKIT_TIMER_SAMPLE; default 1: every cycle)",
        check=sample_count,
        fronts=("profile.run",),
        doc="profile.run: PATCHKIT_TIMER_SAMPLE, time about one cycle in N",
        example=1,
    ),
    Option(
        "warmup",
        key="profile.warmup",
        default=True,
        check=boolean,
        help="warm up (first prompt, plain and assisted) before the measured pass; default on, "
        "--no-warmup: off; the report keeps the measured window's cycles only",
        fronts=_RUN_SWEEP,
        doc="false: no warm-up pass",
    ),
    Option(
        "repeat",
        key="profile.repeat",
        help=f"measured passes per point, in rotated order (default {SWEEP_REPEAT}); the verdict names a best "
        "point only when its ratio to the baseline is significantly the highest",
        check=repeat_count,
        fronts=("profile.sweep",),
        doc="profile.sweep: measured passes per point",
        example=SWEEP_REPEAT,
    ),
    Option("no_chart", default=False, help="skip phases.png and report.html", fronts=_RUN_SWEEP),
    Option(
        "num_assistant_tokens",
        default=4,
        help="draft tokens per cycle (default {default})",
        check=positive_int,
        fronts=("profile.run",),
    ),
    Option(
        "confidence",
        default=0.0,
        help="assistant_confidence_threshold (default {default:g}: draft all k tokens)",
        check=_fraction,
        fronts=("profile.run",),
    ),
    # profile.remote (RemoteConfig; also `python -m patchkit.profile.remote`): every key of
    # patchkit.profile.remote, in invoke.yaml's order, and the options of the profile.remote task
    # (an option that sets a key is that key's row: --server sets server_command)
    Option(
        "target",
        key="profile.remote.targets",
        default=[],
        help="SGLang install root to profile (site-packages or a checkout), e.g. "
        "ssh://gpu1/opt/venv/lib/python3.11/site-packages; repeat for nodes, head first",
        fronts=("profile.remote",),
        doc='SGLang install roots, head node first, e.g.\n["ssh://gpu1/opt/venv/lib/python3.11/site-packages"]',
        commented=False,
        fallback="targets",
    ),
    Option(
        "server",
        key="profile.remote.server_command",
        help="server command line, run detached by sh -c on every target",
        check=command_line,
        fronts=("profile.remote",),
        doc='sh -c on every target, detached, e.g. "python -m\n'
        "sglang.launch_server --model-path M --speculative-algorithm\n"
        'EAGLE3 --speculative-draft-model-path D --tp 2 --port 30000";\n'
        "multi-node: --nnodes $PATCHKIT_NNODES --node-rank $PATCHKIT_NODE_RANK",
        commented=False,
    ),
    Option(
        "bench",
        key="profile.remote.bench_command",
        help="benchmark command line, run by sh -c on the first target",
        check=command_line,
        fronts=("profile.remote",),
        doc='sh -c on the first target, e.g. "python -m sglang.bench_serving\n'
        '--backend sglang --port 30000 --dataset-name random --num-prompts 200"',
        commented=False,
    ),
    Option(
        "env",
        key="profile.remote.env",
        default={},
        help="NAME=VALUE for the server, e.g. NCCL_PROTO=LL (repeat; merged over the settings)",
        fronts=("profile.remote",),
        doc="server environment, e.g. {NCCL_PROTO: LL, NCCL_ALGO: Ring}",
        commented=False,
    ),
    Option(
        "bench_env", key="profile.remote.bench_env", default={}, doc="benchmark environment", commented=False
    ),
    Option(
        "python",
        key="profile.remote.python",
        default="python3",
        help="python on the targets: runs the job-control agent",
        check=program,
        doc="python on the targets (runs the job-control agent)",
        commented=False,
    ),
    Option(
        "port",
        key="profile.remote.port",
        check=whole_in(1, 65535),
        default=30000,
        doc="server port; health_url defaults to http://127.0.0.1:PORT/health",
        commented=False,
    ),
    Option("health_url", key="profile.remote.health_url", check=http_url, doc="", commented=False),
    Option(
        "health_on",
        key="profile.remote.health_on",
        check=one_of(*HEALTH_ON),
        default="first",
        doc="first | all (multi-node SGLang serves HTTP on the head only)",
        commented=False,
    ),
    Option(
        "health_timeout_s",
        key="profile.remote.health_timeout_s",
        default=900.0,
        check=positive,
        doc="model loading and CUDA graph capture take minutes",
        commented=False,
    ),
    Option(
        "bench_timeout_s",
        key="profile.remote.bench_timeout_s",
        default=3600.0,
        check=positive,
        doc="",
        commented=False,
    ),
    Option(
        "poll_s",
        key="profile.remote.poll_s",
        default=1.0,
        check=positive,
        doc="seconds between /health and job polls (one SSH round trip each)",
        commented=False,
    ),
    Option(
        "stop_signals",
        key="profile.remote.stop_signals",
        check=stop_signals,
        default=["INT", "TERM"],
        doc="sent to the server's process group in turn, then KILL",
        commented=False,
    ),
    Option(
        "stop_grace_s",
        key="profile.remote.stop_grace_s",
        default=20.0,
        check=positive,
        doc="seconds after each signal",
        commented=False,
    ),
    Option(
        "timer",
        key="profile.remote.timer",
        check=one_of(*TIMER_MODES),
        doc="PATCHKIT_TIMER on the server: events | sync | host | off",
        commented=False,
    ),
    Option(
        "timer_flush_s",
        key="profile.remote.timer_flush_s",
        default=1.0,
        check=positive,
        doc="PATCHKIT_TIMER_FLUSH_S: bounds what a KILLed rank loses",
        commented=False,
    ),
    Option(
        "sample",
        key="profile.remote.timer_sample",
        check=sample_count,
        help="time about one decode cycle in N, chosen at random; every cycle is still "
        "recorded (PATCHKIT_TIMER_SAMPLE; 1 = every cycle; default: profile.remote.timer_sample, "
        "else the runtime's budget: as many cycles as one percent of the cycle period pays for, "
        "PATCHKIT_TIMER_BUDGET)",
        fronts=("profile.remote",),
        doc="PATCHKIT_TIMER_SAMPLE: time ~1 decode cycle in N, each chosen at\n"
        "random (every cycle still recorded); 1 = time every cycle;\n"
        "null: the runtime's budget (PATCHKIT_TIMER_BUDGET, 1 % of the\n"
        "cycle period: every cycle where the device hides the cost)",
        commented=False,
    ),
    Option(
        "timer_seed",
        key="profile.remote.timer_seed",
        check=whole_in(0, (1 << 63) - 1),
        doc="PATCHKIT_TIMER_SEED; null: one drawn per run, shared by all nodes",
        commented=False,
    ),
    Option(
        "remote_dir",
        key="profile.remote.remote_dir",
        check=absolute_path,
        default="/tmp/patchkit-profile",
        doc="a fresh run directory per run is made inside",
        commented=False,
    ),
    Option(
        "keep_remote_dir",
        key="profile.remote.keep_remote_dir",
        check=boolean,
        default=False,
        help="leave the run directory (logs, timing files) on the targets",
        fronts=("profile.remote",),
        doc="true: leave logs and timing files on the targets",
        commented=False,
    ),
    Option(
        "max_fetch_mb",
        key="profile.remote.max_fetch_mb",
        default=1024.0,
        help="timing files fetched per target, at most",
        check=positive,
        doc="timing files fetched per target, at most",
        commented=False,
    ),
    Option(
        "step_timeout_s",
        key="profile.remote.step_timeout_s",
        default=120.0,
        help="one small remote program, connect included",
        check=positive,
        doc="one small remote step (connection included)",
        commented=False,
    ),
    Option(
        "out",
        key="profile.remote.out",
        default=DefaultOf("profile.out"),
        check=text,
        help="reports go to OUT/<timestamp>/ (default: {default})",
        fronts=("profile.remote", _REMOTE_MAIN),
        doc="reports in OUT/<timestamp>/",
        commented=False,
    ),
    Option(
        "baseline",
        key="profile.remote.baseline",
        check=boolean,
        default=False,
        help="also serve without every --speculative-* option (series not applied), same "
        "benchmark: tokens/s with and without speculation and their ratio",
        fronts=("profile.remote",),
        doc="true (--baseline): also serve without every --speculative-*\n"
        "option, series reverted, same benchmark (OUT/<ts>/baseline/)",
        commented=False,
    ),
    Option(
        "matrix",
        key="profile.remote.matrix",
        help="sweep, one server start per point, e.g. 'speculative-num-steps=1,2,3;"
        "speculative-num-draft-tokens=2,4;env:NCCL_PROTO=LL,Simple' (KEY replaces or adds "
        "--KEY VALUE; env:NAME sets the server's environment)",
        fronts=("profile.remote",),
        doc="--matrix: one server start per point, e.g.\n"
        '"speculative-num-steps=1,2,3;env:NCCL_PROTO=LL,Simple"',
        commented=False,
    ),
    Option(
        "warmup",
        key="profile.remote.warmup",
        check=boolean,
        default=True,
        help="run the benchmark once before the measured pass, on the same server (default "
        "on; --no-warmup: off); the report keeps the measured window's cycles only",
        fronts=("profile.remote",),
        doc="--no-warmup: false; the benchmark once before the measured pass,\n"
        "same server; window.json tells the report which cycles count",
        commented=False,
    ),
    Option(
        "warmup_command",
        key="profile.remote.warmup_command",
        check=command_line,
        doc="the warm-up's command (default: bench_command), e.g. the same\nbenchmark with --num-prompts 50",
        commented=False,
    ),
    Option(
        "repeat",
        key="profile.remote.repeat",
        help="with --matrix: server starts per point, the baseline included, in rotated order "
        f"(default {REMOTE_REPEAT}); the verdict names a best point only when it is significantly faster",
        check=repeat_count,
        fronts=("profile.remote",),
        doc="--repeat N: server starts per sweep point, baseline included,\n"
        f"in rotated order (default {REMOTE_REPEAT}; with budget_minutes/until: rounds\n"
        f"at most, default {MAX_ROUNDS})",
        commented=False,
    ),
    Option(
        "budget",
        key="profile.remote.budget_minutes",
        check=minutes,
        help="with --matrix: MINUTES for the sweep: rounds of every live point until the verdict "
        "is decided or the next round would not fit; clear losers are dropped (--repeat: rounds "
        f"at most, default {MAX_ROUNDS})",
        fronts=("profile.remote",),
        doc="--budget M: rounds of every live point until the verdict is\n"
        "decided or the next round would not fit M minutes; losers dropped",
        commented=False,
    ),
    Option(
        "until",
        key="profile.remote.until",
        check=one_of(*UNTIL, fold=True),
        help="with --matrix: 'decided': rounds until the verdict is decided (--repeat rounds at most, "
        f"default {MAX_ROUNDS}; with --budget, whichever comes first)",
        fronts=("profile.remote",),
        doc="--until decided: rounds until decided (repeat rounds at most)",
        commented=False,
    ),
    Option(
        "gpus",
        key="profile.remote.gpus",
        check=gpu_list,
        help="with --matrix: GPUs of each target, e.g. 0,1,2,3: one server per GPU at once "
        "(CUDA_VISIBLE_DEVICES, port + index), every GPU runs every point over the rounds",
        fronts=("profile.remote",),
        doc="--gpus 0,1,2,3: one server per GPU at once (CUDA_VISIBLE_DEVICES,\n"
        "port + index); each GPU runs every point over the rounds",
        commented=False,
    ),
    Option(
        "blocks",
        key="profile.remote.blocks",
        check=one_of(*BLOCKS, fold=True),
        default="fleet",
        help="with --matrix and several --target: 'fleet' (default): the targets serve together "
        "(one multi-node server); 'hosts': each target runs its own server, a block like a GPU of "
        "--gpus (port + index), every target runs every point over the rounds",
        fronts=("profile.remote",),
        doc="--blocks: several targets as one fleet serving together (fleet,\n"
        "a multi-node server) or each its own server, a block like a GPU\n"
        "(hosts: port + index, each runs every point over the rounds)",
        commented=False,
    ),
    Option(
        "cpus",
        key="profile.remote.cpus",
        check=cpu_lists,
        help="pin the server to CPUs, as taskset -c writes them: '0-15' for every server, or one "
        "list per block of a sweep with --gpus or --blocks hosts, ';' between them ('0-15;16-31'); "
        "the job control sets the affinity before the server starts (PATCHKIT_CPUS)",
        fronts=("profile.remote",),
        doc="--cpus 0-15: the server pinned to these CPUs (PATCHKIT_CPUS); one\n"
        "list per block of a sweep, ';' between them: \"0-15;16-31\"",
        commented=False,
    ),
    Option(
        "spread_cache",
        key="profile.remote.spread_cache",
        check=file_or_off,
        doc="the spread between starts remembered per target and command\n"
        f"(null: $PATCHKIT_SPREAD_CACHE, else {SPREAD_CACHE};\n"
        "off: none); a sweep takes it as known (its z test and horizon)",
        commented=False,
    ),
    Option(
        "min_effect",
        key="profile.remote.min_effect",
        default=5.0,
        check=lambda v, option, where="": number(v, option, where, low=0.1, high=100.0),
        help="with --matrix and --budget/--until: PCT, the smallest tok/s difference worth deciding "
        "(default 5): the sequential test's horizon is the rounds that decide it at --power",
        fronts=("profile.remote",),
        doc="--min-effect PCT: the smallest tok/s difference worth deciding\n"
        "(default 5): sets the sequential test's horizon (rounds)",
        commented=False,
    ),
    Option(
        "power",
        key="profile.remote.power",
        default=0.9,
        check=lambda v, option, where="": number(v, option, where, low=0.5, high=0.999),
        help="with --matrix and --budget/--until: the chance of deciding a --min-effect difference "
        "that the horizon is planned for (default 0.9)",
        fronts=("profile.remote",),
        doc="--power P: the chance of deciding a min_effect difference the\n"
        "horizon is planned for (default 0.9)",
        commented=False,
    ),
    Option(
        "sweep_seed",
        key="profile.remote.sweep_seed",
        check=whole_in(0, (1 << 63) - 1),
        doc="seed of the GPUs' randomized Latin square (null: one per sweep)",
        commented=False,
    ),
    Option(
        "series",
        key="profile.remote.series",
        help="series folder, a shipped series' name, or 'auto' (chosen from the targets' files); "
        "default: profile.remote.series, else patchkit.series",
        fronts=("profile.remote",),
        doc="null: patchkit.series (above); the same for the next four",
        fallback="series",
    ),
    Option(
        "layout",
        key="profile.remote.layout",
        default=DefaultOf("layout"),
        help="auto | checkout | installed",
        check=_layout,
        doc="",
        example=None,
        fallback="layout",
    ),
    Option("ssh_config", key="profile.remote.ssh_config", doc="", fallback="ssh_config"),
    Option("ssh_options", key="profile.remote.ssh_options", default=[], doc="", fallback="ssh_options"),
    Option(
        "ssh_persist",
        key="profile.remote.ssh_persist",
        default=DefaultOf("ssh_persist"),
        check=lambda value, option, where="": seconds(value, option, where, zero=True),
        doc="",
        example=None,
        fallback="ssh_persist",
    ),
    Option(
        "chart",
        key="profile.remote.chart",
        check=boolean,
        default=True,
        doc="false (--no-chart): no phases.png, sweep.png or report.html",
    ),
    Option(
        "jobs",
        key="profile.remote.jobs",
        default=DefaultOf("jobs"),
        help="hosts in parallel for verify/apply/revert",
        check=whole_in(1, 1024),
        doc="targets worked on in parallel by verify, apply and revert",
    ),
    Option(
        "connect_timeout",
        key="profile.remote.connect_timeout",
        check=positive,
        doc=f"seconds for the SSH connect and banner (null: {CONNECT_TIMEOUT_S:g})",
    ),
    # the targets profile.remote resolves as the patch tasks do (patchkit.transport.resolve_targets):
    # an inventory's hosts, and the target kinds' own settings (k8s: kubectl, k8s_container, kube_context)
    # (their options are the patch tasks' --inventory, --limit, --root, --k8s-container, ...: the
    # same help and check; --limit/--root without an inventory refused by the same need_inventory)
    Option(
        "inventory",
        key="profile.remote.inventory",
        help=_inventory_help("profile.remote.inventory, else patchkit.inventory when no target is set"),
        check=text,
        fronts=("profile.remote",),
        doc="Ansible inventory: its hosts are targets too, after targets\n"
        "(null: patchkit.inventory, when targets are not set here)",
        fallback="inventory",
    ),
    Option(
        "limit",
        key="profile.remote.limit",
        help=_limit_help("profile.remote.limit, else all hosts"),
        check=text,
        fronts=("profile.remote",),
        doc="with an inventory: Ansible host pattern (null: all hosts)",
    ),
    Option(
        "root",
        key="profile.remote.root",
        help=_root_help("profile.remote.root, else each host's patchkit_root variable"),
        check=text,
        fronts=("profile.remote",),
        doc="with an inventory: the target path on every host\n(null: each host's patchkit_root variable)",
    ),
    *(
        Option(
            name,
            key=f"profile.remote.{name}",
            help=setting.help_after(f"profile.remote.{name}", f"patchkit.{name}"),
            check=_kind,
            fronts=("profile.remote",),
            doc=f"null: patchkit.{name}",
            fallback=name,
        )
        for name, setting in kind_settings().items()
    ),
    # the profile.remote task's options that set no key of their own
    Option(
        "no_chart",
        default=False,
        help="skip phases.png, sweep.png and report.html",
        fronts=("profile.remote",),
    ),
    Option(
        "from_prediction",
        help="a run folder (or predict.json) of profile.predict: sweep only the --top most "
        "promising predicted num-steps values plus the profiled one (replaces --matrix's "
        "speculative-num-steps axis; other axes kept)",
        check=text,
        fronts=("profile.remote",),
    ),
    Option(
        "top",
        default=2,
        help="with --from-prediction: how many of the best predicted points to measure (default {default})",
        check=positive_int,
        fronts=("profile.remote",),
    ),
    Option(
        "resume",
        help="with --matrix: continue the sweep in this folder (its sweep-state.json) after its process, "
        "connection or machine died, with the same settings: the runs done are kept, a run cut "
        "mid-server runs again, the targets are checked pristine first",
        check=existing_dir,
        fronts=("profile.remote", _REMOTE_MAIN),
    ),
    Option("config", help=".json, .toml or .yaml file", fronts=(_REMOTE_MAIN,)),
    Option(
        "section",
        help="dotted key of the settings in that file, e.g. patchkit.profile.remote for an invoke.yaml",
        fronts=(_REMOTE_MAIN,),
    ),
    # profile.collect: reads three profile.remote keys under options of its own
    Option(
        "target",
        help="where the server ran (any --target form: a folder, ssh://[user@]host[:port]/path, "
        "host:/path, docker://C/path); repeat for the nodes of one multi-node server",
        fronts=("profile.collect",),
    ),
    Option(
        "from_",
        help="the timing folder on the target (PATCHKIT_TIMER_DIR); relative: under the "
        "target's path; default: the target's path itself",
        check=text,
        fronts=("profile.collect",),
    ),
    Option(
        "out",
        help="local folder for the timing files (new, or one without *.jsonl)",
        check=text,
        fronts=("profile.collect",),
    ),
    Option(
        "max_mb",
        key="profile.remote.max_fetch_mb",
        default=SAME,
        help="refuse a target whose folder holds more (default: patchkit.profile.remote.max_fetch_mb, {default:g})",
        check=_size_mb,
        fronts=("profile.collect",),
    ),
    Option(
        "python",
        key="profile.remote.python",
        default=SAME,
        help="python on the target, runs the fetch agent (default: {default})",
        check=program,
        fronts=("profile.collect",),
    ),
    Option(
        "timeout",
        key="profile.remote.step_timeout_s",
        default=SAME,
        help="seconds allowed per target (default {default:g}, plus a second per MB allowed)",
        check=seconds,
        fronts=("profile.collect",),
    ),
    # the authoring tasks (patch.edit/new/refresh/gen-runtime/export/gen-config/rebase/diff), the
    # upstream.* tasks and profile.report/predict: their options, help texts and defaults (the tasks
    # check them where they are used; the patch.rebase target options are the patch tasks' rows)
    Option(
        "series",
        key="series",
        default=SAME,
        help="series folder or a shipped series' name (default: patchkit.series in invoke.yaml / "
        "patchkit.yaml)",
        check=text,
        fronts=(*_AUTHOR, "patch.gen-runtime"),
    ),
    Option(
        "edited",
        help="a copy of the pinned tree with your edits (make one with patch.edit)",
        check=existing_dir,
        fronts=("patch.new", "patch.refresh"),
    ),
    Option(
        "pristine",
        help="pristine pinned tree (default: fetched from the pin, by version, into .cache/)",
        check=existing_dir,
        fronts=_AUTHOR,
    ),
    Option("dest", help="folder to write the editable tree into", check=text, fronts=("patch.edit",)),
    Option("upto", help="stop after this patch (default: the whole series)", fronts=("patch.edit",)),
    Option(
        "layout",
        default="checkout",
        help="checkout or installed (default {default})",
        check=one_of(*TREE_LAYOUTS),
        fronts=("patch.edit",),
    ),
    Option("name", help="file name of the new patch, e.g. 0008-my-timer.patch", fronts=("patch.new",)),
    Option("header", help="text put before the diff, saying what the patch times", fronts=("patch.new",)),
    Option("new_file", help="a file the patch creates (repeat)", check=relative_paths, fronts=("patch.new",)),
    Option("patch", help="the patch to rewrite (default: the top one)", fronts=("patch.refresh",)),
    Option(
        "check",
        default=False,
        help="only check: exit 1 when a runtime patch differs from patchkit/timing/phase_timer.py",
        fronts=("patch.gen-runtime",),
    ),
    Option(
        "all_",
        default=False,
        help="every shipped series instead of --series (they hold the runtime patch as a marker, "
        "rendered on every read: this finds a stale copy beside one)",
        fronts=("patch.gen-runtime",),
    ),
    Option(
        "series",
        key="series",
        default=SAME,
        help="series folder or a shipped series' name (default: patchkit.series in invoke.yaml / patchkit.yaml)",
        check=text,
        fronts=("patch.export",),
    ),
    Option(
        "out",
        help="where to write: the series becomes OUT/<its name>/ (an existing non-empty one is refused)",
        check=folder_path,
        fronts=("patch.export",),
    ),
    Option("all_", default=False, help="every shipped series instead of --series", fronts=("patch.export",)),
    Option(
        "file",
        help="the example config to rewrite (default: invoke.yaml in patchkit's checkout)",
        check=existing_file,
        fronts=("patch.gen-config",),
    ),
    Option(
        "check",
        default=False,
        help="only check: exit 1 when its commented defaults differ from the option table",
        fronts=("patch.gen-config",),
    ),
    Option(
        "series",
        key="series",
        default=SAME,
        help="the series to carry over (never written): a folder or a shipped series' name; default: "
        "patchkit.series in invoke.yaml (patchkit.yaml when installed)",
        fronts=("patch.rebase",),
    ),
    Option(
        "onto",
        help="a PyPI version (e.g. 0.5.10), or with --upstream a tag, branch or commit",
        fronts=("patch.rebase",),
    ),
    Option(
        "upstream",
        help="a local git clone of the upstream project to read --onto from",
        check=existing_dir,
        fronts=("patch.rebase",),
    ),
    Option(
        "out",
        help="the new series folder (default: patches/<name>-v<version> beside --series)",
        check=folder_path,
        fronts=("patch.rebase",),
    ),
    Option(
        "context_trim",
        default=False,
        help="retry a hunk with fewer outer context lines when that is still unique",
        fronts=("patch.rebase",),
    ),
    Option(
        "resume",
        default=False,
        help="after hand edits in --out: take its marker-free patches, place everything again",
        fronts=("patch.rebase",),
    ),
    Option(
        "version",
        help="with --upstream: the version to pin (default: from a vX.Y.Z tag)",
        fronts=("patch.rebase",),
    ),
    Option(
        "trust_new",
        default=False,
        help="accept and record a wheel whose sha256 is not pinned yet",
        fronts=("patch.rebase",),
    ),
    Option(
        "merge",
        default=True,
        help="after exact matching, relocate the rest by a checked git merge-file "
        "(default on; --no-merge: exact match only)",
        fronts=("patch.rebase",),
    ),
    Option(
        "onto_target",
        help="instead of --onto: the files as they are on this target (any --target "
        "form), read in one connection and pinned to exactly that text; needs --out",
        fronts=("patch.rebase",),
    ),
    Option(
        "json",
        default=False,
        help="print the list as JSON (stable keys: schema patchkit.series/1) instead of a table",
        fronts=("patch.series",),
    ),
    Option("from_", help="the older series: a folder or a shipped series' name", fronts=("patch.diff",)),
    Option("to", help="the newer series: a folder or a shipped series' name", fronts=("patch.diff",)),
    Option(
        "series",
        help="take name, version, commit and paths from this series' pin.toml (a series folder or a "
        "shipped series' name)",
        fronts=("upstream.fetch",),
    ),
    Option("name", help="distribution name (e.g. sglang)", fronts=("upstream.fetch",)),
    Option("version", help="exact version on PyPI", fronts=("upstream.fetch",)),
    Option("path", help="file to fetch (repeat; default: the pinned files)", fronts=("upstream.fetch",)),
    Option(
        "upstream",
        help="a local git clone to read from instead of PyPI",
        check=existing_dir,
        fronts=("upstream.fetch",),
    ),
    Option("rev", help="tag/branch/commit in the clone", fronts=("upstream.fetch",)),
    Option(
        "layout",
        default="checkout",
        help="checkout (python/sglang/...) or installed (sglang/...); default {default}",
        check=one_of(*TREE_LAYOUTS),
        fronts=("upstream.fetch",),
    ),
    Option("dest", help="output folder", fronts=("upstream.fetch",)),
    Option(
        "trust_new",
        default=False,
        help="accept a wheel whose sha256 is not in patchkit's table (recorded for next time)",
        fronts=("upstream.fetch",),
    ),
    Option(
        "series",
        help="series folder (or a shipped series' name) whose pin.toml is written",
        fronts=("upstream.pin",),
    ),
    Option("tree", help="pristine tree to hash", check=existing_dir, fronts=("upstream.pin",)),
    Option(
        "path", help="pinned file (repeat; default: the files the series modifies)", fronts=("upstream.pin",)
    ),
    Option("name", help="upstream name", fronts=("upstream.pin",)),
    Option("version", help="upstream version", fronts=("upstream.pin",)),
    Option("commit", help="upstream commit (40 hex)", fronts=("upstream.pin",)),
    Option(
        "package_prefix",
        help="prefix dropped on installed layouts, e.g. python/",
        check=package_prefix,
        fronts=("upstream.pin",),
    ),
    Option(
        "timing",
        help="a folder of timing files (*.jsonl, e.g. from profile.collect), or a run folder "
        "of profile.run / profile.remote (OUT/<timestamp>: its timing/ is read)",
        fronts=("profile.report",),
    ),
    Option(
        "out",
        help="folder for table.txt, trace.json, phases.png and summary.json",
        fronts=("profile.report",),
    ),
    Option(
        "bench",
        help="a benchmark's text output (e.g. sglang.bench_serving's), for tok/s and accept length",
        fronts=("profile.report",),
    ),
    Option("no_chart", default=False, help="skip phases.png and report.html", fronts=("profile.report",)),
    Option(
        "run",
        help="a run folder of profile.remote or profile.run (its timing/ and summary.json)",
        fronts=("profile.predict",),
    ),
    Option(
        "pool",
        help="another run of the same configuration (another server start; repeatable, e.g. a "
        "sweep point's rep2/): each run is predicted on its own, the table gives the medians, so one "
        "start's luck does not move the prediction",
        fronts=("profile.predict",),
    ),
    Option(
        "out",
        help="where to write predict.json (default: the run folder)",
        fronts=("profile.predict",),
    ),
    Option(
        "bootstrap",
        help=f"bootstrap resamples for the intervals (default {PREDICT_BOOTSTRAP}; 0: none)",
        check=_count0,
        fronts=("profile.predict",),
    ),
    Option(
        "verify_us_per_token",
        help="what one more draft token per request adds to verify, in us per token of "
        "the batch, measured elsewhere (default: fitted where the run kept one batch size, else 0)",
        check=_zero_or_more,
        fronts=("profile.predict",),
    ),
    Option(
        "spread",
        help="the spread of tok/s between server starts, in % (default: the spread cache's entry for "
        "this server command, from earlier sweeps with --repeat): says how many starts per point would "
        "tell the predicted best from the runner-up",
        check=_zero_or_more,
        fronts=("profile.predict",),
    ),
)


def _own_defaults(table: tuple[Option, ...]) -> tuple[Option, ...]:
    """The table with each SAME default replaced by its key owner's (the first with that key)."""
    from dataclasses import replace

    owners: dict[str, Option] = {}
    out = []
    for option in table:
        if isinstance(option.default, DefaultOf):
            assert option.default.key in owners, f"{option.name}: {option.default} needs an earlier owner"
            option = replace(option, default=owners[option.default.key].default)
        if option.default is SAME:
            assert option.key in owners, f"{option.name}: SAME needs an earlier option with key {option.key}"
            option = replace(option, default=owners[option.key].default)
        elif option.key is not None:
            assert option.key not in owners, f"config key {option.key} owned twice"
            owners[option.key] = option
        out.append(option)
    return tuple(out)


OPTIONS: tuple[Option, ...] = _own_defaults(_TABLE)

# The patch.* defaults: the rows keyed at the top of patchkit: (tasks.py: ns.configure).
PATCHKIT_DEFAULTS: dict[str, Any] = {
    o.key: o.default for o in OPTIONS if o.key is not None and "." not in o.key
}


def offered(front: str) -> dict[str, Option]:
    """{name: Option} of one front end (an invoke task such as ``profile.run``, or an argparse
    program's name)."""
    return {o.name: o for o in OPTIONS if front in o.fronts}


def task_help(front: str) -> dict[str, str]:
    """An invoke task's ``help=`` mapping: each offered option's help text."""
    return {name: o.help_text for name, o in offered(front).items()}


def owners() -> dict[str, Option]:
    """{config key: the row that owns it} (the first row naming the key; later ones read it
    under an option of their own, e.g. profile.collect's --max-mb)."""
    found: dict[str, Option] = {}
    for option in OPTIONS:
        if option.key is not None:
            found.setdefault(option.key, option)
    return found


def default(key: str) -> Any:
    """The default of a config key (dotted, under ``patchkit:``), from its owner in the table."""
    for option in OPTIONS:
        if option.key == key:
            return option.default
    raise KeyError(key)


# -- the one resolve path: given value -> config key -> row default -> row check ----------------------


def configured(config, key: str) -> tuple[Any, str]:
    """(value, where) of a config key (dotted, under ``patchkit:``): the highest config file that
    sets it (``where``: the key and the file), else what invoke's config holds for it (the
    environment: ``where`` the key); (None, "") when nothing sets it. Old names are read at
    their own level (DEPRECATED, PROFILE_RENAMED)."""
    if "." not in key:
        value, where = _configured(config, key)
        return (value, where) if where else (None, "")
    parts = key.split(".")
    renamed = [old for old, new in PROFILE_RENAMED.items() if parts == ["profile", new]]
    value, where = None, ""
    for layer_where, layer in config_layers(config):
        for path in ([*parts[:-1], old] for old in renamed):
            found = _walk(layer, path)
            if found is not None:
                value, where = found, f"patchkit.{'.'.join(path)} in {layer_where}"
        found = _walk(layer, parts)
        if found is not None:
            value, where = found, f"patchkit.{key} in {layer_where}"
    if where:
        return value, where
    found = _walk(config.get("patchkit", {}) if hasattr(config, "get") else {}, parts)
    return (found, f"patchkit.{key}") if found is not None else (None, "")


def _walk(node: Any, parts: list[str]) -> Any:
    for part in parts:
        node = node.get(part) if hasattr(node, "get") else None
    return node


def row_check(row: Option) -> Callable[..., Any] | None:
    """A row's check: its own, or for an on/off row (a bool default) the one boolean rule."""
    if row.check is None and isinstance(row.default, bool):
        return boolean
    return row.check


def given_value(row: Option, value) -> bool:
    """Whether a task's parameter carries a value: not None, not an empty list, and for an
    on/off row not its default (invoke passes the default when the flag is not given)."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return False
    return not (isinstance(row.default, bool) and value is row.default)


def resolve_where(row: Option, given=None, config=None, *, cwd: str | None = None) -> tuple[Any, str]:
    """(value, where) of one option, the one path every task and front end takes: the value
    given (a task's parameter), else the config key of the row (else the key it falls back
    to), else the row's default; then the row's check (InvalidInput naming ``--option``, or
    the key and the file it came from). ``cwd``: where relative paths of a check start."""
    import copy

    value, where = (given, "") if given_value(row, given) else (None, "")
    if isinstance(value, str) and not value.strip() and row_check(row) is None:
        text(value, row.name)  # an empty value, for any option: refused, never the default
    if where == "" and value is None and config is not None and row.key is not None:
        value, where = configured(config, row.key)
        if value is None and row.fallback is not None:
            value, where = configured(config, row.fallback)
    if value is None:
        value, where = copy.deepcopy(row.default), ""
    return resolve_checked(row, value, where, cwd=cwd), where


def resolve_checked(row: Option, value, where: str = "", *, cwd: str | None = None) -> Any:
    """The last step of resolve_where: ``value`` (from ``where``: "" an option, else the key
    and file) through the row's check; None stays None."""
    check = row_check(row)
    if value is None or check is None:
        return value
    if cwd is not None and check in (existing_file, existing_dir):
        return check(value, row.name, where, cwd=cwd)
    return check(value, row.name, where)


def resolve(row: Option, given=None, config=None, *, cwd: str | None = None) -> Any:
    """The value of one option (resolve_where)."""
    return resolve_where(row, given, config, cwd=cwd)[0]


def resolve_front(front: str, given: dict, config=None, *, cwd: str | None = None) -> dict[str, Any]:
    """Every option of one front end (``given``: its parameters), each through resolve."""
    return {name: resolve(row, given.get(name), config, cwd=cwd) for name, row in offered(front).items()}


def checked(front: str, name: str, value) -> Any:
    """A value given to ``front``'s option ``name``, through that row's check (None: the
    row's default, unchecked when it is None)."""
    return resolve(offered(front)[name], value)


def add_argument(parser, option: Option, **kwargs) -> None:
    """``parser.add_argument`` for a table option: --name, its default (unless ``kwargs`` gives
    one) and its help text (``%`` escaped for argparse)."""
    kwargs.setdefault("default", option.default)
    parser.add_argument(
        "--" + option.name.rstrip("_").replace("_", "-"), help=option.help_text.replace("%", "%%"), **kwargs
    )


# -- the example config (invoke.yaml), generated from the table ---------------------------------------
# `invoke patch.gen-config [--check]` (make lint: --check) rewrites the key lines of each block of
# EXAMPLE_SCOPES (the lines after its opening line: `# key: value  # comment` or `key: value  #
# comment`, and the comment lines continuing them) from the rows with a ``doc``, in table order;
# the rest of the file (the prose between the blocks) is written by hand.
# scope (the key's dotted prefix) -> (the line its keys follow, the column their comments start at)
EXAMPLE_SCOPES = {"": ("patchkit:", 25), "profile": ("  profile:", 25), "profile.remote": ("    remote:", 31)}


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _scope(key: str) -> str:
    return key.rpartition(".")[0]


def example_lines(scope: str, indent: int, column: int) -> list[str]:
    """The documented keys of ``patchkit.<scope>`` (``""``: patchkit's own): one line per
    documented row, in table order, commented out (``# key: value``) or set, its doc after
    ``#`` from ``column`` on (each further line of the doc on a line of its own)."""
    lines = []
    for option in OPTIONS:
        if option.key is None or option.doc is None or _scope(option.key) != scope:
            continue
        head = f"{' ' * indent}{'# ' if option.commented else ''}{option.key.rpartition('.')[2]}: "
        head += _yaml_value(option.shown)
        if not option.doc:
            lines.append(head + "\n")
            continue
        at = max(column, len(head) + 2)
        first, *more = option.doc.split("\n")
        lines.append(f"{head.ljust(at)}# {first}\n")
        lines += [f"{' ' * at}# {line}\n" for line in more]
    return lines


def _in_block(line: str, indent: int) -> bool:
    """A line of a block's generated part: a key line at ``indent`` (set with a value, or
    commented out) or a comment deeper than that continuing one."""
    body = line[indent:] if line[:indent] == " " * indent else None
    if body is None:
        return False
    if re.match(r"(# )?[a-z0-9_]+: \S", body):
        return True
    return body.startswith(" ") and body.lstrip(" ").startswith("# ")


def example_config(text: str, where: str = "invoke.yaml") -> str:
    """``text`` (an example config) with each EXAMPLE_SCOPES block's key lines replaced by
    example_lines; InvalidInput when a scope's opening line is missing."""
    lines = text.splitlines(keepends=True)
    for scope, (anchor, column) in EXAMPLE_SCOPES.items():
        try:
            start = next(n for n, line in enumerate(lines) if line.rstrip("\n") == anchor) + 1
        except StopIteration:
            raise InvalidInput(
                f"{where}: no line {anchor.strip()!r} (patchkit{'.' if scope else ''}{scope}) "
                "to write its keys under"
            ) from None
        indent = len(anchor) - len(anchor.lstrip()) + 2
        end = start
        while end < len(lines) and _in_block(lines[end], indent):
            end += 1
        lines[start:end] = example_lines(scope, indent, column)
    return "".join(lines)


def example_keys() -> set[str]:
    """The dotted keys (under patchkit:) the example config documents: the rows with a doc."""
    return {o.key for o in OPTIONS if o.key is not None and o.doc is not None}


# The patchkit.profile keys check_config accepts: the table's (the rows keyed profile.<name>),
# the profile.remote block, and the old names read under their new ones (PROFILE_RENAMED).
PROFILE_KEYS = {o.key.partition(".")[2] for o in OPTIONS if o.key is not None and o.key.count(".") == 1} | {
    "remote",
    *PROFILE_RENAMED,
}


# The defaults by the names the profile code uses (views of the table above): profile.run /
# profile.sweep and run_default / run_sweep (patchkit.profile.*), and profile.remote's RemoteConfig
# and profile.collect's FetchSettings (patchkit.profile.remote.*).
PROFILE_DEFAULTS: dict[str, Any] = {
    o.name: o.default
    for o in OPTIONS
    if "profile.run" in o.fronts or "profile.sweep" in o.fronts
    if o.default is not None and o.name != "no_chart"
}
REMOTE_DEFAULTS: dict[str, Any] = {
    o.key.rpartition(".")[2]: o.default
    for o in OPTIONS
    if o.key is not None and _scope(o.key) == "profile.remote"
}
# profile.remote's keys by their rows ({key: the row that owns it}: RemoteConfig's last step of
# the resolve path, resolve_checked, for each)
REMOTE_ROWS: dict[str, Option] = {
    key.rpartition(".")[2]: o for key, o in owners().items() if _scope(key) == "profile.remote"
}
# profile.remote's keys with a check of their own ({key: check})
REMOTE_CHECKS: dict[str, Callable[..., Any]] = {
    key.rpartition(".")[2]: o.check
    for key, o in owners().items()
    if o.check is not None and _scope(key) == "profile.remote"
}
# profile.remote's keys read from patchkit.* when not set ({key: top-level key})
REMOTE_FALLBACKS: dict[str, str] = {
    o.key.rpartition(".")[2]: o.fallback
    for o in OPTIONS
    if o.key is not None and o.fallback is not None and _scope(o.key) == "profile.remote"
}


# -- the settings object -------------------------------------------------------------------------


def patch_rows() -> dict[str, Option]:
    """{name: row} of every option a patch.* task offers (PATCH_TASKS), once each, and of the
    patchkit.* keys no task offers as an option (ssh_options)."""
    rows: dict[str, Option] = {}
    for option in OPTIONS:
        if set(option.fronts) & set(PATCH_TASKS) or (
            not option.fronts and option.key is not None and "." not in option.key
        ):
            rows.setdefault(option.name, option)
    return rows


@dataclass(frozen=True)
class PatchSettings:
    """Everything a ``patch.*`` task needs, checked (module docstring)."""

    op: str
    series: str | None
    targets: list[str]
    layout: str = PATCHKIT_DEFAULTS["layout"]
    jobs: int = PATCHKIT_DEFAULTS["jobs"]
    timeout: float | None = None
    ssh_config: str | None = None
    ssh_options: list[str] = field(default_factory=list)
    ssh_persist: float = PATCHKIT_DEFAULTS["ssh_persist"]
    inventory: str | None = None
    limit: str | None = None
    root: str | None = None
    container: str | None = None
    exec_prefix: str | None = None
    kind_options: dict[str, str] = field(default_factory=dict)  # the target kinds' own settings
    keep_journal: bool = False
    keep_journal_where: str = ""  # where keep_journal came from: "--keep-journal" or the key and file
    force: bool = False
    dry_run: bool = False
    show_script: bool = False
    json: bool = False
    cwd: str = ""
    series_where: str = ""
    config_where: str = "invoke.yaml"  # the config files read (config_where), for messages
    extra: dict[str, Any] = field(default_factory=dict)  # the other rows of the patch tasks, checked

    @classmethod
    def from_invoke(cls, c, op: str, given: dict, *, notes=None) -> PatchSettings:
        """From the task's context ``c`` and its options ``given`` (the task's parameters)."""
        config = c.config
        say_notes(config, notes)
        cwd = getattr(c, "cwd", None) or os.getcwd()
        rows = patch_rows()
        targets, inventory = given.get("target") or [], given.get("inventory")
        if not targets and not inventory:  # the targets of the config only when none are given
            targets = resolve(rows["target"], None, config)
            inventory = resolve(rows["inventory"], None, config)
        wheres, values = {}, {}
        for name, row in rows.items():
            if name in ("target", "inventory"):
                values[name] = resolve(row, targets if name == "target" else inventory)
            elif row.key is None:
                values[name] = resolve(row, given.get(name))
            else:
                values[name], wheres[name] = resolve_where(row, given.get(name), config, cwd=cwd)
        fields_ = {f for f in cls.__dataclass_fields__}
        settings = cls(
            op=op,
            targets=values.pop("target"),
            exec_prefix=values.pop("exec_"),
            kind_options={name: value for name in kind_settings() if (value := values.pop(name)) is not None},
            keep_journal_where=wheres.get("keep_journal") or "--keep-journal",
            cwd=cwd,
            series_where=wheres.get("series", ""),
            config_where=config_where(config),
            **{name: values.pop(name) for name in list(values) if name in fields_},
            extra=values,  # rows no field names (a row added to the table: its checked value)
        )
        if settings.show_script and settings.json:
            raise InvalidInput(
                "--show-script prints the shell programs on stdout, where --json "
                "promises one JSON document: give one of them"
            )
        need_inventory(settings.inventory, settings.limit, settings.root)
        return settings

    def __getattr__(self, name: str) -> str | None:
        """A target kind's own setting by its name (``settings.k8s_container``; None: not given),
        or any other row of the patch tasks by its name (``extra``)."""
        if name in kind_settings():
            return self.kind_options.get(name)
        if name in self.__dict__.get("extra", {}):
            return self.extra[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def transport_options(self) -> dict:
        return transport_options(
            ssh_config=self.ssh_config,
            ssh_options=self.ssh_options,
            ssh_persist=self.ssh_persist,
            kind_options=self.kind_options,
        )


def transport_options(
    *,
    ssh_config: str | None = None,
    ssh_options=(),
    ssh_persist: float | None = None,
    connect_timeout: float | None = None,
    kind_options: dict | None = None,
) -> dict:
    """The transport options (patchkit.transport.parse_target / expand_targets keywords) of
    checked settings: the one translation the patch tasks, profile.collect and profile.remote
    share. ``ssh_persist`` None: patchkit.ssh_persist's default."""
    from patchkit.transport.remote import ssh_persist_options

    transport: dict[str, Any] = {}
    if ssh_config:
        transport["ssh_config"] = ssh_config
    if ssh_options:
        transport["ssh_options"] = list(ssh_options)
    if connect_timeout is not None:
        transport["connect_timeout"] = connect_timeout
    transport.update(
        ssh_persist_options(PATCHKIT_DEFAULTS["ssh_persist"] if ssh_persist is None else ssh_persist)
    )
    transport.update(kind_options or {})  # the target kinds' own (k8s: targets: transport.k8s)
    return transport
