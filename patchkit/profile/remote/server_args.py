"""Rewrite a server command line (a ``sh -c`` string) option by option, keeping everything else.

    drop_speculative("exec python -m sglang.launch_server --model M --speculative-num-steps 3")
        -> ("exec python -m sglang.launch_server --model M", ["--speculative-num-steps 3"])
    set_option('PYTHONPATH="$ROOT" exec python -m x --port 1', "speculative-num-steps", "2")
        -> 'PYTHONPATH="$ROOT" exec python -m x --port 1 --speculative-num-steps 2'

The command is split into shell words the way ``sh`` would (quotes, backslashes, ``$(...)``,
backquotes, comments, control operators), but only to find where each word starts and ends:
the words that stay are kept as they were typed, expansions included, so ``"$PATCHKIT_..."``
still expands on the target. Inserted values are shlex-quoted.

An option ``--NAME`` takes the next word as its value unless it is written ``--NAME=VALUE``,
the next word is another option (``-...``) or a control operator, or NAME is one of SGLang's
switches without a value (``BOOLEAN_OPTIONS``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from patchkit.errors import InvalidInput

SPECULATIVE_PREFIX = "--speculative-"
# SGLang's --speculative-* switches that take no value (server_args.py, 0.5.9 .. 0.5.23)
BOOLEAN_OPTIONS = frozenset({"--speculative-adaptive", "--speculative-skip-dp-mlp-sync"})
CONTROL = frozenset({";", "&", "&&", "|", "||", "|&", ";;", "(", ")", "\n"})
OPTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# set by the profile run itself: neither env: settings nor env: matrix keys may name them
RESERVED_ENV = (
    "PATCHKIT_TIMER_DIR",
    "PATCHKIT_TARGET_ROOT",
    "PATCHKIT_RUN_DIR",
    "PATCHKIT_NODE_RANK",
    "PATCHKIT_NNODES",
    "PATCHKIT_SERVER_PORT",
)


@dataclass(frozen=True)
class Word:
    start: int
    end: int
    text: str
    value: str | None  # the literal value, None when the word has an expansion

    @property
    def is_control(self) -> bool:
        return self.text in CONTROL


def _skip_parens(cmd: str, i: int) -> int:
    """Index just past the ``)`` that closes the ``$(`` whose ``(`` is at cmd[i - 1]."""
    depth = 1
    while i < len(cmd):
        ch = cmd[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "'":
            i = cmd.find("'", i + 1)
            if i < 0:
                break
        elif ch == '"':
            i = _skip_double(cmd, i + 1)
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise InvalidInput(f"server command: unbalanced $( in {cmd!r}")


def _skip_double(cmd: str, i: int) -> int:
    """Index just past the ``"`` closing the double quote opened before cmd[i]."""
    while i < len(cmd):
        ch = cmd[i]
        if ch == "\\":
            i += 2
        elif ch == '"':
            return i + 1
        elif cmd.startswith("$(", i):
            i = _skip_parens(cmd, i + 2)
        elif ch == "`":
            end = cmd.find("`", i + 1)
            if end < 0:
                break
            i = end + 1
        else:
            i += 1
    raise InvalidInput(f"server command: unterminated double quote in {cmd!r}")


def split_words(cmd: str) -> list[Word]:
    """Shell words with their spans; control operators (and newlines) are words of their own."""
    words: list[Word] = []
    i, n = 0, len(cmd)
    while i < n:
        ch = cmd[i]
        if cmd.startswith("\\\n", i) or ch in " \t":
            i += 2 if ch == "\\" else 1
            continue
        if ch == "#":  # a comment runs to the end of the line
            end = cmd.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch in ";&|()\n":
            op = cmd[i : i + 2] if cmd[i : i + 2] in CONTROL else ch
            words.append(Word(i, i + len(op), op, op))
            i += len(op)
            continue
        start, value, literal = i, [], True
        while i < n:
            ch = cmd[i]
            if ch in " \t\n" or (ch in ";|()") or (ch == "&" and cmd[i - 1 : i] not in "<>"):
                break
            if ch == "\\":
                if cmd.startswith("\\\n", i):
                    i += 2
                    continue
                value.append(cmd[i + 1 : i + 2])
                i += 2
            elif ch == "'":
                end = cmd.find("'", i + 1)
                if end < 0:
                    raise InvalidInput(f"server command: unterminated single quote in {cmd!r}")
                value.append(cmd[i + 1 : end])
                i = end + 1
            elif ch == '"':
                end = _skip_double(cmd, i + 1)
                inner = cmd[i + 1 : end - 1]
                if "$" in inner or "`" in inner:
                    literal = False
                value.append(re.sub(r'\\([$`"\\\n])', r"\1", inner))
                i = end
            elif ch == "$" or ch == "`":
                literal = False
                if cmd.startswith("$(", i):
                    i = _skip_parens(cmd, i + 2)
                elif ch == "`":
                    end = cmd.find("`", i + 1)
                    if end < 0:
                        raise InvalidInput(f"server command: unterminated backquote in {cmd!r}")
                    i = end + 1
                else:
                    i += 1
            else:
                value.append(ch)
                i += 1
        words.append(Word(start, i, cmd[start:i], "".join(value) if literal else None))
    return words


def _takes_value(words: list[Word], idx: int) -> bool:
    word = words[idx]
    if "=" in (word.value or "") or word.value in BOOLEAN_OPTIONS or idx + 1 >= len(words):
        return False
    nxt = words[idx + 1]
    return not nxt.is_control and not (nxt.value or "").startswith("-")


def _cut(cmd: str, words: list[Word], drop: set[int]) -> str:
    """The command without the words at ``drop`` (and the blank before each)."""
    out, pos = [], 0
    for idx in sorted(drop):
        gap_start = words[idx - 1].end if idx > 0 else words[idx].start
        out.append(cmd[pos:gap_start])
        pos = words[idx].end
    out.append(cmd[pos:])
    text = "".join(out)
    return text.lstrip() if drop and min(drop) == 0 else text


def drop_speculative(cmd: str) -> tuple[str, list[str]]:
    """``cmd`` with every ``--speculative-*`` option and its value removed; what was removed."""
    words = split_words(cmd)
    drop: set[int] = set()
    removed = []
    for idx, word in enumerate(words):
        if idx in drop or not (word.value or "").startswith(SPECULATIVE_PREFIX):
            continue
        drop.add(idx)
        if _takes_value(words, idx):
            drop.add(idx + 1)
            removed.append(f"{word.text} {words[idx + 1].text}")
        else:
            removed.append(word.text)
    return _cut(cmd, words, drop), removed


def drop_options(cmd: str, names) -> str:
    """``cmd`` without the options ``--NAME`` (and their values) for each of ``names``."""
    flags = {"--" + check_option_name(n, "server option") for n in names}
    words = split_words(cmd)
    drop: set[int] = set()
    for idx, word in enumerate(words):
        text = word.value or ""
        if idx in drop or not (text in flags or text.split("=", 1)[0] in flags):
            continue
        drop.add(idx)
        if text in flags and _takes_value(words, idx):
            drop.add(idx + 1)
    return _cut(cmd, words, drop)


def shift_port(cmd: str, index: int, default: int | None = None) -> str:
    """One server per GPU: every literal ``--port N`` (``--port=N``) of ``cmd`` becomes
    ``N + index``; a port given by an expansion (``"$PATCHKIT_SERVER_PORT"``) is left to it;
    without ``--port``, ``default`` (when given) is added as ``--port default``."""
    words = split_words(cmd)
    edits: list[tuple[int, int, str]] = []
    found = False
    for idx, word in enumerate(words):
        text = word.value or ""
        if text == "--port" and _takes_value(words, idx):
            found = True
            nxt = words[idx + 1]
            if nxt.value is not None and nxt.value.isdigit():
                edits.append((nxt.start, nxt.end, str(int(nxt.value) + index)))
        elif text.startswith("--port="):
            found = True
            value = text.split("=", 1)[1]
            if value.isdigit():
                edits.append((word.start, word.end, f"--port={int(value) + index}"))
        elif word.value is None and word.text.startswith(("--port", "'--port", '"--port')):
            found = True  # written with an expansion: its own business
    if not found:
        return set_option(cmd, "port", str(default)) if default is not None else cmd
    return _apply_edits(cmd, edits)


def _apply_edits(cmd: str, edits: list[tuple[int, int, str]]) -> str:
    """``cmd`` with each (start, end, text) span replaced; spans in order, not overlapping."""
    out, pos = [], 0
    for start, end, text in edits:
        out += [cmd[pos:start], text]
        pos = end
    out.append(cmd[pos:])
    return "".join(out)


def check_option_name(name: str, where: str) -> str:
    name = name.strip()
    name = name[2:] if name.startswith("--") else name
    if not OPTION_NAME.match(name):
        raise InvalidInput(f"{where}: {name!r} is not an option name (letters, digits, - _ .)")
    return name


def set_option(cmd: str, name: str, value: str) -> str:
    """``--name value`` in ``cmd``: each occurrence's value replaced, else the option added at
    the end of the first command (before a control operator or comment, if any)."""
    flag = "--" + check_option_name(name, "server option")
    quoted = shlex.quote(str(value))
    words = split_words(cmd)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement)
    for idx, word in enumerate(words):
        if word.value == flag:
            if _takes_value(words, idx):
                nxt = words[idx + 1]
                edits.append((nxt.start, nxt.end, quoted))
            else:
                edits.append((word.end, word.end, " " + quoted))
        elif (word.value or "").startswith(flag + "="):
            edits.append((word.start, word.end, shlex.quote(f"{flag}={value}")))
    if not edits:
        at = _end_of_first_command(cmd, words)
        head, rest = cmd[:at].rstrip(), cmd[at:]
        gap = cmd[len(head) : at] or (" " if rest else "")
        return f"{head} {flag} {quoted}{gap}{rest}"
    return _apply_edits(cmd, edits)


def _end_of_first_command(cmd: str, words: list[Word]) -> int:
    """Where words can be added to the first simple command: before its control operator,
    else before a trailing ``#`` comment, else the end."""
    for word in words:
        if word.is_control:
            return word.start
    comment = cmd.find("#", words[-1].end if words else 0)
    return comment if comment >= 0 else len(cmd)


# ---- the remote sweep's matrix --------------------------------------------------------------

ENV_PREFIX = "env:"


def parse_server_matrix(text) -> dict[str, list[str]]:
    """``"speculative-num-steps=1,2,3;env:NCCL_PROTO=LL,Simple"`` -> ordered ``{key: values}``.

    A key is a server option (``--`` optional; the point's value replaces or adds
    ``--KEY VALUE`` in the server command) or ``env:NAME`` (the server's environment).
    A mapping ``{key: [values]}`` (e.g. from invoke.yaml) is checked the same way."""
    if isinstance(text, dict):
        parts = [
            (str(k), [str(v) for v in (vs if isinstance(vs, (list, tuple)) else [vs])])
            for k, vs in text.items()
        ]
    else:
        parts = []
        for part in filter(None, (p.strip() for p in re.split(r"[;\n]", str(text or "")))):
            key, sep, values = part.partition("=")
            if not sep:
                raise InvalidInput(
                    f"--matrix: {part!r} is not KEY=V1,V2,... (KEY a server "
                    "option such as speculative-num-steps, or env:NAME)"
                )
            parts.append((key, values.split(",")))
    matrix: dict[str, list[str]] = {}
    for key, values in parts:
        key = key.strip()
        if key.startswith(ENV_PREFIX):
            name = key[len(ENV_PREFIX) :].strip()
            if not ENV_NAME.match(name):
                raise InvalidInput(f"--matrix: {key!r}: {name!r} is not an environment name")
            if name in RESERVED_ENV:
                raise InvalidInput(f"--matrix: {key!r}: {name} is set by the profile run itself")
            key = ENV_PREFIX + name
        else:
            key = check_option_name(key, "--matrix")
        values = [v.strip() for v in values if v.strip()]
        if not values:
            raise InvalidInput(f"--matrix: {key} has no values")
        if any(ch in v for v in values for ch in "\0\n\r"):
            raise InvalidInput(f"--matrix: a value of {key} contains a control character")
        if key in matrix:
            raise InvalidInput(f"--matrix: {key} is given twice")
        matrix[key] = values
    if not matrix:
        raise InvalidInput("--matrix: empty; e.g. 'speculative-num-steps=1,2,3;env:NCCL_PROTO=LL,Simple'")
    return matrix


def point_label(params: dict[str, str]) -> str:
    """``num-steps=2 num-draft-tokens=4 NCCL_PROTO=LL`` (the speculative- prefix left out)."""
    short = []
    for key, value in params.items():
        name = key[len(ENV_PREFIX) :] if key.startswith(ENV_PREFIX) else key
        short.append(f"{name.removeprefix('speculative-')}={value}")
    return " ".join(short)


def expand_server_matrix(
    matrix: dict[str, list[str]], server_command: str, env: dict[str, str]
) -> list[dict]:
    """Every point of the matrix (cartesian product, first key slowest): its label, params,
    server command and server environment (``env`` with the point's env: keys over it)."""
    import itertools

    keys = list(matrix)
    points = []
    for combo in itertools.product(*(matrix[k] for k in keys)):
        params = dict(zip(keys, combo))
        command, point_env = server_command, dict(env)
        for key, value in params.items():
            if key.startswith(ENV_PREFIX):
                point_env[key[len(ENV_PREFIX) :]] = value
            else:
                command = set_option(command, key, value)
        points.append(
            {"label": point_label(params), "params": params, "server_command": command, "env": point_env}
        )
    return points
