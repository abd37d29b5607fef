"""The run's optimizer: built from its config (Adagrad, fused on the CPU where PyTorch has the
kernel, or Adam), and restored from a checkpoint without taking the saved implementation."""
from __future__ import annotations

import inspect
from typing import Any, Dict, Optional

import torch

from ..weight_values import non_finite
from .checkpoint import contents_problem
from .config import TrainConfig


def adagrad(params, lr: float, initial_accumulator_value: float) -> torch.optim.Adagrad:
    """Adagrad; with every parameter on the CPU its fused kernel (one pass over each parameter
    instead of about five separate operations; the same update up to float rounding) where
    this PyTorch has one, else its usual implementation."""
    params = list(params)
    # The CPU kernel is recent (PyTorch 2.4); an Adagrad without it refuses the argument, even
    # as None, so it is passed only where the constructor takes it.
    takes_fused = "fused" in inspect.signature(torch.optim.Adagrad).parameters
    extra = {"fused": True} if takes_fused and all(p.device.type == "cpu" for p in params) else {}
    return torch.optim.Adagrad(params, lr=lr, initial_accumulator_value=initial_accumulator_value, **extra)


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """``optimizer.load_state_dict(state)``, keeping the implementation this run chose for its
    device. load_state_dict takes every setting of the saved groups, ``fused`` and ``foreach``
    too: a run started on the CPU (fused Adagrad, see :func:`adagrad`) and resumed on a GPU
    asked for the fused kernel there, which PyTorch versions without a CUDA one refuse at
    the first step; a run started on a GPU and resumed on the CPU lost the fused kernel.

    The saved groups are given this run's choice before they are loaded, as load_state_dict
    places each step count by them: on the parameter's device for a fused or capturable
    implementation, else where the checkpoint was loaded (the CPU). By the saved ones, a CPU
    run's (fused) counts resumed on a GPU went to the GPU, where the usual implementation
    read each back with ``.item()``, a wait for the GPU per parameter and step."""
    keys = ("fused", "foreach", "capturable")
    chosen = [{k: group[k] for k in keys if k in group} for group in optimizer.param_groups]
    groups = [{**saved, **own} for saved, own in zip(state["param_groups"], chosen)]
    optimizer.load_state_dict({**state, "param_groups": groups + state["param_groups"][len(groups):]})


def build_optimizer(cfg: TrainConfig, params) -> torch.optim.Optimizer:
    # (__post_init__ sets the rate; with_recipe_defaults, which the trainer applies first, the accumulator)
    assert cfg.lr is not None
    if cfg.optimizer == "adagrad":
        assert cfg.adagrad_init is not None
        return adagrad(params, cfg.lr, cfg.adagrad_init)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr)
    raise ValueError(f"optimizer must be 'adagrad' or 'adam', got {cfg.optimizer!r}")


def optimizer_state_problem(optimizer: torch.optim.Optimizer, state: Any) -> Optional[str]:
    """What in ``state``, an optimizer's state dict read from a checkpoint, does not fit
    ``optimizer`` (this run's, as built: Adagrad's holds its sums already), else None.

    load_state_dict checks little of it: a group without its ``eps`` loaded, and the first
    step failed in a KeyError; a parameter's state deleted was begun afresh without a word; a
    sum of integers was read as floats. Each is a damaged checkpoint, named here before
    anything of it is loaded."""
    if not isinstance(state, dict) or not isinstance(state.get("state"), dict) \
            or not isinstance(state.get("param_groups"), list):
        return "not a dict of 'state' and 'param_groups'"
    groups = state["param_groups"]
    if len(groups) != len(optimizer.param_groups):
        return f"{len(groups)} parameter groups, this run's optimizer has {len(optimizer.param_groups)}"
    params: Dict[Any, torch.Tensor] = {}
    for i, (saved, own) in enumerate(zip(groups, optimizer.param_groups)):
        # (the switches are left out: PyTorch gives a group saved before one existed its default;
        # its numbers are floats given as ints or not: TrainConfig(lr=1)'s decayed rate is 0.5)
        template = {k: float(v) if type(v) is int else v for k, v in own.items()
                    if k != "params" and not isinstance(v, bool) and v is not None}
        problem = contents_problem(saved, template, f"param_groups[{i}]")
        if problem is not None:
            return problem
        ids = saved.get("params")
        if not isinstance(ids, list) or len(ids) != len(own["params"]) \
                or not all(type(i) is int for i in ids):
            return f"param_groups[{i}]['params'] is not a list of {len(own['params'])} parameter ids"
        params.update(zip(ids, own["params"]))
    return _param_states_problem(optimizer, state["state"], params)


def _param_states_problem(optimizer: torch.optim.Optimizer, states: dict,
                          params: Dict[Any, torch.Tensor]) -> Optional[str]:
    """:func:`optimizer_state_problem` of the parameters' states (``params``: the saved id of
    each of this run's parameters)."""
    for key, entry in states.items():
        if key not in params:
            return f"state[{key!r}] belongs to no parameter of the groups"
        if not isinstance(entry, dict):
            return f"state[{key!r}] is {type(entry).__name__}, expected a dict"
        param = params[key]
        for name, value in entry.items():
            if isinstance(value, torch.Tensor) and (not value.is_floating_point()
                                                     or value.shape not in (torch.Size([]), param.shape)):
                return (f"state[{key!r}][{name!r}] is a {value.dtype} tensor of shape {tuple(value.shape)}, "
                        f"expected floats of shape {tuple(param.shape)} (or one number)")
            if isinstance(value, torch.Tensor) and non_finite(value) is not None:
                # (resumed, the first step's update was NaN: "training diverged", blaming the run)
                return f"state[{key!r}][{name!r}] holds non-finite values (NaN or inf)"
    for key, param in params.items():
        own = optimizer.state.get(param)
        if own and key not in states:
            return f"state[{key!r}] is missing"
        if own:   # (an optimizer that makes its state as it is built: the checkpoint's has one too)
            problem = contents_problem(states.get(key), dict(own), f"state[{key!r}]")
            if problem is not None:
                return problem
    return None
