"""The biLM's LSTM stacks: LSTM cells with a projection, clipping and optional skip connections.

One layer of one direction (H cells, projection P, input I), at each time step::

    i, j, f, o = split(x_t W_ih + h_{t-1} W_hh + b)          gate order of the original
    c_t = sigmoid(i) * tanh(j) + sigmoid(f + 1) * c_{t-1}      forget bias +1 at run time
    c_t = clip(c_t, cell_clip)
    h_t = clip((sigmoid(o) * tanh(c_t)) W_proj, proj_clip)     projection without bias

The state carried from step to step is (c_t, h_t), c of width H and h of width P.

Speed: the input products x_t W_ih of many time steps are one matrix multiply; the forward
and backward directions step together (one batched multiply per step for both); sequences are
packed by length, so padded positions are never computed. Without autograd, one sequence
(batch-1 inference) takes the allocation-free path of :mod:`elmo.modules.lstm_inference`.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import require_switch
from ..config import LSTMConfig
from .autocast import autocast_on
from .dropout_off import dropout_active
from .lstm_autograd import run_lstm_layer_autograd, wants_fast_path
from .dense import pack_for_onednn, per_direction_mm, recurrent_in_onednn, recurrent_packed
from .eager import eager_under_compile
from .hooks import refuse_hooks
from .lstm_inference import Int8Weights, require_int8_kernel, run_single_sequence
from .packing import Lengths, Packing, host_lengths
from .weight_cache import WeightCache

# A layer's state for both directions: c (2, B, H) and h (2, B, P); direction 0 is forward.
LayerState = Tuple[torch.Tensor, torch.Tensor]

# W_hh and W_proj of each direction in oneDNN's layout (BiLSTMLayer.onednn_packed_weights).
PackedWeights = Tuple[List[torch.Tensor], List[torch.Tensor]]


class BiLSTMLayer(nn.Module):
    """The parameters of one LSTM-with-projection layer, both directions stacked.

    Index 0 of the leading dimension is the forward direction, 1 the backward one. Shapes:
    weight_ih (2, 4H, I), weight_hh (2, 4H, P), bias (2, 4H), weight_proj (2, P, H); the
    gate order along 4H is i, j (candidate), f, o. ``bias`` is the stored bias; the +1 forget
    bias is added when the layer runs. Stacking the directions lets one batched multiply step
    both of them.
    """

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int):
        super().__init__()
        self.input_dim, self.cell_dim, self.projection_dim = input_dim, cell_dim, projection_dim
        self.weight_ih = nn.Parameter(torch.empty(2, 4 * cell_dim, input_dim))
        self.weight_hh = nn.Parameter(torch.empty(2, 4 * cell_dim, projection_dim))
        self.bias = nn.Parameter(torch.zeros(2, 4 * cell_dim))
        self.weight_proj = nn.Parameter(torch.empty(2, projection_dim, cell_dim))
        # Inference's other forms of the weights, each made when first needed: the opt-in
        # int8 weights (BiLSTMStack.use_int8), W_hh re-laid for one-row steps
        # (recurrent_weight_rows) and oneDNN's layout of W_hh and W_proj (onednn_packed_weights).
        self._int8_enabled = False
        self._int8: WeightCache[Tuple[Int8Weights, Int8Weights]] = WeightCache()
        self._hh_rows: WeightCache[torch.Tensor] = WeightCache()
        self._packed: WeightCache[PackedWeights] = WeightCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights per direction (each (4H, I), (4H, P), (P, H)), zero bias."""
        for w in (self.weight_ih, self.weight_hh, self.weight_proj):
            for direction in w:
                nn.init.xavier_uniform_(direction)
        nn.init.zeros_(self.bias)

    def _apply(self, fn, *args, **kwargs):
        # .to() / .half() / .cuda() make new weight tensors, and the allocator may give one the
        # address that the weight a form was made from had: after a .half().float() round trip
        # W_hh had the same address, version, dtype and device, and other (rounded) values, so
        # the one-row steps kept using the re-laid copy of the old W_hh. Drop the forms here.
        result = super()._apply(fn, *args, **kwargs)
        for cache in (self._int8, self._hh_rows, self._packed):
            cache.clear()
        return result

    def int8_weights(self, enabled: Optional[bool] = None) -> Optional[Tuple[Int8Weights, Int8Weights]]:
        """The opt-in int8 (W_hh, W_proj) when enabled with :meth:`BiLSTMStack.use_int8`, else None.

        Quantized again whenever a weight has changed since (so they never go stale).
        ``enabled``: the mode the stack's call read once at its start (None: this layer's now),
        so that a switch made by another thread during a call does not reach its later layers."""
        if not (self._int8_enabled if enabled is None else enabled):
            return None
        hh, proj = self.weight_hh, self.weight_proj
        return self._int8.get((hh, proj), lambda: (Int8Weights(hh), Int8Weights(proj)))

    def recurrent_weight_rows(self) -> torch.Tensor:
        """W_hh as a contiguous (2, P, 4H) copy (no autograd), for the steps that run one row.

        With one row, a step multiplies h (P,) by W_hh. Stored as (4H, P) that is a
        matrix-vector product over 4H rows; as a (P, 4H) copy it is a one-row GEMM that scales
        and sums P contiguous rows, and MKL ran it 2.4 times as fast on a Zen 3 CPU (batch-1
        inference of the original model: 5.5 against 2.3 ms a product; see
        benchmarks/RESULTS.md). The same products in fp32, summed in another order: the
        results differ from the stored layout's by float rounding (about 1e-7). The copy costs
        one more W_hh in memory (134 MB for the original model), only once a one-row step has
        run, and is made again whenever W_hh has changed (so it never goes stale). Where the
        one-row products go through oneDNN (:func:`~elmo.modules.dense.recurrent_in_onednn`)
        they read the stored layout, and the copy is never made."""
        w = self.weight_hh
        return self._hh_rows.get((w,), lambda: w.detach().transpose(1, 2).contiguous())

    def onednn_packed_weights(self) -> PackedWeights:
        """W_hh and W_proj of each direction in oneDNN's own layout (no autograd), for the
        per-step products of two rows or more where :func:`~elmo.modules.dense.recurrent_packed`
        says so: ([W_hh fwd, W_hh bwd], [W_proj fwd, W_proj bwd]).

        In the stored layout oneDNN lays out the weight anew on every call; the original model's
        32 MiB W_hh then took 5 to 6 ms a product at 30 rows, against 4 ms laid out once (Zen 3),
        with equal results. The copy costs one more W_hh and W_proj in memory (160 MiB for the
        original model), only once such a step has run, and is made again whenever a weight has
        changed."""
        hh, proj = self.weight_hh, self.weight_proj
        return self._packed.get((hh, proj), lambda: ([pack_for_onednn(w) for w in hh.detach()],
                                                     [pack_for_onednn(w) for w in proj.detach()]))

    def effective_bias(self) -> torch.Tensor:
        """The stored bias with the forget gate's +1: (2, 4H)."""
        forget = torch.zeros_like(self.bias)
        forget[:, 2 * self.cell_dim:3 * self.cell_dim] = 1.0
        return self.bias + forget


