"""Configuration of the remote profile run (invoke.yaml ``patchkit.profile.remote`` or a file).

``RemoteConfig.from_mapping(mapping, cwd=...)`` checks every key and value and refuses with
InvalidInput (exit 2) before anything is started: unknown keys, then each setting by its row's
check in the option table (patchkit.settings: stop signals outside a fixed list, non-positive
timeouts, choices, GPU and CPU lists), then what only RemoteConfig knows: empty commands,
environment names that are not shell names, the series' pin.toml, settings that exclude each other.
Commands are shell command lines run by ``sh -c`` on the target (a list is joined with
shlex.join); environment values are passed as data, never through a shell.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable
from dataclasses import asdict, field, fields, make_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from patchkit.errors import InvalidInput
from patchkit.locations import series_root
from patchkit.profile.remote.server_args import ENV_NAME, RESERVED_ENV
from patchkit.settings import (  # the choices: the option table's checks (patchkit.settings)
    BLOCKS,
    CPU_LIST,
    GPU_ID,
    MAX_ROUNDS,
    REMOTE_DEFAULTS,
    REMOTE_REPEAT,
    REMOTE_ROWS,
    REMOTE_SERIES,
    STOP_SIGNALS,
    TIMER_MODES,
    UNTIL,
    command_line,
    cpu_lists,
    gpu_list,
    need_inventory,
    resolve_checked,
    transport_options,
)
from patchkit.transport import kind_settings

__all__ = [  # the choices are the option table's; named here too for the sweep's modules
    "BLOCKS",
    "CPU_LIST",
    "DEFAULT_SERIES",
    "GPU_ID",
    "STOP_SIGNALS",
    "TIMER_MODES",
    "UNTIL",
    "RemoteConfig",
    "gpu_device",
    "parse_cpus",
    "parse_gpus",
]

DEFAULT_SERIES = series_root() / REMOTE_SERIES


def _fresh(name: str) -> Callable[[], Any]:
    """A default_factory: a copy of a list or mapping default, one per config."""
    return lambda: copy.deepcopy(REMOTE_DEFAULTS[name])


def _field(name: str, default: Any) -> Any:
    return (
        field(default_factory=_fresh(name)) if isinstance(default, (list, dict)) else field(default=default)
    )


# One field per patchkit.profile.remote key of the option table (patchkit.settings: the rows keyed
# profile.remote.*), its default the row's: a row added there is a setting here, nothing restated.
if TYPE_CHECKING:  # the fields come from the rows: the type checker reads them as Any

    class _RemoteFields:
        __dataclass_fields__: ClassVar[dict[str, Any]]

        def __init__(self, **settings: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

else:
    _RemoteFields = make_dataclass(
        "_RemoteFields", [(name, Any, _field(name, default)) for name, default in REMOTE_DEFAULTS.items()]
    )


class RemoteConfig(_RemoteFields):
    """Every knob of profile.remote; see invoke.yaml's documented ``profile.remote`` block. The
    settings, their defaults and what each means are the option table's rows keyed
    patchkit.profile.remote.* (patchkit.settings); ``series`` None: patchkit.series (the task),
    else DEFAULT_SERIES (_check). A dataclass (its fields: _RemoteFields)."""

    # ---- construction ----------------------------------------------------------------------

    @classmethod
    def from_mapping(
        cls, mapping: dict | None, *, cwd: str | Path | None = None, extra_env=None
    ) -> RemoteConfig:
        """Checked settings; ``extra_env`` (NAME=VALUE strings, e.g. from the command line)
        is merged over ``env``. Relative paths are taken from ``cwd``."""
        mapping = {k: v for k, v in dict(mapping or {}).items() if v is not None}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise InvalidInput(
                f"profile.remote: unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        cfg = cls(**mapping)
        cfg._check(Path(cwd) if cwd else Path.cwd())
        if extra_env:
            cfg.env.update(_env(list(extra_env), "env"))
        return cfg

    @classmethod
    def from_file(cls, path: str | Path, *, section: str | None = None) -> RemoteConfig:
        """JSON, TOML or YAML (needs PyYAML); ``section`` picks a dotted sub-table."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"{path}: cannot read the configuration ({exc.strerror})") from exc
        try:
            if path.suffix == ".json":
                data = json.loads(text)
            elif path.suffix == ".toml":
                import tomllib

                data = tomllib.loads(text)
            elif path.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
            else:
                raise InvalidInput(f"{path}: use a .json, .toml or .yaml file")
        except (ValueError, ImportError) as exc:  # JSON/TOML/YAML errors are ValueErrors
            raise InvalidInput(f"{path}: cannot parse the configuration: {exc}") from exc
        for key in section.split(".") if section else []:
            data = (data or {}).get(key) if isinstance(data, dict) else None
        if not isinstance(data, dict):
            raise InvalidInput(f"{path}: no mapping{' at ' + section if section else ''}")
        return cls.from_mapping(data, cwd=path.parent)

    # ---- checks ------------------------------------------------------------------------------

    def _check(self, cwd: Path) -> None:
        cfg: Any = self  # the fields are the rows' (_RemoteFields): set by name
        if isinstance(cfg.targets, str):
            cfg.targets = [cfg.targets]
        cfg.targets = [str(t) for t in cfg.targets]
        if not cfg.targets and not cfg.inventory:
            raise InvalidInput(
                "profile.remote: no targets (the SGLang install roots, "
                "e.g. ssh://gpu1/opt/venv/lib/python3.11/site-packages)"
            )
        for name, row in REMOTE_ROWS.items():  # each setting through its row (the resolve path's last step)
            setattr(self, name, resolve_checked(row, getattr(self, name), f"profile.remote: {name}"))
        for name in ("server_command", "bench_command"):  # required: None is missing too
            setattr(self, name, command_line(getattr(self, name), name, f"profile.remote: {name}"))
        if cfg.series is None:  # no series in the settings, nor patchkit.series (the task's fallback)
            cfg.series = str(DEFAULT_SERIES)
        cfg.series = str((cwd / Path(cfg.series).expanduser()).resolve())
        if not (Path(cfg.series) / "pin.toml").is_file():
            raise InvalidInput(f"profile.remote: series {cfg.series} has no pin.toml")
        cfg.env, cfg.bench_env = _env(cfg.env, "env"), _env(cfg.bench_env, "bench_env")
        need_inventory(cfg.inventory, cfg.limit, cfg.root, "profile.remote")  # as the patch tasks
        if cfg.inventory:  # read when the targets are resolved (resolve_targets), from here
            cfg.inventory = str(cwd / Path(cfg.inventory).expanduser())
        if cfg.timer_seed is None:  # one seed for every node and rank: they time the same cycles
            import secrets

            cfg.timer_seed = secrets.randbelow(1 << 32)
        if isinstance(cfg.ssh_options, str):
            cfg.ssh_options = [cfg.ssh_options]
        self._check_sequential()
        if cfg.matrix is not None and cfg.matrix != "":
            from patchkit.profile.remote.server_args import expand_server_matrix, parse_server_matrix

            cfg.matrix = parse_server_matrix(cfg.matrix)
            expand_server_matrix(cfg.matrix, cfg.server_command, cfg.env)  # shell syntax
            if cfg.gpus is not None and "env:CUDA_VISIBLE_DEVICES" in cfg.matrix:
                raise InvalidInput(
                    "profile.remote: gpus sets CUDA_VISIBLE_DEVICES per server; the matrix names it too"
                )
        else:
            cfg.matrix = None
        if cfg.baseline:
            from patchkit.profile.remote.server_args import drop_speculative

            if not drop_speculative(cfg.server_command)[1]:
                raise InvalidInput(
                    "profile.remote --baseline: the server command has no "
                    "--speculative-* option to drop, so the baseline would be "
                    "the same server"
                )
        if cfg.ssh_config:
            cfg.ssh_config = str(Path(cfg.ssh_config).expanduser())

    def _check_sequential(self) -> None:
        """budget_minutes, until, gpus, spread_cache, sweep_seed (a sweep's)."""
        if self.cpus is not None and "PATCHKIT_CPUS" in self.env:
            raise InvalidInput("profile.remote: cpus sets PATCHKIT_CPUS; env names it too")
        if self.hosts_as_blocks:
            if self.baseline:
                raise InvalidInput(
                    "profile.remote: blocks hosts and baseline together: the baseline serves the "
                    "reverted tree while the other hosts serve the patched one; sweep the baseline apart"
                )
            self._check_health_port("blocks hosts", "each block's server is probed on port + its index")
        if self.gpus is not None:
            taken = [k for k in self.env if k == "CUDA_VISIBLE_DEVICES"]
            if taken:
                raise InvalidInput(
                    "profile.remote: gpus sets CUDA_VISIBLE_DEVICES per server; env names it too"
                )
            if self.baseline:
                raise InvalidInput(
                    "profile.remote: gpus and baseline together: the baseline serves the reverted "
                    "tree while the other GPUs serve the patched one; sweep the baseline apart"
                )
            if len(self.gpus) > 1:
                self._check_health_port("gpus", "each GPU's server is probed on port + its index")
        if (self.budget_minutes, self.until, self.gpus) != (None, None, None) and not self.matrix:
            raise InvalidInput("profile.remote: budget_minutes, until and gpus are for a sweep (--matrix)")
        if self.hosts_as_blocks and not self.matrix:
            raise InvalidInput("profile.remote: blocks hosts is for a sweep (--matrix)")

    def _check_health_port(self, what: str, why: str) -> None:
        """A given health_url must name ``port``: each block's server is probed on its own."""
        if self.health_url is None:
            return
        from urllib.parse import urlsplit

        try:
            port = urlsplit(str(self.health_url)).port
        except ValueError:
            port = None
        if port != self.port:
            raise InvalidInput(
                f"profile.remote: with {what} the health_url must name port {self.port} ({why})"
            )

    # ---- derived -------------------------------------------------------------------------------

    @property
    def hosts_as_blocks(self) -> bool:
        """``blocks: hosts``: each target serves on its own, a block of the sweep's design."""
        return self.blocks == "hosts"

    @property
    def url(self) -> str:
        return self.health_url or f"http://127.0.0.1:{self.port}/health"

    @property
    def repeats(self) -> int:
        """Server starts per sweep point (``repeat``, default REMOTE_REPEAT)."""
        return self.repeat if self.repeat is not None else REMOTE_REPEAT

    @property
    def sequential(self) -> bool:
        """Rounds until decided (or the budget is spent): budget_minutes or until given."""
        return self.budget_minutes is not None or self.until is not None

    @property
    def rounds(self) -> int:
        """The sweep's rounds at most: ``repeat``; its default is 5 for a fixed sweep and
        MAX_ROUNDS for a sequential one."""
        return self.repeat if self.repeat is not None else (MAX_ROUNDS if self.sequential else self.repeats)

    @property
    def python_argv(self) -> list[str]:
        return shlex.split(self.python)

    def transport_options(self) -> dict:
        """The same translation as the patch tasks' (patchkit.settings.transport_options)."""
        return transport_options(
            ssh_config=self.ssh_config,
            ssh_options=self.ssh_options,
            ssh_persist=self.ssh_persist,
            connect_timeout=self.connect_timeout,
            kind_options={
                name: getattr(self, name) for name in kind_settings() if getattr(self, name) is not None
            },
        )

    def open_targets(self, cwd: str | None = None) -> list:
        """Every target, opened: ``targets`` then the inventory's hosts (``limit``, at ``root``), each kind's spec
        expanded (a k8s: selector: every pod it matches), through the one function the patch
        tasks use (patchkit.transport.resolve_targets). The caller closes them."""
        from patchkit.transport import resolve_targets

        return resolve_targets(
            self.targets,
            inventory=self.inventory,
            limit=self.limit,
            root=self.root,
            open_all=True,
            cwd=cwd,
            **self.transport_options(),
        )

    def to_dict(self) -> dict:
        return asdict(self)


