"""The installed ``patchkit`` command: invoke's own Program serving patchkit's task collection.

``patchkit patch.apply --series auto --target …`` takes the same tasks and options as
``invoke patch.apply …`` in the checkout (both serve ``patchkit.tasks.ns``), from any directory.
Configuration, lowest to highest: the collection's defaults, ``/etc/patchkit.yaml``, the per-user
``$XDG_CONFIG_HOME/patchkit/patchkit.yaml`` (``~/.config/patchkit/``), ``patchkit.yaml`` -- or,
when there is none, ``invoke.yaml`` -- in the current directory, ``INVOKE_*`` environment
variables (as for invoke), ``-f FILE``, then the command line. Relative paths in any of them
resolve against the current directory. Unknown ``patchkit.*`` keys in any of those files are
refused (exit 2, naming key and file: patchkit.settings.check_config), and so are command-line
parse errors such as an unknown option (exit 2: patchkit.boundary.program_class).
"""

from __future__ import annotations

# the program's first own import: Ctrl-C from here on, while invoke and the tasks load, is one
# line and exit 130 (patchkit.startup; the venv's patchkit-startup.pth may have done it already)
from patchkit import startup

startup.install_if_program()

import os  # noqa: E402
import sys  # noqa: E402

from invoke import Config  # noqa: E402

from patchkit.boundary import exit_boundary, program_class  # noqa: E402

# the project-level file names tried in the current directory, first found wins (json/yaml only:
# a patchkit.py or invoke.py there is somebody's code, not configuration)
PROJECT_FILES = ("patchkit", "invoke")
PROJECT_SUFFIXES = ("yaml", "yml", "json")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("patchkit")
    except Exception:  # a checkout run without installed metadata
        return "unknown"


def user_config_dir() -> str:
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(xdg, "patchkit")


class PatchkitConfig(Config):
    """invoke's Config with patchkit's file names (``patchkit.yaml``) and places."""

    prefix = "patchkit"
    PROJECT_NAMES = PROJECT_FILES  # the project file names, in order (patchkit.settings.config_places)
    # invoke's Config says `env_prefix = None` (typed None) and reads a string from subclasses
    env_prefix = "INVOKE"  # type: ignore[assignment]  # INVOKE_PATCHKIT_JOBS=4 works alike for `invoke` and `patchkit`

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("user_prefix", os.path.join(user_config_dir(), ""))
        super().__init__(*args, **kwargs)

    def load_project(self, merge: bool = True) -> None:
        """``patchkit.yaml`` in the project folder, else ``invoke.yaml`` (yml, json alike)."""
        if self._project_found is not None or self._project_prefix is None:
            return
        for base in PROJECT_FILES:
            for suffix in PROJECT_SUFFIXES:
                path = f"{self._project_prefix}{base}.{suffix}"
                if os.path.isfile(path):
                    self._set(
                        _project=getattr(self, f"_load_{suffix}")(path) or {},
                        _project_path=path,
                        _project_found=True,
                    )
                    if merge:
                        self.merge()
                    return
        self._set(_project_found=False)


# the base is built by a call so that importing patchkit.boundary does not import invoke; mypy cannot
# follow a call as a base class
class PatchkitProgram(program_class()):  # type: ignore[misc]
    """Program with a fixed namespace whose project config is the current directory's; parse
    errors exit 2 (program_class)."""

    # invoke's core flags for its own run()/sudo() (a pty, a sudo password, echo, dry runs, hiding
    # output, a command timeout) and for .pyc files: patchkit's tasks never call run(), so
    # `patchkit --help` leaves them out (they still parse, as for invoke)
    HIDDEN_CORE_FLAGS = frozenset(
        (
            "--pty",
            "--prompt-for-sudo-password",
            "--echo",
            "--dry",
            "--hide",
            "--warn-only",
            "--command-timeout",
            "--write-pyc",
        )
    )

    def print_help(self) -> None:
        """The subcommands first, then the core options that concern patchkit."""
        print(f"Usage: {self.binary} [--core-opts] <subcommand> [--subcommand-opts] ...")
        print(f"       {self.binary} <subcommand> --help   (a subcommand's own options)")
        print("")
        self.list_tasks()
        print("Core options:")
        print("")
        shown = [
            row
            for row in self.initial_context.help_tuples()
            if not any(flag.split("=")[0] in self.HIDDEN_CORE_FLAGS for flag in row[0].split(", "))
        ]
        self.print_columns(shown)

    def parse_collection(self) -> None:
        super().parse_collection()
        self.config.set_project_location(os.getcwd())
        self.config.load_project()

    def execute(self) -> None:
        from patchkit.settings import say_notes

        # the one boundary (patchkit.boundary): a bad config file exits 2, Ctrl-C 130 (invoke's own
        # Program would exit 1); every config file is loaded by now (-f included)
        with exit_boundary("patchkit"):
            say_notes(self.config)
            super().execute()


def make_program() -> PatchkitProgram:
    from patchkit.tasks import ns

    return PatchkitProgram(
        name="patchkit",
        binary="patchkit",
        binary_names=["patchkit"],
        version=_version(),
        namespace=ns,
        config_class=PatchkitConfig,
    )


def main(argv: list[str] | None = None) -> None:
    make_program().run(argv if argv is not None else sys.argv)


if __name__ == "__main__":
    main()
