"""The frozen biLM's layers, computed once per distinct sentence and reused.

A frozen, stateless biLM gives a sentence the same L + 1 layers in every epoch, seed and
variant, so running it again is wasted work. :class:`LayerCache` runs it once per distinct
token sequence (in length-sorted batches) and stores the layers at half precision; the task
model then only mixes them. It is used only when the biLM is frozen; a fine-tuned biLM runs
inside the task model.

Memory: sentences x tokens x (L + 1) x D x 2 bytes; :meth:`LayerCache.nbytes` reports it and
:meth:`LayerCache.estimate_nbytes` says it before a fill. An experiment keeps only the current
task's sentences (:meth:`LayerCache.retain`), so its memory is that of its largest task, not
of all its tasks together.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Sequence, Tuple

import torch

from ..modules.bilm import BiLM


class LayerCache:
    """Precomputed biLM layers for token sequences.

    Args:
        bilm: a loaded :class:`~elmo.modules.bilm.BiLM` (run in eval mode, without gradients).
        batch_size: sentences per biLM call when filling.
        dtype: storage type (float16 halves the memory; mixing happens in float32).
    """

    def __init__(self, bilm: BiLM, batch_size: int = 64, dtype: torch.dtype = torch.float16):
        self.bilm = bilm
        self.batch_size = batch_size
        self.dtype = dtype
        self.max_chars = bilm.options.char_cnn.max_characters_per_token
        self._store: Dict[Tuple[str, ...], torch.Tensor] = {}       # (L + 1, n, D)

    def __len__(self) -> int:
        return len(self._store)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._store.values())

    def estimate_nbytes(self, sentences: Iterable[Sequence[str]]) -> int:
        """The bytes that :meth:`fill` would add for ``sentences`` (those not cached yet)."""
        todo = {tuple(s) for s in sentences if s} - set(self._store)
        per_token = (self.bilm.num_layers * self.bilm.output_dim
                     * torch.empty((), dtype=self.dtype).element_size())
        return per_token * sum(len(s) for s in todo)

    def retain(self, sentences: Iterable[Sequence[str]]) -> int:
        """Drop every cached sentence not among ``sentences``; returns how many were dropped.

        An experiment's runs go task after task: without it the layers of every finished
        task stayed in memory to the end (the sum of all tasks, where one is needed)."""
        keep = {tuple(s) for s in sentences}
        gone = [key for key in self._store if key not in keep]
        for key in gone:
            del self._store[key]
        return len(gone)

    @torch.no_grad()
    def fill(self, sentences: Iterable[Sequence[str]], progress: bool = False) -> None:
        """Run the biLM on every sentence not cached yet, in batches of ``batch_size`` sorted
        by length, then by tokens: the same batches in every process. ``progress``: a tqdm bar
        on stderr counting the sentences (thousands take minutes on a CPU), gone when done."""
        from tqdm import tqdm
        # by length, then by the tokens: ties in set order followed the process's string
        # hash seed, so the batches (and a batch of one's rounding) changed from run to run
        todo = sorted({tuple(s) for s in sentences if s} - set(self._store), key=lambda s: (len(s), s))
        was_training = self.bilm.training
        self.bilm.eval()
        device = next(self.bilm.parameters()).device
        try:
            with tqdm(total=len(todo), desc="biLM layers", unit="sentence", leave=False,
                      disable=not progress) as bar:
                for start in range(0, len(todo), self.batch_size):
                    chunk = todo[start:start + self.batch_size]
                    ids = self.bilm.token_ids([list(s) for s in chunk]).to(device)
                    layers = self.bilm(ids)["activations"]
                    stacked = torch.stack(layers, dim=0).to("cpu", self.dtype)     # (L + 1, B, T, D)
                    for i, sent in enumerate(chunk):
                        self._store[sent] = stacked[:, i, :len(sent)].clone()
                    bar.update(len(chunk))
        finally:
            self.bilm.train(was_training)

    def layers(self, sentences: Sequence[Sequence[str]]) -> List[torch.Tensor]:
        """L + 1 float32 tensors (B, T, D) for a batch, zero at padding; fills what is missing."""
        missing = [s for s in sentences if s and tuple(s) not in self._store]
        if missing:
            self.fill(missing)
        n_layers, dim = self.bilm.num_layers, self.bilm.output_dim
        longest = max((len(s) for s in sentences), default=0)
        out = torch.zeros(n_layers, len(sentences), longest, dim)
        for i, s in enumerate(sentences):
            if s:
                out[:, i, :len(s)] = self._store[tuple(s)].float()
        return list(out.unbind(0))
