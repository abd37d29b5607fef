"""What the README quotes as output is what a newcomer sees.

1. The block of "The default model and `elmo demo`" is what ``elmo demo`` prints, abridged: each
   of its lines is a line of the demo's output, in the same order (the demo's sentence list and
   timing line are left out). A number with decimals may differ by one unit in its last printed
   place (another CPU's kernels round the vectors otherwise); words and whole numbers (counts,
   parameters, layer numbers) must be the same. The prose's "gap" is the table's top row.
2. The Analysis section's summary of the default model's report quotes the committed
   ``experiments/analysis/default/results.json`` (the report `elmo analyze` wrote there).
3. The figures of "Task experiments" are what `elmo experiment-table` gives for the committed
   ``experiments/results/`` folders (and the paired differences between two variants).
"""
from __future__ import annotations

import contextlib
import io
import json
import re
from typing import List, Optional

import pytest
import torch

from elmo.demo import run_demo
from test_readme import ROOT, assert_phrases_in, fenced_blocks, readme_text

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _section(text: str, heading: str) -> str:
    """The README text from ``heading`` to the next heading of the same level."""
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def _same_quote(quoted: str, printed: str) -> bool:
    """``quoted`` (a README line) reads as ``printed``: the same words between the numbers
    (spaces collapsed), the same whole numbers, and each decimal within one unit of its last
    printed place."""
    words = [" ".join(part.split()) for part in _NUMBER.split(quoted)]
    if words != [" ".join(part.split()) for part in _NUMBER.split(printed)]:
        return False
    for q, p in zip(_NUMBER.findall(quoted), _NUMBER.findall(printed)):
        if "." not in q:
            if q != p:
                return False
            continue
        places = len(q.split(".")[1])
        if abs(float(q.replace(",", "")) - float(p.replace(",", ""))) > 1.01 * 10.0 ** -places:
            return False
    return True


def _unmatched(quoted: List[str], printed: List[str]) -> Optional[str]:
    """The first quoted line that has no printed line after the previous one's, else None."""
    at = 0
    for line in filter(str.strip, quoted):
        found = next((i for i in range(at, len(printed)) if _same_quote(line, printed[i])), None)
        if found is None:
            return line
        at = found + 1
    return None


def test_the_quote_reader_tolerates_the_last_digit_only():
    assert _same_quote("  1   0.8374   0.925", "  1   0.8375   0.926")
    assert not _same_quote("  1   0.8374", "  1   0.8376")          # two units off
    assert not _same_quote("the 1,021 occurrences", "the 1,022 occurrences")
    assert not _same_quote("within-sense 0.729", "across-sense 0.729")
    assert _unmatched(["a 1", "c 3"], ["a 1", "b 2", "c 3"]) is None   # abridged: lines left out
    assert _unmatched(["c 3", "a 1"], ["a 1", "b 2", "c 3"]) == "a 1"  # but in order


@pytest.fixture(scope="module")
def demo_output() -> List[str]:
    """The lines ``elmo demo`` prints (one torch thread, as the command runs by default)."""
    threads = torch.get_num_threads()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            run_demo(threads=1)
    finally:
        torch.set_num_threads(threads)
    return out.getvalue().splitlines()


def _demo_block() -> List[str]:
    section = _section(readme_text(), "## The default model and `elmo demo`")
    blocks = [b for b in fenced_blocks(section) if b.lines and b.lines[0].startswith("model: ")]
    assert len(blocks) == 1, "the README's quoted demo output is gone"
    return blocks[0].lines


def test_the_readme_demo_output_is_what_elmo_demo_prints(demo_output):
    line = _unmatched(_demo_block(), demo_output)
    assert line is None, f"README's demo line not printed (in this order) by elmo demo: {line!r}"


def test_the_readme_demo_gap_is_the_top_layer_difference(demo_output):
    header = next(i for i, line in enumerate(demo_output) if "within sense  across senses" in line)
    rows = demo_output[header + 1:]
    top = rows[next(i for i, line in enumerate(rows) if not re.match(r"\s+\d+\s", line)) - 1]
    within, across = (float(x) for x in top.split()[1:3])
    prose = " ".join(_section(readme_text(), "## The default model and `elmo demo`").split())
    quoted = re.search(r"river sentences \(gap (\d\.\d+);", prose)
    assert quoted, "the README's bank gap is gone"
    assert abs(float(quoted.group(1)) - (within - across)) <= 0.0011, (quoted.group(1), top)


def _finding(text: str) -> List[str]:
    """'+0.9 points, 95% interval +0.7 to +1.1' -> ['+0.9', '+0.7', '+1.1']."""
    m = re.search(r"\(([+-]\d+\.\d+) points, 95% interval ([+-]\d+\.\d+) to ([+-]\d+\.\d+)\)", text)
    assert m, text
    return list(m.groups())


def test_the_readme_analysis_summary_quotes_the_default_models_report():
    results = json.loads((ROOT / "experiments/analysis/default/results.json").read_text("utf-8"))
    pos, wsd = results["pos"], results["wsd"]
    wsd_diff, seen = wsd["layer2_minus_layer1"], wsd["layer2_minus_layer1_seen_senses"]
    pos_diff = pos["layer1_minus_layer2"]
    control = _finding(pos["control_untrained"]["finding"])
    text = " ".join(_section(readme_text(), "## Analysis").split())
    expected = [
        f"layer 2 beats layer 1 by {100 * wsd_diff['diff']:.2f} F1 points (95% interval "
        f"{100 * wsd_diff['low']:.2f} to {100 * wsd_diff['high']:.2f}; +{100 * seen['diff']:.2f}",
        f"({100 * wsd['layers'][0]:.1f} F1 against layer 2's {100 * wsd['layers'][2]:.1f})",
        f"beats layer 2 for POS by {100 * pos_diff['diff']:.2f} points "
        f"({100 * pos_diff['low']:.2f} to {100 * pos_diff['high']:.2f})",
        f"the untrained copy shows more strongly ({control[0]})",
        f"({100 * pos['layers'][1]:.1f} against {100 * pos['control_untrained']['layers'][1]:.1f})",
        f"layer 1 above layer 2 for POS by {control[0].lstrip('+')} points (95% interval "
        f"{control[1].lstrip('+')} to {control[2].lstrip('+')})",
    ]
    assert_phrases_in(text, expected)


