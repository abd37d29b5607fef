"""Hooks on the biLM's submodules: the character CNN's layers with hooks are called so that
their hooks run; the LSTM's layers, which are never called, refuse them."""
from __future__ import annotations

import pytest
import torch
import torch.nn.utils.prune as prune

from elmo import batch_to_ids
from tests.conftest import random_bilm

IDS = batch_to_ids([["The", "bank", "closed", "."], ["Hi"]])


def cnn_parts(bilm):
    encoder = bilm.token_encoder
    return {"convolution": encoder.convolutions[1], "highway": encoder.highway.layers[0],
            "projection": encoder.projection}


@pytest.mark.parametrize("part", ["convolution", "highway", "projection"])
def test_forward_hooks_on_the_cnns_layers_run(part):
    """The CPU path multiplied by these layers' weights without calling them: a forward hook
    on one (to read a convolution's outputs, say) never ran, with no error; on a GPU the
    convolutions were called and it did. It now runs, and the outputs stay what they were."""
    bilm = random_bilm()
    with torch.no_grad():
        want = bilm(IDS)["activations"]
    seen = []
    handle = cnn_parts(bilm)[part].register_forward_hook(lambda module, args, out: seen.append(out.shape))
    with torch.no_grad():
        got = bilm(IDS)["activations"]
    handle.remove()
    assert seen and all(len(shape) >= 2 for shape in seen)
    for g, w in zip(got, want):  # PyTorch's products instead of ours: float rounding apart
        assert float((g - w).abs().max()) <= 1e-5 * float(w.abs().max())


@pytest.mark.parametrize("part", ["convolution", "highway", "projection"])
def test_a_pruned_cnn_layer_trains_and_follows_its_weights(part):
    """torch.nn.utils.prune computes ``weight = weight_orig * mask`` in a forward pre-hook that
    never ran: the second training step failed deep in autograd ("Trying to backward through
    the graph a second time"), and the vectors kept the weight of the moment prune was
    applied after weight_orig changed. The pruned layer is now called, its hook runs."""
    bilm = random_bilm().train()
    module = cnn_parts(bilm)[part]
    prune.l1_unstructured(module, "weight", amount=0.5)
    optimizer = torch.optim.SGD(bilm.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        bilm(IDS)["activations"][-1].sum().backward()
        optimizer.step()
    with torch.no_grad():
        got = bilm(IDS)["activations"]
    prune.remove(module, "weight")                      # the pruned weight made permanent
    with torch.no_grad():
        want = bilm(IDS)["activations"]
    for g, w in zip(got, want):
        assert float((g - w).abs().max()) <= 1e-5 * float(w.abs().max())


def test_hooks_on_an_lstm_layer_are_refused():
    """A BiLSTMLayer holds weights that the stack reads; it is never called, so a hook on it
    (prune's, for one) never ran and the weight of the moment it was applied stayed in use.
    Now one RuntimeError says so."""
    bilm = random_bilm()
    prune.l1_unstructured(bilm.lstm.layers[1], "weight_hh", amount=0.5)
    with pytest.raises(RuntimeError, match="LSTM layer 1 .* has hooks, which never run"):
        bilm(IDS)
    prune.remove(bilm.lstm.layers[1], "weight_hh")
    bilm(IDS)


class Doubled(torch.nn.Module):
    """Put in the place of a layer, as LoRA or quantization tools put their modules: its
    forward is not the product with a ``weight`` tensor (here the base layer's output, doubled).
    With ``expose_weight`` it passes the base layer's weight and bias on, as LoRA wrappers do."""

    def __init__(self, base: torch.nn.Module, expose_weight: bool):
        super().__init__()
        self.base = base
        if expose_weight:
            self.weight, self.bias = base.weight, base.bias

    def forward(self, x):
        return 2 * self.base(x)


@pytest.mark.parametrize("expose_weight", [True, False], ids=["lora-like", "no-weight-tensor"])
@pytest.mark.parametrize("part", ["convolution", "highway", "projection"])
def test_a_module_put_in_the_place_of_a_cnn_layer_is_called(part, expose_weight):
    """The CPU path read ``layer.weight`` and ``layer.bias`` of whatever module sat there: a
    wrapper that passes its base layer's weight on (LoRA's) was computed as the base layer
    alone, silently, and one without a weight tensor (quantize_dynamic's Linear) failed deep
    in the CNN. Any module but a plain Linear or Conv1d is now called; here the result is
    that of a plain layer with twice the weight and bias."""
    bilm = random_bilm(2)
    doubled = random_bilm(2)
    with torch.no_grad():
        for p in cnn_parts(doubled)[part].parameters():
            p.mul_(2)
        want = doubled(IDS)["activations"]
    encoder = bilm.token_encoder
    if part == "convolution":
        encoder.convolutions[1] = Doubled(encoder.convolutions[1], expose_weight)
    elif part == "highway":
        encoder.highway.layers[0] = Doubled(encoder.highway.layers[0], expose_weight)
    else:
        encoder.projection = Doubled(encoder.projection, expose_weight)
    encoder.build_token_cache(["bank"])
    with torch.no_grad():
        got = bilm(IDS)["activations"]
    for g, w in zip(got, want):
        assert float((g - w).abs().max()) <= 1e-5 * float(w.abs().max())
