"""The figures docs/DATA.md and the default model's card quote are those of the committed
files they come from, so a rebuilt corpus or a retrained model cannot leave them behind:

1. docs/DATA.md's "The mix (measured)" table and its summary line are docs/corpus_stats.json;
   its download sizes add up the pinned packages' sizes (elmo/data/fetch.py).
2. elmo/resources/default/MODEL_CARD.md: the data table is docs/corpus_stats.json, the
   held-out table is what experiments/default/compare_heldout.py prints, the training table is
   experiments/default/training.json (version 1) and experiments/default/v3/training.json
   (versions 2 and 3), the storage precision tables are experiments/default/precision.json,
   and the parameter counts and totals are the model's metadata.json.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Dict, List

from test_readme import ROOT, assert_phrases_in

DATA_PAGE = ROOT / "docs" / "DATA.md"
CARD = ROOT / "elmo" / "resources" / "default" / "MODEL_CARD.md"
STATS = json.loads((ROOT / "docs" / "corpus_stats.json").read_text(encoding="utf-8"))


def _table(path, heading: str) -> Dict[str, List[str]]:
    """The first table after the line ``heading``: first cell -> the other cells (bold marks
    dropped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    rows: Dict[str, List[str]] = {}
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]
        if not set(cells[0]) <= set("-:"):
            rows[cells[0]] = cells[1:]
    assert rows, f"{path}: no table after {heading!r}"
    return rows


