"""Observers of the registered ``stable_flash`` attention (used by the probe and the monitor).

``with observe_attention(callback): model(**batch)`` calls
``callback(module, query, key, value, attention_mask, **kwargs)`` once per attention layer with
the tensors transformers hands to the attention function: query (B, Hq, Sq, D), key/value
(B, Hk, Sk, D) (KV heads, before any GQA repeat), the mask from the registered mask function
(None or a (B, Sk) padding mask), and kwargs with at least ``scaling``, ``softcap``,
``sliding_window``, ``dropout`` and ``is_causal``. Callbacks must not modify the tensors.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

AttentionObserver = Callable[..., None]

_observers: list[AttentionObserver] = []


@contextmanager
def observe_attention(callback: AttentionObserver) -> Iterator[AttentionObserver]:
    """Call ``callback`` from every stable_flash attention layer while the block runs."""
    _observers.append(callback)
    try:
        yield callback
    finally:
        _observers.remove(callback)


def notify(module, query, key, value, attention_mask, kwargs: dict) -> None:
    """Hand one layer's attention inputs to every active observer."""
    for callback in tuple(_observers):
        callback(module, query, key, value, attention_mask, **kwargs)


def has_observers() -> bool:
    return bool(_observers)
