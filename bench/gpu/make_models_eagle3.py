"""Build an 8B-shaped Llama target and an EAGLE-3 draft head whose acceptance is set, not random.

The GPU harness's tiny models are host-bound (3-5 ms cycles); this pair puts the decode cycle in
the regime EAGLE-3 is deployed for, where the target's verify forward dominates. It is built on
the GPU from fixed seeds in seconds (no downloads) and written in bf16 safetensors.

How acceptance is set (the same idea as make_models.py, adapted to EAGLE-3's inputs):
  * target: token c's embedding is a random vector e_c; every layer's output projections
    (o_proj, down_proj) are scaled down (--residual-scale) so the residual stream keeps carrying
    the current token through all layers; lm_head row P(c) is e_c (unit length, scaled to a
    logit of about 30), so the target's next token is a fixed permutation P of the current one.
  * EAGLE-3 draft (``LlamaForCausalLMEagle3``, one layer): its input at position p is the target's
    aux hidden states at p (three layers' residual streams, each carrying x_p) concatenated, or,
    from the second draft step on, its own previous output hidden state. ``fc`` averages the three
    aux states into U * e_x. The MLP is a lookup table with one neuron per token: neuron c fires
    (silu gate) when the input carries e_c, and its down_proj column writes U * (e_P(c) - e_c),
    so the layer's output hidden state carries P(x): every draft step advances the chain by one
    token, as the target does. Attention is kept (real compute) but its o_proj is scaled to
    nearly nothing. The draft's lm_head maps the carried token y to Q(y), where Q equals P except
    on a random (1 - --agree) share of tokens (a cyclic shift among them): each drafted token is
    right with probability --agree, so with k chained steps the accept length is about
    1 + a + a^2 + ... + a^k (a = 0.8, k = 3: 2.95 of 4).

    python bench/gpu/make_models_eagle3.py OUT [--agree 0.8] [--steps 3] [--check] [--tiny]

writes OUT/target (LlamaForCausalLM) and OUT/draft (LlamaForCausalLMEagle3, draft_vocab_size =
vocab_size so no d2t map) with config.json and a WordLevel tokenizer. ``--check`` runs, before
saving, the target through transformers' own Llama forward (aux hidden states from its
output_hidden_states) and the draft head in plain torch (its attention left out: its output
projection is scaled to ~0), and prints ``CHECK {json}`` with the predicted accept length.
``--tiny`` builds a small shape of the same construction (for a CPU check of the logic).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time

import torch
import torch.nn.functional as F

SPECIAL = 3  # <unk>, <s>, </s> map to themselves
FULL = dict(vocab=32000, hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336)
TINY = dict(vocab=512, hidden=256, layers=8, heads=4, kv_heads=2, intermediate=512)
LOGIT = 30.0  # the winning logit's size (target and draft)
GATE = 8.0  # lookup neuron's gate at a full match: silu(8) = 7.997
EPS = 1e-5


def aux_layer_ids(layers: int) -> list[int]:
    """The EAGLE-3 convention SGLang uses by default ([2, L/2, L-3] captured, ids one lower)."""
    return [1, layers // 2 - 1, layers - 4]


def permutations(vocab: int, agree: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, Q): the target's next-token map and the draft's, Q = P composed with a cyclic shift
    over a random (1 - agree) share of the tokens."""
    gen = torch.Generator().manual_seed(1)
    target = torch.arange(vocab)
    target[SPECIAL:] = SPECIAL + torch.randperm(vocab - SPECIAL, generator=gen)
    n_bad = round((1.0 - agree) * (vocab - SPECIAL))
    bad = SPECIAL + torch.randperm(vocab - SPECIAL, generator=gen)[:n_bad]
    shift = torch.arange(vocab)
    if n_bad > 1:
        shift[bad] = bad.roll(1)
    return target, target[shift]


def rows_for(unit: torch.Tensor, next_of: torch.Tensor) -> torch.Tensor:
    """lm_head rows such that a hidden state carrying token c scores highest on row next_of[c]."""
    inverse = torch.empty_like(next_of)
    inverse[next_of] = torch.arange(len(next_of))
    return unit[inverse.to(unit.device)] * (LOGIT / math.sqrt(unit.shape[1]))


