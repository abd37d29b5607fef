"""torch.compile of a model that holds ours: the biLM's forwards run eagerly inside it
(elmo/modules/eager.py), so compiling gives the eager outputs and gradients, and a new batch
shape costs no new trace of the biLM."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import elmo
from conftest import random_bilm
from training_helpers import tiny_lm_and_batch

@pytest.fixture(autouse=True, scope="module")
def own_inductor_cache(tmp_path_factory):
    """Inductor's kernels built in a folder of this run: its cache is keyed without ATen's CPU
    capability, so kernels left by a run under another ATEN_CPU_CAPABILITY fail to build."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
        yield


SENTENCES = [["The", "bank", "closed", "."], ["Hi"], "a b c d e f g".split()]


def _worst(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def test_a_compiled_bilm_and_elmo_give_the_eager_outputs_for_every_shape():
    torch._dynamo.reset()
    bilm = random_bilm()
    mixer = elmo.Elmo(module=bilm, num_output_representations=1, dropout=0.0).eval()
    graphs = []

    def counting_backend(graph, example_inputs):  # what TorchDynamo hands a backend to compile
        graphs.append(graph)
        return graph.forward

    compiled_bilm, compiled_mixer = torch.compile(bilm, backend=counting_backend), torch.compile(mixer)
    for sentences in (SENTENCES, [["x"] * 9, ["y"] * 3], [["z"]]):
        ids = elmo.batch_to_ids(sentences)
        with torch.no_grad():
            eager = bilm(ids)
            assert _worst(compiled_bilm(ids)["activations"], eager["activations"]) == 0
            want = mixer(ids)["elmo_representations"]
            assert _worst(compiled_mixer(ids)["elmo_representations"], want) < 1e-6
    assert graphs == []  # the biLM ran as it is: nothing of it traced, for no shape


def test_a_compiled_language_model_step_gives_the_eager_loss_and_gradients(tmp_path):
    torch._dynamo.reset()
    model, _, batch = tiny_lm_and_batch(tmp_path / "t.txt", "a b c d e f\ng h a b\nc d e\n", 2, 5)
    params = list(model.parameters())
    eager = model(batch)["loss"]
    g_eager = torch.autograd.grad(eager, params)
    compiled = torch.compile(model)(batch)["loss"]
    g_compiled = torch.autograd.grad(compiled, params)
    assert float(compiled.detach()) == float(eager.detach())
    assert _worst(g_compiled, g_eager) == 0


def test_onednn_is_left_to_inductor_in_a_piece_compiled_on_its_own(monkeypatch):
    """A part of ours traced by itself (here the products helper, with oneDNN asked for on any
    CPU) takes PyTorch's own product, which Inductor can lower; the eager call is unchanged."""
    from elmo.modules import dense
    monkeypatch.setattr(dense, "BACKEND", "onednn")
    torch._dynamo.reset()
    a, w, bias = torch.randn(5, 8), torch.randn(3, 8), torch.randn(3)
    want = a @ w.t() + bias
    assert torch.allclose(torch.compile(dense.linear)(a, w, bias), want, atol=1e-5)
    assert torch.allclose(dense.linear(a, w, bias), want, atol=1e-5)



_FORWARDS = """
import sys
import torch
import elmo
from elmo.modules.char_cnn import CharCNN
from elmo.modules.lstm import BiLSTMStack
from elmo.training.model import LanguageModel
def disabled():
    return [getattr(c.forward, "_torchdynamo_disable", False)
            for c in (elmo.BiLM, CharCNN, BiLSTMStack, LanguageModel)]
"""


def _start(code: str, first: str = "") -> subprocess.Popen:
    """``code`` in a fresh interpreter (nothing of this test run loaded), after ``first`` and
    the imports of ``_FORWARDS``; started, not waited for."""
    return subprocess.Popen([sys.executable, "-c", first + _FORWARDS + code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finished(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]


#: A forward patched before TorchDynamo loads, then ``torch.compile`` (the first test below).
_UNLOADED_UNTIL_COMPILE = """
bilm = elmo.from_pretrained("fixture")
ids = elmo.batch_to_ids([["The", "bank"], ["Hi"]])
with torch.no_grad():
    eager = bilm(ids)["activations"]
assert "torch._dynamo" not in sys.modules, "import elmo, or a forward, loaded TorchDynamo"
assert disabled() == [False] * 4
def patched(self, *args, **kwargs):   # (the biLM does not call it)
    return "patched"
LanguageModel.forward = patched
graphs = []
def backend(graph, example_inputs):
    graphs.append(graph)
    return graph.forward
compiled = torch.compile(bilm, backend=backend)   # loads TorchDynamo
assert LanguageModel.forward is patched
assert disabled() == [True] * 3 + [False], disabled()
with torch.no_grad():
    assert all(torch.equal(a, b) for a, b in zip(compiled(ids)["activations"], eager))
assert graphs == []   # nothing of the biLM traced
"""


@pytest.fixture(autouse=True, scope="module")
def fresh_interpreters():
    """The two fresh interpreters of the tests below, started with the module: they run on the
    second core while this process compiles (each test then only waits for its own)."""
    procs = {"unloaded": _start(_UNLOADED_UNTIL_COMPILE),
             "loaded_first": _start("assert disabled() == [True] * 4, disabled()\n", first="import torch._dynamo\n")}
    yield procs
    for proc in procs.values():   # (a no-op for those waited for)
        proc.kill()
        proc.communicate()


def test_import_elmo_leaves_torchdynamo_unloaded_until_torch_compile_loads_it(fresh_interpreters):
    """TorchDynamo's import cost about 0.9 s of every `import elmo` and every command: the
    forwards are marked for it once it is loaded, before anything is traced. A forward
    replaced before it loads is left as it was set: marking the forwards then (DDP loads it
    too) put the original back over a forward that a test or a user had patched meanwhile.
    (One interpreter for both: each check needs TorchDynamo unloaded at the start.)"""
    _finished(fresh_interpreters["unloaded"])


def test_the_forwards_are_marked_from_the_start_where_torchdynamo_was_loaded_before_elmo(fresh_interpreters):
    _finished(fresh_interpreters["loaded_first"])


def test_fullgraph_says_why_the_bilm_is_not_traced():
    # TorchDynamo stopped with "(reason: None)" and a hint to remove the disable call
    torch._dynamo.reset()
    compiled = torch.compile(random_bilm(), backend="eager", fullgraph=True)
    with pytest.raises(Exception, match=r"BiLM\.forward: elmo's biLM forwards run eagerly.*compile without "
                                        r"fullgraph=True"):
        with torch.no_grad():
            compiled(elmo.batch_to_ids([["a", "b"]]))


@pytest.mark.parametrize("make", [elmo.Elmo, elmo.ElmoTokenEmbedder])
def test_a_compiled_bilm_given_as_module_is_named(make):
    """torch.compile(bilm) hands its BiLM's attributes through, num_layers among them, so
    Elmo(module=compiled) took it for a module on AllenNLP's contract: its first call stopped
    with "keep_sentence_boundaries must be True or False, got NoneType" (the word ids passed
    where the BiLM takes that switch) and get_output_dim() with an AttributeError of BiLM."""
    compiled = torch.compile(random_bilm(), backend="eager")
    with pytest.raises(TypeError, match=r"module= is a torch\.compile'd BiLM: pass the BiLM itself"):
        make(module=compiled, dropout=0.0)
