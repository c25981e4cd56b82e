"""The embedded default workload: assisted generation with transformers, no hub downloads.

Run as a program (``python -m patchkit.profile.workload --spec SPEC.json``) in a subprocess
whose PYTHONPATH starts with the patched transformers tree, so that
``transformers.generation.phase_timer`` is the runtime the series inserted. The orchestrator
(patchkit.profile.session) writes the spec and reads back the result file.

The models are built from configs with a fixed seed. The target is a random Llama; the draft
is the target's first ``draft_layers`` decoder layers sharing its embeddings, final norm and
LM head (the very same modules, no copy). The target's later layers have their output
projections (attention o_proj, MLP down_proj) scaled by ``later_scale`` so that they only
nudge the residual stream: the draft's greedy choice usually, but not always, matches the
target's, and acceptance is high but not total. The LM head is scaled so that the logits
have a standard deviation of ``logit_std``: random logits are otherwise so flat that every
draft token has a tiny probability and ``assistant_confidence_threshold`` means nothing.

Decoding is greedy, so speculation must not change the text: the result records how many
prompts came out identical with and without the assistant (a correctness check; bf16 kernels
on a GPU may legitimately differ in a late token).

Per pass of the spec (one point once for ``profile.run``; for ``profile.sweep`` every point,
``repeat`` times in rotated order, see ``spec["passes"]``) the timing runtime is (re)configured
to write into that pass's directory, and for every prompt the plain generation (baseline, no
assistant) runs right before the assisted one, so both see the same machine load.

Warm-up (``spec["warmup"]``, default true): before the first pass of each point, the first
prompt at full length, plain and assisted at that point's settings, with timing on in that
pass's directory; the measured pass then starts. The wall-clock start and end of the warm-up
and of the measured pass (``time.time_ns()``, this process's host: the clock of the timing
headers) are returned per pass as ``warmup_ns`` and ``window_ns``; the orchestrator writes them
to the timing folder as window.json, and the report keeps only the measured pass's cycles.
Without warm-up the first pass meets cold caches (kernel selection on a GPU: seen on an H200,
the first 128-token prompt ran 5x slower).

Progress goes to stdout as ``@@progress {json}`` lines; everything else goes to stderr.
The result (``--result``) is JSON: device, model, per point tokens/s with and without the
assistant, mean accepted length (tokens per target forward), identical outputs.

Imports torch and transformers only inside functions: importing this module is cheap.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

PROGRESS_PREFIX = "@@progress "


@dataclass(frozen=True)
class ModelSize:
    """One workload size: the target model, the draft depth and the prompt set."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    draft_layers: int
    later_scale: float
    prompts: int
    prompt_len: int
    new_tokens: int
    dtype: str  # "float32" | "bfloat16"
    logit_std: float = 4.0  # LM head scaled so the logits' spread gives confidences meaning


SIZES: dict[str, ModelSize] = {
    # seconds on a 2-core CPU; for the tests
    "ci": ModelSize(
        hidden=256,
        layers=4,
        intermediate=688,
        heads=4,
        kv_heads=4,
        vocab=1024,
        draft_layers=2,
        later_scale=0.05,
        prompts=2,
        prompt_len=12,
        new_tokens=24,
        dtype="float32",
    ),
    # the CPU default: memory-bound enough that verifying k tokens costs about one forward
    "cpu": ModelSize(
        hidden=1024,
        layers=16,
        intermediate=2816,
        heads=16,
        kv_heads=16,
        vocab=4096,
        draft_layers=2,
        later_scale=0.02,
        prompts=3,
        prompt_len=24,
        new_tokens=48,
        dtype="float32",
    ),
    # the GPU default (a 16-layer, 2048-wide random Llama in bf16)
    "gpu": ModelSize(
        hidden=2048,
        layers=16,
        intermediate=5632,
        heads=32,
        kv_heads=8,
        vocab=32000,
        draft_layers=2,
        later_scale=0.02,
        prompts=8,
        prompt_len=64,
        new_tokens=128,
        dtype="bfloat16",
    ),
}
SIZE_NAMES = ("default", *SIZES)  # "default": gpu where CUDA is available, else cpu


def _no_device_sync() -> None:
    """On the CPU every operation has finished when it returns: nothing to wait for."""


def resolve_size(name: str, cuda: bool) -> str:
    if name == "default":
        return "gpu" if cuda else "cpu"
    if name not in SIZES:
        raise ValueError(f"unknown size {name!r}; choose one of {', '.join(SIZE_NAMES)}")
    return name


