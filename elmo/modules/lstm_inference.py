"""The LSTM's no-grad path for one sequence (batch-1 inference) and its opt-in int8 weights.

With one row, each time step multiplies a vector by every recurrent weight, W_hh (4H x P) and
W_proj (P x H) of each direction, and does 2 FLOPs per weight read: the step runs at the speed
of memory (the original model reads 80 MB per layer and step). This path therefore

* reads each recurrent weight once per step. Where oneDNN is the library of
  :mod:`elmo.modules.dense` (AMD's CPUs) and a weight is large enough to stream from memory
  (:func:`elmo.modules.dense.recurrent_in_onednn`), both are oneDNN one-row products in
  their stored layouts.
  Otherwise W_proj is a matrix-vector product in its stored layout, and W_hh a one-row GEMM
  with the layer's contiguous (P x 4H) copy, which MKL ran 2.4 times as fast as the stored
  layout's matrix-vector product on Zen 3
  (:meth:`elmo.modules.lstm.BiLSTMLayer.recurrent_weight_rows`; the copy is made once). A
  bfloat16 W_hh keeps the stored layout's matrix-vector product, 1.8 times as fast as the copy's
  GEMM on an Intel Xeon with AMX (:func:`elmo.modules.lstm.one_row_relaid`);
* computes the input products x_t W_ih of up to ``INPUT_CHUNK_STEPS`` steps in one GEMM, so
  W_ih is read once per chunk instead of once per step;
* writes the gates, the cell and the outputs into buffers allocated once per layer call, with
  the elementwise cell math done in place (no per-step allocations or concatenations).

The results equal the general path's (the same products in the same order: its one-row steps
make the same choice of library and layout).

**int8 weights** (opt-in, ``BiLSTMStack.use_int8()``): W_hh and W_proj stored as int8 with one
scale per output row (:class:`Int8Weights`), multiplied with ``torch._weight_int8pack_mm`` by
the state rounded to bfloat16, the products rounded to bfloat16; a quarter of the bytes per
step. The input products, biases and cell state stay float32. This changes the outputs
(measured by ``benchmarks/inference.py --int8``), so it is never the default; it applies at
every batch size, so a sentence gets the same vectors alone or in a batch.
"""
from __future__ import annotations

import functools
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .dense import onednn_mm, recurrent_in_onednn

LayerState = Tuple[torch.Tensor, torch.Tensor]

#: Time steps whose input products are computed in one multiply (as in lstm.py).
INPUT_CHUNK_STEPS = 32


#: The int8 kernel is given sizes padded to a multiple of this: its tail handling gave wrong
#: results for some widths (e.g. K = 40) on this CPU. Zero padding leaves the products exact.
INT8_PAD = 64


class Int8Weights:
    """One matrix of each direction as int8 rows with a scale per row.

    ``q``: (D, N', K') int8 and ``scales``: (D, N') bfloat16, N and K zero-padded to multiples
    of :data:`INT8_PAD`, so that ``q[d, :N, :K] * scales[d, :N, None]`` approximates the float
    weight (N, K) of direction d.
    """

    def __init__(self, weight: torch.Tensor):
        """weight: (D, N, K) float, rows are the outputs."""
        w = weight.detach().float()
        self.n, self.k = w.shape[1], w.shape[2]
        scale = w.abs().amax(dim=-1).clamp_min(1e-12) / 127.0          # (D, N)
        q = torch.round(w / scale[..., None]).clamp_(-127, 127).to(torch.int8)
        pad_n, pad_k = -self.n % INT8_PAD, -self.k % INT8_PAD
        self.q = F.pad(q, (0, pad_k, 0, pad_n)).contiguous()
        self.scales = F.pad(scale, (0, pad_n)).to(torch.bfloat16).contiguous()

    def _mm(self, d: int, a: torch.Tensor) -> torch.Tensor:
        """a (M, K) bfloat16 -> (M, N) bfloat16."""
        if a.shape[1] != self.q.shape[2]:
            a = F.pad(a, (0, self.q.shape[2] - a.shape[1]))
        return torch._weight_int8pack_mm(a, self.q[d], self.scales[d])[:, :self.n]

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """x (D, M, K) float -> (D, M, N) in x's dtype, each direction with its own weights
        (float32 for a float32 model; a bfloat16 or float64 model's state keeps its dtype)."""
        a = x.to(torch.bfloat16)
        return torch.stack([self._mm(d, a[d]) for d in range(self.q.shape[0])]).to(x.dtype)

    def matvec(self, d: int, x: torch.Tensor, out: torch.Tensor) -> None:
        """out (N,) = the product of direction d's weights with x (K,); ``out`` keeps its
        dtype (the state's: float32 for a float32 model, bfloat16 for a bfloat16 one)."""
        out.copy_(self._mm(d, x.to(torch.bfloat16).unsqueeze(0))[0])


def int8_supported(device: torch.device) -> bool:
    """Whether this PyTorch has the int8 weight-only product for ``device``."""
    if not hasattr(torch, "_weight_int8pack_mm"):
        return False
    try:
        a = torch.ones(1, 8, dtype=torch.bfloat16, device=device)
        q = torch.ones(8, 8, dtype=torch.int8, device=device)
        s = torch.ones(8, dtype=torch.bfloat16, device=device)
        torch._weight_int8pack_mm(a, q, s)
        return True
    except (RuntimeError, NotImplementedError):
        return False


@functools.lru_cache(maxsize=None)
def _int8_kernel_on(device: torch.device) -> bool:
    """:func:`int8_supported`, tried once per device."""
    return int8_supported(device)


