"""ScalarMix: one task's learned mix of the biLM layers.

    mix = gamma * sum_j softmax(s)_j * h_j

s (one scalar per layer) starts at zeros and gamma at 1; both are learned per task, not per
word. With ``do_layer_norm`` each layer is first normalised by the mean and variance over all
of its unmasked positions and features, as in the original. ``penalty(lam)`` gives the
regulariser lam * ||s||^2 to add to the task loss.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from torch import nn

from ..jobconfig import integer_or_none


class ScalarMix(nn.Module):
    """Mix ``num_layers`` tensors of equal shape into one.

    Args:
        num_layers: number of layers to mix (L + 1 for a biLM of L LSTM layers).
        do_layer_norm: normalise each layer over its unmasked positions first.
        initial_scalar_parameters: starting s (default zeros: equal weights).
        initial_gamma: starting gamma.
        trainable: learn s and gamma (False keeps them fixed).
    """

    def __init__(self, num_layers: int, do_layer_norm: bool = False,
                 initial_scalar_parameters: Optional[Sequence[float]] = None,
                 initial_gamma: float = 1.0, trainable: bool = True):
        super().__init__()
        count = integer_or_none(num_layers)  # any integer type (numpy's too), but not 2.5
        if count is None or count < 1:
            raise ValueError(f"num_layers must be a count of at least 1, got {num_layers!r}")
        num_layers = count
        s = [0.0] * num_layers if initial_scalar_parameters is None else list(initial_scalar_parameters)
        if len(s) != num_layers:
            raise ValueError(f"initial_scalar_parameters has {len(s)} values for {num_layers} layers")
        if not all(math.isfinite(v) for v in s + [initial_gamma]):  # else every output is NaN
            raise ValueError(f"initial_scalar_parameters and initial_gamma must be finite, got {s} "
                             f"and {initial_gamma}")
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.scalar_parameters = nn.Parameter(torch.tensor(s, dtype=torch.float32), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor([float(initial_gamma)]), requires_grad=trainable)

    def weights(self) -> torch.Tensor:
        """softmax(s): (num_layers,)."""
        return torch.softmax(self.scalar_parameters, dim=0)

    def penalty(self, lam: float) -> torch.Tensor:
        """lam * ||s||^2, the paper's regulariser that pulls the weights towards an average."""
        return lam * (self.scalar_parameters ** 2).sum()

    def forward(self, layers: Sequence[torch.Tensor], mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """layers: num_layers tensors (B, T, D); mask: (B, T), needed for layer norm -> (B, T, D)."""
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layers, got {len(layers)}")
        shapes = {tuple(layer.shape) for layer in layers}
        if len(shapes) > 1:
            raise ValueError(f"the layers to mix must have one shape, got {sorted(shapes)}")
        weights = self.weights().to(layers[0].dtype)
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("do_layer_norm needs the mask")
            if tuple(mask.shape) != tuple(layers[0].shape[:-1]):  # else a broadcasting error, or worse
                raise ValueError(f"the mask has shape {tuple(mask.shape)}; for layers of shape "
                                 f"{tuple(layers[0].shape)} it must be {tuple(layers[0].shape[:-1])}")
            layers = [self._normalise(layer, mask) for layer in layers]
        mixed = sum(w * layer for w, layer in zip(weights, layers))
        return self.gamma.to(mixed.dtype) * mixed

    @staticmethod
    def _normalise(layer: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask.unsqueeze(-1).to(layer.dtype)
        count = keep.sum() * layer.shape[-1]
        if float(count) == 0:
            return layer
        mean = (layer * keep).sum() / count
        var = (((layer - mean) * keep) ** 2).sum() / count
        return (layer - mean) / torch.sqrt(var + 1e-12)
