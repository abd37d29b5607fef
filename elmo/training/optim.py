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
    the first step; a run started on a GPU and resumed on the CPU lost the fused kernel."""
    chosen: list[dict[str, object]] = [{k: group[k] for k in ("fused", "foreach") if k in group} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, own in zip(optimizer.param_groups, chosen):
        group.update(own)


def build_optimizer(cfg: TrainConfig, params) -> torch.optim.Optimizer:
    # (__post_init__ sets the rate; with_recipe_defaults, which the trainer applies first, the accumulator)
    assert cfg.lr is not None
    if cfg.optimizer == "adagrad":
        assert cfg.adagrad_init is not None
        return adagrad(params, cfg.lr, cfg.adagrad_init)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr)
    raise ValueError(f"optimizer must be 'adagrad' or 'adam', got {cfg.optimizer!r}")
