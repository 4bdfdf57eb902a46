"""Writes a tiny random-weight Llama checkpoint in Hugging Face format, made entirely here.

Its text is noise, but its prefill cost is real, which is all warmroute needs to see a warm
prefix cache. The tokenizer is a byte-level BPE trained on generated words, so any input
text tokenizes (no unknown token) and a ~3K-token prompt is easy to build.
Run with the venv's python: bench/real/make-model.py [--out DIR].
"""

import argparse
import json
import os

import torch
from tokenizers import Tokenizer
from tiny_tokenizer import byte_level_bpe, corpus
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

# Llama-3 style; the final message is rendered without anything the template could not
# trim, so continue_final_message can resume an assistant turn mid-text.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + (message['content'] if message['content'] is string else '') + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)


ENGLISH = "the a of to and in is it you that he was for on are with as I his they be at one have this from".split()


def make_tokenizer(vocab_size: int) -> Tokenizer:
    return byte_level_bpe(vocab_size, SPECIAL, corpus(7, 20000, 4000, ENGLISH))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/warmroute/models/tiny-llama"))
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--context", type=int, default=8192)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    raw = make_tokenizer(args.vocab)
    ids = {t: raw.token_to_id(t) for t in SPECIAL}
    fast = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
        model_max_length=args.context,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(args.out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=raw.get_vocab_size(),
        hidden_size=args.hidden,
        intermediate_size=args.ffn,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.context,
        bos_token_id=ids["<|begin_of_text|>"],
        eos_token_id=ids["<|eot_id|>"],
        pad_token_id=ids["<|end_of_text|>"],
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(args.out, safe_serialization=True)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id,
                   "pad_token_id": config.pad_token_id}, f)
    n = sum(p.numel() for p in model.parameters())
    print(json.dumps({"out": args.out, "params": n, "vocab": config.vocab_size}))


if __name__ == "__main__":
    main()
