"""``python -m patchkit.profile run|sweep``: the profile flows without invoke.

The invoke tasks (profile.run, profile.sweep) call the same functions; this entry exists for
machines without invoke (a lent GPU box) and for tests that signal the process. Exit codes:
0 done, 1 refused/failed (tree reverted), 2 invalid input, 130 interrupted (tree reverted).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from patchkit.boundary import argument_parser, main_boundary
from patchkit.settings import add_argument, offered

# the options of both commands, in order, with their argparse types (help, default and check:
# patchkit.settings' option table, as for the invoke tasks profile.run / profile.sweep)
COMMON: dict[str, dict[str, Any]] = {
    "out": {},
    "size": {},
    "site": {},
    "series": {},
    "timer": {},
    "device": {},
    "seed": {"type": int},
    "timeout": {"type": float},
    "wheelhouse": {},
    "no_chart": {"action": "store_true"},
    "warmup": {"action": argparse.BooleanOptionalAction},
}
OWN: dict[str, dict[str, dict[str, Any]]] = {
    "run": {"num_assistant_tokens": {"type": int}, "confidence": {"type": float}, "mode": {}},
    "sweep": {"matrix": {}, "repeat": {"type": int}},
}
# checked after parsing (argparse took the types, not the ranges), as the invoke tasks check them
CHECKED = {
    "run": ("timeout", "seed", "num_assistant_tokens", "confidence", "mode"),
    "sweep": ("timeout", "seed"),
}


def _paths(args) -> dict:
    kw = {}
    if args.site:
        kw["site"] = args.site
    if args.series:
        kw["series_dir"] = args.series
    return kw


def build_parser() -> argparse.ArgumentParser:
    """The ``run`` and ``sweep`` command lines (help, defaults: patchkit.settings' option table)."""
    parser = argument_parser(prog="python -m patchkit.profile")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for cmd, help in (
        ("run", "one profile run of the embedded default"),
        ("sweep", "one profile run per matrix point, plus the baseline"),
    ):
        command, options = sub.add_parser(cmd, help=help), offered(f"profile.{cmd}")
        for name, kwargs in {**COMMON, **OWN[cmd]}.items():
            add_argument(command, options[name], **kwargs)
    return parser


@main_boundary("profile", interrupted="the tree was reverted")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    options = offered(f"profile.{args.cmd}")
    for name in CHECKED[args.cmd]:  # the same checks as the invoke tasks
        check = options[name].check
        assert check is not None, f"profile.{args.cmd} --{name} has a check in the option table"
        check(getattr(args, name), name)
    common = dict(
        size=args.size,
        timer_mode=args.timer,
        device=args.device,
        seed=args.seed,
        timeout=args.timeout,
        wheelhouse=args.wheelhouse,
        chart=not args.no_chart,
        warmup=args.warmup,
        **_paths(args),
    )
    if args.cmd == "run":
        from patchkit.profile.local_run import run_default

        run_default(
            args.out,
            num_assistant_tokens=args.num_assistant_tokens,
            assistant_confidence_threshold=args.confidence,
            mode=args.mode,
            **common,
        )
    else:
        from patchkit.profile.local_sweep import run_sweep

        run_sweep(args.out, matrix=args.matrix, repeat=args.repeat, **common)
    return 0


if __name__ == "__main__":
    sys.exit(main())
