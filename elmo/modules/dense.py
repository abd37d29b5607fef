"""Dense products ``x W^T + b`` on the CPU through oneDNN where it is the faster library.

PyTorch multiplies float32 matrices on the CPU with MKL. MKL picks its tuned kernels for
Intel processors; on others (AMD's Zen) it runs a generic path. oneDNN, which PyTorch also
ships, picks its kernels from the instruction sets the CPU reports, whatever the vendor. On a
Zen 3 CPU (2 threads, *scratch* timings) it ran the highway's three products, (460, 2048) x
(2048, 4096) forward and both gradients, 1.0 to 1.45 times as fast as MKL (the ratio changed
from hour to hour on that shared machine), and the sampled softmax's (512, 128) x (128, 8192)
1.37 times; a whole training step of the small model got 3 to 6% faster
(benchmarks/RESULTS.md). Elsewhere it did not pay: the LSTM's products and the projection ran
at about MKL's speed; weight gradients with small outputs and long reductions ran 0.4 to 0.8
times as fast; the convolutions' products were 1.1 to 1.4 times as fast alone but made the
encoder's training step slower (0.95x), and each new shape costs oneDNN 1 to 3 ms to build
its kernel (the convolutions' row counts change with every batch). So it is used for the
highway (:func:`linear`), the sampled softmax's logits (:func:`onednn_mm`) and, without
autograd, the LSTM's per-step products with weights of 4 MiB and more
(:func:`recurrent_in_onednn`): on a Zen 5 that made inference of the original model 1.2 to
1.8 times as fast (benchmarks/RESULTS.md), but not training (below). Steps of two rows or
more read those weights laid out once in oneDNN's own format (:func:`recurrent_packed`).
``benchmarks/train.py --dense-default`` and ``benchmarks/inference.py --dense-default`` time
ours with and without it.

Both libraries compute in float32 and differ only in the order of the sums (relative
differences about 1e-6 on 2048-long sums), like any two GEMM kernels.

:data:`BACKEND` chooses: ``"auto"`` (oneDNN on AMD's CPUs, where it was measured; PyTorch's
own products on the others: MKL's own Intel processors, where oneDNN's one-row products with
the original model's weights ran 0.74 and 0.80 times as fast as MKL's on a Xeon with AMX, and
Arm), ``"onednn"`` (wherever
PyTorch has it) or ``"default"`` (PyTorch's own products everywhere). Other devices, dtypes
other than float32 and a PyTorch built without oneDNN use PyTorch's own products; so does
autocast, except that under the CPU's bfloat16 autocast, where oneDNN multiplies bfloat16
natively, :func:`linear` runs oneDNN's products over rounded rows
(:func:`bf16_autocast_in_onednn`) unless the backend is ``"default"``. The environment
variable ``ELMO_DENSE_BACKEND`` sets it at import, for the command-line tools.

oneDNN keeps state for every row count it multiplies (its just-in-time kernels), and the
highway's row count is the batch's number of distinct tokens, so :func:`linear` rounds it up
to :data:`ROW_MULTIPLE` (unrounded, training steps of the small model grew the process by
about 0.5 GB over the first 400 steps on a Zen 4; benchmarks/RESULTS.md).
"""
from __future__ import annotations

import functools
import os
from typing import Callable, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ..runtime import cpu_vendor
from .autocast import autocast_dtype, autocast_on

#: "auto", "onednn" or "default"; see the module's docstring.
BACKEND = os.environ.get("ELMO_DENSE_BACKEND", "auto")


def _probe(check: Callable[[], bool]) -> Callable[[], bool]:
    """A capability check, tried once (``cache_clear`` tries it again) outside autocast and
    autograd: the checks compare oneDNN with ``F.linear``, which autocast would run in
    bfloat16, so a first call under autocast would otherwise turn oneDNN off for good."""
    @functools.lru_cache(maxsize=None)
    @functools.wraps(check)
    def tried() -> bool:
        with torch.autocast("cpu", enabled=False), torch.no_grad():
            return check()
    return tried


@_probe
def _onednn_linear_available() -> bool:
    """Whether this PyTorch has oneDNN's fused linear operator and it computes ``x W^T + b``.

    The operator is internal to PyTorch (its compiler's CPU path uses it), so it is tried once
    on a small product, strided operands included, and compared with ``F.linear``: a PyTorch
    where it is missing, takes other arguments or computes something else gets PyTorch's own
    products instead of an error deep inside a training step."""
    try:
        if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
            return False
        gen = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(*shape, generator=gen) for shape in ((5, 24), (24, 7), (7,)))
        got = torch.ops.mkldnn._linear_pointwise(x, w.t(), b, "none", [], "")
        return got.shape == (5, 7) and bool(torch.allclose(got, F.linear(x, w.t(), b), rtol=1e-4, atol=1e-5))
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return False