def _env(value, name: str) -> dict:
    if isinstance(value, (list, tuple)):  # ["NCCL_PROTO=LL", ...]
        pairs = {}
        for item in value:
            key, eq, val = str(item).partition("=")
            if not eq:
                raise InvalidInput(f"profile.remote: {name} entry {item!r} is not NAME=VALUE")
            pairs[key] = val
        value = pairs
    if isinstance(value, str):
        return _env(value.split(), name)
    if not isinstance(value, dict):
        raise InvalidInput(f"profile.remote: {name} must map names to values")
    out = {}
    for key, val in value.items():
        if not ENV_NAME.match(str(key)):
            raise InvalidInput(f"profile.remote: {name}: {key!r} is not an environment name")
        if str(key) in RESERVED_ENV:
            raise InvalidInput(f"profile.remote: {name}: {key} is set by the profile run itself")
        if "\0" in str(val):
            raise InvalidInput(f"profile.remote: {name}: the value of {key} contains NUL")
        out[str(key)] = str(val)
    return out


def parse_gpus(value, name: str = "profile.remote: gpus") -> list[str] | None:
    """``"0,1,2,3"`` (or a list) -> ["0", "1", "2", "3"] (the option table's check of
    profile.remote.gpus: patchkit.settings.gpu_list); None when not given. ``name``: the
    setting or option the messages name."""
    return None if value is None else gpu_list(value, "gpus", name)


def parse_cpus(value, name: str = "profile.remote: cpus") -> list[str] | None:
    """``"0-15"`` -> ["0-15"]; ``"0-15;16-31"`` -> one CPU list per block of a sweep (the option
    table's check of profile.remote.cpus: patchkit.settings.cpu_lists). None when not given."""
    return None if value is None else cpu_lists(value, "cpus", name)


def gpu_device(gpu: str) -> str:
    """A --gpus entry's CUDA_VISIBLE_DEVICES value: the entry less its "@label"."""
    return gpu.partition("@")[0]