def _prose(path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def test_the_data_pages_mix_is_the_committed_corpus_stats():
    table = _table(DATA_PAGE, "### The mix (measured)")
    wrong = []
    for name, s in STATS["sources"].items():
        label = {"brown": "brown (train files)", "wordnet": "wordnet (glosses)"}.get(name, name)
        expected = [f"{n:,}" for n in (s["raw_words"], s["dropped_cleaning"], s["dropped_task_overlap"],
                                       s["dropped_duplicates_heldout"] + s["dropped_duplicates_train"],
                                       s["train_sentences"], s["train_tokens"], s["train_words"],
                                       s["heldout_tokens"])]
        if table.get(label) != expected:
            wrong.append((label, table.get(label), expected))
    t = STATS["totals"]
    total = [f"{t['raw_words']:,}", "", "", "", f"{t['train_sentences']:,}", f"{t['train_tokens']:,}",
             f"{t['train_words']:,}", f"{t['heldout_tokens']:,}"]
    if table.get("total") != total:
        wrong.append(("total", table.get("total"), total))
    assert len(table) == len(STATS["sources"]) + 2, sorted(table)   # the header, the sources, the total
    assert not wrong, wrong
    summary = (f"`train.txt`: {t['train_sentences']:,} sentences, {t['train_tokens'] / 1e6:.2f}M tokens, "
               f"{t['train_words'] / 1e6:.2f}M words")
    held = (f"Held out: {t['heldout_sentences']:,} sentences, {t['heldout_tokens']:,} tokens in "
            f"{len(STATS['sources'])} files.")
    text = _prose(DATA_PAGE)
    assert summary in text and held in text, (summary, held)
    seconds = round(STATS["seconds"])
    assert f"`elmo data build-corpus` {seconds // 60} min {seconds % 60} s" in text


def test_the_data_pages_download_sizes_add_up_the_pinned_packages():
    """`--all` fetches every package but the withdrawn BIG-bench release; the page rounds."""
    from elmo.data.fetch import PACKAGES
    offered = sum(p.size_mb for name, p in PACKAGES.items() if name != "bigbench")
    text = _prose(DATA_PAGE)
    quoted = re.search(r"# every corpus still offered \(about (\d+) MB of downloads\)", text)
    assert quoted, "docs/DATA.md's `elmo data get --all` line no longer gives its download size"
    assert abs(int(quoted.group(1)) - offered) <= 5, (quoted.group(1), offered)
    assert f"The {PACKAGES['bigbench'].size_mb:.0f} MB BIG-bench source archive" in text


def test_the_cards_data_table_is_the_committed_corpus_stats():
    table = _table(CARD, "## Data")
    names = ["brown", "sotu", "moby-dick", "shakespeare", "milton", "kjv", "wikipedia", "wiki-summaries",
             "xsum", "wikihow", "movie-dialog", "wordnet"]
    assert sorted(names) == sorted(STATS["sources"])
    rows = [cells for label, cells in table.items() if label not in ("source", "total")]
    got = [cells[:3] for cells in rows]
    expected = [[f"{STATS['sources'][n][k]:,}" for k in ("train_words", "train_tokens", "heldout_tokens")]
                for n in names]
    assert got == expected
    t = STATS["totals"]
    assert table["total"][:3] == [f"{t[k]:,}" for k in ("train_words", "train_tokens", "heldout_tokens")]


def test_the_cards_heldout_table_is_what_compare_heldout_prints():
    printed = subprocess.run(
        [sys.executable, "experiments/default/compare_heldout.py", "experiments/default/v2/heldout_ppl_v1.json",
         "experiments/default/v2/heldout_ppl_v2.json", "experiments/default/v3/heldout_ppl_v3.json",
         "--names", "v1", "v2", "v3"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    table_lines = [line for line in printed.splitlines() if line.startswith("|")]
    card = CARD.read_text(encoding="utf-8").splitlines()
    start = card.index(table_lines[0])
    assert card[start:start + len(table_lines)] == table_lines


def _phases() -> List[dict]:
    phases = []
    for path in ("experiments/default/training.json", "experiments/default/v3/training.json"):
        phases += json.loads((ROOT / path).read_text(encoding="utf-8"))["phases"]
    return phases


def test_the_cards_training_table_is_the_runs_records():
    table = _table(CARD, "## Training")
    phases = _phases()
    steps = [p["tokens"] // (128 * 20) for p in phases]
    assert table["steps (128 x 20 tokens)"] == [f"{n:,}" for n in steps] + [f"{sum(steps):,}"]
    tokens = [p["tokens"] for p in phases]
    assert table["tokens seen"][:-1] == [f"{n:,}" for n in tokens]
    assert table["tokens seen"][-1].startswith(f"{sum(tokens):,} ")
    seconds = [round(p["elapsed_s"], -1) if i >= 2 else round(p["elapsed_s"]) for i, p in enumerate(phases)]
    label = "training time (the trainer's clock: steps only)"
    assert table[label][:-1] == [f"{s:,.0f} s" for s in seconds]
    assert table[label][-1] == f"{sum(seconds):,.0f} s = {sum(seconds) / 3600:.1f} h"
    rates = [f"{p['tokens_per_s']:,.0f}" for p in phases]
    assert table["tokens/s"] == rates + [f"{sum(tokens) / sum(seconds):,.0f}"]
    metadata = json.loads((CARD.parent / "metadata.json").read_text(encoding="utf-8"))
    assert metadata["tokens_total"] == sum(tokens) and metadata["steps"] == sum(steps[2:])
    assert abs(metadata["elapsed_s"] - sum(seconds[2:])) < 1


def test_the_cards_validation_row_is_each_phases_last_evaluation():
    table = _table(CARD, "## Training")
    valid = {}
    for path in ("experiments/default/training.json", "experiments/default/v3/training.json"):
        record = json.loads((ROOT / path).read_text(encoding="utf-8"))
        valid.update({(path, v["step"]): v["ppl"] for v in record["valid"]})
    ends = [("experiments/default/training.json", 1885), ("experiments/default/training.json", 3820)]
    ends += [("experiments/default/v3/training.json", p["end_step"]) for p in _phases()[2:]]
    got = [cell.split()[0] for cell in table["validation perplexity at the end, average"][:-1]]
    assert got == [f"{valid[end]:.1f}" for end in ends]


def test_the_cards_precision_tables_are_precision_json():
    record = json.loads((ROOT / "experiments/default/precision.json").read_text(encoding="utf-8"))
    layers = _table(CARD, "## Storage precision: why the softmax is float16 and the biLM float32")
    for a in record["activations"]:
        row = next(cells for label, cells in layers.items() if label.split()[0] == str(a["layer"]))
        assert row == [f"{a['max_abs_diff']:.4f}", f"{a['ref_max_abs']:.2f}", f"{a['ref_rms']:.2f}",
                       f"{a['min_cosine']:.7f}"], (a["layer"], row)
    text = CARD.read_text(encoding="utf-8")
    for label, key in (("float32", "reference"), ("biLM float16, softmax float32", "candidate_bilm"),
                       ("biLM float32, softmax float16", "candidate_softmax"), ("both float16", "candidate")):
        p = record["perplexity"][key]
        line = f"| {label} | {p['ppl_fwd']:.4f} / {p['ppl_bwd']:.4f} / {p['ppl']:.4f} |"
        assert line in text, line
        if key != "reference":
            assert f"{line} {100 * p['relative_change']['ppl']:+.4f}% |" in text, label
    assert f"sentences ({record['tokens']:,} tokens)" in _prose(CARD)


def test_the_cards_headline_figures_are_the_records():
    metadata = json.loads((CARD.parent / "metadata.json").read_text(encoding="utf-8"))
    v3 = json.loads((ROOT / "experiments/default/v3/training.json").read_text(encoding="utf-8"))
    corpus_tokens = v3["start"]["corpus"]["tokens"]
    text = _prose(CARD)
    expected = [
        f"In all it has seen {metadata['tokens_total'] / 1e6:.1f}M tokens "
        f"({metadata['tokens_total'] / corpus_tokens:.1f} epochs)",
        f"({metadata['tokens_total'] / corpus_tokens:.2f} epochs of the {corpus_tokens / 1e6:.2f}M tokens",
        f"| parameters | {v3['start']['params_bilm']:,} in the biLM, "
        f"{v3['start']['params'] - v3['start']['params_bilm']:,} in the softmax ({v3['start']['params']:,} in all) |",
    ]
    assert_phrases_in(text, expected)
    assert metadata["params"] == v3["start"]["params"]


def test_the_brown_description_of_data_list_gives_the_pages_word_count():
    """`elmo data list` printed "Brown corpus raw text (1.16M words ...)" beside its own words
    column of 1,022,924 (1.16M is about the count of all tokens, punctuation included); the
    page's table gives the words."""
    from elmo.data.sources import SOURCES
    row = _table(DATA_PAGE, "## The corpora")["`brown`"]
    words = re.search(r"([\d.]+M) words", row[-1])
    assert words, row
    assert f"({words.group(1)} words," in SOURCES["brown"].description, SOURCES["brown"].description