@_probe
def _onednn_bf16_available() -> bool:
    """Whether oneDNN multiplies bfloat16 natively on this CPU (AVX512-BF16 or AMX) and its
    linear operator computes ``x W^T`` in bfloat16 (tried once, as for float32)."""
    try:
        if not _onednn_linear_available() or not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return False
        gen = torch.Generator().manual_seed(0)
        x, w = (torch.randn(*shape, generator=gen).bfloat16() for shape in ((3, 64), (16, 64)))
        got = torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
        want = F.linear(x.float(), w.float())
        return got.dtype == torch.bfloat16 and bool(torch.allclose(got.float(), want, rtol=2e-2, atol=2e-2))
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return False


def onednn_wanted(x: torch.Tensor, bf16: bool = False) -> bool:
    """Whether :func:`linear` would run ``x``'s products through oneDNN; with ``bf16``, also
    whether bfloat16 products would, where oneDNN multiplies them natively (for the LSTM's
    per-step products of a bfloat16 model; :func:`linear` itself stays with float32)."""
    if BACKEND not in ("auto", "onednn", "default"):
        raise ValueError(f"elmo.modules.dense.BACKEND (or ELMO_DENSE_BACKEND): {BACKEND!r}; "
                         "expected 'auto', 'onednn' or 'default'")
    if BACKEND == "default" or x.device.type != "cpu" or autocast_on("cpu"):
        return False
    if torch.compiler.is_compiling():  # a piece traced on its own: Inductor cannot lower the op
        return False
    if x.dtype == torch.float32:
        available = _onednn_linear_available()
    else:
        available = bf16 and x.dtype == torch.bfloat16 and _onednn_bf16_available()
    return available and (BACKEND == "onednn" or cpu_vendor() == "AuthenticAMD")


def cpu_products() -> str:
    """Which library :func:`linear` uses for float32 CPU tensors here: "oneDNN" or "PyTorch"
    (its default, MKL on x86), for the machine lines of benchmarks and results files."""
    return "oneDNN" if onednn_wanted(torch.empty(0)) else "PyTorch"


