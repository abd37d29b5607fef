"""Elmo: the biLM run once, with N task-specific layer mixes and dropout on each.

The constructor and the output dict follow AllenNLP's ``Elmo``, so code written for it keeps
working after changing the import::

    elmo = Elmo(options_file, weight_file, num_output_representations=2, dropout=0.5)
    out = elmo(batch_to_ids(sentences))
    out["elmo_representations"]  # 2 tensors (B, T, 2P)
    out["mask"]                  # (B, T) bool; any leading shape works: (B, N, T, C) ids give (B, N, T, 2P)

One difference: the biLM is stateless by default (a sentence always gets the same vectors);
pass ``stateful=True`` for the original's carried state.
"""
from __future__ import annotations

import math
import re
import warnings
from typing import TYPE_CHECKING, List, Optional, Sequence, TypedDict, cast

import torch
from torch import nn

from ..checks import require_count, require_switch
from ..runtime import resolve_device
from .bilm import BiLM, BiLMOutput
from .scalar_mix import ScalarMix, mix_parameters, no_penalty, penalty_weight


def _holds_words(words: Sequence[str]) -> bool:
    """Whether ``vocab_to_cache`` holds words to cache (an empty list holds none), told by its
    length, not its truth: a numpy array of words has no truth value (numpy's "ambiguous"
    ValueError), and one of the single word "" was false, so no cache was built. What has no
    length (a generator) is left to ``build_token_cache`` to read and check."""
    try:
        return len(words) > 0
    except TypeError:
        return True


class ElmoMixes(TypedDict):
    """The keys :meth:`Elmo.forward` always returns."""

    elmo_representations: List[torch.Tensor]  # num_output_representations of (..., T, 2P)
    mask: torch.Tensor                         # (..., T) bool


class ElmoOutput(ElmoMixes, total=False):
    """What :meth:`Elmo.forward` returns (a plain dict): ``layers`` only with ``return_layers``.
    (A typed dict, not Dict[str, object]: ``out["elmo_representations"][0]`` is a tensor to a
    type checker, where an object could not be indexed.)"""

    layers: List[torch.Tensor]                 # L + 1 of (..., T, 2P), before mixing


