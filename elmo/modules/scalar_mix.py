"""ScalarMix: one task's learned mix of the biLM layers.

    mix = gamma * sum_j softmax(s)_j * h_j

s (one scalar per layer) starts at zeros and gamma at 1; both are learned per task, not per
word. With ``do_layer_norm`` each layer is first normalised by the mean and variance over all
of its unmasked positions and features, as in the original. ``penalty(lam)`` gives the
regulariser lam * ||s||^2 to add to the task loss.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, List, Optional, Sequence

import torch
from torch import nn

from ..checks import require_count, require_switch, shown


#: The largest float32; a larger finite Python float becomes inf in the model (its output NaN).
FLOAT32_MAX = torch.finfo(torch.float32).max


def float32_number(value, name: str) -> float:
    """``value`` as a float that float32 holds as a finite number (the mix's parameters are
    float32); TypeError for what is not a number, ValueError for NaN, inf or |value| > 3.4e38."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise TypeError(f"{name} must be a number, got {type(value).__name__}: {shown(value)}")
    try:
        number = float(value)  # (numpy's and 0-dim torch numbers too)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}: {shown(value)}") from None
    if not abs(number) <= FLOAT32_MAX:  # (NaN fails it too)
        raise ValueError(f"{name} must be a finite number that float32 holds (|x| <= 3.4e38), got {value!r}")
    return number


def mix_parameters(values, num_layers: int, name: str) -> List[float]:
    """The fixed or starting s of a mix over ``num_layers`` layers, checked (``name`` is the
    argument that gave it): one float32-finite number per layer."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of {num_layers} numbers, one per layer, got "
                        f"{type(values).__name__}: {values!r}")
    s = [float32_number(v, f"{name}[{i}]") for i, v in enumerate(values)]
    if len(s) != num_layers:
        raise ValueError(f"{name} has {len(s)} values for {num_layers} layers")
    return s


def penalty_weight(lam) -> float:
    """The regulariser's lambda, checked: a finite number of 0 or more (NaN would make the task
    loss NaN; a negative one would push the weights apart)."""
    weight = float32_number(lam, "lam")
    if weight < 0:
        raise ValueError(f"lam must be 0 or more, got {lam!r}")
    return weight


def no_penalty(module: nn.Module) -> torch.Tensor:
    """A 0-dim zero penalty on the device and in the dtype of ``module``'s first floating
    parameter or buffer (a fixed mix's values are buffers; torch's default on the CPU if it has
    none): a CPU zero added to a loss on the
    GPU failed, and a float32 one left a float64 model's loss float32 where it had no mixes."""
    like = next((p for p in itertools.chain(module.parameters(), module.buffers()) if p.is_floating_point()), None)
    if like is None:
        return torch.zeros(())
    return torch.zeros((), device=like.device, dtype=like.dtype)


class ScalarMix(nn.Module):
    """Mix ``num_layers`` tensors of equal shape into one.

    Args:
        num_layers: number of layers to mix (L + 1 for a biLM of L LSTM layers).
        do_layer_norm: normalise each layer over its unmasked positions first.
        initial_scalar_parameters: starting s (default zeros: equal weights).
        initial_gamma: starting gamma.
        trainable: learn s and gamma (False keeps them fixed, as buffers that no
            ``requires_grad_`` or optimizer reaches, and the penalty is zero).
    """

    def __init__(self, num_layers: int, do_layer_norm: bool = False,
                 initial_scalar_parameters: Optional[Sequence[float]] = None,
                 initial_gamma: float = 1.0, trainable: bool = True):
        super().__init__()
        num_layers = require_count("num_layers", num_layers)
        do_layer_norm = require_switch("do_layer_norm", do_layer_norm)  # "False" is true: say so
        trainable = require_switch("trainable", trainable)
        s = ([0.0] * num_layers if initial_scalar_parameters is None
             else mix_parameters(initial_scalar_parameters, num_layers, "initial_scalar_parameters"))
        gamma = float32_number(initial_gamma, "initial_gamma")
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.trainable = trainable
        self.scalar_parameters: torch.Tensor
        self.gamma: torch.Tensor
        values = {"scalar_parameters": torch.tensor(s, dtype=torch.float32), "gamma": torch.tensor([gamma])}
        for name, value in values.items():
            if trainable:
                setattr(self, name, nn.Parameter(value))
            else:
                # A fixed mix holds buffers (the same state_dict keys): as parameters with
                # requires_grad False, module.requires_grad_(True), the README's way to unfreeze
                # a biLM, made them trainable too, and the next step moved the "fixed" gamma and s
                self.register_buffer(name, value)

    def weights(self) -> torch.Tensor:
        """softmax(s): (num_layers,)."""
        return torch.softmax(self.scalar_parameters, dim=0)

    def penalty(self, lam: float) -> torch.Tensor:
        """lam * ||s||^2, the paper's regulariser that pulls the weights towards an average; a
        0-dim tensor, zero for a fixed mix (``trainable=False``), whose s is not learned: the
        usual fixed s that picks one layer, [-9e10, 1, -9e10], added 1.6e22 * lam to the task
        loss, which then showed nothing of the task (float32 keeps 7 digits)."""
        weight = penalty_weight(lam)
        if not getattr(self, "trainable", True):   # (a mix pickled before the flag was kept)
            return no_penalty(self)
        return weight * (self.scalar_parameters ** 2).sum()

    def forward(self, layers: Sequence[torch.Tensor], mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """layers: num_layers tensors (B, T, D); mask: (B, T), needed for layer norm -> (B, T, D).

        The mask is bool or 0/1 numbers; any nonzero value counts as a token (once: a long
        mask of 2s weighted those positions twice in the mean and variance). A mask given
        without ``do_layer_norm`` is not used, but checked as well (a wrong one is a caller's
        mistake that layer norm would meet later)."""
        if not hasattr(layers, "__len__"):  # (None, a generator: "... has no len()")
            raise TypeError(f"layers must be a list of {self.num_layers} tensors, got {type(layers).__name__}")
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layers, got {len(layers)}")
        for layer in layers:  # an integer layer would turn the weights into 0 (bool: into True)
            if not (isinstance(layer, torch.Tensor) and layer.is_floating_point()):
                raise TypeError(f"the layers to mix must be floating-point tensors, got "
                                f"{getattr(layer, 'dtype', type(layer).__name__)}")
        shapes = {tuple(layer.shape) for layer in layers}
        if len(shapes) > 1:
            raise ValueError(f"the layers to mix must have one shape, got {sorted(shapes)}")
        if layers[0].dim() == 0:  # (layer norm failed on its shape[-1]; without it the mix was (1,))
            raise ValueError("the layers to mix must be (..., D) tensors, got 0-dimensional ones")
        weights = self.weights().to(layers[0].dtype)
        if mask is not None:
            self._check_mask(mask, layers[0])
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("do_layer_norm needs the mask")
            mask = mask.bool()
            layers = [self._normalise(layer, mask) for layer in layers]
        mixed = sum(w * layer for w, layer in zip(weights, layers))
        return self.gamma.to(mixed.dtype) * mixed

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    @staticmethod
    def _check_mask(mask, layer: torch.Tensor) -> None:
        """A mask (...,) for layers like ``layer`` (..., D), on its device, else a TypeError or
        ValueError: a wrong shape gave a broadcasting error under layer norm, or worse, and
        another device an error from inside PyTorch under layer norm alone."""
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"the mask must be a tensor (B, T), got {type(mask).__name__}")
        if mask.device != layer.device:
            raise ValueError(f"the mask is on {mask.device} and the layers on {layer.device}: "
                             f"move it with mask.to({str(layer.device)!r})")
        shape = layer.shape
        if tuple(mask.shape) != tuple(shape[:-1]):
            raise ValueError(f"the mask has shape {tuple(mask.shape)}; for layers of shape "
                             f"{tuple(shape)} it must be {tuple(shape[:-1])}")

    @staticmethod
    def _normalise(layer: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``layer`` less its mean, over its standard deviation, both over the masked-in
        positions; unchanged where the mask holds none. Chosen on the device, not by reading
        the count back (a GPU sync per layer, and a break in a compiled graph).

        The statistics are taken in float32 at least: in float16 (a ``.half()`` model) the
        sums over B * T * D values passed float16's largest number, 65504, for an ordinary
        batch, and the mix came out NaN. The result has the layer's dtype."""
        work = layer.to(torch.promote_types(layer.dtype, torch.float32))
        keep = mask.unsqueeze(-1).to(work.dtype)
        count = keep.sum() * work.shape[-1]
        # divided by 1 where there is no token: 0 / 0 would make the unused branch NaN, and
        # its zero gradient times NaN a NaN gradient
        some = count > 0
        divisor = torch.where(some, count, torch.ones_like(count))
        mean = (work * keep).sum() / divisor
        var = (((work - mean) * keep) ** 2).sum() / divisor
        return torch.where(some, (work - mean) / torch.sqrt(var + 1e-12), work).to(layer.dtype)
