"""Host tensors meeting device tensors, found on one CPU: what fails, or waits, on a GPU.

On the CPU the host and the model's device are one, so a tensor made on the host and used with
the model's tensors without a copy (``index_copy`` or ``index_select`` by a host index, an
operator between a host tensor and a device one) runs here and fails on a GPU ("Expected all
tensors to be on the same device"), or, for an index of advanced indexing, is copied there
with a wait. :class:`HostDeviceMixes` tags every tensor as made where the code means it:

* on the device: the tensors and modules (parameters, buffers) it is given, those moved with
  ``.to(d)`` for a ``torch.device`` ``d`` (the model's device, as code names it: ``x.device``),
  and factories given such a ``device=``;
* on the host: ``torch.from_numpy``, factories without ``device=`` or with ``device="cpu"`` (a
  string: the host named on purpose), ``.cpu()`` and ``.to("cpu")``;
* an operator's result: on the device if any operand is, else on the host if any is, else
  untagged (tensors made before the block and not named, such as a sampler's own tables).

Each operator that takes a host tensor of one element or more beside a device tensor is
recorded in :attr:`mixes` with the place in ``elmo/`` that called it (a 0-dim host tensor is a
scalar, which CUDA operators accept). Seen through ``torch.overrides``: operators called from
Python, the custom autograd functions' forward and backward included.
"""
from __future__ import annotations

import traceback
from typing import Any, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map_only
from torch.utils.weak import WeakIdKeyDictionary

FACTORIES = {torch.tensor, torch.as_tensor, torch.zeros, torch.ones, torch.empty, torch.full,
             torch.arange, torch.rand, torch.randn, torch.randint, torch.linspace, torch.eye,
             torch.randperm}
MOVES = {torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda}
HOST, DEVICE = "host", "device"


def _named_host(device: Any) -> bool:
    """Whether a ``device=`` or ``.to()`` target names the host on purpose: the string "cpu"
    (the model's device comes as a torch.device, ``x.device``)."""
    return isinstance(device, str) and device == "cpu"


class HostDeviceMixes(TorchFunctionMode):
    """See the module. ``on_device``: tensors and modules whose tensors are on the device."""

    def __init__(self, *on_device: Any):
        super().__init__()
        self.tags: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.mixes: List[Tuple[str, str]] = []
        for thing in on_device:
            tensors = (list(thing.parameters()) + list(thing.buffers())
                       if isinstance(thing, torch.nn.Module) else [thing])
            for t in tensors:
                self.tags[t] = DEVICE
        self._from_numpy = torch.from_numpy

    def __enter__(self):
        real = self._from_numpy

        def from_numpy(array):   # (not seen by torch.overrides: it takes no tensor)
            t = real(array)
            self.tags[t] = HOST
            return t
        torch.from_numpy = from_numpy
        return super().__enter__()

    def __exit__(self, *exc):
        torch.from_numpy = self._from_numpy
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        tag = self._tag_of(func, args, kwargs, tensors)
        if tag is not None:
            tree_map_only(torch.Tensor, lambda t: self.tags.__setitem__(t, tag), out)
        return out

    def _tag_of(self, func, args, kwargs, tensors) -> Optional[str]:
        """Where ``func``'s result is (HOST, DEVICE, or None: untagged); records a mix."""
        if func in FACTORIES:
            return HOST if "device" not in kwargs or _named_host(kwargs["device"]) else DEVICE
        if func in MOVES:
            targets = [a for a in (*args[1:], *kwargs.values()) if isinstance(a, (str, torch.device))]
            if func is torch.Tensor.cpu or (targets and _named_host(targets[0])):
                return HOST
            return DEVICE if targets or func is torch.Tensor.cuda else self.tags.get(args[0])
        tags = [self.tags.get(t) for t in tensors]
        if DEVICE in tags and any(tag == HOST and t.dim() > 0 for t, tag in zip(tensors, tags)):
            self.mixes.append((getattr(func, "__qualname__", str(func)), _caller_in_elmo()))
        return DEVICE if DEVICE in tags else HOST if HOST in tags else None


def _caller_in_elmo() -> str:
    """The innermost frame in the package, as "path:line" from elmo/ (or "?")."""
    frames = [f for f in traceback.extract_stack() if "/elmo/" in f.filename]
    return f"{frames[-1].filename.split('/elmo/')[-1]}:{frames[-1].lineno}" if frames else "?"
