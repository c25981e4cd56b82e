"""Several GPUs of one host as blocks of one sweep (``--gpus 0,1,2,3``).

One server per GPU at the same time: GPU ``i`` of the list gets ``CUDA_VISIBLE_DEVICES`` set to
its id and its own port, ``port + i``: ``PATCHKIT_SERVER_PORT``, the health URL, and every
literal ``--port N`` of the server, warm-up and benchmark commands (``N + i``; a server command
without ``--port`` gets ``--port port+i``, since SGLang's default would collide; a port written
as an expansion, ``"$PATCHKIT_SERVER_PORT"``, is left to it). Every target of the run serves
with that GPU: a fleet of several targets still serves one model together, so the blocks are
the GPUs, not the targets.

Several targets as blocks (``blocks: hosts``, ``--blocks hosts``): each target runs its own
one-node server (its transport alone: PATCHKIT_NODE_RANK 0, PATCHKIT_NNODES 1), one at a time,
like one GPU; with ``gpus`` too, a block is a (target, GPU) pair, target-major. A block's name
is the target's label (``"LABEL gpuI"`` for a pair); block ``i`` gets port + i like a GPU, so
that targets sharing a machine (local folders, pods of one node) do not collide.

Which GPU runs which point: a randomized Latin square per ``len(gpus)`` rounds. In round r,
point i (its index in the matrix) runs on GPU ``relabel[(i + shift) % G]``, where the square
``r // G`` draws (seeded) a permutation ``relabel`` of the GPUs and a permutation of the G
shifts, and round r takes the ``r % G``-th shift: within every G consecutive rounds each point
runs once on every GPU, in an order no one chose, so that a fast GPU cannot favour the points
it happened to run, and the analysis pairs by block. Points sharing a GPU in a round run one
after the other on it, in the round's rotated order.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from patchkit.errors import InvalidInput
from patchkit.profile.remote.config import RemoteConfig, gpu_device
from patchkit.profile.remote.server_args import shift_port


@dataclass
class Block:
    """Where a run goes: its name ("gpu0", a target's label, ...; None for the one block of a
    plain sweep), the GPU, the settings with its port, its transports (its own copies: runs of
    different blocks overlap; one target's alone for a host block) and the server command
    rewrite; ``target``: the target's label of a host block."""

    index: int
    name: str | None
    gpu: str | None
    cfg: RemoteConfig
    transports: list
    target: str | None = None

    def server_command(self, command: str) -> str:
        if self.name is None:
            return command
        return shift_port(command, self.index, default=self.cfg.port)

    def describe(self) -> str:
        """The block for a log line: its name, GPU and port."""
        gpu = f"CUDA_VISIBLE_DEVICES={self.gpu}, " if self.gpu is not None else ""
        return f"{self.name} ({gpu}port {self.cfg.port})"

    def env(self, env: dict) -> dict:
        out = dict(env)
        cpus = self.cfg.cpus
        if cpus and len(cpus) > 1:  # one CPU list per block (a single list: every server's)
            out["PATCHKIT_CPUS"] = cpus[self.index]
        if self.gpu is not None:
            out["CUDA_VISIBLE_DEVICES"] = gpu_device(self.gpu)
        return out


def _with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (userinfo + "@" if userinfo else "") + f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def gpu_config(cfg: RemoteConfig, index: int) -> RemoteConfig:
    """The settings for GPU ``index`` of ``cfg.gpus``: port + index in the port, the health
    URL and the benchmark and warm-up commands."""
    port = cfg.port + index
    return dataclasses.replace(
        cfg,
        port=port,
        health_url=_with_port(cfg.health_url, port) if cfg.health_url else None,
        bench_command=shift_port(cfg.bench_command, index),
        warmup_command=shift_port(cfg.warmup_command, index) if cfg.warmup_command else None,
    )


def copy_transports(transports: list) -> list:
    """Fresh transports to the same targets (a dataclass transport's connection state is not
    copied: each block opens and closes its own)."""
    return [
        dataclasses.replace(t) if dataclasses.is_dataclass(t) and not isinstance(t, type) else t
        for t in transports
    ]


def make_blocks(cfg: RemoteConfig, transports: list) -> list[Block]:
    """One Block per GPU of ``cfg.gpus`` (the first with ``transports`` themselves), or the one
    block of a sweep without GPUs; with ``blocks: hosts``, one per target (per target and GPU)."""
    if cfg.hosts_as_blocks:
        blocks = host_blocks(cfg, transports)
    elif not cfg.gpus:
        blocks = [Block(0, None, None, cfg, transports)]
    else:
        blocks = [
            Block(
                i, f"gpu{i}", gpu, gpu_config(cfg, i), transports if i == 0 else copy_transports(transports)
            )
            for i, gpu in enumerate(cfg.gpus)
        ]
    if cfg.cpus and len(cfg.cpus) > 1 and len(cfg.cpus) != len(blocks):
        raise InvalidInput(
            f"profile.remote: cpus gives {len(cfg.cpus)} CPU lists for {len(blocks)} block(s) "
            "(one list for every server, or one per GPU of --gpus / target of --blocks hosts)"
        )
    return blocks


def host_blocks(cfg: RemoteConfig, transports: list) -> list[Block]:
    """``blocks: hosts``: one Block per target (per target and GPU of ``cfg.gpus``), each with
    its target's transport alone, named by its label (made unique), port + its index."""
    labels: list[str] = []
    for t in transports:
        label = str(getattr(t, "label", None) or f"target{len(labels)}")
        if label in labels:
            label = f"{label} #{len(labels) + 1}"
        labels.append(label)
    blocks: list[Block] = []
    for t, label in zip(transports, labels):
        for g, gpu in enumerate(cfg.gpus or [None]):
            i = len(blocks)
            name = label if gpu is None else f"{label} gpu{g}"
            mine = [t] if not any(b.transports[0] is t for b in blocks) else copy_transports([t])
            blocks.append(Block(i, name, gpu, gpu_config(cfg, i), mine, target=label))
    return blocks


def assign(points: list[int], rnd: int, blocks: int, seed: int) -> dict[int, int]:
    """Round ``rnd``: point index -> block index (the module docstring's Latin square)."""
    if blocks <= 1:
        return {p: 0 for p in points}
    square, pos = divmod(rnd, blocks)
    rng = random.Random(f"patchkit-sweep:{seed}:{square}")
    relabel = list(range(blocks))
    rng.shuffle(relabel)
    shifts = list(range(blocks))
    rng.shuffle(shifts)
    return {p: relabel[(p + shifts[pos]) % blocks] for p in points}
