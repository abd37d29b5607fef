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


def test_the_shared_benchmark_command_line_sets_the_threads():
    """Six benchmarks each built the same parser and set the threads by hand; they now share
    benchmarks.common's (its --threads default, None keeping torch's own)."""
    from benchmarks.common import benchmark_parser, parse_args
    before = torch.get_num_threads()
    try:
        parser = benchmark_parser("doc")
        parser.add_argument("--rounds", type=int, default=9)
        assert vars(parse_args(parser, ["--rounds", "2"])) == {"threads": 1, "rounds": 2}
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        assert parse_args(benchmark_parser("doc", threads=None), []).threads is None
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
