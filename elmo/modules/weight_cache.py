"""A value derived from some parameters, kept until one of them changes.

The LSTM keeps weights in other forms for inference: W_hh re-laid for one-row products, int8
rows, oneDNN's own layout; the character CNN keeps the vectors of its token cache. Each is
made when first needed and made again when a weight it was made from has changed (an
optimizer step or ``load_state_dict`` changes it in place and bumps its version; ``.to()``
replaces it), so it never goes stale.

PyTorch's fused optimizer kernels (``fused=True``, as ``elmo train`` uses Adagrad on the CPU)
write the parameters without bumping their version, and so may another library's optimizer.
Importing this module therefore registers one global hook after every optimizer step that
bumps the version of the parameters such an optimizer updated (see
:func:`_count_optimizer_writes`): without it, a validation run after a fused step measured
the weights of an earlier one, and a fine-tuned model's cached words kept their old vectors.

A weight replaced by another tensor (``torch.func.functional_call``'s parameters,
``param.data = w``, ``load_state_dict(assign=True)``) is another storage: the key holds a weak
reference to each weight's storage, so a new tensor that the allocator placed at the address
of a freed weight, with the same version, is not taken for it (``functional_call`` of a model
with a new temporary dict of parameters per call got the freed ones' addresses, and the
one-row steps kept the first dict's W_hh).

Nor can a process count another's writes: weights in shared memory (``module.share_memory()``,
tensors sent through ``torch.multiprocessing``) may be written by another process (Hogwild
training) while this one's version counters stay as they were, and its forms and token vectors
went on giving the old weights' results. For CPU weights in shared memory
(:func:`shared_between_processes`) a value is therefore made again at every use (the LSTM's
forms once per layer and call; the token cache is not used). So are those of inference
tensors (weights made or loaded under ``torch.inference_mode()``), which count no writes at
all (:func:`writes_uncounted`).

What it cannot see is a write that PyTorch does not count either: through ``param.data``
(``param.data.copy_(w)``), which bypasses the version counter as it bypasses autograd's own
checks. After such a write, call :meth:`elmo.modules.lstm.BiLSTMStack.clear_inference_caches`
and build a token cache again (or write under ``torch.no_grad()`` instead, which is counted).
"""
from __future__ import annotations

from typing import Any, Callable, Generic, Iterable, Optional, Sequence, Tuple, TypeVar

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.optim.optimizer import register_optimizer_step_post_hook

T = TypeVar("T")


def weights_key(params: Iterable[torch.Tensor]) -> Tuple[Any, ...]:
    """Each tensor's address, in-place version, device and dtype (see :class:`WeightsState`);
    an inference tensor has no version (reading it raised), so its place holds None."""
    return tuple((p.data_ptr(), None if p.is_inference() else p._version, p.device, p.dtype) for p in params)


def shared_between_processes(params: Iterable[torch.Tensor]) -> bool:
    """Whether any of ``params`` is a CPU tensor in shared memory, which another process may
    write without this one counting it (see the module's docstring)."""
    return any(p.device.type == "cpu" and p.untyped_storage().is_shared() for p in params)


def writes_uncounted(params: Iterable[torch.Tensor]) -> bool:
    """Whether a write to any of ``params`` may go uncounted: weights in shared memory
    (:func:`shared_between_processes`), or inference tensors (a model loaded or moved under
    ``torch.inference_mode()``), which count no versions at all. Reading an inference tensor's
    version was a RuntimeError ("Inference tensors do not track version counter") at the first
    call of such a model, and writes to it under ``inference_mode`` (``load_state_dict``) go
    unseen; so values made from them are made again at each use, as for shared weights."""
    params = tuple(params)
    return any(p.is_inference() for p in params) or shared_between_processes(params)


class WeightsState:
    """What identifies the current values of some weights, for a value made from them.

    :meth:`matches` holds while each weight has the address, in-place version, device and
    dtype it had here and its storage then is still alive (held weakly, so a replaced weight
    is freed as before). A freed storage's address can be handed to a new tensor, whose version
    may well be the same: the address alone took such a tensor for the weight it replaced.
    It never holds for weights whose writes may go uncounted (:func:`writes_uncounted`).

    A copy or pickle of it is the state of no weights, which matches none (the storages of a
    copy are others, and a weak reference cannot be copied or saved)."""

    __slots__ = ("_key", "_storages")

    def __init__(self, params: Iterable[torch.Tensor] = ()):
        params = tuple(params)
        self._key = weights_key(params)
        self._storages = tuple(StorageWeakRef(p.untyped_storage()) for p in params)

    def matches(self, params: Iterable[torch.Tensor]) -> bool:
        """Whether ``params`` are the weights this state was taken from, unchanged since (as
        far as PyTorch counts changes: see the module's docstring)."""
        params = tuple(params)
        return (weights_key(params) == self._key and not any(s.expired() for s in self._storages)
                and not writes_uncounted(params))

    def __reduce__(self):
        return WeightsState, ()


def _count_optimizer_writes(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    """After an optimizer's step, bump the version of the parameters it may have written
    without counting: those of a group with ``fused`` set, and all of an optimizer that is not
    one of PyTorch's own (its kernels are unknown here). PyTorch's other implementations write
    through counted in-place operators already. A version bumped once more is harmless; it is
    what a non-fused step would have done."""
    own = type(optimizer).__module__.startswith("torch.optim")
    for group in optimizer.param_groups:
        if group.get("fused") or not own:
            # one tensor a call: a list is taken from PyTorch 2.5 on only; on 2.4 every fused
            # step raised TypeError here
            for param in group["params"]:
                torch.autograd.graph.increment_version(param)


register_optimizer_step_post_hook(_count_optimizer_writes)


class WeightCache(Generic[T]):
    """Holds ``make()``'s value for the current state of ``params`` (see :meth:`get`).

    A module's deep copy or pickle gets an empty cache: the value is made again on first use
    (oneDNN's packed tensors cannot be copied or saved, and a copy would double the memory).
    """

    def __init__(self) -> None:
        # (state, value) in one attribute, so that a reader never pairs one state with another value
        self._entry: Optional[Tuple[WeightsState, T]] = None

    def get(self, params: Sequence[torch.Tensor], make: Callable[[], T]) -> T:
        """The value made from ``params`` in their current state; ``make()`` runs when there is
        none yet or a parameter has changed since (:meth:`WeightsState.matches`)."""
        entry = self._entry
        if entry is None or not entry[0].matches(params):
            entry = (WeightsState(params), make())
            self._entry = entry
        return entry[1]

    @property
    def value(self) -> Optional[T]:
        """The value last made, or None (for tests and memory accounting)."""
        return None if self._entry is None else self._entry[1]

    def clear(self) -> None:
        """Drops the value (its memory is freed once no one else holds it)."""
        self._entry = None

    def __deepcopy__(self, memo: dict) -> "WeightCache[T]":
        return WeightCache()

    def __getstate__(self) -> dict:
        return {"_entry": None}