def _rows(folder: str) -> dict:
    """(task, variant) -> the summary row `elmo experiment-table` prints for a committed
    experiment folder (recomputed from its runs, as the command does)."""
    from elmo.tasks.compare import read_results, recomputed
    path = ROOT / "experiments/results" / folder
    results = recomputed(read_results(path, need=("config", "runs")), path)
    return {(row["task"], row["variant"]): row for row in results["summary"]}


def _paired(folder: str, task: str, a: str, b: str) -> dict:
    from elmo.tasks.compare import read_results
    from elmo.tasks.paired import paired_difference
    return paired_difference(read_results(ROOT / "experiments/results" / folder), task, a, b)


def test_the_readme_task_results_quote_the_committed_experiments():
    """The figures of "Task experiments" are those `elmo experiment-table` gives for the
    committed results (pos, ner, sentiment, pos-sample-efficiency, smoke-pos-ptb, v1/)."""
    pos, ner, v1pos, v1ner = _rows("pos"), _rows("ner"), _rows("v1/pos"), _rows("v1/ner")
    senti, sizes, ptb = _rows("sentiment"), _rows("pos-sample-efficiency"), _rows("smoke-pos-ptb")
    main, ner_main = pos["pos", "elmo-input"], ner["ner", "elmo-input"]
    five = senti["sentiment5", "elmo-input"]
    last = _paired("pos", "pos", "elmo-input", "last-only")
    both = _paired("pos", "pos", "elmo-input-output", "elmo-input")
    tuned = _paired("ner", "ner", "elmo-input", "elmo-input-finetuned")
    g = {n: sizes[f"pos-{n}", "elmo-input"]["gain_mean"] for n in (250, 500, 4000)}
    expected = [
        f"POS on Brown {pos['pos', 'baseline']['test_mean']:.2f} → **{main['test_mean']:.2f}** token "
        f"accuracy with 2,000 training sentences ({main['gain_mean']:+.2f}, interval "
        f"{main['gain_low']:+.2f} to {main['gain_high']:+.2f}; version 1: "
        f"{v1pos['pos', 'elmo-input']['gain_mean']:+.2f}; a random-weight biLM of the same shape "
        f"adds {pos['pos', 'random-biLM-control']['gain_mean']:+.2f})",
        f"**{g[250]:+.1f}** with 250, {g[500]:+.1f} with 500, {g[4000]:+.1f} with 4,000",
        f"**{ner_main['gain_mean']:+.2f} span F1** over {len(ner_main['seeds'])} seeds (interval "
        f"{ner_main['gain_low']:+.2f} to {ner_main['gain_high']:+.2f}), where version 1 gave "
        f"{v1ner['ner', 'elmo-input']['gain_mean']:+.2f}",
        f"adds nothing more ({ner['ner', 'elmo-input-adapted']['gain_mean']:+.2f})",
        f"5-class sentiment {five['gain_mean']:+.2f} (interval {five['gain_low']:+.2f} to "
        f"{five['gain_high']:+.2f}, not significant)",
        f"all layers beat the last one on POS ({last['mean']:+.2f}, {last['low']:+.2f} to {last['high']:+.2f})",
        f"beats the input alone on POS ({both['mean']:+.2f})",
        f"costs {tuned['mean']:.1f} F1 on NER",
        f"{ptb['pos', 'elmo-input']['gain_mean']:+.1f} ± {ptb['pos', 'elmo-input']['gain_std']:.1f} token "
        f"accuracy over a weak, short-trained baseline ({ptb['pos', 'baseline']['test_mean']:.1f}), against "
        f"{ptb['pos', 'random-biLM-control']['gain_mean']:+.1f} ± {ptb['pos', 'random-biLM-control']['gain_std']:.1f}",
    ]
    # (the README writes a negative bound with a minus sign, U+2212)
    text = " ".join(_section(readme_text(), "## Task experiments").replace("\u2212", "-").split())
    assert_phrases_in(text, expected)
    # "with ELMo, 1,000 sentences beat the baseline's 4,000"; the interval excludes 0 only where
    # the README calls a gain significant (the sentiment one it calls not significant)
    assert "1,000 sentences beat the baseline's 4,000" in text
    assert sizes["pos-1000", "elmo-input"]["test_mean"] > sizes["pos-4000", "baseline"]["test_mean"]
    assert five["gain_low"] < 0 < five["gain_high"]


def test_the_readme_config_error_example_is_what_the_command_says(capsys, monkeypatch):
    """"Task experiments" quotes the error of a misspelt setting: its command says it (the
    config is checked before any data is read, so no corpus is needed)."""
    from elmo.cli import main
    text = " ".join(_section(readme_text(), "## Task experiments").split())
    m = re.search(r"\(`(elmo experiment [^`]+)` says `([^`]+)`", text)
    assert m, "the README's example of a config error is gone"
    monkeypatch.chdir(ROOT)
    assert main(m.group(1).split()[1:]) != 0
    err = capsys.readouterr().err
    assert m.group(2) in err and len(err.strip().splitlines()) == 1, err
