"""Training fast path of the LSTM: a whole packed sequence as one autograd function.

The same recurrence as :func:`elmo.modules.lstm.run_lstm_layer`, for D directions at once::

    a_t = [sigmoid(i), tanh(j), sigmoid(f), sigmoid(o)] of  g_t = u_t + h_{t-1} W_hh
    c_t = clip(a_i * a_j + a_f * c_{t-1}, cell_clip)
    m_t = a_o * tanh(c_t)
    h_t = clip(m_t W_proj, proj_clip)

where u_t (the input products and bias) is computed outside, for all steps in one multiply.

Why: through autograd, every step of every layer records about 20 small operations, and the
backward accumulates the weight gradients one step at a time (a small product and an
addition per step and weight). Here the forward runs without recording and keeps what the
backward needs (the activations a_t, c_t, tanh(c_t), m_t and the clip masks); the backward
runs the recurrence once, step by step, for the gradients that must be sequential (those of
h_t and c_t), and then computes each weight's gradient over all time steps as one batched
matrix multiply: dW_hh = H_prev^T dG and dW_proj = M^T dH.

Gradient conventions are those of autograd through the plain formula: sigmoid'(x) = y (1 - y),
tanh'(x) = 1 - y^2, and clamp passes the gradient where lo <= x <= hi (boundaries included).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from torch.autograd.function import once_differentiable

from .autocast import autocast_dtype


def _clip_mask(x: torch.Tensor, clip: float, out: torch.Tensor) -> None:
    """Writes into ``out`` (bool) where clamp(x, -clip, clip) passes its gradient: -clip <= x <=
    clip, boundaries included as in clamp's backward."""
    torch.le(x.abs(), clip, out=out)


