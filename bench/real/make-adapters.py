"""Writes N small LoRA adapters for the tiny local model, random weights, made entirely here.

Their output is noise like the model's, but vLLM loads, schedules and caches them as it would
real ones: each runs in a LoRA slot (--max-loras), and its KV blocks hash apart from the base
model's. rank 8 on q_proj and v_proj; init_lora_weights=False so the weights are not zero.
Run with the venv's python: bench/real/make-adapters.py --model DIR --out DIR --count N
(adapters lora-0 ... lora-{N-1}; one that already exists is kept).
"""

import argparse
import os

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for i in range(a.count):
        where = os.path.join(a.out, f"lora-{i}")
        if os.path.exists(os.path.join(where, "adapter_config.json")):
            continue
        torch.manual_seed(1000 + i)
        base = LlamaForCausalLM.from_pretrained(a.model, torch_dtype=torch.bfloat16)
        config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False, task_type="CAUSAL_LM")
        get_peft_model(base, config).save_pretrained(where)
        print(f"adapter {where}")


if __name__ == "__main__":
    main()