class Elmo(nn.Module):
    """ELMo representations for a downstream model.

    Args:
        options_file, weight_file: the original options.json and HDF5 weights. Alternatively
            pass a loaded ``module`` (a :class:`BiLM`) and leave both None. As in AllenNLP, any
            other module with ``num_layers``, ``get_output_dim()`` and AllenNLP's forward (see
            :meth:`_run_other_module`) works too.
        num_output_representations: number of independent mixes (e.g. one for the task
            model's input, one for its output).
        requires_grad: fine-tune the biLM too (default frozen). As in AllenNLP this sets the
            biLM's parameters' ``requires_grad``, and their flags decide from then on: a biLM
            unfrozen later (``elmo.requires_grad_(True)``, ``elmo.bilm.requires_grad_(True)``)
            is fine-tuned from the next call. Two Elmo over one biLM share the flags, and a
            fine-tuning Elmo whose biLM was frozen since warns once at its next call.
        do_layer_norm: layer-normalise each layer before mixing.
        dropout: dropout on each mixed output, in [0, 1).
        vocab_to_cache: words whose token vectors are precomputed (others still use the CNN).
        keep_sentence_boundaries: keep the ``<S>``/``</S>`` positions.
        scalar_mix_parameters: fixed s for every mix (not learned, so :meth:`penalty` is zero
            for them), e.g. ``[-9e10, 1, -9e10]`` to pick one layer.
        stateful: carry LSTM state across calls, as the original. None (the default) keeps a
            given ``module``'s own setting, and is False for a model read from the files.
        device: where to put the model.
    """

    def __init__(self, options_file: Optional[str] = None, weight_file: Optional[str] = None,
                 num_output_representations: int = 1, requires_grad: bool = False,
                 do_layer_norm: bool = False, dropout: float = 0.5,
                 vocab_to_cache: Optional[Sequence[str]] = None, keep_sentence_boundaries: bool = False,
                 scalar_mix_parameters: Optional[Sequence[float]] = None,
                 module: Optional[BiLM] = None, stateful: Optional[bool] = None,
                 device: Optional[str | torch.device] = None):
        super().__init__()
        num_output_representations = require_count("num_output_representations", num_output_representations,
                                                   least=0)
        requires_grad, do_layer_norm, keep_sentence_boundaries = (  # "False" is true: say so
            require_switch(name, value) for name, value in (
                ("requires_grad", requires_grad), ("do_layer_norm", do_layer_norm),
                ("keep_sentence_boundaries", keep_sentence_boundaries)))
        try:
            # (NaN fails this too; nn.Dropout lets it through, and 1, which zeroes every vector
            # in training: the task learned from zeros and no error said so)
            rate_ok = bool(0.0 <= dropout < 1.0)
        except TypeError:  # None, a string: not a number
            rate_ok = False
        if not rate_ok:
            raise ValueError(f"dropout must be a number between 0 and 1 (0 included, 1 not: it "
                             f"would zero every vector in training), got {dropout!r}")
        if stateful is not None:
            stateful = require_switch("stateful", stateful)
        if device is not None:  # before loading the files (a URL is a download)
            device = resolve_device(device, None, "device")
        if module is None:
            if options_file is None or weight_file is None:
                raise ValueError("pass options_file and weight_file, or a loaded BiLM as module=")
            from ..weights import load_original
            # Fine-tuned (requires_grad) in float32: a file saved from a bfloat16 model loads as
            # bfloat16, whose weights would take the optimizer's steps rounded to 8 bits of mantissa
            module = load_original(options_file, weight_file, stateful=bool(stateful),
                                   dtype=torch.float32 if requires_grad else None)
        elif options_file is not None or weight_file is not None:
            raise ValueError("pass either module= or options_file/weight_file, not both")
        elif not isinstance(module, BiLM) and isinstance(getattr(module, "_orig_mod", None), BiLM):
            # (torch.compile's wrapper hands the BiLM's num_layers through: it was taken for a
            # module on AllenNLP's contract, and its first call failed on a switch it never set)
            raise TypeError("module= is a torch.compile'd BiLM: pass the BiLM itself (compiled._orig_mod); "
                            "its forwards run eagerly under torch.compile, so compile the model that "
                            "holds this Elmo instead")
        elif not isinstance(module, BiLM) and not (isinstance(module, nn.Module)
                                                    and hasattr(module, "num_layers")):
            raise TypeError(f"module= must be a BiLM (elmo.from_pretrained) or a torch module with "
                            f"num_layers, get_output_dim() and AllenNLP's forward; got "
                            f"{type(module).__name__}")
        elif stateful is not None:  # None: the module's own setting stays
            module.stateful = stateful
        if scalar_mix_parameters is not None:
            scalar_mix_parameters = mix_parameters(scalar_mix_parameters, module.num_layers, "scalar_mix_parameters")
        self._elmo_lstm = module
        for p in module.parameters():
            p.requires_grad_(requires_grad)
        if not requires_grad:
            module.eval()
        self._requires_grad = requires_grad
        self._warned_frozen = False  # (see forward: warned once)
        if vocab_to_cache is not None and _holds_words(vocab_to_cache):
            if not isinstance(module, BiLM):
                raise ValueError(f"vocab_to_cache needs a BiLM; module= is a {type(module).__name__}")
            module.token_encoder.build_token_cache(vocab_to_cache)
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._dropout = nn.Dropout(p=dropout)
        # an nn.ModuleList, typed by its items (torch's stubs give them as plain Module)
        self.scalar_mixes = cast("Sequence[ScalarMix]", nn.ModuleList(
            ScalarMix(module.num_layers, do_layer_norm=do_layer_norm,
                      initial_scalar_parameters=scalar_mix_parameters,
                      trainable=scalar_mix_parameters is None)
            for _ in range(num_output_representations)))
        if device is not None:
            self.to(device)

    @property
    def bilm(self) -> BiLM:
        return self._elmo_lstm

    def __getattr__(self, name: str):
        """AllenNLP's names for the mixes: ``scalar_mix_K`` is ``scalar_mixes[K]`` and
        ``_scalar_mixes`` the list (code that reads the learned layer weights uses them). They
        are not registered under these names, so ``state_dict`` keys stay ``scalar_mixes.K``."""
        # (nn.Module looks its submodules up here: every other name goes straight on)
        match = re.fullmatch(r"scalar_mix_(0|[1-9][0-9]*)", name) if name.startswith("scalar_mix_") else None
        if match is not None or name == "_scalar_mixes":
            mixes = cast("Sequence[ScalarMix]", super().__getattr__("scalar_mixes"))
            if match is None:
                return list(mixes)
            if int(match[1]) < len(mixes):
                return mixes[int(match[1])]
        return super().__getattr__(name)

    def get_output_dim(self) -> int:
        if isinstance(self._elmo_lstm, BiLM):
            return self._elmo_lstm.output_dim
        return self._elmo_lstm.get_output_dim()  # AllenNLP's contract for module=

    def train(self, mode: bool = True) -> "Elmo":
        super().train(mode)
        if not self._requires_grad:  # a frozen biLM always runs in inference mode
            self._elmo_lstm.eval()
        return self

    def requires_grad_(self, requires_grad: bool = True) -> "Elmo":
        """Sets the flag of every parameter, the biLM's too, as for any module; this Elmo then
        counts as frozen or fine-tuning (:meth:`train`, and no warning about a biLM frozen by
        another Elmo after ``requires_grad_(False)``)."""
        super().requires_grad_(requires_grad)
        self._requires_grad = bool(requires_grad)
        return self

    def reset_states(self) -> None:
        """Forget the LSTM state a stateful biLM carries between calls: the next call starts
        from zeros (a stateless biLM carries none, so nothing changes). The README promised it
        on ``Elmo``, where it was an ``AttributeError``; it is the biLM's
        :meth:`BiLM.reset_states`."""
        reset = getattr(self._elmo_lstm, "reset_states", None)
        if not callable(reset):  # a module= on AllenNLP's contract need not have one
            raise TypeError(f"module= {type(self._elmo_lstm).__name__} has no reset_states(): "
                            f"reset its state through the module itself")
        reset()

    def penalty(self, lam: float) -> torch.Tensor:
        """lam * sum over mixes of ||s||^2: a 0-dim tensor (zero without mixes, and for mixes
        fixed by ``scalar_mix_parameters``: they are not learned)."""
        penalty_weight(lam)  # checked also where there are no mixes
        penalties = [mix.penalty(lam) for mix in self.scalar_mixes]
        if not penalties:  # sum() would give the int 0
            return no_penalty(self)
        return sum(penalties[1:], penalties[0])

    def forward(self, inputs: torch.Tensor, word_inputs: Optional[torch.Tensor] = None,
                return_layers: bool = False) -> ElmoOutput:
        """inputs: (B, T, C) character ids from :func:`elmo.batch_to_ids`, or any leading
        shape (..., T, C), e.g. (B, passages, T, C); each (T, C) slice is one sentence.

        ``word_inputs`` ((..., T) word ids, AllenNLP's cached-vocabulary input) must have the
        shape of ``inputs`` without its last dimension; its values are not used: the token
        cache is looked up from the characters, so out-of-vocabulary words still get their
        CNN vectors.

        Returns ``elmo_representations`` (list of (..., T, 2P), zero where ``mask`` is False),
        ``mask`` (..., T) bool, and with ``return_layers`` also ``layers`` (L + 1 tensors
        (..., T, 2P), before mixing). With ``keep_sentence_boundaries`` T becomes T + 2, and an
        empty sentence is ``<S> </S>`` (two positions of mask True, as in AllenNLP).

        With ``do_layer_norm`` each layer's mean and variance are over the sentences' tokens,
        without the ``<S>``/``</S>`` positions (as bilm-tf; AllenNLP includes them) unless
        ``keep_sentence_boundaries``; they are over the whole call, all leading dimensions.
        """
        return_layers = require_switch("return_layers", return_layers)
        if not isinstance(inputs, torch.Tensor):
            raise TypeError(f"inputs must be a torch.Tensor of character ids (elmo.batch_to_ids), "
                            f"got {type(inputs).__name__}")
        if word_inputs is not None and not isinstance(word_inputs, torch.Tensor):
            raise TypeError(f"word_inputs must be a torch.Tensor or None, got {type(word_inputs).__name__}")
        if inputs.is_meta:  # (.to(device) below would fail inside PyTorch: a meta tensor has no data)
            raise ValueError("inputs are on the meta device, which holds no ids: pass real character ids")
        if inputs.dim() < 3:
            raise ValueError(f"inputs must be character ids (batch, tokens, chars) or "
                             f"(..., tokens, chars), got shape {tuple(inputs.shape)}")
        if word_inputs is not None and tuple(word_inputs.shape) != tuple(inputs.shape[:-1]):
            raise ValueError(f"word_inputs has shape {tuple(word_inputs.shape)}; with character ids "
                             f"of shape {tuple(inputs.shape)} it must be {tuple(inputs.shape[:-1])}")
        leading = tuple(inputs.shape[:-2])
        device = next(self._elmo_lstm.parameters()).device
        # (..., T, C) -> (N, T, C), rows in row-major order; each row is an independent sentence
        inputs = inputs.to(device).reshape(math.prod(leading), *inputs.shape[-2:])
        # The parameters' own flags decide, as for any module: a biLM unfrozen after the
        # constructor (requires_grad_(True)) ran without autograd and got no gradients.
        bilm_trains = any(p.requires_grad for p in self._elmo_lstm.parameters())
        fine_tune = torch.is_grad_enabled() and bilm_trains
        if torch.is_grad_enabled() and self._requires_grad and not bilm_trains and \
                not getattr(self, "_warned_frozen", False):
            # requires_grad is the parameters' own flag: a second Elmo(module=bilm,
            # requires_grad=False) over the same biLM cleared it for this one too, and its
            # fine-tuning then left the biLM as it was without a word
            self._warned_frozen = True
            warnings.warn("Elmo(requires_grad=True), but none of its biLM's parameters requires "
                          "grad now, so the biLM is not fine-tuned: was another Elmo(module=..., "
                          "requires_grad=False) made over the same biLM? (It sets the parameters' "
                          "requires_grad for both.) Call elmo.bilm.requires_grad_(True) to fine-tune "
                          "it, or use a copy of the biLM for the frozen one", stacklevel=2)
        with torch.set_grad_enabled(fine_tune):
            if isinstance(self._elmo_lstm, BiLM):
                bilm_out = self._elmo_lstm(inputs, keep_sentence_boundaries=self._keep_sentence_boundaries)
            else:
                bilm_out = self._run_other_module(inputs, word_inputs)
        layers: List[torch.Tensor] = bilm_out["activations"]          # L + 1 of (N, T', 2P)
        mask: torch.Tensor = bilm_out["mask"]                         # (N, T')
        unflat = lambda t: t.reshape(*leading, *t.shape[1:])
        representations = [unflat(self._dropout(self._mixed(mix, layers, mask))) for mix in self.scalar_mixes]
        out: ElmoOutput = {"elmo_representations": representations, "mask": unflat(mask)}
        if return_layers:
            out["layers"] = [unflat(layer) for layer in layers]
        return out

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    @staticmethod
    def _mixed(mix: ScalarMix, layers: List[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """One mix of the layers (each (N, T, 2P)) -> (N, T, 2P), zero where ``mask`` (N, T)
        bool has no token (a layer normalised by ``do_layer_norm`` is -mean / std there, not
        zero as the biLM's layers are)."""
        return mix(layers, mask).masked_fill(~mask.unsqueeze(-1), 0.0)

    def _run_other_module(self, inputs: torch.Tensor, word_inputs: Optional[torch.Tensor]) -> BiLMOutput:
        """A ``module=`` that is not a :class:`BiLM`, on AllenNLP's contract: ``module(ids (N, T, C),
        word_inputs (N, T) or None)`` returns ``activations`` (L + 1 of (N, T + 2, D)) and
        ``mask`` (N, T + 2), both with ``<S>``/``</S>``. The boundaries are removed here unless
        kept: row i keeps positions 1 .. len_i - 2, moved to 0 .. len_i - 3."""
        if word_inputs is not None:
            word_inputs = word_inputs.to(inputs.device).reshape(inputs.shape[:-1])
        other: nn.Module = self._elmo_lstm  # (not a BiLM: its call is not BiLM's, its result checked here)
        out = other(inputs, word_inputs)
        try:
            layers, mask = list(out["activations"]), out["mask"].bool()
        except (TypeError, KeyError, AttributeError):
            raise TypeError(f"module= {type(self._elmo_lstm).__name__} must return a dict with "
                            f"'activations' (a list of tensors) and 'mask'") from None
        name = type(self._elmo_lstm).__name__
        if not all(isinstance(layer, torch.Tensor) for layer in layers):
            raise TypeError(f"module= {name} must return 'activations' as a list of tensors")
        # (else a broadcasting or reshape error below, or a mask that does not fit the vectors)
        if mask.dim() != 2 or mask.shape[0] != inputs.shape[0] or \
                any(layer.dim() != 3 or layer.shape[:2] != mask.shape for layer in layers):
            raise ValueError(f"module= {name} returned activations of shapes "
                             f"{[tuple(layer.shape) for layer in layers]} and a mask of shape "
                             f"{tuple(mask.shape)}; for {inputs.shape[0]} sentences they must be "
                             f"(N, T + 2, D) each and (N, T + 2)")
        if self._keep_sentence_boundaries:
            return {"activations": layers, "mask": mask}
        steps = mask.shape[1] - 2
        if steps < 0:
            raise ValueError(f"module= {name} returned a mask of shape "
                             f"{tuple(mask.shape)}, without the two boundary positions")
        lengths = (mask.sum(dim=1) - 2).clamp(min=0)                  # tokens without <S>, </S>
        kept = torch.arange(steps, device=mask.device)[None, :] < lengths[:, None]
        keep = kept.unsqueeze(-1)
        return {"activations": [layer[:, 1:-1] * keep.to(layer.dtype) for layer in layers], "mask": kept}