class LSTMSequence(torch.autograd.Function):
    """D directions of one LSTM-with-projection layer over packed sequences.

    forward(gate_inputs, weight_hh, weight_proj, c0, h0, batch_sizes, cell_clip, proj_clip):
        gate_inputs: (D, N, 4H) input products plus bias (forget +1 included), packed
            time-major (see :class:`elmo.modules.lstm.Packing`).
        weight_hh: (D, P, 4H). weight_proj: (D, H, P).
        c0: (D, B, H), h0: (D, B, P) initial state in sorted row order.
        batch_sizes: rows running at each step (non-increasing, sums to N, first <= B).
        cell_clip, proj_clip: floats or None.
    Returns:
        outputs (D, N, P) packed; final c (D, B, H) and h (D, B, P): rows that never run keep
        their initial state.
    """

    @staticmethod
    def forward(ctx, gate_inputs, weight_hh, weight_proj, c0, h0, batch_sizes: Sequence[int],
                cell_clip: Optional[float], proj_clip: Optional[float]):
        """See the class doc: -> outputs (D, N, P), c (D, B, H), h (D, B, P), in
        ``gate_inputs``' dtype. Keeps the activations, cells and clip masks (D, N, ...) for
        the backward."""
        d, n, four_h = gate_inputs.shape
        hid = four_h // 4
        proj = weight_proj.shape[2]
        acts = gate_inputs.new_empty(d, n, four_h)   # sigmoid(i), tanh(j), sigmoid(f), sigmoid(o)
        cells = gate_inputs.new_empty(d, n, hid)     # c_t after the clip
        tanh_c = gate_inputs.new_empty(d, n, hid)
        cell_out = gate_inputs.new_empty(d, n, hid)  # m_t = sigmoid(o) * tanh(c_t)
        hs = gate_inputs.new_empty(d, n, proj)       # h_t after the clip: the outputs
        c_mask = gate_inputs.new_empty(d, n, hid, dtype=torch.bool) if cell_clip is not None else None
        h_mask = gate_inputs.new_empty(d, n, proj, dtype=torch.bool) if proj_clip is not None else None
        c, h = c0, h0
        finished_c: List[torch.Tensor] = []
        finished_h: List[torch.Tensor] = []
        offset = 0
        for bs in batch_sizes:
            if bs < h.shape[1]:  # the shortest rows have ended: keep their final state
                finished_c.append(c[:, bs:])
                finished_h.append(h[:, bs:])
                c, h = c[:, :bs], h[:, :bs]
            s = slice(offset, offset + bs)
            gates = torch.baddbmm(gate_inputs[:, s], h, weight_hh)        # (D, bs, 4H)
            a = acts[:, s]
            torch.sigmoid(gates, out=a)
            torch.tanh(gates[..., hid:2 * hid], out=a[..., hid:2 * hid])
            gi, gj, gf, go = a.chunk(4, dim=-1)
            c_new = cells[:, s]
            torch.mul(gi, gj, out=c_new)
            c_new.add_(gf * c)
            if cell_clip is not None and c_mask is not None:  # c_mask exists exactly with cell_clip
                _clip_mask(c_new, cell_clip, c_mask[:, s])
                c_new.clamp_(-cell_clip, cell_clip)
            tc = tanh_c[:, s]
            torch.tanh(c_new, out=tc)
            m = cell_out[:, s]
            torch.mul(go, tc, out=m)
            h_new = torch.bmm(m, weight_proj)                              # (D, bs, P)
            if proj_clip is not None and h_mask is not None:  # likewise h_mask with proj_clip
                _clip_mask(h_new, proj_clip, h_mask[:, s])
                h_new.clamp_(-proj_clip, proj_clip)
            hs[:, s] = h_new
            c, h = c_new, h_new
            offset += bs
        finished_c.append(c)
        finished_h.append(h)
        c_final = torch.cat(finished_c[::-1], dim=1)
        h_final = torch.cat(finished_h[::-1], dim=1)
        ctx.batch_sizes = list(batch_sizes)
        ctx.save_for_backward(weight_hh, weight_proj, c0, h0, acts, cells, tanh_c, cell_out, hs,
                              c_mask, h_mask)
        return hs, c_final, h_final

    @staticmethod
    @once_differentiable  # the backward is written out: a second derivative raises, not lies
    def backward(ctx, grad_out, grad_c_final, grad_h_final):
        """grad_out (D, N, P), grad_c_final (D, B, H), grad_h_final (D, B, P) -> gradients of
        gate_inputs (D, N, 4H), weight_hh (D, P, 4H), weight_proj (D, H, P), c0 (D, B, H) and
        h0 (D, B, P); None for batch_sizes and the clips."""
        weight_hh, weight_proj, c0, h0, acts, cells, tanh_c, cell_out, hs, c_mask, h_mask = ctx.saved_tensors
        sizes = ctx.batch_sizes
        d, n, four_h = acts.shape
        offsets = [0]
        for bs in sizes[:-1]:
            offsets.append(offsets[-1] + bs)
        d_gates = acts.new_empty(d, n, four_h)
        d_h_pre = acts.new_empty(d, n, hs.shape[2])   # gradient of h_t before its clip
        w_hh_t = weight_hh.transpose(1, 2)            # (D, 4H, P)
        w_proj_t = weight_proj.transpose(1, 2)        # (D, P, H)
        # dh, dc: gradients reaching h_t, c_t of the rows still running, from later steps
        dh = grad_h_final[:, :0]
        dc = grad_c_final[:, :0]
        for t in range(len(sizes) - 1, -1, -1):
            bs, s = sizes[t], slice(offsets[t], offsets[t] + sizes[t])
            if dh.shape[1] < bs:  # rows whose last step is t: their final state's gradient
                dh = torch.cat([dh, grad_h_final[:, dh.shape[1]:bs]], dim=1)
                dc = torch.cat([dc, grad_c_final[:, dc.shape[1]:bs]], dim=1)
            dh = dh + grad_out[:, s]
            if h_mask is not None:
                dh = torch.where(h_mask[:, s], dh, 0.0)   # as clamp's backward
            d_h_pre[:, s] = dh
            dm = torch.bmm(dh, w_proj_t)                               # (D, bs, H)
            gi, gj, gf, go = acts[:, s].chunk(4, dim=-1)
            tc = tanh_c[:, s]
            dc = dc + dm * go * (1 - tc * tc)
            if c_mask is not None:
                dc = torch.where(c_mask[:, s], dc, 0.0)
            c_prev = c0[:, :bs] if t == 0 else cells[:, offsets[t - 1]:offsets[t - 1] + bs]
            dg = d_gates[:, s]
            di, dj, df, do = dg.chunk(4, dim=-1)
            torch.mul(dc * gj, gi * (1 - gi), out=di)
            torch.mul(dc * gi, 1 - gj * gj, out=dj)
            torch.mul(dc * c_prev, gf * (1 - gf), out=df)
            torch.mul(dm * tc, go * (1 - go), out=do)
            dc = dc * gf
            dh = torch.bmm(dg, w_hh_t)                                 # (D, bs, P)
        # rows that never ran pass the final state's gradient to the initial state
        grad_h0 = torch.cat([dh, grad_h_final[:, dh.shape[1]:]], dim=1)
        grad_c0 = torch.cat([dc, grad_c_final[:, dc.shape[1]:]], dim=1)
        # h_{t-1} of every packed slot: h0 for step 0, else the previous step's outputs
        h_prev = torch.cat([h0[:, :sizes[0]]]
                           + [hs[:, offsets[t - 1]:offsets[t - 1] + sizes[t]] for t in range(1, len(sizes))],
                           dim=1) if sizes else h0[:, :0]
        # Computed transposed and handed back as a transposed view: the weights arrive as
        # transposed views of the stored (D, 4H, P) and (D, P, H) parameters, so autograd's
        # transpose turns these back into contiguous gradients (no copy when accumulating).
        grad_w_hh = torch.bmm(d_gates.transpose(1, 2), h_prev).transpose(1, 2)      # (D, P, 4H)
        grad_w_proj = torch.bmm(d_h_pre.transpose(1, 2), cell_out).transpose(1, 2)  # (D, H, P)
        return d_gates, grad_w_hh, grad_w_proj, grad_c0, grad_h0, None, None, None


