"""The sections of ``elmo analyze``: one runner per section, which computes its numbers and
draws its pictures into a folder.

    res = SECTION_RUNNERS["pos"](embedder, config, out, progress=False, digest=None)

Each runner takes the :class:`~elmo.analysis.report.AnalysisConfig` of the run and ``digest``,
the :func:`~elmo.model_digest.model_digest` of the embedder's model where the report has it
(the neighbour index is keyed by it; None: hashed where needed), and returns the
section's results (plain data for ``results.json``); :mod:`elmo.analysis.report` runs them in
order and :mod:`elmo.analysis.markdown` writes them up.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from .report import NEIGHBOR_QUERIES, AnalysisConfig, index_home, resolve_corpus, similarity_sets


def _run_pos(embedder, config: AnalysisConfig, out: Path, progress: bool = False,
             digest: Optional[str] = None) -> dict:
    from . import datasets, plots
    from .probes import pos_probe

    folder = datasets.corpus_dir("brown-pos")
    train = datasets.brown_pos(folder, "train", config.pos_train_sentences or None, config.seed)
    test = datasets.brown_pos(folder, "test", config.pos_test_sentences or None, config.seed)
    res = pos_probe(embedder, train, test, config.pos_l2, config.pos_iterations, config.seed,
                    config.batch_size, progress)
    if config.untrained_control:
        from .vectors import untrained_copy
        control = pos_probe(untrained_copy(embedder.bilm, config.seed), train, test, config.pos_l2,
                            config.pos_iterations, config.seed, config.batch_size, progress)
        res["control_untrained"] = {k: control[k] for k in ("layers", "mix", "finding") if k in control}
    scores = {f"layer {j}": a for j, a in enumerate(res["layers"])}
    scores["mix"] = res["mix"]
    intervals = {f"layer {j}": iv for j, iv in enumerate(res["layers_interval"])}
    intervals["mix"] = res["mix_interval"]
    plots.layer_bars(scores, {"majority tag": res["majority_tag"],
                              "word's majority tag": res["word_majority_tag"]},
                     "POS: linear probe accuracy (Brown test), 95% intervals", "accuracy (%)",
                     out / "pos.png", intervals)
    plots.mix_weights(res["mix_weights"], out / "mix_weights_pos.png",
                      "mix weights learned by the POS probe")
    return res


def _run_wsd(embedder, config: AnalysisConfig, out: Path, progress: bool = False,
             digest: Optional[str] = None) -> dict:
    from . import datasets, plots, wsd

    folder = datasets.corpus_dir("wordnet")
    examples = datasets.wordnet_examples(folder)
    senses = datasets.wordnet_senses(folder)
    res = wsd.wsd_eval(embedder, examples, senses, config.wsd_test_fraction, config.seed,
                       config.wsd_max_lemmas or None, config.batch_size, progress)
    if config.untrained_control:
        from .vectors import untrained_copy
        control = wsd.wsd_eval(untrained_copy(embedder.bilm, config.seed), examples, senses,
                               config.wsd_test_fraction, config.seed,
                               config.wsd_max_lemmas or None, config.batch_size, progress)
        res["control_untrained"] = {k: control[k] for k in
                                    ("layers", "layers_seen_senses", "finding") if k in control}
    plots.layer_bars({f"layer {j}": f for j, f in enumerate(res["layers"])},
                     {"most frequent sense": res["mfs"]},
                     "WSD: nearest sense centroid F1 (WordNet examples), 95% intervals", "F1 (%)",
                     out / "wsd.png",
                     {f"layer {j}": iv for j, iv in enumerate(res["layers_interval"])})
    groups = pca_groups(examples)
    key = pca_key(groups, config.pca_word)
    items = groups[key]
    from .vectors import gathered_layers
    vecs = gathered_layers(embedder, [list(it.tokens) for it in items], [it.index for it in items],
                           config.batch_size)
    defs = datasets.wordnet_definitions(folder, {it.synset for it in items})
    names = [f"{it.synset}: {defs.get(it.synset, '')[:40]}" for it in items]
    plots.sense_pca(vecs, names, key[0], out / "sense_pca.png")
    res["pca_word"] = {"lemma": key[0], "pos": key[1], "n": len(items),
                       "senses": len({it.synset for it in items})}
    return res


#: Senses of the PCA picture's word: at most this many, those with the most examples.
PCA_SENSES = 5


def pca_groups(examples) -> dict:
    """The candidates of the sense PCA picture: (lemma, pos) -> its instances of the
    :data:`PCA_SENSES` senses with the most examples, for every ambiguous lemma."""
    from . import wsd

    return {k: _top_senses(v, PCA_SENSES) for k, v in wsd.ambiguous(wsd.instances(examples)).items()}


def pca_key(groups: dict, pca_word: Optional[str]) -> tuple:
    """The (lemma, pos) the sense PCA picture draws: ``pca_word``'s (``bank``: its part of
    speech with the most examples; ``bank/v``: that one, as the WSD results name lemmas), else
    the lemma with the most examples in its best-covered senses (ties: alphabetical)."""
    from . import wsd

    if not groups:   # (min() of nothing: "min() arg is an empty sequence")
        raise ValueError("no WordNet lemma has examples in 2 or more senses: there is no word for the "
                         "sense PCA picture")
    if not pca_word:
        return min(groups, key=lambda k: (-len(groups[k]), k))
    lemma, _, pos = pca_word.partition("/")   # ('bank/n' was looked up as the lemma 'bank/n')
    keys = [k for k in groups if k[0] == wsd.clean_lemma(lemma) and (not pos or k[1] == pos.lower())]
    if not keys:                              # ('Bank' found none: lemmas are lower case)
        speech = f" as part of speech {pos!r}" if pos else ""
        raise ValueError(f"--pca-word {pca_word!r}: no WordNet examples in 2+ senses{speech}")
    return max(keys, key=lambda k: len(groups[k]))


def _top_senses(items: list, n: int) -> list:
    """The instances of the ``n`` synsets with the most examples (ties: synset id)."""
    from collections import Counter

    counts = Counter(it.synset for it in items)
    keep = {s for s, _ in sorted(counts.items(), key=lambda sc: (-sc[1], sc[0]))[:n]}
    return [it for it in items if it.synset in keep]


def _run_neighbors(embedder, config: AnalysisConfig, out: Path, progress: bool = False,
                   digest: Optional[str] = None) -> dict:
    from . import datasets
    from .neighbors import cached_index, context, query_vectors, static_neighbors

    corpus = resolve_corpus(config.neighbors_corpus)
    from ..data.fetch import DATA_CACHE_HINT
    index = cached_index(embedder, corpus, index_home(), config.neighbors_sentences or None,
                         config.batch_size, writable_hint=DATA_CACHE_HINT, progress=progress, digest=digest)
    words, layer0 = index.word_types()
    glove_error = None
    try:
        glove_words, glove_vecs = datasets.glove(datasets.corpus_dir("glove-50d"))
    except Exception as e:                               # optional: report why it is missing
        glove_words, glove_vecs, glove_error = None, None, str(e)
    queries = []
    k = config.neighbors_k
    for sentence, word in NEIGHBOR_QUERIES:
        tokens = sentence.split()
        pos, vecs = query_vectors(embedder, tokens, word)
        own = index.copies(tokens, pos)      # the query itself is no neighbour of its own
        row: Dict[str, Any] = {"sentence": sentence, "word": word, "layers": [], "same_word": [],
                               "occurrences": len(index.occurrences(word)) - len(own), "query_copies": len(own)}
        hit = lambda h: {"word": h.word, "score": h.score,
                         "context": context(index.sentences[h.sentence], h.token, 5)}
        for j in range(1, index.num_layers):
            row["layers"].append([hit(h) for h in index.search(vecs[j], j, k, exclude=own)])
            row["same_word"].append([hit(h) for h in index.search(vecs[j], j, k, word=word, exclude=own)])
        row["layer0_static"] = [{"word": h.word, "score": h.score}
                                for h in static_neighbors(words, layer0, word, k, query=vecs[0])]
        row["glove"] = ([{"word": h.word, "score": h.score}
                         for h in static_neighbors(glove_words, glove_vecs, word.lower(), k)]
                        if glove_words is not None else None)
        row["glove_missing"] = glove_error
        queries.append(row)
    return {"corpus": str(corpus), "corpus_spec": config.neighbors_corpus,
            "max_sentences": config.neighbors_sentences, "n_sentences": len(index.sentences),
            "n_tokens": int(index.positions.shape[0]), "queries": queries}


def _run_contrast(embedder, config: AnalysisConfig, out: Path, progress: bool = False,
                  digest: Optional[str] = None) -> dict:
    from .contrast import contrast_eval, load_pairs, pairs_record

    from .vectors import untrained_copy

    path = Path(config.contrast_file) if config.contrast_file else None
    items = load_pairs(path)
    res = contrast_eval(embedder, items, config.seed, config.contrast_l2, config.batch_size, progress)
    # (which pairs: a report keeps this section only while its file or set is unchanged)
    res["pairs"] = pairs_record(path, items)
    if config.untrained_control:
        control = contrast_eval(untrained_copy(embedder.bilm, config.seed), items, config.seed,
                                config.contrast_l2, config.batch_size, progress)
        res["control_untrained"] = {name: c["probe"] for name, c in control["categories"].items()}
    return res


def similarity_corpus(config: AnalysisConfig) -> List[List[str]]:
    """The sentences of ``--similarity-corpus``; none is a ValueError naming it."""
    from .neighbors import read_corpus

    path = resolve_corpus(str(config.similarity_corpus))
    sentences = read_corpus(path)
    if not sentences:
        raise ValueError(f"--similarity-corpus {config.similarity_corpus}: {path} holds no sentences")
    return sentences


def _run_similarity(embedder, config: AnalysisConfig, out: Path, progress: bool = False,
                    digest: Optional[str] = None) -> dict:
    from . import datasets, plots
    from .similarity import similarity_eval
    from ..tasks.embeddings import glove_cased, load_glove

    sets = similarity_sets(config.similarity_sets)
    glove, glove_error = None, None
    try:
        where = str(datasets.corpus_dir("glove-50d"))
        glove = (*load_glove(where), glove_cased(where))
    except Exception as e:                               # optional, as in the neighbours: say why
        glove_error = str(e)
    corpus = similarity_corpus(config) if config.similarity_corpus else None
    res = similarity_eval(embedder, sets, glove, config.seed, config.batch_size, corpus=corpus,
                          progress=progress)
    res["glove_missing"] = glove_error
    if config.untrained_control:
        from .vectors import untrained_copy
        control = similarity_eval(untrained_copy(embedder.bilm, config.seed), sets, None, config.seed,
                                  config.batch_size, n_resamples=0, progress=progress)
        res["control_untrained"] = {name: c["layers"] for name, c in control["sets"].items()}
    plots.similarity_layers(res, out / "similarity.png")
    return res


SECTION_RUNNERS = {"pos": _run_pos, "wsd": _run_wsd, "neighbors": _run_neighbors,
                    "contrast": _run_contrast, "similarity": _run_similarity}
