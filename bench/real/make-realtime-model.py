"""Writes a tiny random-weight Qwen3-ASR checkpoint that vLLM serves on /v1/realtime, made entirely here.

Its transcripts are noise, but every stage of a real realtime session runs: log-mel features,
the audio encoder, the text decoder's prefill over the audio tokens, and decoding. The layout
is the original Qwen3-ASR release's (a `thinker` holding `audio_tower`, `model` and `lm_head`),
which is what vLLM's loader and config class read; the architecture named in config.json,
Qwen3ASRRealtimeGeneration, is what makes vLLM report the "realtime" task and mount /v1/realtime.
The tokenizer is a byte-level BPE trained on generated words, with the special tokens that
vLLM's realtime prompt (`<|im_start|>user\\n<|audio_start|><|audio_pad|><|audio_end|>...`) and
Hugging Face's processor (its audio token attributes) look up.
Run with the venv's python: bench/real/make-realtime-model.py [--out DIR].
"""

import argparse
import json
import os

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from tiny_tokenizer import byte_level_bpe, corpus
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen3_asr import Qwen3ASRFeatureExtractor, Qwen3ASRProcessor
from transformers.models.qwen3_asr.configuration_qwen3_asr import Qwen3ASREncoderConfig
from transformers.models.qwen3_asr.modeling_qwen3_asr import Qwen3ASREncoder

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>", "<asr_text>"]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'audio' %}{{ '<|audio_start|><|audio_pad|><|audio_end|>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# vLLM computes the encoder's output length with a fixed 100-frame chunk (n_window 50), whatever
# the config says; the config must agree or the placeholder count and the embeddings differ.
N_WINDOW = 50


ENGLISH = "the a of to and in is it you that he was for on are with as I his they be at one".split()


def make_tokenizer(vocab_size: int) -> Tokenizer:
    return byte_level_bpe(vocab_size, SPECIAL, corpus(11, 10000, 2000, ENGLISH))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/warmroute/models/tiny-asr"))
    ap.add_argument("--audio-dim", type=int, default=64)
    ap.add_argument("--audio-layers", type=int, default=2)
    ap.add_argument("--audio-heads", type=int, default=2)
    ap.add_argument("--downsample", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--context", type=int, default=4096)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    raw = make_tokenizer(args.vocab)
    ids = {t: raw.token_to_id(t) for t in SPECIAL}
    fast = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=args.context,
        # Hugging Face's Qwen3ASRProcessor reads these three as tokenizer attributes.
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>", "audio_eos_token": "<|audio_end|>"},
    )
    features = Qwen3ASRFeatureExtractor(n_window=N_WINDOW)
    processor = Qwen3ASRProcessor(feature_extractor=features, tokenizer=fast, chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(args.out)
    fast.save_pretrained(args.out)

    head_dim = args.hidden // args.heads
    # M-RoPE as the released checkpoints have it (three sections summing to head_dim / 2); with
    # audio and text on one axis it comes to plain RoPE, but vLLM takes the M-RoPE code path.
    third = head_dim // 2 // 3
    mrope_section = [head_dim // 2 - 2 * third, third, third]
    audio = dict(
        num_mel_bins=features.feature_size, encoder_layers=args.audio_layers, encoder_attention_heads=args.audio_heads,
        encoder_ffn_dim=2 * args.audio_dim, d_model=args.audio_dim, output_dim=args.hidden,
        n_window=N_WINDOW, n_window_infer=8 * N_WINDOW * 2, conv_chunksize=500,
        downsample_hidden_size=args.downsample, max_source_positions=1500, activation_function="gelu",
    )
    text = dict(
        vocab_size=raw.get_vocab_size(), hidden_size=args.hidden, intermediate_size=args.ffn,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=head_dim, hidden_act="silu", max_position_embeddings=args.context, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=False,
        rope_scaling={"rope_type": "default", "mrope_section": mrope_section, "interleaved": True, "mrope_interleaved": True},
    )

    torch.manual_seed(0)
    enc_cfg = Qwen3ASREncoderConfig(**{k: v for k, v in audio.items() if k not in ("conv_chunksize", "max_source_positions")},
                                    max_position_embeddings=13)
    encoder = Qwen3ASREncoder(enc_cfg)
    lm = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in text.items() if k != "rope_scaling"}))
    weights: dict[str, torch.Tensor] = {}
    # Parameters only: buffers such as the sinusoid table are rebuilt by vLLM from the config.
    for name, p in encoder.named_parameters():
        weights[f"thinker.audio_tower.{name}"] = p.detach()
    # The encoder's output projection (d_model → d_model → text hidden), which the release keeps
    # inside the audio tower.
    for i, (d_in, d_out) in enumerate([(args.audio_dim, args.audio_dim), (args.audio_dim, args.hidden)], start=1):
        lin = torch.nn.Linear(d_in, d_out)
        weights[f"thinker.audio_tower.proj{i}.weight"] = lin.weight.detach()
        weights[f"thinker.audio_tower.proj{i}.bias"] = lin.bias.detach()
    for name, p in lm.named_parameters():
        weights[f"thinker.{name}"] = p.detach()
    weights = {k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()}
    save_file(weights, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})

    config = {
        "architectures": ["Qwen3ASRRealtimeGeneration"],
        "model_type": "qwen3_asr",
        "torch_dtype": "bfloat16",
        "thinker_config": {
            "audio_config": audio,
            "text_config": text,
            "audio_token_id": ids["<|audio_pad|>"],
            "audio_start_token_id": ids["<|audio_start|>"],
            "user_token_id": raw.token_to_id("user") if raw.token_to_id("user") is not None else ids["<|im_start|>"],
            "model_type": "qwen3_asr_thinker",
        },
        "support_languages": ["English"],
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    eos = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": eos, "pad_token_id": ids["<|endoftext|>"]}, f)
    n = sum(v.numel() for v in weights.values())
    print(json.dumps({"out": args.out, "params": n, "vocab": text["vocab_size"], "tensors": len(weights)}))


if __name__ == "__main__":
    main()
