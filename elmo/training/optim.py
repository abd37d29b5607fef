"""The run's optimizer: built from its config (Adagrad, fused on the CPU where PyTorch has the
kernel, or Adam), and restored from a checkpoint without taking the saved implementation."""
from __future__ import annotations

import inspect

import torch

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
