"""``python -m patchkit.profile run|sweep``: the profile flows without invoke.

The invoke tasks (profile.run, profile.sweep) call the same functions; this entry exists for
machines without invoke (a lent GPU box) and for tests that signal the process. Exit codes:
0 done, 1 refused/failed (tree reverted), 2 invalid input, 130 interrupted (tree reverted).
"""

from __future__ import annotations

import argparse
import sys

from patchkit.cli import argument_parser, main_boundary
from patchkit.settings import PROFILE_DEFAULTS, number, positive_int, seconds


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=PROFILE_DEFAULTS["out"], help="reports go to OUT/<timestamp>/")
    p.add_argument("--size", default=PROFILE_DEFAULTS["size"], help="default | ci | cpu | gpu")
    p.add_argument("--site", default=None, help="installed tree to patch (default .work/tf-site)")
    p.add_argument("--series", default=None, help="series folder (default the transformers one)")
    p.add_argument(
        "--timer", default=None, help="events | sync | host | off (default: events on CUDA, host otherwise)"
    )
    p.add_argument("--device", default=PROFILE_DEFAULTS["device"], help="auto | cpu | cuda")
    p.add_argument("--seed", type=int, default=PROFILE_DEFAULTS["seed"])
    p.add_argument("--timeout", type=float, default=None, help="seconds for the workload")
    p.add_argument("--wheelhouse", default=None, help="folder of wheels instead of the index")
    p.add_argument("--no-chart", action="store_true", help="skip phases.png")
    p.add_argument(
        "--warmup",
        action=argparse.BooleanOptionalAction,
        default=PROFILE_DEFAULTS["warmup"],
        help="warm up before the measured pass (default on)",
    )


def _paths(args) -> dict:
    kw = {}
    if args.site:
        kw["site"] = args.site
    if args.series:
        kw["series_dir"] = args.series
    return kw


def build_parser() -> argparse.ArgumentParser:
    """The ``run`` and ``sweep`` command lines (their defaults: patchkit.settings.PROFILE_DEFAULTS)."""
    parser = argument_parser(prog="python -m patchkit.profile")
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="one profile run of the embedded default")
    _common(run)
    run.add_argument("--num-assistant-tokens", type=int, default=PROFILE_DEFAULTS["num_assistant_tokens"])
    run.add_argument(
        "--confidence",
        type=float,
        default=PROFILE_DEFAULTS["confidence"],
        help="assistant_confidence_threshold",
    )
    sweep = sub.add_parser("sweep", help="one profile run per matrix point, plus the baseline")
    _common(sweep)
    sweep.add_argument(
        "--matrix",
        default=PROFILE_DEFAULTS["matrix"],
        help="e.g. 'num_assistant_tokens=2,4,8;assistant_confidence_threshold=0,0.4'",
    )
    sweep.add_argument(
        "--repeat", type=int, default=None, help="measured passes per point, rotated (default 3)"
    )
    return parser


@main_boundary("profile", interrupted="the tree was reverted")
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    # the same checks as the invoke tasks (argparse took the types, not the ranges)
    seconds(args.timeout, "timeout")
    positive_int(args.seed, "seed", minimum=0)
    if args.cmd == "run":
        positive_int(args.num_assistant_tokens, "num_assistant_tokens")
        number(args.confidence, "confidence", low=0, high=1)
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
        from patchkit.profile.default import run_default

        run_default(
            args.out,
            num_assistant_tokens=args.num_assistant_tokens,
            assistant_confidence_threshold=args.confidence,
            **common,
        )
    else:
        from patchkit.profile.sweep import run_sweep

        run_sweep(args.out, matrix=args.matrix, repeat=args.repeat, **common)
    return 0


if __name__ == "__main__":
    sys.exit(main())