def onednn_mm(a: torch.Tensor, b_t: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``a @ b_t.T (+ bias)`` through oneDNN: a (M, K), b_t (N, K), both may be strided views;
    bias (N,) or None -> (M, N) contiguous. No autograd; call only where :func:`onednn_wanted`."""
    if a.shape[0] == 0 or b_t.shape[0] == 0 or a.shape[1] == 0:  # oneDNN wants non-empty shapes
        out = a.new_zeros(a.shape[0], b_t.shape[0])
        return out if bias is None else out + bias
    return torch.ops.mkldnn._linear_pointwise(a, b_t, bias, "none", [], "")


#: Whether the LSTM's per-step products (with W_hh and W_proj) go through oneDNN where
#: :func:`recurrent_in_onednn` would use it (benchmarks switch it off to time PyTorch's there).
RECURRENT_ONEDNN = True

#: The smallest weight of a direction, in bytes, whose per-step products go through oneDNN.
#: Below it the weight stays in cache and oneDNN's fixed cost per call (about 15 us) weighs
#: more than its faster reads. On a Zen 5: alone, a 0.5 MiB W_proj's one-row product ran 0.47x
#: as fast as MKL's matrix-vector product and a 2 MiB W_hh's 1.42x as fast as MKL's one-row
#: GEMM (benchmarks/one_row_products.py), but inference of the small model (those weights)
#: ran 0.9 to 1.06 times as fast with oneDNN for all its steps, and of the bundled default
#: (1 and 0.25 MiB) 0.72 to 1.09 times; the original model's (32 and 8 MiB) 1.2 to 1.8 times.
#: On a Zen 3 (AVX2) the original model's inference ran 1.22x (batch 8), 1.15x (32) and 1.04x
#: (128) as fast with them as with MKL's, and its one-row products 1.01x (W_hh, against the
#: re-laid copy) and 1.14x (W_proj).
RECURRENT_MIN_BYTES = 4 << 20


def recurrent_in_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the LSTM's per-step products of ``x`` (D, M, .) with ``weight`` (D, ., .), W_hh
    or W_proj of each direction, go through oneDNN (:func:`per_direction_mm`, the weight in
    its stored (N, K) layout, so that no re-laid copy is needed).

    They do where :func:`onednn_wanted` says so (by default on AMD's CPUs: float32, and the
    opt-in bfloat16 model where the CPU multiplies bfloat16 natively), for a direction's
    weight of at least :data:`RECURRENT_MIN_BYTES`, and never where autograd would record them
    (oneDNN's call records no graph).

    The original model's products stream W_hh (16384 x 512) and W_proj (512 x 4096) from
    memory, and oneDNN read them 1.6 times as fast as the faster of MKL's one-row GEMM and
    matrix-vector product at one row, on a Zen 5; whole inference ran 1.8 times as fast at
    batch 1, 1.3 at batch 8 and 32, 1.2 at 128 (benchmarks/RESULTS.md). The training path
    (:mod:`elmo.modules.lstm_autograd`) keeps PyTorch's batched products: with oneDNN's in
    its forward and backward steps, training steps ran 1.02 times as fast for the small model
    and 0.94 times for the bundled default's shape (Zen 5). oneDNN builds a kernel per row
    count, and a batch's row counts are at most its batch size."""
    if not RECURRENT_ONEDNN or x.dtype != weight.dtype:
        return False
    if weight[0].numel() * weight.element_size() < RECURRENT_MIN_BYTES:
        return False
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return False
    return onednn_wanted(x, bf16=True)


def per_direction_mm(a: torch.Tensor, b_t: Union[torch.Tensor, Sequence[torch.Tensor]]) -> torch.Tensor:
    """``a[d] @ b_t[d].T`` for each direction d through oneDNN: a (D, M, K), b_t (D, N, K)
    (views allowed; b_t contiguous per direction reads fastest) or a weight (N, K) per
    direction, such as :func:`pack_for_onednn`'s -> (D, M, N). No autograd."""
    return torch.stack([onednn_mm(a[d], b_t[d]) for d in range(a.shape[0])])


#: Whether the per-step products of two rows or more read the weights in oneDNN's own layout
#: where :func:`recurrent_packed` would (benchmarks switch it off to time the stored layout).
RECURRENT_PACKED = True

#: The row count oneDNN is told to expect when it lays out a weight (:func:`pack_for_onednn`);
#: the layout serves any row count. Alone (Zen 3), 32 ran 30 rows about as fast as 128 did and
#: 2 to 8 rows faster; 1 gave no gain over the stored layout.
PACK_ROWS = 32


@_probe
def _onednn_packing_available() -> bool:
    """Whether this PyTorch's oneDNN can lay out a float32 weight once in its own format and
    multiply by it (internal operators, tried once on a small product and compared with
    ``F.linear``, as for :func:`_onednn_linear_available`)."""
    if not _onednn_linear_available() or not hasattr(torch.ops.mkldnn, "_reorder_linear_weight"):
        return False
    try:
        gen = torch.Generator().manual_seed(0)
        x, w = torch.randn(5, 24, generator=gen), torch.randn(7, 24, generator=gen)
        packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_ROWS)
        got = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        return got.shape == (5, 7) and bool(torch.allclose(got, F.linear(x, w), rtol=1e-4, atol=1e-5))
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return False


def recurrent_packed(x: torch.Tensor) -> bool:
    """Whether per-step products of ``x`` (D, M, K) that :func:`recurrent_in_onednn` sends to
    oneDNN read the weights in oneDNN's layout (:func:`pack_for_onednn`): for float32 and two
    rows or more, where :data:`RECURRENT_PACKED` and this PyTorch has the operators.

    In the stored layout oneDNN lays the weight out afresh for every product: the original
    model's W_hh (16384 x 512) took 5.1 ms at 30 rows against 4.0 ms laid out once, 2.6 ms
    against 1.3 ms at 2 rows, with equal results (Zen 3, benchmarks/RESULTS.md). One row gains
    nothing and would round differently from the batch-1 path, so it keeps the stored layout."""
    return (RECURRENT_PACKED and x.shape[1] >= 2 and x.dtype == torch.float32
            and _onednn_packing_available())


def pack_for_onednn(b_t: torch.Tensor) -> torch.Tensor:
    """The weight b_t (N, K), float32, in oneDNN's own layout, for :func:`onednn_mm` as its
    ``b_t``: an opaque tensor of about the same size, which cannot be copied or saved."""
    return torch.ops.mkldnn._reorder_linear_weight(b_t.contiguous(), PACK_ROWS)


