"""The public modules as ordinary PyTorch modules: their parameter names are the documented ones."""
from __future__ import annotations

import re
from pathlib import Path

from elmo import Elmo
from tests.conftest import random_bilm

ARCHITECTURE = Path(__file__).parent.parent / "docs" / "ARCHITECTURE.md"


def documented_names() -> set:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("**Parameter names.**"):]
    section = section[:section.index("\n* **")]
    return set(re.findall(r"`((?:token_encoder|lstm|scalar_mixes)\.[\w.]+)`", section))


def general(name: str) -> str:
    """A parameter name with its layer indexes as N."""
    return re.sub(r"\.\d+\.", ".N.", name)


def test_parameter_names_are_the_documented_ones():
    """The state_dict keys are the names of a saved model's tensors; docs/ARCHITECTURE.md
    lists them, and a renamed module would fail here before it failed to load a saved model."""
    documented = documented_names()
    elmo = Elmo(module=random_bilm(), num_output_representations=2)
    names = {general(name) for name in elmo.state_dict()}
    bilm_names = {name[len("_elmo_lstm."):] for name in names if name.startswith("_elmo_lstm.")}
    mix_names = names - {"_elmo_lstm." + name for name in bilm_names}
    assert bilm_names | mix_names <= documented
    assert documented - bilm_names - mix_names == {"token_encoder.word_embedding.weight"}
    assert {general(name) for name, _ in elmo.named_parameters()} == names  # (no buffers)
