"""Build a tiny random Llama (2 layers, hidden 64, vocab 1000) and a from-scratch BPE tokenizer.

No hub access is needed: the tokenizer is trained on a synthetic corpus and the weights are
random (seeded), so the model is the same on every machine.

`--head-dim 64` builds the vLLM lab's variant: hidden 256, 4 heads of 64, intermediate 512
(3.4 MB). vLLM's CPU attention supports only head_dim 32, 64, 80, ... and checks it at the
first forward, not at startup, so the default head_dim 16 model would start and then die.

usage: python make_tiny_llama.py OUTDIR [--head-dim 64]
"""
from __future__ import annotations

import os
import string
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 1000
SPECIAL = ["<s>", "</s>", "<pad>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    line = " ".join([
        "the quick brown fox jumps over the lazy dog", string.ascii_letters,
        string.digits, string.punctuation, "hello world sglang hang watch",
    ])
    tok.train_from_iterator([line] * 50, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(fast: PreTrainedTokenizerFast, head_dim: int = 16) -> LlamaForCausalLM:
    heads = 4  # 2 KV heads: TP=2 splits them into one per rank
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=heads * head_dim, intermediate_size=2 * heads * head_dim,
        num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=2, head_dim=head_dim,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, tie_word_embeddings=False, torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(torch.bfloat16)


def main(out: str, head_dim: int = 16) -> None:
    os.makedirs(out, exist_ok=True)
    fast = build_tokenizer()
    fast.save_pretrained(out)
    model = build_model(fast, head_dim)
    model.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    print(f"saved to {out} params: {params} vocab: {len(fast)}")
    print(sorted(os.listdir(out)))


if __name__ == "__main__":
    if len(sys.argv) == 2:
        main(sys.argv[1])
    elif len(sys.argv) == 4 and sys.argv[2] == "--head-dim" and sys.argv[3].isdigit():
        main(sys.argv[1], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