#: Time steps whose input products are computed in one multiply, at most. Large enough for an
#: efficient GEMM, small enough that a 10,000-token sentence does not hold all its gates at once.
INPUT_CHUNK_STEPS = 32

#: The most bytes of input products computed at once, unless W_ih itself is larger (always at
#: least one step). Without it a chunk of 32 steps at batch 128 is 96 MB for the small
#: configuration: the steps then read their gates back from memory instead of the cache, and
#: glibc maps and faults in a block that size on every call. Chunks are not made smaller than
#: W_ih, which each chunk's product reads once: for the original configuration (W_ih 64 MB)
#: smaller chunks were slower. See benchmarks/RESULTS.md.
INPUT_CHUNK_BYTES = 16 << 20


def input_chunks(batch_sizes: Sequence[int], row_bytes: int, weight_bytes: int) -> List[Tuple[int, int]]:
    """Split the steps into runs whose input products are computed in one multiply.

    Args:
        batch_sizes: rows running at each step.
        row_bytes: bytes of the input products of one row (all directions).
        weight_bytes: bytes of W_ih (all directions).
    Returns:
        (first step, step after the last) of each run, in order: at most
        :data:`INPUT_CHUNK_STEPS` steps and max(:data:`INPUT_CHUNK_BYTES`, ``weight_bytes``)
        bytes of products each, but at least one step.
    """
    budget = max(INPUT_CHUNK_BYTES, weight_bytes)
    runs: List[Tuple[int, int]] = []
    start, rows = 0, 0
    for t, bs in enumerate(batch_sizes):
        if t > start and (t - start == INPUT_CHUNK_STEPS or (rows + bs) * row_bytes > budget):
            runs.append((start, t))
            start, rows = t, 0
        rows += bs
    if batch_sizes:
        runs.append((start, len(batch_sizes)))
    return runs


