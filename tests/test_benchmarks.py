"""The benchmarks' own helpers (the benchmarks themselves need the Brown corpus and minutes)."""
import torch

from benchmarks.inference import print_profile


def test_inference_profile_names_each_operator_with_its_shapes(capsys):
    """``benchmarks/inference.py --profile``: the table tells products apart by their shapes."""
    weight = torch.randn(64, 32)
    print_profile(lambda: torch.mm(torch.randn(1, 64), weight), tokens=7)
    out = capsys.readouterr().out
    assert "(7 tokens)" in out
    assert "aten::mm" in out and "[[1, 64], [64, 32]]" in out
