"""Building modules without drawing their random initial weights, for a load that overwrites them.

A loader builds the model, then copies every weight of the file into it: the random draws of
the modules' ``reset_parameters`` (``torch.nn.init``) were thrown away. For the original model
(93.6M weights) they took 0.8 s of a 1.8 s ``load_original`` (cProfile: ``uniform_``); skipped,
the load took a median 0.57 s against 1.5 s, and a native one 0.37 s against 0.69 s (a busy
2-core x86-64 machine, alternating fresh processes; *scratch*). Memory not yet written is not
yet resident either: ``load_original`` frees each of the file's arrays once copied in, and its
peak (ru_maxrss) fell from 954 to 697 MB.

    with init_skipped():
        bilm = BiLM(options)       # weights of torch.empty: whatever memory held
    load_every_weight(bilm)        # the caller's duty: each parameter and buffer overwritten

How: a :class:`~torch.overrides.TorchFunctionMode` that answers the calls that fill a
parameter in place (``torch.nn.init``'s functions and the tensor methods they end in:
``uniform_``, ``normal_``, ``zero_``, ``fill_``) with the parameter as it is. Calls on other
tensors run (a buffer keeps the constant its constructor gives it). Such a mode is seen by the
thread that entered it only, so another thread building a model meanwhile draws its weights as
always (patching ``reset_parameters`` or ``torch.nn.init`` would have skipped them there too).
Not the meta device (``torch.nn.utils.skip_init``): its first use imported 486 more modules
and took 0.6 s, after ``import elmo`` (*scratch*).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

#: The calls that initialise a parameter in place, answered with the parameter as it is: the
#: ``torch.nn.init`` functions that let a mode take them whole, and the tensor methods that the
#: others (``xavier_uniform_``, ``zeros_``, an embedding's padding row) fill it with.
SKIPPED = frozenset({nn.init.uniform_, nn.init.normal_, nn.init.constant_, nn.init.kaiming_uniform_,
                     torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.zero_, torch.Tensor.fill_})


def leave_as_is(tensor: torch.Tensor) -> torch.Tensor:
    """What a skipped initialiser does to its tensor: nothing (a test fills it with NaN, to
    see that a load overwrites every value)."""
    return tensor


def _is_parameter(tensor) -> bool:
    """A parameter, or a view of one (a direction of a stacked LSTM weight, a padding row)."""
    return isinstance(tensor, nn.Parameter) or isinstance(getattr(tensor, "_base", None), nn.Parameter)


class _InitSkipped(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        target = args[0] if args else (kwargs or {}).get("tensor", (kwargs or {}).get("self"))
        if func in SKIPPED and isinstance(target, torch.Tensor) and _is_parameter(target):
            return leave_as_is(target)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def init_skipped() -> Iterator[None]:
    """Modules built in the block (by this thread) keep their weights uninitialised: every one
    must be overwritten before use (see the module doc)."""
    with _InitSkipped():
        yield