#: Whether one sequence without autograd takes lstm_inference's path (benchmarks switch it off
#: to time the general path).
SINGLE_SEQUENCE_PATH = True

#: Whether steps that run one row without autograd multiply by the re-laid W_hh
#: (:meth:`BiLSTMLayer.recurrent_weight_rows`) instead of the stored one (benchmarks switch it
#: off to time the stored layout).
RECURRENT_ROWS = True


def one_row_relaid(layer: "BiLSTMLayer") -> bool:
    """Whether ``layer``'s one-row steps multiply by the re-laid W_hh: where
    :data:`RECURRENT_ROWS` and the weights are float32. A bfloat16 W_hh keeps its stored layout:
    there the matrix-vector product was the faster (the original model's 16 MiB W_hh: 0.84 ms
    against 1.5 ms for the re-laid one-row GEMM, Intel with AMX, 2 threads;
    ``benchmarks/one_row_products.py --dtype bfloat16``, benchmarks/RESULTS.md)."""
    return RECURRENT_ROWS and layer.weight_hh.dtype == torch.float32


def _batched_product(x: torch.Tensor, weight: torch.Tensor,
                     rows: Optional[Callable[[], torch.Tensor]] = None,
                     packed: Optional[Callable[[], Sequence[torch.Tensor]]] = None) -> torch.Tensor:
    """x (D, bs, K) @ weight (D, K, N) -> (D, bs, N).

    oneDNN's product per direction where :func:`~elmo.modules.dense.recurrent_in_onednn` says
    so: with ``packed()``, each direction's weight in oneDNN's layout, where given and
    :func:`~elmo.modules.dense.recurrent_packed` says so (two rows or more); else with the
    stored (N, K) weight, as lstm_inference's one-row steps (so that both paths give equal
    results). Else, with one row, a product per direction instead of the batched GEMM
    (measured at about half the speed for one row): a one-row GEMM with ``rows()``, the weight
    as a contiguous (D, K, N) copy, where given; else a matrix-vector product with the stored
    weight. Else the batched GEMM.
    """
    if recurrent_in_onednn(x, weight):
        if packed is not None and recurrent_packed(x):
            return per_direction_mm(x, packed())
        return per_direction_mm(x, weight.transpose(1, 2))
    if x.shape[1] == 1 and x.dtype == weight.dtype:  # (under autocast the dtypes differ)
        if rows is not None:
            w = rows()
            return torch.stack([torch.mm(x[d], w[d]) for d in range(x.shape[0])])
        return torch.stack([torch.mv(weight[d].T, x[d, 0]) for d in range(x.shape[0])]).unsqueeze(1)
    return torch.bmm(x, weight)


