"""Token vectors of every layer, computed once per sentence list and gathered by position."""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..embedding import Embedder
from ..modules import BiLM

Sentence = Sequence[str]


def as_embedder(model: Union[Embedder, BiLM, str], batch_size: int = 32) -> Embedder:
    """An :class:`Embedder` for a model, a model name or folder, or an embedder itself.

    A stateful model is refused: each batch would start from the state the previous one left,
    so a sentence's vectors would depend on what was embedded before it (and the numbers
    differed from those of the same model's folder, which loads stateless)."""
    embedder = model if isinstance(model, Embedder) else Embedder(model, batch_size=batch_size)
    if embedder.bilm.stateful:
        raise ValueError("the analysis needs a stateless model: a stateful one carries its LSTM "
                         "state from one batch into the next, so a sentence's vectors would depend "
                         "on the sentences embedded before it; set model.stateful = False")
    return embedder


def untrained_copy(bilm: BiLM, seed: int = 0) -> BiLM:
    """A model of the same architecture with freshly initialised (untrained) weights: the
    control that tells what the architecture gives for free from what training learned.
    It runs on ``bilm``'s device, initialised on the CPU (the same weights for a seed on any)."""
    import torch

    torch.manual_seed(seed)
    own_ids = bilm.options.char_vocabulary is not None  # a dictionary model keeps its dictionaries
    control = BiLM(bilm.options, id_scheme=bilm.id_scheme if own_ids else None).eval()
    return control.to(next(bilm.parameters()).device)


def progress_bar(total: int, desc: str, progress: bool, unit: str = "tok") -> Any:
    """A tqdm bar on stderr over ``total`` units (tokens embedded, by default) named ``desc``,
    drawn only where ``progress`` (``elmo analyze`` asks for it where stderr is a terminal,
    without --quiet: a section's embedding and probes were minutes without a word)."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, disable=not progress)


def embed_layers(model: Union[Embedder, BiLM, str], sentences: Sequence[Sentence],
                 batch_size: int = 32, bar: Optional[Any] = None) -> List[np.ndarray]:
    """All layers of every sentence: a list of float32 arrays (L + 1, n_tokens, D).
    ``bar`` (:func:`progress_bar`) counts their tokens, batch by batch."""
    on_batch = None if bar is None else bar.update
    return as_embedder(model, batch_size).embed_sentences(list(sentences), layers="all", on_batch=on_batch)


def gather(arrays: Sequence[np.ndarray], positions: Sequence[Tuple[int, int]]) -> np.ndarray:
    """The vectors at ``(sentence, token)`` positions: (L + 1, N, D)."""
    if not positions:
        raise ValueError("no positions to gather")
    return np.stack([arrays[s][:, t] for s, t in positions], axis=1)


#: Sentences embedded at a time by :func:`gathered_layers` and :func:`stacked_layers` (their
#: float32 layers are dropped once their tokens are copied out).
GATHER_CHUNK_SENTENCES = 1024


def _chunks(embedder: Embedder, sentences: Sequence[Sentence], batch_size: int,
            bar: Optional[Any] = None) -> Iterator[Tuple[int, List[np.ndarray]]]:
    """``(start, layers)`` of :data:`GATHER_CHUNK_SENTENCES` sentences at a time from
    ``start``: :func:`embed_layers` of ``sentences[start:start + GATHER_CHUNK_SENTENCES]``."""
    for start in range(0, len(sentences), GATHER_CHUNK_SENTENCES):
        yield start, embed_layers(embedder, sentences[start:start + GATHER_CHUNK_SENTENCES], batch_size, bar)


def gathered_layers(model: Union[Embedder, BiLM, str], sentences: Sequence[Sentence],
                    tokens: Sequence[int], batch_size: int = 32, bar: Optional[Any] = None) -> np.ndarray:
    """Every layer's vector of token ``tokens[i]`` of ``sentences[i]``: (L + 1, N, D) float32.

    :func:`gather` of :func:`embed_layers`, :data:`GATHER_CHUNK_SENTENCES` sentences at a
    time: the layers of all the sentences (every token, where one a sentence is wanted) were
    held at once, about sentence-length times the result (gigabytes for a WSD run over all
    lemmas). ``bar`` (:func:`progress_bar`) counts the tokens of the sentences embedded."""
    if len(tokens) != len(sentences):
        raise ValueError(f"{len(tokens)} token positions for {len(sentences)} sentences")
    parts = [gather(arrays, [(i, t) for i, t in enumerate(tokens[start:start + len(arrays)])])
             for start, arrays in _chunks(as_embedder(model, batch_size), sentences, batch_size, bar)]
    if not parts:
        raise ValueError("no positions to gather")
    return np.concatenate(parts, axis=1)


def stacked_layers(model: Union[Embedder, BiLM, str], sentences: Sequence[Sentence],
                   batch_size: int = 32, bar: Optional[Any] = None) -> np.ndarray:
    """Every layer's vector of every token of ``sentences``, in order: (L + 1, N, D) float32,
    N the tokens of them all (the concatenation of :func:`embed_layers`' arrays).

    Written into one array made beforehand, :data:`GATHER_CHUNK_SENTENCES` sentences at a
    time: the POS probe over all of Brown held every sentence's array and their concatenation
    at once, twice the memory of the result. ``bar`` (:func:`progress_bar`) counts the tokens."""
    embedder = as_embedder(model, batch_size)
    n_tokens = sum(len(s) for s in sentences)
    out = np.empty((embedder.num_layers, n_tokens, embedder.dim), dtype=np.float32)
    at = 0
    for _, arrays in _chunks(embedder, sentences, batch_size, bar):
        for array in arrays:
            out[:, at:at + array.shape[1]] = array
            at += array.shape[1]
    if at != n_tokens:   # (embed_sentences gives one vector a token: a broken promise, not bad input)
        raise RuntimeError(f"embedded {at} tokens of {n_tokens}")
    return out


def unit_rows(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows of ``x`` (..., D) scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, eps)
