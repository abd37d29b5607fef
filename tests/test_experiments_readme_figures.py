"""experiments/README.md's tables quote the committed experiments: each cell of "Main
comparison", "Sample efficiency" and "Ablations" (and the paired differences below it) is
what `elmo experiment-table` or `experiments/paired_difference.py` gives for the folders under
experiments/results/, recomputed from their runs. A rerun that changes a results.json without
the page fails here, naming the row."""
from __future__ import annotations

from typing import Dict, List, Optional

from test_readme import ROOT, assert_phrases_in
from test_readme_quoted_output import _paired, _rows

PAGE = ROOT / "experiments" / "README.md"


def _table(heading: str) -> Dict[str, List[str]]:
    """The first table after ``heading``: first cell -> the other cells, bold marks dropped and
    minus signs (U+2212) written as '-'. A row whose first cell is empty continues the one
    above (its key is that row's first cell plus ' / ' plus the second cell)."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(heading)
    rows: Dict[str, List[str]] = {}
    last = ""
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip().replace("**", "").replace("\u2212", "-") for c in line.strip().strip("|").split("|")]
        if (cells[0] and set(cells[0]) <= set("-:")) or cells[0] in ("task (metric)", "training sentences", "task", "question", "representation", "layer"):
            continue
        if cells[0]:
            last = cells[0]
            rows[last] = cells[1:]
        else:
            rows[f"{last} / {cells[1]}"] = cells[1:]
    assert rows, f"{PAGE}: no table after {heading!r}"
    return rows


def _mean_std(row: dict, key: str = "test") -> str:
    return f"{row[f'{key}_mean']:.2f} ± {row[f'{key}_std']:.2f}"


def _gain(row: Optional[dict]) -> str:
    return "" if row is None else f"{row['gain_mean']:+.2f} ± {row['gain_std']:.2f}"


def test_the_main_comparison_quotes_the_committed_results():
    table = _table("## Main comparison")
    lines = {   # row -> (folder, task, ELMo variant, control variant or None, version 1 folder or None)
        "POS, Brown, 2,000 sentences (token accuracy %)": ("pos", "pos", "elmo-input", True, "v1/pos"),
        "NER, Twitter (span F1 %)": ("ner", "ner", "elmo-input", True, "v1/ner"),
        "NER, biLM adapted to the tweets": ("ner", "ner", "elmo-input-adapted", False, "v1/ner"),
        "Sentiment, 5 classes (accuracy %)": ("sentiment", "sentiment5", "elmo-input", True, "v1/sentiment"),
        "Sentiment, binary (accuracy %)": ("sentiment", "sentiment2", "elmo-input", True, "v1/sentiment"),
        "Sentiment, mean rating as a number (Pearson r ×100)":
            ("sentiment-rating", "sentiment_rating", "elmo-input", True, None),
        "Topic, BBC (accuracy %)": ("topic", "topic", "elmo-input", True, "v1/topic"),
    }
    wrong = []
    for label, (folder, task, variant, control, v1) in lines.items():
        rows = _rows(folder)
        elmo = rows[task, variant]
        expected = [_mean_std(rows[task, "baseline"]), _mean_std(elmo), _gain(elmo),
                    f"{elmo['gain_low']:+.2f} to {elmo['gain_high']:+.2f}", f"{elmo['gain_t']:.2f}",
                    _gain(rows[task, "random-biLM-control"] if control else None),
                    _gain(_rows(v1)[task, variant]) if v1 else "(not run)", str(len(elmo["seeds"]))]
        if table.get(label) != expected:
            wrong.append((label, table.get(label), expected))
    for label, folder in (("VitaminC, 4,000 pairs (accuracy %), version 1", "vitaminc"),
                          ("VitaminC, all 44,910 pairs (accuracy %), version 1", "vitaminc-full")):
        rows = _rows(folder)
        elmo = rows["vitaminc", "elmo-input"]
        control = rows.get(("vitaminc", "random-biLM-control"))
        expected = [_mean_std(rows["vitaminc", "baseline"]), _mean_std(elmo), _gain(elmo), "",
                    f"{elmo['gain_t']:.2f}", _gain(control), "(this row)", str(len(elmo["seeds"]))]
        if table.get(label) != expected:
            wrong.append((label, table.get(label), expected))
    assert not wrong, wrong


def test_the_sample_efficiency_table_quotes_the_committed_results():
    table = _table("## Sample efficiency (the paper's Figure 1)")
    sizes, v1sizes, pos, v1pos = (_rows(f) for f in ("pos-sample-efficiency", "v1/pos-sample-efficiency",
                                                      "pos", "v1/pos"))
    wrong = []
    for size in (250, 500, 1000, 2000, 4000):
        # the 2,000 row is pos.json's experiment
        rows, v1, task = (pos, v1pos, "pos") if size == 2000 else (sizes, v1sizes, f"pos-{size}")
        expected = [_mean_std(rows[task, "baseline"]), _mean_std(rows[task, "elmo-input"]),
                    _gain(rows[task, "elmo-input"]), _gain(rows[task, "random-biLM-control"]),
                    _gain(v1[task, "elmo-input"])]
        if table.get(f"{size:,}") != expected:
            wrong.append((size, table.get(f"{size:,}"), expected))
    assert not wrong, wrong


_ABLATIONS = ("elmo-input", "all-lambda-1", "last-only", "elmo-output", "elmo-input-output",
              "elmo-input-finetuned")


def test_the_ablation_table_quotes_the_committed_results():
    table = _table("## Ablations (the paper's Tables 2 and 3, and more)")
    wrong = []
    for name, task, label in (("POS", "pos", "POS (accuracy %)"), ("NER", "ner", "NER (F1 %)")):
        for version, folder in (("3", task), ("1", f"v1/{task}")):
            rows = _rows(folder)
            scores = [f"{_mean_std(rows[task, v])} ({len(rows[task, v]['seeds'])})" for v in _ABLATIONS]
            gains = [_gain(rows[task, v]) for v in _ABLATIONS]
            for key, expected in ((f"{label}, version {version}", scores),
                                  (f"{name} gain over the baseline, version {version}", gains)):
                if table.get(key) != expected:
                    wrong.append((key, table.get(key), expected))
    assert not wrong, wrong


def _difference(folder: str, task: str, a: str, b: str) -> str:
    d = _paired(folder, task, a, b)
    return (f"{d['mean']:+.2f} ± {d['std']:.2f} ({d['seeds']} seeds), {d['low']:+.2f} to "
            f"{d['high']:+.2f}, paired t {d['t']:.2f}")


def test_the_paired_differences_quote_paired_difference_py():
    table = _table("The paper's questions, as differences paired by seed with 95% intervals")
    questions = {   # the row's question -> (variant a, variant b)
        "all layers - last layer (Table 2)": ("elmo-input", "last-only"),
        "λ 1 - λ 0.001": ("all-lambda-1", "elmo-input"),
        "input - output (Table 3)": ("elmo-input", "elmo-output"),
        "input and output - input": ("elmo-input-output", "elmo-input"),
        "fine-tuned - frozen": ("elmo-input-finetuned", "elmo-input"),
        "adapted - plain": ("elmo-input-adapted", "elmo-input"),
        "trained - random control": ("elmo-input", "random-biLM-control"),
    }
    wrong = []
    for question, (a, b) in questions.items():
        for task in ("POS", "NER"):
            key = question if table.get(question, [""])[0] == task else f"{question} / {task}"
            if key not in table:
                continue
            t = task.lower()
            expected = [task, _difference(t, t, a, b), _difference(f"v1/{t}", t, a, b)]
            if table[key] != expected:
                wrong.append((key, table[key], expected))
    assert len(table) == 13, sorted(table)   # every row was checked above
    assert not wrong, wrong


def test_the_opening_describes_the_shipped_model_as_its_records_do():
    """The opening's biLM figures (parameters, tokens, epochs, hours, held-out perplexity of
    versions 3 and 1) are those of the model's records, as its card gives them."""
    import json
    import math
    card = ROOT / "elmo" / "resources" / "default"
    metadata = json.loads((card / "metadata.json").read_text(encoding="utf-8"))
    v3 = json.loads((ROOT / "experiments/default/v3/training.json").read_text(encoding="utf-8"))
    v1 = json.loads((ROOT / "experiments/default/training.json").read_text(encoding="utf-8"))
    corpus = v3["start"]["corpus"]["tokens"]
    hours = (v1["elapsed_s"] + v3["elapsed_s"]) / 3600

    def pooled(path: str) -> float:
        """exp of the mean of both directions' losses over every source's targets."""
        sources = json.loads((ROOT / path).read_text(encoding="utf-8"))["sources"].values()
        loss = sum((s["loss_fwd"] + s["loss_bwd"]) / 2 * s["targets"] for s in sources)
        return math.exp(loss / sum(s["targets"] for s in sources))

    expected = [
        f"{v3['start']['params_bilm'] / 1e6:.1f}M biLM parameters, trained here on "
        f"{metadata['tokens_total'] / 1e6:.1f}M tokens ({metadata['tokens_total'] / corpus:.1f} epochs of a corpus "
        f"of 10.7M words, {corpus / 1e6:.1f}M tokens) in {hours:.1f} hours, held-out perplexity "
        f"{pooled('experiments/default/v3/heldout_ppl_v3.json'):.1f}",
        f"({v1['tokens'] / 1e6:.1f}M tokens, perplexity {pooled('experiments/default/v2/heldout_ppl_v1.json'):.1f})",
    ]
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert_phrases_in(text, expected)