def progress(**fields) -> None:
    sys.stdout.write(PROGRESS_PREFIX + json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- models


def build_models(size: ModelSize, device: str, seed: int):
    """(target, draft): a random Llama and a draft made of its first layers (shared modules)."""
    import torch
    from torch import nn
    from transformers import LlamaConfig, LlamaForCausalLM

    dtype = getattr(torch, size.dtype)
    cfg = LlamaConfig(
        vocab_size=size.vocab,
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        max_position_embeddings=max(512, 2 * (size.prompt_len + size.new_tokens)),
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    draft_cfg = LlamaConfig(**{**cfg.to_dict(), "num_hidden_layers": size.draft_layers})
    torch.manual_seed(seed)
    with torch.device(device):
        target = LlamaForCausalLM(cfg)
        draft = LlamaForCausalLM(draft_cfg)
    with torch.no_grad():
        for layer in target.model.layers[size.draft_layers :]:
            layer.self_attn.o_proj.weight.mul_(size.later_scale)
            layer.mlp.down_proj.weight.mul_(size.later_scale)
        # the final norm gives unit-RMS states, so a logit's std is the row norm of lm_head
        row_norm = target.lm_head.weight.float().norm(dim=1).mean().item()
        target.lm_head.weight.mul_(size.logit_std / row_norm)
    draft.model.embed_tokens = target.model.embed_tokens
    draft.model.layers = nn.ModuleList(list(target.model.layers[: size.draft_layers]))
    draft.model.norm = target.model.norm
    draft.lm_head = target.lm_head
    target.to(dtype).eval()
    draft.to(dtype).eval()
    return target, draft


def make_prompts(size: ModelSize, device: str, seed: int):
    import torch

    gen = torch.Generator().manual_seed(seed + 1)
    return [
        torch.randint(1, size.vocab, (1, size.prompt_len), generator=gen).to(device)
        for _ in range(size.prompts)
    ]


class ForwardCounter:
    """Counts forward calls of a model (the target: one per assisted cycle)."""

    def __init__(self, model):
        self.calls = 0
        self.handle = model.register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        self.calls += 1


# ----------------------------------------------------------------------------- runs


def _configure_assistant(draft, point: dict) -> None:
    gc = draft.generation_config
    gc.num_assistant_tokens = int(point.get("num_assistant_tokens", 4))
    gc.num_assistant_tokens_schedule = point.get("schedule", "constant")
    # random logits are flat: the stock 0.4 confidence cut would stop every draft at one token
    gc.assistant_confidence_threshold = float(point.get("assistant_confidence_threshold", 0.0))


def _timed(fn, sync):
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - t0


def apply_timer_spec(spec: dict) -> None:
    """--sample N (the spec's timer_sample): PATCHKIT_TIMER_SAMPLE for each pt.configure().
    Without it the environment's PATCHKIT_TIMER_SAMPLE or PATCHKIT_TIMER_BUDGET, else every
    cycle (PATCHKIT_TIMER_SAMPLE=1: profile.run's default, its few cycles all timed, rather than
    the runtime's budget, which would sample them where a CPU model's cycles are short)."""
    if spec.get("timer_sample"):
        os.environ["PATCHKIT_TIMER_SAMPLE"] = str(int(spec["timer_sample"]))
    elif not any(os.environ.get(k, "").strip() for k in ("PATCHKIT_TIMER_SAMPLE", "PATCHKIT_TIMER_BUDGET")):
        os.environ["PATCHKIT_TIMER_SAMPLE"] = "1"


def run_point(
    pt,
    target,
    draft,
    prompts,
    size: ModelSize,
    point: dict,
    index: int,
    total: int,
    sync,
    warmup: bool = False,
) -> dict:
    """Baseline and assisted generation of every prompt, interleaved; timing into point dir
    (``point["timing_dir"]``); with ``warmup`` the first prompt once before, both modes."""
    import torch

    _configure_assistant(draft, point)
    kw = dict(max_new_tokens=size.new_tokens, min_new_tokens=size.new_tokens, do_sample=False, pad_token_id=0)
    counter = ForwardCounter(target)
    os.makedirs(point["timing_dir"], exist_ok=True)
    mode = pt.configure(directory=point["timing_dir"])
    warmup_ns = None
    where = dict(point=index, points=total)  # the progress lines' fields, in their order
    try:
        with torch.no_grad():
            if warmup:
                progress(stage="warmup", **where, label=point.get("label"))
                sync()
                w0 = time.time_ns()
                target.generate(prompts[0], **kw)
                target.generate(prompts[0], assistant_model=draft, **kw)
                sync()
                warmup_ns = [w0, time.time_ns()]
            sync()
            start_ns = time.time_ns()
            sums = _interleaved(target, draft, prompts, kw, sync, counter, where, point.get("label"))
            sync()
            end_ns = time.time_ns()
    finally:
        counter.handle.remove()
        pt.shutdown()  # writes the last records (one wait for the GPU) and the stats line
    return _point_result(point, mode, sums, len(prompts), [start_ns, end_ns], warmup_ns)


def _interleaved(target, draft, prompts, kw: dict, sync, counter, where: dict, label) -> dict:
    """Each prompt generated plainly, then with the assistant: the seconds and new tokens of
    each mode, the target's forwards in assisted generation, and the prompts whose outputs match."""
    import torch

    sums = dict(base_s=0.0, spec_s=0.0, base_tokens=0, spec_tokens=0, forwards=0, identical=0)
    for i, prompt in enumerate(prompts):
        progress(stage="baseline", **where, prompt=i, prompts=len(prompts), label=label)
        out_b, dt = _timed(lambda prompt=prompt: target.generate(prompt, **kw), sync)
        sums["base_s"] += dt
        sums["base_tokens"] += out_b.shape[1] - prompt.shape[1]
        progress(stage="assisted", **where, prompt=i, prompts=len(prompts), label=label)
        before = counter.calls
        out_a, dt = _timed(lambda prompt=prompt: target.generate(prompt, assistant_model=draft, **kw), sync)
        sums["spec_s"] += dt
        sums["spec_tokens"] += out_a.shape[1] - prompt.shape[1]
        sums["forwards"] += counter.calls - before
        sums["identical"] += int(torch.equal(out_a.cpu(), out_b.cpu()))
    return sums


def _point_result(point: dict, mode, sums: dict, prompts: int, window_ns: list[int], warmup_ns) -> dict:
    """A point's record for the workload's result: its params, both modes' tokens/s, the accept
    length (new tokens per target forward), the measured window and the warm-up's."""
    base_s, spec_s, forwards = sums["base_s"], sums["spec_s"], sums["forwards"]
    return {
        "label": point.get("label"),
        "params": {k: v for k, v in point.items() if k not in ("timing_dir", "label")},
        "timing_dir": point["timing_dir"],
        "timer_mode": mode,
        "baseline": {
            "tokens": sums["base_tokens"],
            "seconds": base_s,
            "tokens_per_s": sums["base_tokens"] / base_s if base_s else None,
        },
        "assisted": {
            "tokens": sums["spec_tokens"],
            "seconds": spec_s,
            "tokens_per_s": sums["spec_tokens"] / spec_s if spec_s else None,
            "target_forwards": forwards,
        },
        "accept_length": sums["spec_tokens"] / forwards if forwards else None,
        "identical_outputs": sums["identical"],
        "prompts": prompts,
        "window_ns": window_ns,
        "warmup_ns": warmup_ns,
    }


def _describe_device(torch, device: str) -> str:
    if device.startswith("cuda"):
        return f"{device} ({torch.cuda.get_device_name(0)})"
    return f"cpu ({torch.get_num_threads()} threads)"


def run(spec: dict) -> dict:
    """Everything the subprocess does; returns the result document."""
    t_start = time.perf_counter()
    progress(stage="import")
    import torch
    import transformers
    from transformers.generation import phase_timer as pt

    transformers.logging.set_verbosity_error()
    wanted = spec.get("device", "auto")
    if wanted == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device 'cuda' was asked for, but torch {torch.__version__} sees no CUDA device")
    cuda = torch.cuda.is_available() and wanted != "cpu"
    device = "cuda" if cuda else "cpu"
    size_name = resolve_size(spec.get("size", "default"), cuda)
    size = SIZES[size_name]
    if size.dtype == "bfloat16" and not cuda:
        size = ModelSize(**{**asdict(size), "dtype": "float32"})
    seed = int(spec.get("seed", 0))
    apply_timer_spec(spec)
    sync: Callable[[], object] = torch.cuda.synchronize if cuda else _no_device_sync
    progress(stage="build", size=size_name, device=device)
    pt.configure(mode="off")  # model building is not profiled
    target, draft = build_models(size, device, seed)
    prompts = make_prompts(size, device, seed)
    sync()
    warmup = bool(spec.get("warmup", True))
    plan = spec.get("passes") or [{"point": i, "rep": 0} for i in range(len(spec["points"]))]
    passes, warmed = [], set()
    for step in plan:
        index = int(step["point"])
        point = dict(spec["points"][index])
        if step.get("timing_dir"):
            point["timing_dir"] = step["timing_dir"]
        result = run_point(
            pt,
            target,
            draft,
            prompts,
            size,
            point,
            index,
            len(spec["points"]),
            sync,
            warmup=warmup and index not in warmed,
        )
        warmed.add(index)
        result.update(index=index, rep=int(step.get("rep", 0)))
        passes.append(result)
    first: dict[int, dict] = {}
    for result in passes:  # each point's first pass, in point order
        first.setdefault(result["index"], result)
    points = [first[i] for i in sorted(first)]
    progress(stage="done")
    return {
        "schema": "patchkit.profile.workload/1",
        "device": _describe_device(torch, device),
        "cuda": cuda,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "transformers_file": transformers.__file__,
        "size": size_name,
        "model": asdict(size),
        "seed": seed,
        "points": points,
        "passes": passes,
        "warmup": warmup,
        "wall_s": time.perf_counter() - t_start,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="JSON file: size, seed, device, points")
    parser.add_argument("--result", required=True, help="where to write the result JSON")
    args = parser.parse_args(argv)
    with open(args.spec, encoding="utf-8") as fh:
        spec = json.load(fh)
    result = run(spec)
    tmp = args.result + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    os.replace(tmp, args.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
