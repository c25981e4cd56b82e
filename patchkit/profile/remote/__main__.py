"""``python -m patchkit.profile.remote --config FILE [--section patchkit.profile.remote] [--resume DIR]``.

The entry point picks the run: ``matrix`` in the settings runs the sweep (sweep.py), otherwise
one run (run.py). The choice lives here, above both, so that neither imports the other's caller.
Errors, ^C and SIGTERM reach the exit code through the one boundary (patchkit.boundary).
"""

from __future__ import annotations

import argparse
import sys

from patchkit.boundary import argument_parser, main_boundary
from patchkit.errors import InvalidInput
from patchkit.profile.remote.config import RemoteConfig
from patchkit.profile.remote.run import run_remote
from patchkit.profile.remote.sweep import run_remote_sweep
from patchkit.settings import add_argument, checked, offered

PROG = "python -m patchkit.profile.remote"  # its options: patchkit.settings' option table


def build_parser() -> argparse.ArgumentParser:
    """The command line; every setting's default is RemoteConfig's (--out: None keeps its ``out``)."""
    parser = argument_parser(prog=PROG)
    options = offered(PROG)
    add_argument(parser, options["config"], required=True)
    add_argument(parser, options["section"])
    add_argument(parser, options["out"], default=None)
    add_argument(parser, options["resume"])
    return parser


@main_boundary("profile", interrupted="servers stopped, targets reverted")
def main(argv=None) -> int:
    """``python -m patchkit.profile.remote --config FILE [--section patchkit.profile.remote]``."""
    args = build_parser().parse_args(argv)
    cfg = RemoteConfig.from_file(args.config, section=args.section)
    if args.out:
        cfg.out = args.out
    resume = checked(PROG, "resume", args.resume)
    if resume is not None and not cfg.matrix:
        raise InvalidInput(f"{PROG} --resume is for a sweep: the settings in {args.config} have no matrix")
    if cfg.matrix:
        run_remote_sweep(cfg, resume=resume)
    else:
        run_remote(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