#: :func:`linear` rounds its row count up to a multiple of this (zero rows, dropped again).
#: oneDNN builds and keeps kernels for every row count it meets, and the highway's is the
#: batch's number of distinct tokens, new nearly every batch. Alone, the highway's three
#: products with 440 to 500 rows grew the process by 256 MiB in 300 calls unrounded and by
#: 54 MiB rounded to 32, and ran 1.07x as fast rounded (Zen 4, benchmarks/RESULTS.md).
ROW_MULTIPLE = 32


def rows_rounded(rows: int) -> int:
    """``rows`` rounded up to a multiple of :data:`ROW_MULTIPLE`."""
    return -(-rows // ROW_MULTIPLE) * ROW_MULTIPLE


def bf16_autocast_in_onednn(x: torch.Tensor) -> bool:
    """Whether ``x``'s products under the CPU's bfloat16 autocast (opt-in training) go through
    oneDNN natively: where :func:`_onednn_bf16_available` and :data:`BACKEND` is not "default".

    PyTorch itself multiplies bfloat16 on the CPU with oneDNN, which builds a kernel for every
    new row count (1 to 13 ms each, AMX, *scratch*): the highway's rows are the batch's distinct
    tokens and the convolutions' their positions, new in nearly every batch. So where this
    holds, :func:`linear` and :func:`elmo.modules.conv_pool.conv_max_pool` round their rows
    up to :data:`ROW_MULTIPLE`, as :func:`linear` does for float32 on AMD's CPUs."""
    return (BACKEND != "default" and x.device.type == "cpu" and autocast_dtype("cpu") == torch.bfloat16
            and not torch.compiler.is_compiling() and _onednn_bf16_available())


def _pad_rows(a: torch.Tensor, rows: int) -> torch.Tensor:
    """a (M, K) -> (rows, K): a, then zero rows (a itself where M == rows)."""
    return a if a.shape[0] == rows else F.pad(a, (0, 0, 0, rows - a.shape[0]))


class _OneDNNLinear(torch.autograd.Function):
    """``x W^T + b`` with all three products (forward, input and weight gradients) in oneDNN,
    over the rows rounded up to :data:`ROW_MULTIPLE`: the zero rows add nothing to the
    weight's gradient, and their outputs and input gradients are dropped."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        """x (M, K), weight (N, K), bias (N,) or None -> (M, N)."""
        rows = x.shape[0]
        x_padded = _pad_rows(x, rows_rounded(rows))
        ctx.save_for_backward(x_padded, weight)
        ctx.has_bias = bias is not None
        return onednn_mm(x_padded, weight, bias)[:rows]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        """grad (M, N) -> gradients of x (M, K), weight (N, K), bias (N,), each None where not
        needed."""
        x_padded, weight = ctx.saved_tensors
        rows = grad.shape[0]
        grad_padded = _pad_rows(grad.contiguous(), x_padded.shape[0])
        d_x = onednn_mm(grad_padded, weight.t())[:rows] if ctx.needs_input_grad[0] else None  # (M, N) x (N, K)
        d_weight = onednn_mm(grad_padded.t(), x_padded.t()) if ctx.needs_input_grad[1] else None  # (N, M) x (M, K)
        d_bias = grad.sum(dim=0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return d_x, d_weight, d_bias


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           float32_in_onednn: bool = True) -> torch.Tensor:
    """``F.linear(x, weight, bias)``: x (..., K), weight (N, K), bias (N,) -> (..., N), through
    oneDNN where :func:`onednn_wanted` says so (gradients included) or, in bfloat16, where
    :func:`bf16_autocast_in_onednn` does, else ``F.linear``. ``float32_in_onednn=False``
    leaves float32 to ``F.linear`` (for products where oneDNN did not pay)."""
    flat = x.reshape(-1, x.shape[-1])
    if bf16_autocast_in_onednn(x):  # cast as autocast would, then multiply over rounded rows
        low = torch.bfloat16
        with torch.autocast("cpu", enabled=False):
            out = _OneDNNLinear.apply(flat.to(low), weight.to(low), None if bias is None else bias.to(low))
        return out.view(*x.shape[:-1], weight.shape[0])
    if not float32_in_onednn or not onednn_wanted(x) or weight.dtype != torch.float32:
        return F.linear(x, weight, bias)
    out = _OneDNNLinear.apply(flat, weight, bias)
    return out.view(*x.shape[:-1], weight.shape[0])