def _similarity(folder: str) -> dict:
    import json
    return json.loads((ROOT / "experiments/analysis" / folder / "results.json").read_text(encoding="utf-8"))["similarity"]


def _rho(value: float) -> str:
    return f"{value:.3f}".replace("-0.000", "0.000")


def _with_interval(value: float, interval) -> str:
    return f"{_rho(value)} ({_rho(interval[0])} to {_rho(interval[1])})"


def test_the_word_similarity_tables_quote_the_analysis_reports():
    """"Word similarity of the shipped models": version 3's rows, the untrained copy and GloVe
    are experiments/analysis/default/results.json; versions 2 and 1 their similarity/ folders;
    the type-average table the same report's `type_average`."""
    v3 = _similarity("default")
    table = _table("## Word similarity of the shipped models (`elmo analyze --only similarity`)")
    sets = ("wordsim353", "simlex999")
    expected = {f"version 3, layer {j}": [_with_interval(v3["sets"][s]["layers"][j], v3["sets"][s]["layers_interval"][j])
                                          for s in sets] for j in range(3)}
    for version, folder in (("2", "default-v2/similarity"), ("1", "default-v1/similarity")):
        old = _similarity(folder)["sets"]
        expected[f"version {version}, layer 0 / 1 / 2"] = [" / ".join(_rho(x) for x in old[s]["layers"]) for s in sets]
    expected["untrained copy, layer 0 / 1 / 2"] = [" / ".join(_rho(x) for x in v3["control_untrained"][s])
                                                   for s in sets]
    expected["GloVe 50d (6B tokens)"] = [_with_interval(v3["sets"][s]["glove"]["rho"], v3["sets"][s]["glove"]["interval"])
                                         for s in sets]
    assert table == expected
    context = _table("**Words in their contexts (version 3).**")
    typed = v3["type_average"]
    assert context == {str(j): [cell for s in sets for cell in (
        _with_interval(typed[s]["layers"][j], typed[s]["layers_interval"][j]), _rho(typed[s]["alone_layers"][j]))]
        for j in range(3)}
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert (f"so {typed['wordsim353']['n_pairs']} of WordSim-353's pairs and {typed['simlex999']['n_pairs']} "
            f"of SimLex-999's have both words there") in text