def lstm_sequence(gate_inputs: torch.Tensor, weight_hh: torch.Tensor, weight_proj: torch.Tensor,
                  state: Tuple[torch.Tensor, torch.Tensor], batch_sizes: Sequence[int],
                  cell_clip: Optional[float], proj_clip: Optional[float]
                  ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """:class:`LSTMSequence` with the state as a pair: returns outputs (D, N, P), (c, h)."""
    c0, h0 = state
    out, c, h = LSTMSequence.apply(gate_inputs, weight_hh, weight_proj, c0, h0, tuple(batch_sizes),
                                   cell_clip, proj_clip)
    return out, (c, h)


def wants_fast_path(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a layer should run as :class:`LSTMSequence`: when gradients are recorded for
    its weights or input (training). Under autocast it runs too, in the autocast dtype (see
    :func:`run_lstm_layer_autograd`)."""
    return torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad)


def run_lstm_layer_autograd(layer_input: torch.Tensor, weight_ih: torch.Tensor, bias: torch.Tensor,
                            batch_sizes: List[int], weight_hh: torch.Tensor, weight_proj: torch.Tensor,
                            state: Tuple[torch.Tensor, torch.Tensor], cell_clip: Optional[float],
                            proj_clip: Optional[float]
                            ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Same arguments and results as :func:`elmo.modules.lstm.run_lstm_layer`.

    The input products of all steps are one batched multiply (training holds every step's
    activations anyway), then :class:`LSTMSequence` runs the recurrence.

    Under autocast (opt-in bf16 training) the function cannot repeat autocast's casts op by
    op, so the whole layer runs in the autocast dtype: inputs, weights and state are cast once
    (the casts' backward returns the gradients in the parameters' dtype), and the outputs and
    final state come back in that dtype, as the per-step path under autocast gives them.
    """
    device = layer_input.device.type
    dtype = autocast_dtype(device)
    if dtype is not None:
        with torch.autocast(device, enabled=False):
            cast = [t.to(dtype) for t in (layer_input, weight_ih, bias, weight_hh, weight_proj) + tuple(state)]
            layer_input, weight_ih, bias, weight_hh, weight_proj, c0, h0 = cast
            return run_lstm_layer_autograd(layer_input, weight_ih, bias, batch_sizes, weight_hh, weight_proj,
                                           (c0, h0), cell_clip, proj_clip)
    gate_inputs = torch.baddbmm(bias, layer_input, weight_ih)           # (D, N, 4H)
    return lstm_sequence(gate_inputs, weight_hh, weight_proj, state, batch_sizes, cell_clip, proj_clip)