def run_lstm_layer(layer_input: torch.Tensor, weight_ih: torch.Tensor, bias: torch.Tensor,
                   batch_sizes: List[int], weight_hh: torch.Tensor, weight_proj: torch.Tensor,
                   state: LayerState, cell_clip: Optional[float], proj_clip: Optional[float],
                   int8: Optional[Tuple[Int8Weights, Int8Weights]] = None,
                   weight_hh_rows: Optional[Callable[[], torch.Tensor]] = None,
                   packed_weights: Optional[Callable[[], PackedWeights]] = None
                   ) -> Tuple[torch.Tensor, LayerState]:
    """Step D directions of one layer over packed sequences.

    Args:
        layer_input: (D, N, I) packed inputs, time-major (see :class:`Packing`).
        weight_ih: (D, I, 4H). bias: (D, 1, 4H), forget +1 included.
        batch_sizes: rows running at each step (non-increasing, sums to N).
        weight_hh: (D, P, 4H). weight_proj: (D, H, P).
        state: initial (c (D, B, H), h (D, B, P)) in sorted row order.
        int8: opt-in int8 (W_hh, W_proj) for the products with the state (see
            :mod:`elmo.modules.lstm_inference`); None for the float weights.
        weight_hh_rows: gives W_hh as a contiguous (D, P, 4H) copy for the steps that run
            one row (:meth:`BiLSTMLayer.recurrent_weight_rows`), called only when one does;
            None to multiply by ``weight_hh`` there too.
        packed_weights: gives W_hh and W_proj in oneDNN's layout
            (:meth:`BiLSTMLayer.onednn_packed_weights`), called only when a step uses them;
            None to multiply by the stored weights.

    Returns:
        outputs (D, N, P) packed, and the final state (c, h) in sorted row order; rows that
        never run keep their initial state.
    """
    c, h = state
    if (SINGLE_SEQUENCE_PATH and not torch.is_grad_enabled() and h.shape[1] == 1 and batch_sizes
            and layer_input.dtype == weight_hh.dtype and not autocast_on(h.device.type)):
        return run_single_sequence(layer_input, weight_ih, bias, weight_hh, weight_proj, state,
                                   cell_clip, proj_clip, int8,
                                   weight_hh_rows() if weight_hh_rows is not None and int8 is None
                                   and not recurrent_in_onednn(layer_input, weight_hh) else None)
    outputs, finished_c, finished_h = [], [], []
    offset = 0
    step_inputs: List[torch.Tensor] = []
    row_bytes = weight_ih.shape[0] * weight_ih.shape[2] * weight_ih.element_size()  # D x 4H floats
    chunk_stop = dict(input_chunks(batch_sizes, row_bytes, weight_ih.numel() * weight_ih.element_size()))
    if weight_hh_rows is not None:  # looked up once, at the first one-row step (a form of
        # weights in shared memory is made again at each lookup: see weight_cache)
        weight_hh_rows = functools.lru_cache(maxsize=1)(weight_hh_rows)
    packed_hh = packed_proj = None
    if packed_weights is not None:  # looked up once, at the first step that uses them
        packed_once = functools.lru_cache(maxsize=1)(packed_weights)
        packed_hh, packed_proj = (lambda: packed_once()[0]), (lambda: packed_once()[1])
    for t, bs in enumerate(batch_sizes):
        if t in chunk_stop:  # input products of the next chunk of time steps, one GEMM
            sizes = batch_sizes[t:chunk_stop[t]]
            gate_inputs = torch.baddbmm(bias, layer_input[:, offset:offset + sum(sizes)], weight_ih)
            # One split rather than a slice per step: the backward of a split is one
            # concatenation, while each slice's backward writes a zero-filled chunk-sized
            # gradient (quadratic in the chunk length).
            step_inputs = list(torch.split(gate_inputs, sizes, dim=1))[::-1]
        if bs < h.shape[1]:  # the shortest rows have ended: keep their final state
            finished_c.append(c[:, bs:])
            finished_h.append(h[:, bs:])
            c, h = c[:, :bs], h[:, :bs]
        gates = (_batched_product(h, weight_hh, weight_hh_rows, packed_hh) if int8 is None
                 else int8[0].product(h)) + step_inputs.pop()
        i, j, f, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(j) + torch.sigmoid(f) * c
        if cell_clip is not None:
            c = c.clamp(-cell_clip, cell_clip)
        hidden = torch.sigmoid(o) * torch.tanh(c)
        h = _batched_product(hidden, weight_proj, packed=packed_proj) if int8 is None else int8[1].product(hidden)
        if proj_clip is not None:
            h = h.clamp(-proj_clip, proj_clip)
        outputs.append(h)
        offset += bs
    finished_c.append(c)
    finished_h.append(h)
    final = (torch.cat(finished_c[::-1], dim=1), torch.cat(finished_h[::-1], dim=1))
    if outputs:
        packed = torch.cat(outputs, dim=1)
    else:
        packed = weight_proj.new_zeros(weight_proj.shape[0], 0, weight_proj.shape[2])
    return packed, final


