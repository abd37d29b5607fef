"""The CPU's autocast made to cast as CUDA's does (:func:`cpu_autocast_as_cudas`), so that code
run under ``torch.autocast("cpu")`` meets what ``torch.autocast("cuda")`` would give it: the
tests' ``cuda_like_autocast`` fixture, tests/test_cuda.py on the CPU and
``benchmarks/gpu/run.py --smoke`` use it. PyTorch's two autocasts differ in their lists of
operators (aten/src/ATen/autocast_mode.cpp): code relying on the CPU's casts passed every CPU
test and failed at its first bf16 step on a GPU (index_copy of bfloat16 into float32)."""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Iterator

import torch

#: Operators CUDA's autocast runs in float32 and the CPU's leaves in their inputs' dtype (from
#: PyTorch's list for CUDA: aten/src/ATen/autocast_mode.cpp), by "name" or "name.overload".
CUDA_AUTOCAST_FLOAT32 = ("exp", "expm1", "log", "log1p", "log2", "log10", "reciprocal", "rsqrt",
                         "pow.Tensor_Scalar", "pow.Tensor_Tensor", "softplus", "layer_norm",
                         "group_norm", "sum", "sum.dim_IntList", "prod", "prod.dim_int", "cumsum",
                         "cumprod", "softmax.int", "log_softmax.int", "logsumexp",
                         "linalg_vector_norm")
#: Operators CUDA's autocast runs in its lower precision and the CPU's does not.
CUDA_AUTOCAST_LOWER = ("mv", "addmv", "addr")


def _autocast_cast_to(op, lower: bool):
    """An AutocastCPU kernel for ``op`` that casts its floating operands (not float64) to
    autocast's dtype (``lower``) or to float32, then runs it below autocast, as CUDA's does."""
    below = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)

    def cast(a):
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype != torch.float64:
            return a.to(torch.get_autocast_dtype("cpu") if lower else torch.float32)
        return type(a)(cast(x) for x in a) if isinstance(a, (list, tuple)) else a

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(below):
            return op(*(cast(a) for a in args), **{k: cast(v) for k, v in kwargs.items()})
    return kernel


@contextmanager
def cpu_autocast_as_cudas() -> Iterator[None]:
    """The CPU's autocast casts as CUDA's does inside the block: the CPU's alone promotes the
    operands of ``stack``, ``cat`` and ``index_copy`` to their widest dtype (its kernels for
    them are replaced by fallthroughs, which the dispatcher drops again afterwards); CUDA's
    alone runs :data:`CUDA_AUTOCAST_FLOAT32` in float32 (a bfloat16 ``sum`` or ``exp`` gives
    float32 there) and :data:`CUDA_AUTOCAST_LOWER` in bfloat16. Code that relies on the CPU's
    casts fails here as it fails under ``torch.autocast("cuda")``."""
    with warnings.catch_warnings():  # "overriding a previously registered kernel"
        warnings.simplefilter("ignore")
        lib = torch.library.Library("aten", "IMPL")
        for op in ("index_copy", "stack", "cat"):
            lib.impl(op, torch.library.fallthrough_kernel, "AutocastCPU")
        for names, lower in ((CUDA_AUTOCAST_FLOAT32, False), (CUDA_AUTOCAST_LOWER, True)):
            for name in names:
                packet, _, overload = name.partition(".")
                op = getattr(getattr(torch.ops.aten, packet), overload or "default")
                lib.impl(name, _autocast_cast_to(op, lower), "AutocastCPU")
    try:
        yield
    finally:
        lib._destroy()
