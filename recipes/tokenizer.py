"""Tokenizers for the recipes: the model's own when available, otherwise an offline byte-level BPE.

The offline tokenizer is a byte-level BPE (GPT-2's scheme: any byte sequence is encodable, no
unknown token) trained with the `tokenizers` library on the recipe's own training text, with one
special token `<|endoftext|>` (id 0) that separates documents. It is cached under the data cache,
keyed by a hash of the text and the vocabulary size, so a run trains it once.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

logger = logging.getLogger(__name__)

EOS = "<|endoftext|>"
GPT2_TOKENIZER = "openai-community/gpt2"


def train_bpe(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE with `vocab_size` entries (EOS = id 0) trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=None)


def cached_bpe(texts: Callable[[], Iterable[str]], fingerprint: str, vocab_size: int, cache_dir: Path):
    """The offline BPE for the text identified by `fingerprint`, trained on `texts()` on first use."""
    key = hashlib.sha256(f"bpe|{fingerprint}|{vocab_size}".encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"tokenizer-bpe{vocab_size}-{key}"
    if not (path / "tokenizer.json").is_file():
        logger.info("training a byte-level BPE (vocab %d) on the training text -> %s", vocab_size, path)
        tmp = path.with_name(path.name + ".tmp")
        train_bpe(texts(), vocab_size).save_pretrained(tmp)
        tmp.rename(path)
    return AutoTokenizer.from_pretrained(path)


def load_tokenizer(
    spec: str,
    *,
    own: str | None,
    texts: Callable[[], Iterable[str]],
    fingerprint: str,
    vocab_size: int,
    cache_dir: Path,
) -> PreTrainedTokenizerBase:
    """Resolve a tokenizer spec.

    spec: "auto" -> `own` (the model's tokenizer, from local files only) and the offline BPE when it
    is not there; "bpe" -> the offline BPE; anything else -> `AutoTokenizer.from_pretrained(spec)`.
    """
    if spec == "auto" and own is not None:
        try:
            return AutoTokenizer.from_pretrained(own, local_files_only=True)
        except (OSError, ValueError):
            logger.warning("tokenizer %s is not available offline; using the offline byte-level BPE", own)
    if spec in ("auto", "bpe"):
        return cached_bpe(texts, fingerprint, vocab_size, cache_dir)
    return AutoTokenizer.from_pretrained(spec)