def build(shape: dict, agree: float, residual_scale: float, dev: str, dtype=torch.bfloat16):
    """(target state dict, draft state dict, target config kwargs, draft config kwargs)."""
    V, H, L = shape["vocab"], shape["hidden"], shape["layers"]
    nh, nkv, inter = shape["heads"], shape["kv_heads"], shape["intermediate"]
    hd = H // nh
    gen = torch.Generator(device=dev).manual_seed(0)

    def randn(*size, std=0.02):
        return (torch.randn(*size, generator=gen, device=dev) * std).to(dtype)

    ones = lambda n: torch.ones(n, device=dev, dtype=dtype)  # noqa: E731
    embed = torch.randn(V, H, generator=gen, device=dev)  # rows ~ sqrt(H) long
    unit = embed / embed.norm(dim=1, keepdim=True)
    P, Q = permutations(V, agree)
    t = {
        "model.embed_tokens.weight": embed.to(dtype),
        "model.norm.weight": ones(H),
        "lm_head.weight": rows_for(unit, P).to(dtype),
    }
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = randn(nh * hd, H)
        t[p + "self_attn.k_proj.weight"] = randn(nkv * hd, H)
        t[p + "self_attn.v_proj.weight"] = randn(nkv * hd, H)
        t[p + "self_attn.o_proj.weight"] = randn(H, nh * hd, std=0.02 * residual_scale)
        t[p + "mlp.gate_proj.weight"] = randn(inter, H)
        t[p + "mlp.up_proj.weight"] = randn(inter, H)
        t[p + "mlp.down_proj.weight"] = randn(H, inter, std=0.02 * residual_scale)
        t[p + "input_layernorm.weight"] = ones(H)
        t[p + "post_attention_layernorm.weight"] = ones(H)

    # draft: U is the size of the token the hidden state carries (rms 1 per dimension)
    U = math.sqrt(H)
    fc = torch.zeros(H, 3 * H, device=dev)
    for j in range(3):  # mean of the three aux states, e_x (|e_x| ~ sqrt(H)) -> U e_x
        fc[:, j * H : (j + 1) * H] = torch.eye(H, device=dev) * (U / (3 * math.sqrt(H)))
    gate = unit * (GATE / math.sqrt(H))  # gate . rmsnorm(U e_c) = GATE
    up = unit / math.sqrt(H)  # up . rmsnorm(U e_c) = 1
    fire = GATE * torch.sigmoid(torch.tensor(GATE)).item()  # silu(GATE) * 1
    down = (unit[P.to(dev)] - unit).T * (U / fire)  # column c: U (e_P(c) - e_c) / fire
    d = {
        "fc.weight": fc.to(dtype),
        "norm.weight": ones(H),
        "embed_tokens.weight": t["model.embed_tokens.weight"],
        "lm_head.weight": rows_for(unit, Q).to(dtype),
        "layers.0.hidden_norm.weight": ones(H),
        "layers.0.input_layernorm.weight": ones(H),
        "layers.0.post_attention_layernorm.weight": ones(H),
        "layers.0.self_attn.q_proj.weight": randn(nh * hd, 2 * H),
        "layers.0.self_attn.k_proj.weight": randn(nkv * hd, 2 * H),
        "layers.0.self_attn.v_proj.weight": randn(nkv * hd, 2 * H),
        "layers.0.self_attn.o_proj.weight": randn(H, nh * hd, std=0.02 * 1e-3),
        "layers.0.mlp.gate_proj.weight": gate.to(dtype),
        "layers.0.mlp.up_proj.weight": up.to(dtype),
        "layers.0.mlp.down_proj.weight": down.contiguous().to(dtype),
    }
    common = dict(
        vocab_size=V,
        hidden_size=H,
        num_attention_heads=nh,
        num_key_value_heads=nkv,
        head_dim=hd,
        max_position_embeddings=4096,
        rms_norm_eps=EPS,
        rope_theta=500000.0,
        hidden_act="silu",
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    target_cfg = dict(
        common, intermediate_size=inter, num_hidden_layers=L, architectures=["LlamaForCausalLM"]
    )
    draft_cfg = dict(
        common,
        intermediate_size=V,
        num_hidden_layers=1,
        architectures=["LlamaForCausalLMEagle3"],
        draft_vocab_size=V,
        target_hidden_size=H,
        eagle_config={"eagle_aux_hidden_state_layer_ids": aux_layer_ids(L), "use_aux_hidden_state": True},
    )
    return t, d, target_cfg, draft_cfg, P


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w


@torch.no_grad()
def check(
    t: dict,
    d: dict,
    target_cfg: dict,
    P: torch.Tensor,
    steps: int,
    dev: str,
    prompts: int = 32,
    prompt_len: int = 32,
    length: int = 128,
) -> dict:
    """Target through transformers' Llama forward, the draft head in plain torch (attention
    left out), along the target's own trajectory: per-step agreement and accept length."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**target_cfg)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(dev):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    model.load_state_dict(t, strict=True, assign=True)
    model.eval()
    V = target_cfg["vocab_size"]
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(SPECIAL, V, (prompts, prompt_len), generator=gen)
    chain = [ids[:, -1]]
    for _ in range(length):
        chain.append(P[chain[-1]])
    ids = torch.cat([ids, torch.stack(chain[1:], dim=1)], dim=1).to(dev)
    out = model(input_ids=ids, output_hidden_states=True)
    pred = out.logits.argmax(-1)
    follows = (pred[:, :-1] == P.to(dev)[ids[:, :-1]]).float().mean().item()
    hs = out.hidden_states
    aux = torch.cat([hs[i + 1] for i in aux_layer_ids(target_cfg["num_hidden_layers"])], dim=-1)
    del out, hs, model
    # the draft from each position p of the continuation: step k predicts x[p + 2 + k]
    first, last = prompt_len - 1, ids.shape[1] - 2 - steps
    h = F.linear(aux[:, first : last + 1], d["fc.weight"])
    hits = []
    for k in range(steps):
        r = h  # + attention (~0)
        n = rmsnorm(r, d["layers.0.post_attention_layernorm.weight"])
        act = F.silu(F.linear(n, d["layers.0.mlp.gate_proj.weight"])) * F.linear(
            n, d["layers.0.mlp.up_proj.weight"]
        )
        r = r + F.linear(act, d["layers.0.mlp.down_proj.weight"])
        tok = F.linear(rmsnorm(r, d["norm.weight"]), d["lm_head.weight"]).argmax(-1)
        want = ids[:, first + 2 + k : last + 3 + k]
        hits.append(tok == want)
        h = r
    match = torch.stack(hits, dim=-1).cpu()  # [B, positions, steps]
    run = match.long().cumprod(dim=-1).sum(dim=-1)  # leading matches
    per_step = [round(match[..., k].float().mean().item(), 4) for k in range(steps)]
    a = match.float().mean().item()
    return {
        "target_follows_its_map": round(follows, 4),
        "draft_agreement": round(a, 4),
        "per_step_agreement": per_step,
        "expected_accept_length": round(1 + run.float().mean().item(), 3),
        "geometric_accept_length": round(sum(a**i for i in range(steps + 1)), 3),
        "steps": steps,
    }


def tokenizer(vocab: int):
    """make_models.py's WordLevel tokenizer (this folder is on sys.path when run as a script)."""
    from make_models import tokenizer as word_level

    return word_level(vocab)


def save(folder: str, tensors: dict, cfg: dict, tok) -> int:
    from safetensors.torch import save_file
    from transformers import LlamaConfig

    os.makedirs(folder, exist_ok=True)
    cpu = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    save_file(cpu, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    LlamaConfig(**cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return sum(v.numel() * v.element_size() for v in cpu.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--agree", type=float, default=0.8, help="draft/target agreement per token")
    ap.add_argument("--steps", type=int, default=3, help="draft steps the check chains")
    ap.add_argument(
        "--residual-scale", type=float, default=0.01, help="scale of the target layers' output projections"
    )
    ap.add_argument("--check", action="store_true", help="predict the accept length first")
    ap.add_argument("--tiny", action="store_true", help="a small shape of the same construction")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if not 0.0 <= args.agree <= 1.0:
        ap.error(f"--agree must lie in [0, 1], got {args.agree}")
    shape = TINY if args.tiny else FULL
    V, H, L, inter = shape["vocab"], shape["hidden"], shape["layers"], shape["intermediate"]
    params = 2 * V * H + L * (H * H * 2 + 2 * H * H * shape["kv_heads"] // shape["heads"] + 3 * H * inter)
    need = 2 * (params + 3 * H * H + 3 * V * H + 8 * H * H + 3 * H * V)
    os.makedirs(args.out, exist_ok=True)
    free = shutil.disk_usage(args.out).free
    if free < need * 1.1:
        raise SystemExit(
            f"make_models_eagle3: {args.out} has {free / 2**30:.1f} GiB free, "
            f"the models need {need / 2**30:.1f} GiB"
        )
    t0 = time.time()
    t, d, target_cfg, draft_cfg, P = build(shape, args.agree, args.residual_scale, args.device)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    built = time.time()
    info = {
        "agree_asked": args.agree,
        "shape": shape,
        "target_params": params,
        "aux_layer_ids": aux_layer_ids(L),
    }
    if args.check:
        info.update(check(t, d, target_cfg, P, args.steps, args.device))
        info["check_s"] = round(time.time() - built, 1)
        print("CHECK " + json.dumps(info), flush=True)
    t1 = time.time()
    tok = tokenizer(V)
    sizes = {
        name: save(os.path.join(args.out, name), sd, cfg, tok)
        for name, sd, cfg in (("target", t, target_cfg), ("draft", d, draft_cfg))
    }
    print(
        "WROTE "
        + json.dumps(
            {
                "out": args.out,
                "build_s": round(built - t0, 1),
                "save_s": round(time.time() - t1, 1),
                "gib": {k: round(v / 2**30, 2) for k, v in sizes.items()},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