def require_int8_kernel(device: torch.device) -> None:
    """RuntimeError unless this PyTorch has the int8 product on ``device``. Asked by
    ``use_int8`` and by every int8 call: a model switched to int8 on the CPU and then moved to
    a GPU (``.to("cuda")``) met PyTorch's own NotImplementedError deep in its first step where
    this PyTorch has the kernel for the CPU only."""
    if not _int8_kernel_on(torch.device(device)):
        raise RuntimeError(f"int8 weights need torch._weight_int8pack_mm on {device}, which this "
                           f"PyTorch {torch.__version__} lacks; call use_int8(False), or use float32 "
                           f"or bfloat16 weights")


def run_single_sequence(layer_input: torch.Tensor, weight_ih: torch.Tensor, bias: torch.Tensor,
                        weight_hh: torch.Tensor, weight_proj: torch.Tensor, state: LayerState,
                        cell_clip: Optional[float], proj_clip: Optional[float],
                        int8: Optional[Tuple[Int8Weights, Int8Weights]] = None,
                        weight_hh_rows: Optional[torch.Tensor] = None
                        ) -> Tuple[torch.Tensor, LayerState]:
    """Step D directions of one layer over one sequence of N steps (no autograd).

    Args:
        layer_input: (D, N, I). weight_ih: (D, I, 4H). bias: (D, 1, 4H), forget +1 included.
        weight_hh: (D, P, 4H) and weight_proj: (D, H, P), transposed views of the stored
            (D, 4H, P) and (D, P, H) parameters (read here in their stored layout).
        state: initial (c (D, 1, H), h (D, 1, P)).
        int8: prepared (W_hh, W_proj) in int8 to use instead of the float weights.
        weight_hh_rows: W_hh as a contiguous (D, P, 4H) copy, multiplied as a one-row GEMM
            (faster than the stored layout's matrix-vector product where measured; see
            :meth:`elmo.modules.lstm.BiLSTMLayer.recurrent_weight_rows`); None for the stored one.

    Returns:
        outputs (D, N, P) and the final state (c (D, 1, H), h (D, 1, P)).
    """
    n_dir, steps, _ = layer_input.shape
    four_h = weight_hh.shape[2]
    cells, proj = four_h // 4, weight_proj.shape[2]
    w_hh = weight_hh.transpose(1, 2)      # (D, 4H, P), the stored layout: rows are contiguous
    w_proj = weight_proj.transpose(1, 2)  # (D, P, H)
    out = layer_input.new_empty(n_dir, steps, proj)
    gates = layer_input.new_empty(n_dir, four_h)
    c = state[0][:, 0].clone()            # (D, H), updated in place
    h_prev = state[1][:, 0]               # (D, P)
    hidden = layer_input.new_empty(n_dir, cells)
    i, j, f, o = gates.split(cells, dim=1)
    # views made once: per-step indexing costs as much as the cell math on small models
    w_hh_d, w_proj_d, gates_d, hidden_d = w_hh.unbind(0), w_proj.unbind(0), gates.unbind(0), hidden.unbind(0)
    # oneDNN's products read the stored layouts (no re-laid W_hh needed)
    onednn_hh = int8 is None and recurrent_in_onednn(layer_input, weight_hh)
    onednn_proj = int8 is None and recurrent_in_onednn(layer_input, weight_proj)
    rows_d = weight_hh_rows.unbind(0) if weight_hh_rows is not None and not onednn_hh else None
    gate_rows = gates.unsqueeze(1).unbind(0)  # (1, 4H) views of the gate buffer, for the GEMM
    out_steps = out.unbind(1)
    h_prev_d = h_prev.unbind(0)
    for start in range(0, steps, INPUT_CHUNK_STEPS):
        stop = min(start + INPUT_CHUNK_STEPS, steps)
        gate_inputs = torch.baddbmm(bias, layer_input[:, start:stop], weight_ih).unbind(1)  # n x (D, 4H)
        for t in range(start, stop):
            for d in range(n_dir):
                if onednn_hh:
                    gates_d[d].copy_(onednn_mm(h_prev_d[d].unsqueeze(0), w_hh_d[d])[0])
                elif rows_d is not None:
                    torch.mm(h_prev_d[d].unsqueeze(0), rows_d[d], out=gate_rows[d])
                elif int8 is None:
                    torch.mv(w_hh_d[d], h_prev_d[d], out=gates_d[d])
                else:
                    int8[0].matvec(d, h_prev_d[d], out=gates_d[d])
            gates += gate_inputs[t - start]
            # c = sigmoid(i) tanh(j) + sigmoid(f) c, in place in the gate buffer (the same
            # roundings as the general path, so the results are equal)
            i.sigmoid_().mul_(j.tanh_())
            c.mul_(f.sigmoid_()).add_(i)
            if cell_clip is not None:
                c.clamp_(-cell_clip, cell_clip)
            torch.tanh(c, out=hidden)
            hidden.mul_(o.sigmoid_())
            h_t = out_steps[t]
            h_prev_d = h_t.unbind(0)
            for d in range(n_dir):
                if onednn_proj:
                    h_prev_d[d].copy_(onednn_mm(hidden_d[d].unsqueeze(0), w_proj_d[d])[0])
                elif int8 is None:
                    torch.mv(w_proj_d[d], hidden_d[d], out=h_prev_d[d])
                else:
                    int8[1].matvec(d, hidden_d[d], out=h_prev_d[d])
            if proj_clip is not None:
                h_t.clamp_(-proj_clip, proj_clip)
            h_prev = h_t
    final_h = h_prev.unsqueeze(1) if steps else state[1]
    return out, (c.unsqueeze(1), final_h)
