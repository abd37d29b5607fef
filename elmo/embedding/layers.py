"""Which output an embedding run keeps: all layers, the top one, their average, or a fixed mix.

    "all"             -> (L + 1, T, D)   every layer, as the model gives them
    "top"             -> (T, D)          the last LSTM layer
    "average"         -> (T, D)          the mean of the L + 1 layers
    "mix:w0,w1,..."   -> (T, D)          gamma * sum_j w_j h_j, weights used as given

For a task's trained :class:`elmo.ScalarMix`, pass the mix itself as ``layers`` (Python), or
its ``softmax(s)`` as the weights and its gamma as ``gamma``. D is the model's output width (2P).

A mix trained with ``do_layer_norm`` cannot be reproduced here: it normalised each layer by
a mean and variance before weighting it (those of a whole batch in :class:`elmo.Elmo`, of
each sentence in the task models), and a fixed ``mix:`` weights the layers as they are.
Such a ScalarMix is refused; for its weights typed as numbers the code cannot tell, so keep
``all`` and apply the task's mix (with its mask) to the layers instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from ..checks import shown
from ..modules.scalar_mix import FLOAT32_MAX, ScalarMix, float32_number

CHOICES = ("all", "top", "average", "mix:w0,w1,...")


@dataclass(frozen=True)
class LayerSelection:
    """A parsed ``--layers`` value. ``weights`` is only set for ``mix``."""

    kind: str
    weights: Optional[Tuple[float, ...]] = None
    gamma: float = 1.0

    def __post_init__(self) -> None:
        # One made directly was not checked: an unknown kind ran as a mix and stopped in
        # tensordot, a NaN gamma blamed the model's weights, and a gamma on "top" was recorded
        # in the output's settings without changing a vector
        if self.kind not in ("all", "top", "average", "mix"):
            raise ValueError(f"LayerSelection kind must be all, top, average or mix; got {self.kind!r}")
        gamma = float32_number(self.gamma, "gamma")
        if self.kind != "mix":
            if self.weights is not None or gamma != 1.0:
                raise ValueError(f"weights and gamma apply to a mix, not to {self.kind!r}")
            return
        if not self.weights:
            raise ValueError("a mix needs one weight per layer (L + 1, the token layer included)")
        weights = tuple(float32_number(w, "a mix weight") for w in self.weights)
        object.__setattr__(self, "weights", weights)   # (a list given: hashable, as the class)
        object.__setattr__(self, "gamma", gamma)

    @classmethod
    def parse(cls, spec: "str | LayerSelection | ScalarMix", gamma: float = 1.0) -> "LayerSelection":
        if isinstance(spec, LayerSelection):
            gamma = float32_number(gamma, "gamma (--gamma)")
            if gamma != 1.0 and gamma != spec.gamma:  # (it was dropped without a word)
                raise ValueError(f"gamma comes from the LayerSelection given as layers ({spec.gamma}); "
                                 f"leave gamma out")
            return spec
        if isinstance(spec, ScalarMix):
            if float(gamma) != 1.0:
                raise ValueError("gamma comes from the ScalarMix given as layers; leave gamma out")
            return cls.from_scalar_mix(spec)
        if not isinstance(spec, str):  # (else an AttributeError from .strip())
            raise TypeError(f"layers must be a string ({', '.join(CHOICES)}), a ScalarMix or a "
                            f"LayerSelection, got {type(spec).__name__}: {shown(spec)}")
        # float32 must hold them: 1e39 became inf in the mix, which blamed the model's weights
        gamma = float32_number(gamma, "gamma (--gamma)")
        spec = spec.strip()
        if spec in ("all", "top", "average"):
            if gamma != 1.0:
                raise ValueError(f"gamma applies to a mix, not to layers={spec!r}")
            return cls(spec)
        if spec.startswith("mix:"):
            try:
                weights = tuple(float(w) for w in spec[4:].split(","))
            except ValueError:
                raise ValueError(f"layers={spec!r}: the mix weights must be numbers, "
                                 f"e.g. mix:0.2,0.5,0.3") from None
            if not all(abs(w) <= FLOAT32_MAX for w in weights):  # (NaN fails it too)
                raise ValueError(f"layers={spec!r}: the mix weights must be finite numbers that "
                                 f"float32 holds (|x| <= 3.4e38)")
            return cls("mix", weights, float(gamma))
        raise ValueError(f"layers must be one of {', '.join(CHOICES)}; got {spec!r}")

    @classmethod
    def from_scalar_mix(cls, mix: ScalarMix) -> "LayerSelection":
        """The fixed mix of a trained ScalarMix: its ``softmax(s)`` as the weights and its
        gamma. One with ``do_layer_norm`` is a ValueError: weighting the layers as they are
        would give other vectors than the task's, without a word (see the module doc)."""
        if mix.do_layer_norm:
            raise ValueError("this ScalarMix normalises each layer (do_layer_norm) by the statistics of "
                             "its input (a batch, or a sentence), which a fixed mix cannot reproduce; use "
                             "layers='all' and apply the mix to each batch's layers with its mask")
        weights = tuple(float(w) for w in mix.weights().detach().cpu())
        return cls("mix", weights, float32_number(float(mix.gamma.detach()), "the ScalarMix's gamma"))

    def __str__(self) -> str:
        if self.kind != "mix":
            return self.kind
        assert self.weights is not None, "__post_init__ refuses a mix without weights"
        return "mix:" + ",".join(repr(w) for w in self.weights)

    def check(self, num_layers: int) -> None:
        """Raise ValueError if a mix does not have one weight per layer of the model."""
        if self.kind != "mix":
            return
        assert self.weights is not None, "__post_init__ refuses a mix without weights"
        if len(self.weights) != num_layers:
            raise ValueError(f"layers={self}: {len(self.weights)} weights for a model with "
                             f"{num_layers} layers (L + 1, the token layer included)")

    @property
    def keeps_all(self) -> bool:
        return self.kind == "all"

    def shape(self, n_tokens: int, num_layers: int, dim: int) -> Tuple[int, ...]:
        """The array shape of one sentence of ``n_tokens`` tokens: (num_layers, n_tokens, dim)
        for ``all``, else (n_tokens, dim)."""
        return (num_layers, n_tokens, dim) if self.keeps_all else (n_tokens, dim)

    def reduce(self, stacked: torch.Tensor) -> torch.Tensor:
        """(L + 1, B, T, D) -> (L + 1, B, T, D) for ``all``, else (1, B, T, D).

        An average or mix is computed in float32 at least: in a bfloat16 model's own dtype
        the ``average`` was not the mean of the ``all`` layers (the sum was rounded to 8 bits
        of mantissa before the division); it is given back in float32."""
        if self.kind == "all":
            return stacked
        if self.kind == "top":
            return stacked[-1:]
        stacked = stacked.to(torch.promote_types(stacked.dtype, torch.float32))
        if self.kind == "average":
            return stacked.mean(dim=0, keepdim=True)
        self.check(stacked.shape[0])
        w = torch.tensor(self.weights, dtype=stacked.dtype, device=stacked.device)
        return self.gamma * torch.tensordot(w, stacked, dims=1).unsqueeze(0)