class BiLSTMStack(nn.Module):
    """A forward and a backward stack of ``config.n_layers`` projected LSTM layers.

    Args:
        config: the ``lstm`` section of the options (cells H, projection P, layers, clips,
            skip connections).
        input_dim: width I of the first layer's input; P (the token vectors) when None.
        dropout: (training only) drops each layer's input, as the original trainer does.

    Layer j >= 1 adds its input to its output when ``config.use_skip_connections`` is set.
    """

    def __init__(self, config: LSTMConfig, input_dim: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.config = config
        self.cell_dim, self.projection_dim, self.n_layers = config.dim, config.projection_dim, config.n_layers
        self.cell_clip, self.proj_clip = config.cell_clip, config.proj_clip
        self.use_skip_connections = config.use_skip_connections
        self.dropout = dropout
        dims = [config.projection_dim if input_dim is None else input_dim] + [self.projection_dim] * (self.n_layers - 1)
        # an nn.ModuleList, typed by its items (torch's stubs give them as plain Module)
        self.layers = cast("Sequence[BiLSTMLayer]", nn.ModuleList(
            BiLSTMLayer(d, self.cell_dim, self.projection_dim) for d in dims))

    def use_int8(self, enabled: bool = True) -> None:
        """Opt in (or out) of int8 recurrent weights for inference (no autograd).

        W_hh and W_proj are multiplied as int8 with a float scale per row and the state rounded
        to bfloat16 (see :mod:`elmo.modules.lstm_inference`): about a quarter of the memory
        traffic of a batch-1 step, at the cost of a small, measured deviation. Off by default.
        It pays for few rows a step: ``torch._weight_int8pack_mm`` is a weight-only kernel, and
        with many rows float32's GEMM is faster (``python benchmarks/inference.py --configs
        original --batches 1 32 128 --int8``: on a Zen 4 EPYC, int8 well ahead at batch 1 and
        behind float32 at 128, benchmarks/RESULTS.md; *scratch*, the two recurrent products
        alone, one thread: 2.9-3.4x as fast at 1 row, 0.82x at 128 rows with AVX-512 kernels,
        0.92x at 32 with AVX2 ones). No CPU check warns: the slowdown follows the batch size on
        every instruction set measured, not the CPU alone.
        ``enabled`` must be a bool: ``use_int8("no")`` turned int8 on (a non-empty string is true).
        """
        enabled = require_switch("enabled", enabled)
        if enabled:
            require_int8_kernel(self.layers[0].weight_hh.device)
        for layer in self.layers:
            layer._int8_enabled = enabled
            layer._int8.clear()

    def clear_inference_caches(self) -> None:
        """Drops every layer's inference forms of its weights (int8 rows, re-laid W_hh,
        oneDNN's layout); they are made again when next needed. They follow every counted
        change of the weights by themselves (optimizer steps, ``load_state_dict``, in-place
        writes under ``torch.no_grad()``, ``.to()``); call this after writing weights through
        ``param.data``, which PyTorch does not count, or to free their memory (a fused
        optimizer's step is counted, and weights in shared memory, which another process may
        write, get their forms made at every call: see :mod:`elmo.modules.weight_cache`)."""
        for layer in self.layers:
            for cache in (layer._int8, layer._hh_rows, layer._packed):
                cache.clear()

    @property
    def int8_enabled(self) -> bool:
        return self.layers[0]._int8_enabled

    def zero_state(self, batch_size: int, like: torch.Tensor) -> List[LayerState]:
        """A zero state for each layer: c (2, B, H), h (2, B, P)."""
        return [(like.new_zeros(2, batch_size, self.cell_dim), like.new_zeros(2, batch_size, self.projection_dim))
                for _ in range(self.n_layers)]

    @eager_under_compile
    def forward(self, inputs: torch.Tensor, lengths: Lengths,
                state: Optional[List[LayerState]] = None,
                backward_inputs: Optional[torch.Tensor] = None
                ) -> Tuple[List[torch.Tensor], List[LayerState]]:
        """Run both stacks.

        Args:
            inputs: (B, T, I), row b valid for its first ``lengths[b]`` positions.
            lengths: each row's valid positions, 0 to T: a (B,) integer tensor on any device,
                or a list or tuple of B ints. The packing is computed on the host
                (:mod:`elmo.modules.packing`): ints there cost no read of the device, a tensor
                on a GPU one (a wait for the queued work). ValueError for other types, another
                count than B, or a length outside 0 to T.
            state: per layer (c (2, B, H), h (2, B, P)); zeros when None.
            backward_inputs: None to let the backward stack read ``inputs`` right to left
                (the usual biLM). Otherwise (B, T, I) that the backward stack reads left to
                right as given, e.g. the reversed text of a language-model stream; its outputs
                are then aligned with ``backward_inputs``.

        Returns:
            per layer (B, T, 2P): forward outputs then backward outputs, zero past each
            length; and the final state per layer (rows of length 0 keep their state).
        """
        batch, steps, _ = inputs.shape
        for j, layer in enumerate(self.layers):  # (its weights are read here; it is never called)
            refuse_hooks(layer, f"LSTM layer {j} (a BiLSTMLayer)")
        # the mode is read once: another thread's use_int8() during this call gave its first
        # layers one mode and the rest the other, vectors of neither mode, without a word
        int8 = self.int8_enabled
        if int8 and torch.is_grad_enabled():
            raise RuntimeError("int8 LSTM weights are for inference: run under torch.no_grad() "
                               "or call use_int8(False) first")
        if int8:  # (checked again: the model may have moved since use_int8)
            require_int8_kernel(inputs.device)
        if state is None:
            state = self.zero_state(batch, inputs)
        packing = Packing.from_host_lengths(host_lengths(lengths, steps, rows=batch), steps, inputs.device)
        order = packing.order
        bwd_source = inputs if backward_inputs is None else backward_inputs
        bwd_index = packing.backward_index if backward_inputs is None else packing.forward_index
        flat_fwd = inputs.reshape(batch * steps, inputs.shape[-1])
        flat_bwd = bwd_source.reshape(batch * steps, bwd_source.shape[-1])
        x = torch.stack([flat_fwd[packing.forward_index], flat_bwd[bwd_index]])  # (2, N, I)

        unsort = torch.empty_like(order)
        unsort[order] = torch.arange(order.numel(), device=order.device)
        outputs, final_states = [], []
        for j, layer in enumerate(self.layers):
            layer_input = F.dropout(x, self.dropout, dropout_active(self)) if self.dropout > 0 else x
            c0, h0 = state[j]
            # training: the whole sequence as one autograd function (lstm_autograd.py)
            args = (layer_input, layer.weight_ih.transpose(1, 2), layer.effective_bias()[:, None],
                    packing.batch_sizes, layer.weight_hh.transpose(1, 2),
                    layer.weight_proj.transpose(1, 2), (c0[:, order], h0[:, order]),
                    self.cell_clip, self.proj_clip)
            if wants_fast_path(layer_input, layer.weight_hh):
                packed, (c, h) = run_lstm_layer_autograd(*args)
            else:  # inference (also under autocast): int8 weights when opted in
                packed, (c, h) = run_lstm_layer(*args, int8=layer.int8_weights(int8),
                                                weight_hh_rows=layer.recurrent_weight_rows if one_row_relaid(layer) else None,
                                                packed_weights=layer.onednn_packed_weights)
            if self.use_skip_connections and j > 0:
                packed = packed + layer_input
            x = packed
            final_states.append((c[:, unsort], h[:, unsort]))
            outputs.append(self._unpack(packed, packing, bwd_index, batch, steps))
        return outputs, final_states

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    def _unpack(self, packed: torch.Tensor, packing: Packing, bwd_index: torch.Tensor,
                batch: int, steps: int) -> torch.Tensor:
        """(2, N, P) packed -> (B, T, 2P) padded with zeros."""
        zeros = packed.new_zeros(batch * steps, self.projection_dim)
        fwd = zeros.index_copy(0, packing.forward_index, packed[0])
        bwd = zeros.index_copy(0, bwd_index, packed[1])
        return torch.cat([fwd, bwd], dim=1).view(batch, steps, 2 * self.projection_dim)
