"""The markdown of ``elmo analyze``'s report: the paper's findings judged from the numbers,
and one part of the report per section, each followed by the command that recomputes it.

    text = render(results, model, out, config)    # results as run_analysis returns them

Nothing here computes a number: ``--report-only`` writes the report again from a folder's
``results.json`` alone.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ..redact import redact_url
from ..tasks.paired import signed
from ..text_files import decode_text
from .report import NEIGHBORS_BATCH_SIZE, SECTIONS, AnalysisConfig, command


# ----------------------------------------------------------------------------- findings
def paper_findings(results: dict) -> Dict[str, str]:
    """The paper's two layer findings, judged from the computed numbers.

    Each entry starts with ``holds``, ``does not hold``, ``not shown`` (difference within
    the bootstrap's 95% interval) or ``not tested``; where the untrained-copy control ran,
    its verdict follows, because a layer ordering that an untrained model shows as well
    comes from the architecture, not from what the biLM learned.
    """
    out = {}
    for name, section, claim in (("pos", "pos", "layer 1 is better than layer 2 for POS"),
                                 ("wsd", "wsd", "layer 2 is better than layer 1 for word senses")):
        res = results.get(section)
        if res is None:
            out[name] = f"not tested: the {section} section was not run ({claim})"
        elif "finding" not in res:
            out[name] = (f"not tested: the model has {_count(results['num_layers'] - 1, 'LSTM layer')}, "
                         f"the finding needs two ({claim})")
        else:
            out[name] = f"{res['finding']} [{claim}]"
            control = res.get("control_untrained", {}).get("finding")
            if control:
                out[name] += (f". The same comparison on an untrained copy of the model (random "
                              f"weights): {control}")
    return out


# ----------------------------------------------------------------------------- markdown
def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _count(n: int, noun: str) -> str:
    """``n noun``, the noun in the plural unless ``n`` is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _fixed(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, a value that rounds to zero without a sign (1 - cos of
    equal vectors comes out as -1e-8, printed ``-0.000``)."""
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


#: A hand-written reading of the numbers, kept in the output folder: the report shows it.
INTERPRETATION = "interpretation.md"


def read_interpretation(out: Path) -> Optional[str]:
    """The text of ``out``'s :data:`INTERPRETATION` file, stripped; None when there is none.

    A file that is not UTF-8 (one saved as Latin-1, say) is a ValueError naming it and the
    first bad byte: the codec's bare message named no file, a full run failed at its very
    end without a report, and ``--report-only`` blamed ``results.json`` for it."""
    path = Path(out) / INTERPRETATION
    if not path.is_file():
        return None
    return decode_text(path.read_bytes(), path, ValueError, expected="the report shows this hand-written "
                       "file, so save it as UTF-8 (or move it away)").strip()


def render(results: dict, model: str, out: Path, config: AnalysisConfig) -> str:
    """The markdown report for ``results`` (as :func:`~elmo.analysis.report.run_analysis` returns them), with the
    folder's :data:`INTERPRETATION` file, when there is one, after the findings. A URL's
    password in it (the model's, in its name and commands) is shown as ``***``."""
    n_lstm = results["num_layers"] - 1
    threads = results["torch"]["threads"]
    lstm = ("layer 1 is the biLSTM" if n_lstm == 1 else f"layers 1..{n_lstm} are the biLSTM")
    lines = [f"# What the layers of `{model}` hold", "",
             f"Model: `{model}`, {_count(n_lstm, 'LSTM layer')}, vectors of width {results['width']}. "
             f"Layer 0 is the character CNN (context-free); {lstm}.",
             ""]
    if str(model) == "fixture":
        lines += ["**A smoke run**: the bundled `fixture` holds the tiny weights of the "
                  "AllenNLP test fixture, so these numbers say nothing about ELMo.", ""]
    if results.get("model_fingerprint"):
        lines += [f"Weights fingerprint `{results['model_fingerprint']}` "
                  "(`elmo.model_digest.model_digest`: a hash of the options and "
                  "weights; a rerun on other weights under the same name gets another).", ""]
    if results.get("model_metadata"):
        lines += ["Model metadata: `" + json.dumps(results["model_metadata"], sort_keys=True)[:600]
                  + "`", ""]
    lines += [f"Everything below: `{command(model, out, config, threads=threads, sections=results['sections'])}`",
              "",
             "Numbers are from `results.json`; each table is followed by the command that "
             f"recomputes it.{_resampled_units(results)} Computed with torch "
             f"{results['torch']['version']} on {results['torch']['threads']} CPU thread(s)"
             f"{_torch_sections(results)}; another thread count can change the last digit.", "",
             "## The paper's two layer findings", ""]
    for key, text in results["findings"].items():
        lines.append(f"* **{'POS' if key == 'pos' else 'Word senses'}**: {text}")
    lines.append("")
    notes = read_interpretation(out)
    if notes is not None:
        lines += ["## Interpretation", "",
                  f"*Written by hand after reading the numbers below (`{INTERPRETATION}` in this "
                  "folder; a rerun keeps it and shows it here again, so check it still fits).*",
                  "", notes, ""]
    # (a section added to the report later may have run on another thread count)
    cmd = {name: command(model, out, config, name, (results.get("torch_sections") or {}).get(name, {})
                         .get("threads", threads)) for name in SECTIONS}
    if "pos" in results:
        lines += _render_pos(results["pos"], cmd["pos"])
    if "wsd" in results:
        lines += _render_wsd(results["wsd"], cmd["wsd"])
    if "neighbors" in results:
        lines += _render_neighbors(results["neighbors"], cmd["neighbors"], model, config)
    if "contrast" in results:
        lines += _render_contrast(results["contrast"], cmd["contrast"])
    if "similarity" in results:
        lines += _render_similarity(results["similarity"], cmd["similarity"], config.similarity_corpus)
    if "given_mix_weights" in results:
        w = results["given_mix_weights"]
        lines += ["## Mix weights given", "",
                  f"`{config.mix_weights}`: " + ", ".join(f"layer {j} {x:.3f}" for j, x in enumerate(w)),
                  ""]
        if results.get("given_mix_note"):
            lines += [f"**Note:** {results['given_mix_note']}.", ""]
        lines += ["![given mix weights](mix_weights_given.png)", ""]
    lines += ["## Time", "", ", ".join(f"{k} {v} s" for k, v in results["seconds"].items()), ""]
    # (a model URL, in its name and the commands, may hold a login: its password is not shown)
    return redact_url("\n".join(lines))


def _torch_sections(results: dict) -> str:
    """The sections that a later ``--only`` run computed with another torch or thread count,
    e.g. `` (similarity: torch 2.13.0+cpu on 1)`` ("" when there are none)."""
    other = results.get("torch_sections") or {}
    if not other:
        return ""
    return " (" + "; ".join(f"{name}: torch {t['version']} on {t['threads']}" for name, t in other.items()) + ")"


#: What each section's bootstrap intervals resample.
_RESAMPLED = {"pos": "test sentences (POS)", "wsd": "lemmas (WSD)",
              "similarity": "word pairs (word similarity)"}


def _resampled_units(results: dict) -> str:
    """The sentence saying what the bootstrap intervals of the sections present resample
    ("" when none of them has intervals)."""
    units = [unit for key, unit in _RESAMPLED.items() if key in results]
    if not units:
        return ""
    return f" Bootstrap intervals resample {', '.join(units[:-1])}{' or ' if len(units) > 1 else ''}{units[-1]}, 1000 times."


def _render_pos(r: dict, cmd: str) -> List[str]:
    lines = ["## POS: a linear probe per layer (paper Table 6)", "",
             f"Brown POS, reduced tags ({r['n_tags']} in training); probe trained on "
             f"{r['n_train_sentences']} train sentences ({r['n_train_tokens']} tokens), tested on "
             f"{r['n_test_sentences']} test sentences ({r['n_test_tokens']} tokens). Intervals: "
             "95%, resampling test sentences (they say how far the test sample could move a "
             "number, not how much another probe training run would).", "",
             "| representation | accuracy (%) | 95% interval |", "|---|---|---|", *_layer_rows(r),
             f"| mix of all layers | {_pct(r['mix'])} | {_span(r.get('mix_interval'))} |",
             *_control_rows(r, with_mix=True),
             f"| baseline: majority tag | {_pct(r['majority_tag'])} | |",
             f"| baseline: each word's majority tag | {_pct(r['word_majority_tag'])} | |",
             f"| baseline: layer 0 (context-free) | {_pct(r['layer0'])} | |", "",
             "Mix weights learned by the probe (softmax): "
             + ", ".join(f"layer {j} {w:.3f}" for j, w in enumerate(r["mix_weights"])), ""]
    if "layer1_minus_layer2" in r:
        b = r["layer1_minus_layer2"]
        lines += [f"Layer 1 minus layer 2: {signed(100 * b['diff'])} points "
                  f"(95% interval {100 * b['low']:+.2f} to {100 * b['high']:+.2f}).", ""]
    lines += [f"Reproduce: `{cmd}`", "", "![POS probe](pos.png) ![mix weights](mix_weights_pos.png)", ""]
    return lines


def _layer_rows(r: dict) -> List[str]:
    """Table rows of the score per layer, with its 95% interval when one was computed."""
    iv = r.get("layers_interval") or [None] * len(r["layers"])
    return [f"| layer {j} | {_pct(a)} | {_span(iv[j])} |" for j, a in enumerate(r["layers"])]


def _control_rows(r: dict, with_mix: bool = False) -> List[str]:
    """Table rows of the untrained-copy control, when it was run."""
    c = r.get("control_untrained")
    if not c:
        return []
    rows = [f"| control: layer {j} of an untrained copy | {_pct(a)} | |"
            for j, a in enumerate(c["layers"])]
    if with_mix:
        rows.append(f"| control: mix of an untrained copy | {_pct(c['mix'])} | |")
    return rows


def _span(interval: Optional[Sequence[float]]) -> str:
    """``[low, high]`` fractions as a percentage range (blank when not computed)."""
    return "" if not interval else f"{100 * interval[0]:.1f} to {100 * interval[1]:.1f}"


def _render_wsd(r: dict, cmd: str) -> List[str]:
    # results written before the sense centroids (no "method") are of 1-NN over train examples
    centroid = r.get("method") == "sense_centroid"
    method, short = (("the nearest sense centroid", "the centroids") if centroid
                     else ("1-nearest-neighbour", "1-NN"))
    lines = [f"## Word senses: {method} per layer (paper Table 5)", "",
             f"WordNet example sentences of {r['n_lemmas']} lemmas with examples in 2+ senses; "
             f"{r['n_train']} train and {r['n_test']} test occurrences"
             + ("; each sense is the mean of its train occurrences' vectors, and a test occurrence "
                "gets the sense of the nearest mean (cosine), as in the paper" if centroid else "")
             + f". {r['n_backoff']} test "
             f"occurrences had no train example of their lemma and backed off to the most frequent "
             f"SemCor sense; {r['n_test_sense_unseen']} test occurrences are of a sense with no "
             f"train example ({short} cannot get these right). Intervals: 95%, resampling lemmas.", "",
             "| representation | F1 (%) | 95% interval |", "|---|---|---|", *_layer_rows(r),
             *_control_rows(r),
             f"| baseline: most frequent sense | {_pct(r['mfs'])} | {_span(r.get('mfs_interval'))} |", "",
             f"Only the {r['n_test'] - r['n_test_sense_unseen']} test occurrences whose sense has a "
             "train example (accuracy %): "
             + ", ".join(f"layer {j} {_pct(a)}" for j, a in enumerate(r["layers_seen_senses"]))
             + f"; most frequent sense {_pct(r['mfs_seen_senses'])}"
             + ("; untrained copy: " + ", ".join(
                 f"layer {j} {_pct(a)}" for j, a in
                 enumerate(r["control_untrained"]["layers_seen_senses"]))
                if r.get("control_untrained", {}).get("layers_seen_senses") else "")
             + ".", ""]
    if "layer2_minus_layer1" in r:
        b = r["layer2_minus_layer1"]
        # a results.json written before the difference was of F1 holds one of accuracy
        # (``--report-only`` of it printed that as F1 points)
        unit = "F1 points" if b.get("metric") == "f1" else "points of accuracy"
        lines += [f"Layer 2 minus layer 1: {signed(100 * b['diff'])} {unit} "
                  f"(95% interval {100 * b['low']:+.2f} to {100 * b['high']:+.2f})"]
        s = r.get("layer2_minus_layer1_seen_senses")
        if s:
            lines[-1] += (f"; on the occurrences whose sense has a train example "
                          f"{signed(100 * s['diff'])} points ({100 * s['low']:+.2f} to "
                          f"{100 * s['high']:+.2f}). Only those can differ between layers")
        lines += [lines.pop() + ".", ""]
    p = r.get("pca_word")
    # (the command computes sense centroids now: it would not give a 1-NN report's numbers)
    later = "" if centroid else (" (this version computes the sense centroids with it, not the 1-NN "
                                 "of the numbers above)")
    lines += [f"Reproduce: `{cmd}`{later}", "", "![WSD](wsd.png)", ""]
    if p:
        lines += [f"The {p['n']} WordNet examples of `{p['lemma']}` ({p['pos']}, {p['senses']} "
                  "senses with the most examples), PCA per layer, coloured by synset:", "", "![sense PCA](sense_pca.png)", ""]
    return lines


def _render_neighbors(r: dict, cmd: str, model: str, config: AnalysisConfig) -> List[str]:
    lines = ["## Contextual neighbours (paper Table 4)", "",
             f"Corpus `{r['corpus']}`: {r['n_sentences']} sentences, {r['n_tokens']} tokens, "
             "exact cosine search. Static neighbours: layer 0 over the corpus words, GloVe 50d "
             "over its 400k words.", ""]
    for q in r["queries"]:
        lines += [f"**{q['word']}** in *{q['sentence']}*"
                  + (f" (a corpus sentence, {q['query_copies']} time(s): the query's own "
                     "occurrences are left out)" if q.get("query_copies") else ""), ""]
        for j, hits in enumerate(q["layers"], 1):
            lines.append(f"* layer {j}, any word: " + "; ".join(
                f"{h['context']} ({h['score']:.2f})" for h in hits))
        for j, hits in enumerate(q["same_word"], 1):
            lines.append(f"* layer {j}, other uses of *{q['word']}* ({q['occurrences']} in the "
                         "corpus): " + ("; ".join(f"{h['context']} ({h['score']:.2f})" for h in hits)
                                        or "none"))
        lines.append("* layer 0 (static): " + ", ".join(h["word"] for h in q["layer0_static"]))
        if q["glove"] is not None:
            lines.append("* GloVe (static): " + ", ".join(h["word"] for h in q["glove"]))
        elif q.get("glove_missing"):   # (the line was left out, though the header promises GloVe)
            lines.append(f"* GloVe (static): not available ({q['glove_missing']})")
        lines += [f"* reproduce one: `{_neighbors_command(q, r, model, config)} [--same-word]`", ""]
    lines += [f"Reproduce all: `{cmd}`", ""]
    return lines


def _neighbors_command(q: dict, r: dict, model: str, config: AnalysisConfig) -> str:
    """The ``elmo neighbors`` command line that gives query ``q`` of neighbour results ``r``
    again (shell-quoted, pasteable), with every setting that changes a number."""
    parts = ["elmo", "neighbors", q["sentence"], "--word", q["word"], "--model", str(model),
             "--corpus", r["corpus_spec"]]
    if r["max_sentences"]:
        parts += ["--max-sentences", str(r["max_sentences"])]
    parts += ["-k", str(config.neighbors_k)]     # (not the hits found: fewer on a small corpus)
    if q.get("glove") is None:   # GloVe was not there: the command would fail to fetch it, at its end
        parts.append("--no-glove")
    if config.batch_size != NEIGHBORS_BATCH_SIZE:
        parts += ["--batch-size", str(config.batch_size)]
    return " ".join(shlex.quote(p) for p in parts)



def _contrast_source(pairs: Optional[dict]) -> str:
    """Which pairs the contrast section measured, as its results record them (for results
    that record none, written before, the sentence the report had then)."""
    if pairs and pairs.get("source") != "built-in":
        return f"The pairs of `{pairs.get('source')}`."
    version = f" (version {pairs['version']})" if pairs and pairs.get("version") is not None else ""
    return f"The built-in set{version} was written before any model was run on it and is not tuned."


def _render_contrast(r: dict, cmd: str) -> List[str]:
    cats = r["categories"]
    n_layers = len(r["movement"]["words"])
    head = "| | " + " | ".join(f"layer {j}" for j in range(n_layers)) + " |"
    sep = "|---" * (n_layers + 1) + "|"
    lines = ["## Contrast pairs: same words, swapped relation", "",
             f"{r['n_items']} targets in {sum(c['n_pairs'] for c in cats.values())} pairs "
             "(" + ", ".join(f"{k} {v['n_pairs']}" for k, v in cats.items()) + "); "
             f"{_count(r['different_words'], 'pair')} whose sentences differ in their words. "
             + _contrast_source(r.get("pairs")), "",
             "How far vectors move between the two sentences of a pair (mean 1 - cosine), with "
             "the spread of random token pairs for scale:", "", head, sep]
    m = r["movement"]
    for key, name in (("words", "all words"), ("targets", "target words"),
                      ("sentence", "mean-pooled sentence"), ("spread", "spread (random tokens)")):
        lines.append(f"| {name} | " + " | ".join(_fixed(x) for x in m[key]) + " |")
    for name, c in cats.items():
        lines.append(f"| target words, {name} | "
                     + " | ".join(_fixed(x) for x in c["movement"]["targets"]) + " |")
    lines += ["", "A probe trained on half of the pairs, tested on the other half (and back), "
              "accuracy % on held-out targets / held-out pairs ranked the right way round; "
              "chance is 50 / 50 with two labels:", "", head, sep]
    control = r.get("control_untrained", {})
    for name, c in cats.items():
        chance = (f"; chance {_span(c['chance_range'])}" if c.get("chance_range") else "")
        if c.get("chance") and abs(c["chance"] - 0.5) > 1e-9:   # more than two labels
            chance = f"; {round(1 / c['chance'])} labels: chance {_pct(c['chance'])} on targets" + chance
        lines.append(f"| {name} ({c['n_pairs']} pairs{chance}) | " + " | ".join(
            f"{_pct(p['accuracy'])} / {_pct(p['pair_accuracy'])}" for p in c["probe"]) + " |")
        if name in control:
            lines.append(f"| {name}, untrained copy | " + " | ".join(
                f"{_pct(p['accuracy'])} / {_pct(p['pair_accuracy'])}" for p in control[name]) + " |")
    # (it said "must score exactly chance", which holds with two labels only: with more, a
    # category's chance is 1 / labels, and layer 0 scores 0 or 50% on each pair)
    lines += ["", "Layer 0 gives a word the same vector in both sentences, so it labels a pair's two "
              "targets alike and gets at most one of them right: with two labels exactly chance "
              "(50 / 50), a check of the set, not a finding. "
              + ("The *untrained copy* rows are the same architecture with fresh random "
                 "weights: word order alone lets a probe read cues such as `by the X` or "
                 "`X was`, so only the margin over that control is learned. " if control else "")
              + "With this few pairs one held-out target is several points. *chance* is the "
              "range (95%) that a coin flip scores on as many distinct rankings (a pair written "
              "in both orders counts once), from the binomial; the "
              "targets of one pair are not independent, so the true range is somewhat wider, "
              "and a score inside it is no evidence at all.", "", f"Reproduce: `{cmd}`", ""]
    return lines


def _rho(x: Optional[float]) -> str:
    """A correlation with three decimals; ``-`` where it is undefined."""
    return "-" if x is None else _fixed(x)


def _rho_span(interval: Optional[Sequence[float]]) -> str:
    return "" if not interval else f"{_fixed(interval[0])} to {_fixed(interval[1])}"


def _render_similarity(r: dict, cmd: str, config_corpus: Optional[str] = None) -> List[str]:
    sets, control = r["sets"], r.get("control_untrained") or {}
    names = list(sets)
    head = "| representation | " + " | ".join(f"{n} ({s['n_pairs']} pairs)" for n, s in sets.items()) + " |"
    n_layers = len(next(iter(sets.values()))["layers"])
    lines = ["## Word similarity: Spearman's rho per layer", "",
             "Each word embedded alone (a one-token sentence), cosine of the two words' vectors "
             "against the human scores. Layer 0 is the character CNN's context-free vector; layers "
             "1 and up are the LSTM's vectors of the word read with nothing around it, a function "
             "of the word type too, but of a context that no use of it in text has. Intervals: 95%, "
             "resampling pairs.", "", head, "|---" * (len(names) + 1) + "|"]
    for j in range(n_layers):
        lines.append(f"| layer {j} | " + " | ".join(
            f"{_rho(s['layers'][j])}{_in_parentheses(_rho_span(s['layers_interval'][j]))}" for s in sets.values()) + " |")
    for j in range(n_layers if control else 0):
        lines.append(f"| control: layer {j} of an untrained copy | "
                     + " | ".join(_rho(control[n][j]) for n in names) + " |")
    lines.append("")
    if r.get("glove_missing"):
        lines += [f"GloVe baseline: not available ({r['glove_missing']}).", ""]
    for name, s in sets.items():
        g = s.get("glove")
        if g is None:
            continue
        missing = ": " + _word_list(g["missing_words"], g["n_missing_words"]) if g["missing_words"] else ""
        lines += [f"**{name}**: GloVe 50d covers {g['n_pairs']} of {s['n_pairs']} pairs "
                  f"({_count(g['n_missing_words'], 'word')} missing{missing}). On those pairs: GloVe "
                  f"{_rho(g['rho'])}{_in_parentheses(_rho_span(g['interval']))}; "
                  + ", ".join(f"layer {j} {_rho(x)}" for j, x in enumerate(g["layers"])) + ".", ""]
    if _undefined_reasons(r):
        lines += ["A `-` is undefined: " + "; ".join(_undefined_reasons(r)) + ".", ""]
    lines += _sample_lines(r)
    if control:
        lines += ["The untrained copy's character CNN already reads spelling: words that share "
                  "letters get close vectors without any training, so only the margin over it is "
                  "learned.", ""]
    lines += _render_type_average(r.get("type_average"), config_corpus)
    lines += [f"Reproduce: `{cmd}`", "", "![word similarity](similarity.png)", ""]
    return lines


def _in_parentheses(text: str) -> str:
    """`` (text)``, or nothing for no text (an undefined rho has no interval: it read ``- ()``)."""
    return f" ({text})" if text else ""


def _undefined_reasons(r: dict) -> List[str]:
    """Why the rhos shown as ``-`` are undefined, sorted: those of each set's layers, and those
    of GloVe, of the layers on GloVe's pairs and of the type averages (whose dashes were
    explained by nothing, and GloVe's rho on 1 pair was printed ``- ()``)."""
    reasons = {u for s in r["sets"].values() for u in s["layers_undefined"] if u}
    for s in r["sets"].values():
        g = s.get("glove") or {}
        reasons |= {g.get("undefined"), *(g.get("layers_undefined") or [])}
    for s in (r.get("type_average") or {}).values():
        reasons |= {*s["layers_undefined"], *(s.get("alone_layers_undefined") or [])}
    return sorted(u for u in reasons if u)


#: Characters of a word that a report's list of words shows (a pair file's word may be long).
SHOWN_WORD = 40


def _word_list(words: Sequence[str], total: int) -> str:
    """``words`` (the first of ``total``) comma separated, ``...`` for the rest; a word past
    :data:`SHOWN_WORD` characters is cut, with its length (a 300-letter word filled the line)."""
    shown = [w if len(w) <= SHOWN_WORD else f"{w[:SHOWN_WORD]}… ({len(w)} characters)" for w in words]
    return ", ".join(shown) + (", ..." if total > len(words) else "")


def _sample_lines(r: dict) -> List[str]:
    """What to know of the pairs behind the rhos: a warning for each interval on fewer than
    :data:`~elmo.analysis.similarity.MIN_PAIRS` pairs (a set, GloVe's share of it, the pairs
    the corpus covers), a set's repeated pairs, and the count of bootstrap draws left out as
    undefined where any was (results written before these counts have none)."""
    from .similarity import MIN_PAIRS
    few = []
    for name, s in r["sets"].items():
        few.append((f"{name}", s["n_pairs"]))
        if s.get("glove") and s["glove"]["interval"]:
            few.append((f"{name}, GloVe's pairs", s["glove"]["n_pairs"]))
    few += [(f"{name}, type averages", s["n_pairs"]) for name, s in (r.get("type_average") or {}).items()]
    lines = [f"**Warning: {name} has only {_count(n, 'pair')}**: below {MIN_PAIRS} pairs its intervals say "
             f"little, since resampling so few pairs draws the same few again and again (an interval can "
             f"collapse to one value, e.g. 1.000 to 1.000)." for name, n in few if 0 < n < MIN_PAIRS]
    for name, s in r["sets"].items():
        again = s.get("repeated_pairs") or []
        if again:
            shown = ", ".join(f"{a}/{b}" for a, b in again[:10]) + (", ..." if len(again) > 10 else "")
            lines.append(f"**{name}**: {_count(len(again), 'pair')} {'repeats' if len(again) == 1 else 'repeat'} an earlier pair (the same two words, "
                         f"in either order), each counted in rho as often as listed: {shown}.")
    skipped = [f"{name}{how} layer {j}: {n}" for how, sets in (("", r["sets"]),
                                                              (", type averages", r.get("type_average") or {}))
               for name, s in sets.items() for j, n in enumerate(s.get("layers_undefined_draws") or []) if n]
    skipped += [f"{name}, GloVe: {s['glove']['undefined_draws']}" for name, s in r["sets"].items()
                if (s.get("glove") or {}).get("undefined_draws")]
    if skipped:
        lines.append("Intervals are over the resamples where rho is defined; left out as undefined (a "
                     "constant side): " + "; ".join(skipped) + ".")
    return [x for line in lines for x in (line, "")]


def _render_type_average(sets: Optional[dict], corpus: Optional[str]) -> List[str]:
    """The table of the type averages over ``corpus``, when they were computed."""
    if not sets:
        return []
    names = list(sets)
    n_layers = len(next(iter(sets.values()))["layers"])
    lines = [f"Type averages over `{corpus}`: each word the mean of its contextual vectors over its "
             "occurrences there (exact tokens), on the pairs both of whose words occur; the lone "
             "word's rho on those same pairs beside it:", "",
             "| representation | " + " | ".join(f"{n} ({s['n_pairs']} pairs)" for n, s in sets.items()) + " |",
             "|---" * (len(names) + 1) + "|"]
    for j in range(n_layers):
        lines.append(f"| layer {j}, type average | " + " | ".join(
            f"{_rho(s['layers'][j])}{_in_parentheses(_rho_span(s['layers_interval'][j]))}" for s in sets.values()) + " |")
        lines.append(f"| layer {j}, alone | " + " | ".join(_rho(s["alone_layers"][j]) for s in sets.values()) + " |")
    lines.append("")
    for name, s in sets.items():
        if s["n_missing_words"]:
            lines += [f"**{name}**: {_count(s['n_missing_words'], 'word')} of its pairs do not occur in the "
                      "corpus: " + _word_list(s["missing_words"], s["n_missing_words"]) + ".", ""]
    return lines