def _mixes(folder: str, task: str, variant: str, position: str = "input") -> List[dict]:
    """Each seed's learned mix (``weights``: softmax(s) per layer, ``gamma``) of one variant."""
    import json
    results = json.loads((ROOT / "experiments/results" / folder / "results.json").read_text(encoding="utf-8"))
    return [run["elmo"]["mix_weights"][position] for run in results["runs"]
            if run["task"] == task and run["variant"] == variant]


def _mean_weights(mixes: List[dict]) -> str:
    """'0.27 / 0.46 / 0.27': each layer's weight, mean over seeds."""
    return " / ".join(f"{sum(m['weights'][j] for m in mixes) / len(mixes):.2f}" for j in range(3))


def _mean_gamma(mixes: List[dict]) -> float:
    return sum(m["gamma"] for m in mixes) / len(mixes)


def test_the_learned_weights_quote_the_runs_mixes():
    """The Ablations' "Learned weights" and "Frozen vs fine-tuned" bullets and the rating
    task's paragraph quote the mixes each run recorded (mean over seeds; NER's γ and the random
    control's layer 0 as the range over seeds)."""
    pos, ner = _mixes("pos", "pos", "elmo-input"), _mixes("ner", "ner", "elmo-input")
    five, two = _mixes("sentiment", "sentiment5", "elmo-input"), _mixes("sentiment", "sentiment2", "elmo-input")
    topic, rating = _mixes("topic", "topic", "elmo-input"), _mixes("sentiment-rating", "sentiment_rating", "elmo-input")
    control = [m["weights"][0] for m in _mixes("pos", "pos", "random-biLM-control")]
    classifiers = [_mean_gamma(m) for m in (five, two, topic)]
    expected = [
        f"(POS {_mean_weights(pos)} for layers 0 / 1 / 2; NER {_mean_weights(ner)}; 5-class sentiment "
        f"{_mean_weights(five)}; topic {_mean_weights(topic)};",
        f"at the output of the POS tagger the top layer gets the most "
        f"({_mean_weights(_mixes('pos', 'pos', 'elmo-output', 'output'))})",
        f"γ is near 1 for the taggers (POS {_mean_gamma(pos):.2f}, NER {min(m['gamma'] for m in ner):.2f} to "
        f"{max(m['gamma'] for m in ner):.2f}) and {min(classifiers):.2f} to {max(classifiers):.2f} for the sentence "
        f"and document classifiers",
        f"the POS mix puts {min(control):.2f} to {max(control):.2f} on layer 0",
        f"(POS {_mean_weights(_mixes('pos', 'pos', 'elmo-input-finetuned'))}, NER "
        f"{_mean_weights(_mixes('ner', 'ner', 'elmo-input-finetuned'))} for layers 0 / 1 / 2)",
        f"close to sentiment5's: {_mean_weights(rating)}, γ {_mean_gamma(rating):.2f} (sentiment5: "
        f"{_mean_weights(five)}, γ {_mean_gamma(five):.2f})",
    ]
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert_phrases_in(text, expected)
    # the layer-1 maximum the bullet names, and its exception with little labelled data
    for mixes in (pos, ner, five, topic):
        means = [sum(m["weights"][j] for m in mixes) / len(mixes) for j in range(3)]
        assert max(range(3), key=means.__getitem__) == 1, means
    for size in (250, 500):   # "about a third each"
        means = [float(x) for x in _mean_weights(_mixes("pos-sample-efficiency", f"pos-{size}", "elmo-input")).split(" / ")]
        assert max(means) - min(means) < 0.1, (size, means)


def test_the_speed_section_quotes_the_recorded_cache_seconds():
    import json

    def cache(folder: str) -> dict:
        path = ROOT / "experiments/results" / folder / "results.json"
        return json.loads(path.read_text(encoding="utf-8"))["bilm_cache_seconds"]
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    expected = (f"{cache('ner')['default']:.1f} s for the 2,295 distinct NER sentences on the default biLM, "
                f"{cache('vitaminc')['random:default']:.1f} s for the 14,049 VitaminC texts on the random control")
    assert expected in text, expected
    pos, v1 = _rows("pos"), _rows("v1/pos")
    frozen, tuned = pos["pos", "elmo-input"]["seconds"], pos["pos", "elmo-input-finetuned"]["seconds"]
    v1_ratio = v1["pos", "elmo-input-finetuned"]["seconds"] / v1["pos", "elmo-input"]["seconds"]
    seeds = len(pos["pos", "elmo-input"]["seeds"])
    ratio = (f"took {tuned / frozen:.1f} times as long as the frozen one ({tuned:,.0f} s against "
             f"{frozen:,.0f} s for {seeds} seeds; {v1_ratio:.1f} times on version 1)")
    assert ratio in text, ratio


def test_the_adaptation_perplexities_quote_the_committed_report():
    """"from 434 to 135" is the held-out perplexity before and after `experiments/adapt_ner.sh`
    in its committed report, and the report's start is the one the NER experiment's adapted
    biLM recorded (the same model, the same held-out tweets)."""
    import json

    report = json.loads((ROOT / "experiments" / "results" / "ner" / "adaptation_report.json").read_text())
    before, after = report["before"]["ppl"], report["after"]["ppl"]
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert f"from {before:.0f} to {after:.0f} (`results/ner/adaptation_report.json`" in text
    results = json.loads((ROOT / "experiments" / "results" / "ner" / "results.json").read_text())
    adapted = results["bilms"]["runs/adapted/twitter-ner/model"]["metadata"]
    assert adapted["heldout_ppl_before"]["sentences"] == report["heldout_sentences"] == report["before"]["sentences"]
    assert abs(adapted["heldout_ppl_before"]["ppl"] / before - 1) < 1e-4
