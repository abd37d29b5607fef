"""The inputs of the task models: static word vectors, optional character features, and
ELMo's task-specific mixes.

* :class:`CharFeatures`: a small character CNN of the task model itself (the baseline's
  optional character features; it has nothing to do with the biLM's CNN).
* :class:`WordFeatures`: word embedding (GloVe-initialised) plus optional char features.
* :class:`ElmoFeatures`: one :class:`elmo.Elmo` with one ScalarMix per position where ELMo is
  added (``input``, ``output``), dropout on each mix, and the lambda * ||s||^2 penalty. It mixes
  cached layers when a batch carries them, else runs the biLM.

With ``do_layer_norm`` each layer is normalised by the mean and variance of each sentence's
own tokens (:data:`LAYER_NORM_OVER`), so a sentence gets the same vectors alone as in any
batch: the original's statistics over a whole batch made a sentence's scores depend on the
sentences batched with it (and a saved model's predictions on how its input was batched).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import torch
from torch import nn

from ..modules.bilm import BiLM
from ..modules.elmo import Elmo
from ..modules.scalar_mix import ScalarMix, no_penalty

POSITIONS = ("input", "output")
#: Fixed mix parameters s that put all the weight on the top layer (softmax ~ [0, ..., 0, 1]).
LAST_LAYER_S = 1.0e4
#: What ``do_layer_norm`` takes each layer's mean and variance over: ``sentence`` (each
#: sentence's tokens; what task models use), or ``batch`` (all tokens of a call, as the
#: original and :class:`elmo.Elmo`; only task models saved before ``sentence`` existed).
LAYER_NORM_OVER = ("sentence", "batch")


class CharFeatures(nn.Module):
    """Character CNN: (B, T, C) char ids -> (B, T, filters), max over character positions.

    Args:
        num_chars: size of the character id space (262 for :func:`elmo.batch_to_ids`).
        dim: character embedding size.
        filters: output channels; width: convolution width.
    """

    def __init__(self, num_chars: int = 262, dim: int = 16, filters: int = 32, width: int = 3):
        super().__init__()
        self.embed = nn.Embedding(num_chars, dim, padding_idx=0)
        self.conv = nn.Conv1d(dim, filters, width, padding=width // 2)
        self.output_dim = filters

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        batch, steps, n_chars = chars.shape
        x = self.embed(chars.reshape(batch * steps, n_chars)).transpose(1, 2)   # (BT, dim, C)
        h = torch.relu(self.conv(x))
        h = h.masked_fill((chars.reshape(batch * steps, 1, n_chars) == 0), 0.0)
        return h.max(dim=2).values.reshape(batch, steps, -1)

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward


class WordFeatures(nn.Module):
    """Static token features: (B, T) word ids and (B, T, C) char ids -> (B, T, D).

    Args:
        embeddings: (V, E) initial word vectors (row 0 is padding).
        trainable: fine-tune the word vectors.
        char_features: add a :class:`CharFeatures` of this many filters (0 = none).
    """

    def __init__(self, embeddings: torch.Tensor, trainable: bool = True, char_features: int = 0):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(embeddings.clone(), freeze=not trainable,
                                                  padding_idx=0)
        self.chars = CharFeatures(filters=char_features) if char_features else None
        self.output_dim = embeddings.shape[1] + (char_features or 0)

    def forward(self, words: torch.Tensor, chars: torch.Tensor,
                extra: Optional[torch.Tensor] = None) -> torch.Tensor:
        """words (B, T), chars (B, T, C) -> (B, T, D). ``extra`` (N, E): the vectors of words
        beyond the vocabulary, ids V .. V + N - 1 (a saved model's GloVe words at prediction)."""
        if extra is None or extra.shape[0] == 0:
            x = self.embed(words)
        else:
            size = self.embed.num_embeddings
            beyond = (words >= size).unsqueeze(-1)
            x = torch.where(beyond, extra.to(self.embed.weight)[(words - size).clamp(min=0)],
                            self.embed(words.clamp(max=size - 1)))
        if self.chars is not None:
            x = torch.cat([x, self.chars(chars)], dim=-1)
        return x

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward


def dictionary_bilm_problem(options, finetune: bool, cached: bool) -> Optional[str]:
    """Why a biLM whose characters go through a dictionary (ELMoForManyLangs) cannot run as
    asked in a task model, or None: the task batches carry byte ids, which such a model would
    read as dictionary ids, so it runs only frozen and from the layer cache."""
    if options.char_vocabulary is None:
        return None
    if finetune:
        return ("fine-tuning a biLM whose characters go through a dictionary "
                "(ELMoForManyLangs) is not supported in task experiments; freeze it")
    if not cached:
        return ("a biLM whose characters go through a dictionary (ELMoForManyLangs) runs in "
                "task experiments only from the layer cache: set cache_layers true")
    return None


class ElmoFeatures(nn.Module):
    """ELMo mixes for the positions where a task model adds them.

    Args:
        bilm: the biLM (shared and frozen unless ``finetune``).
        positions: a subset of ``("input", "output")``; each gets its own ScalarMix.
        layers: ``all`` (learned softmax(s) over the L + 1 layers and gamma) or ``last``
            (s fixed so that only the top layer is used, gamma fixed at 1).
        dropout: dropout on each mixed representation (0.5 in the paper).
        finetune: train the biLM's weights too.
        do_layer_norm: layer-normalise each layer before mixing.
        layer_norm_over: where the layer norm's statistics come from (:data:`LAYER_NORM_OVER`).
    """

    def __init__(self, bilm: BiLM, positions: Sequence[str] = ("input",), layers: str = "all",
                 dropout: float = 0.5, finetune: bool = False, do_layer_norm: bool = False,
                 layer_norm_over: str = "sentence"):
        super().__init__()
        positions = list(positions)
        if not positions or any(p not in POSITIONS for p in positions) or len(set(positions)) != len(positions):
            raise ValueError(f"ELMo positions must be distinct items of {POSITIONS}, got {positions}")
        if layers not in ("all", "last"):
            raise ValueError(f"layers must be 'all' or 'last', got {layers!r}")
        if layer_norm_over not in LAYER_NORM_OVER:
            raise ValueError(f"layer_norm_over must be one of {LAYER_NORM_OVER}, got {layer_norm_over!r}")
        if finetune and bilm.options.char_vocabulary is not None:
            # the batches carry byte ids, which such a model would read as dictionary ids
            raise ValueError(dictionary_bilm_problem(bilm.options, finetune, cached=True))
        fixed = None
        if layers == "last":
            fixed = [-LAST_LAYER_S] * (bilm.num_layers - 1) + [LAST_LAYER_S]
        self.positions = positions
        self.layers_used = layers
        self.finetune = finetune
        self.layer_norm_over = layer_norm_over
        # statistics per sentence: the mixes run once per row (vmap) on the raw layers
        self._per_sentence = do_layer_norm and layer_norm_over == "sentence"
        # Elmo's own dropout is off: it is applied here, so that cached layers get it too.
        self.elmo = Elmo(module=bilm, num_output_representations=len(positions), dropout=0.0,
                         requires_grad=finetune, do_layer_norm=do_layer_norm,
                         scalar_mix_parameters=fixed)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = bilm.output_dim

    def forward(self, chars: torch.Tensor, mask: torch.Tensor,
                layers: Optional[List[torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
        """chars (B, T, C), mask (B, T), optional cached layers (L + 1 tensors (B, T, D))
        -> position -> (B, T, D), zero at padding."""
        if layers is not None and not self.finetune:
            mixed = [self._mix(mix, layers, mask) for mix in self.elmo.scalar_mixes]
        else:
            if self.elmo.bilm.options.char_vocabulary is not None:
                # the batches carry byte ids, which such a model reads as dictionary ids: in
                # range for a real model's thousands of characters, silently wrong vectors
                raise ValueError(dictionary_bilm_problem(self.elmo.bilm.options, False, cached=False))
            out = self.elmo(chars, return_layers=self._per_sentence)
            if self._per_sentence:
                mixed = [self._mix(mix, out["layers"], out["mask"]) for mix in self.elmo.scalar_mixes]
            else:
                mixed = out["elmo_representations"]
        keep = mask.unsqueeze(-1).to(mixed[0].dtype)
        return {p: self.dropout(m) * keep for p, m in zip(self.positions, mixed)}

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    def _mix(self, mix: ScalarMix, layers: List[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """One mix of L + 1 layers (B, T, D) with mask (B, T) -> (B, T, D); with per-sentence
        layer norm each row is mixed alone (vmap over the batch), its statistics its own."""
        if not self._per_sentence:
            return mix(layers, mask)
        if mask.shape[0] == 0:                        # (vmap cannot map over no rows)
            return layers[0].new_zeros(layers[0].shape)
        return torch.vmap(lambda row_mask, *row: mix(list(row), row_mask))(mask, *layers)

    def penalty(self, lam: float) -> torch.Tensor:
        """lambda * ||s||^2 summed over the mixes (zero for fixed, last-layer mixes)."""
        if self.layers_used == "last" or lam == 0:
            return no_penalty(self)
        return self.elmo.penalty(lam)

    def mix_weights(self) -> Dict[str, Dict[str, object]]:
        """position -> {"weights": softmax(s) as a list, "gamma": float}."""
        return {p: {"weights": [float(w) for w in mix.weights().detach()],
                    "gamma": float(mix.gamma.detach())}
                for p, mix in zip(self.positions, self.elmo.scalar_mixes)}
