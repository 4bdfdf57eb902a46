"""The tokenizer of the tiny models made here: a byte-level BPE trained on generated words.

Byte-level, so any input text tokenizes (no unknown token); trained on made-up words plus common
English ones, so prompts of a known token count are easy to build. Shared by make-model.py and
make-realtime-model.py, each with its own seed, corpus size and special tokens.
"""

import random

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ra", "to", "vi", "an", "el", "or", "is", "un", "the", "ing", "er"]


def corpus(seed: int, lines: int, made_words: int, english: list[str]):
    """`lines` sentences of 5–30 words: `made_words` words of 1–4 syllables, and `english` (each 20 times as likely)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(made_words)]
    words += english * 20
    for _ in range(lines):
        yield " ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) + rng.choice([".", "?", "!", ","])


def byte_level_bpe(vocab_size: int, special: list[str], texts) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok
