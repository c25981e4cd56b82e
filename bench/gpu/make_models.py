"""Build a tiny Llama target and a 2-layer standalone draft whose agreement is set, not random.

Random models make speculation meaningless: their next-token logits are nearly flat, so the
argmax flips between kernel paths and even a model drafting for itself is accepted ~1 of 4.
Here the target's next token is a fixed permutation of the current one (lm_head row perm[c] is
token c's embedding, every layer's output projections scaled down so the residual stream keeps
carrying the current token): the argmax has a wide margin and does not flip. The draft has the
same embeddings and its own lm_head built from a second permutation that differs from the
target's on a chosen fraction of tokens, so it proposes the target's token with probability
``--agree`` at every step. Accepted drafts per verify with k steps: 1 + a + a^2 + ... + a^k
(a = 0.8, k = 3: 2.95 of 4).

    python bench/gpu/make_models.py OUT [--agree 0.8] [--check]
writes OUT/target and OUT/draft (safetensors, bf16, WordLevel tokenizer) and, with --check,
measures the greedy agreement along the target's own trajectory and prints the expected
accept length (runs on the CPU too: the weights are built on the CPU with fixed seeds, so the
GPU machine gets bit-identical models).
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 32000
SPECIAL = 3  # <unk>, <s>, </s> map to themselves


def config(layers: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=8,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )


def permutations(agree: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(target map, draft map, disagreeing tokens): the draft map is the target map composed
    with a cyclic shift over a random (1 - agree) share of the tokens."""
    gen = torch.Generator().manual_seed(1)
    target = torch.arange(VOCAB)
    target[SPECIAL:] = SPECIAL + torch.randperm(VOCAB - SPECIAL, generator=gen)
    n_bad = round((1.0 - agree) * (VOCAB - SPECIAL))
    bad = SPECIAL + torch.randperm(VOCAB - SPECIAL, generator=gen)[:n_bad]
    shift = torch.arange(VOCAB)
    if n_bad > 1:
        shift[bad] = bad.roll(1)
    draft = target[shift]
    return target, draft, bad


def lm_head_for(embed: torch.Tensor, next_of: torch.Tensor) -> torch.Tensor:
    """Rows such that token c's embedding scores highest on row next_of[c]."""
    inverse = torch.empty_like(next_of)
    inverse[next_of] = torch.arange(VOCAB)
    return embed[inverse].clone()


def build(agree: float, target_layers: int = 8, draft_layers: int = 2):
    torch.manual_seed(0)
    target = LlamaForCausalLM(config(target_layers))
    torch.manual_seed(0)
    draft = LlamaForCausalLM(config(draft_layers))
    next_target, next_draft, _ = permutations(agree)
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
        target.lm_head.weight.copy_(lm_head_for(target.model.embed_tokens.weight, next_target))
        draft.lm_head.weight.copy_(lm_head_for(target.model.embed_tokens.weight, next_draft))
        for model in (target, draft):
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight.mul_(0.02)
                layer.mlp.down_proj.weight.mul_(0.02)
    return target.to(torch.bfloat16), draft.to(torch.bfloat16)


def tokenizer(vocab: int = VOCAB) -> PreTrainedTokenizerFast:
    """A WordLevel tokenizer of `vocab` words: w3 ... (the ids themselves), <unk>, <s>, </s>."""
    words = {"<unk>": 0, "<s>": 1, "</s>": 2}
    words.update({f"w{i}": i for i in range(SPECIAL, vocab)})
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<unk>",
        model_max_length=4096,
    )


@torch.no_grad()
def measure(target, draft, steps: int = 3, prompts: int = 4, length: int = 96) -> dict:
    """Greedy agreement of draft vs target on the target's own continuation, and the accept
    length a chain of ``steps`` drafts would get (simulated on the produced tokens)."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    target, draft = target.to(dev), draft.to(dev)
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(SPECIAL, VOCAB, (prompts, 32), generator=gen).to(dev)
    for _ in range(length):
        nxt = target(ids).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    t_pred = target(ids).logits.argmax(-1)[:, 31:-1]
    d_pred = draft(ids).logits.argmax(-1)[:, 31:-1]
    follows = (t_pred == ids[:, 32:]).float().mean().item()
    agree = (t_pred == d_pred).float().mean().item()
    match = (t_pred == d_pred).cpu()
    accepted = []
    for row in match:
        for start in range(0, len(row) - steps, steps + 1):
            run = 0
            while run < steps and bool(row[start + run]):
                run += 1
            accepted.append(1 + run)
    return {
        "target_follows_its_map": round(follows, 4),
        "draft_agreement": round(agree, 4),
        "expected_accept_length": round(sum(accepted) / len(accepted), 3),
        "steps": steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--agree", type=float, default=0.8, help="draft/target agreement per token")
    ap.add_argument("--check", action="store_true", help="measure agreement and accept length")
    args = ap.parse_args()
    target, draft = build(args.agree)
    if args.check:
        print("CHECK " + json.dumps({"agree_asked": args.agree, **measure(target, draft)}), flush=True)
    tok = tokenizer()
    for name, model in (("target", target), ("draft", draft)):
        path = os.path.join(args.out, name)
        os.makedirs(path, exist_ok=True)
        model.to("cpu").save_pretrained(path, safe_serialization=True)
        tok.save_pretrained(path)
    print(f"models written to {args.out}/target and {args.out}/draft", flush=True)


if __name__ == "__main__":
    main()
