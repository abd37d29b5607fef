"""The spaCy components: ELMo vectors equal to Embedder's on the same tokens, through
nlp.pipe batches; a saved task model's tags, entities and class labels on Docs."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

spacy = pytest.importorskip("spacy")

import elmo.spacy_component  # noqa: E401,F401  (registers the factories, as the entry point does)
from elmo import Embedder
from tests.test_tasks_files import write_config, write_task

TEXTS = ["The bank closed early today .", "Hi", "", "A much longer sentence about the river bank "
         "and the boats that moved along it slowly ."]


@pytest.mark.parametrize("layers", ["average", "top", "all"])
def test_vectors_equal_the_embedder_on_the_same_tokens(layers):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture", "layers": layers})
    docs = list(nlp.pipe(TEXTS, batch_size=2))
    tokens = [[t.text for t in d] for d in docs]
    expected = Embedder("fixture").embed_sentences(tokens, layers=layers)
    for doc, exp in zip(docs, expected):
        if layers == "all":                         # (L + 1, n, D) -> (n, (L + 1) * D)
            exp = exp.transpose(1, 0, 2).reshape(exp.shape[1], exp.shape[0] * exp.shape[2])
        assert doc.tensor.shape == exp.shape
        # stateless: a sentence's vectors do not depend on its batch, up to float rounding
        np.testing.assert_allclose(doc.tensor, exp, rtol=0, atol=1e-5)
        for token in doc:
            assert np.array_equal(token.vector, doc.tensor[token.i])
        if len(doc):
            np.testing.assert_allclose(doc.vector, exp.mean(0), atol=1e-5)
    one = nlp(TEXTS[0])                             # a single call gives the same
    np.testing.assert_allclose(one.tensor, docs[0].tensor, rtol=0, atol=1e-5)


def test_factories_are_declared_as_entry_points():
    meta = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    points = meta["project"]["entry-points"]["spacy_factories"]
    for name, target in points.items():
        module, attr = target.split(":")
        assert getattr(__import__(module, fromlist=[attr]), attr)
        assert spacy.blank("en").has_factory(name)


def test_a_task_component_without_a_model_says_what_to_pass():
    """(spaCy's config check refused the default None first, in a multi-line ConfigValidationError
    that did not say what the component needs)"""
    with pytest.raises(ValueError, match=r"^the elmo_task component needs config=\{'model': SAVED_MODEL_FOLDER\}$"):
        spacy.blank("en").add_pipe("elmo_task")


@pytest.mark.parametrize("batch_size", [0, -2])
def test_a_task_component_refuses_a_batch_size_below_one_when_it_is_added(batch_size):
    """It was taken, and the first Doc the pipeline met raised (the elmo component checks it
    as it is added)."""
    with pytest.raises(ValueError, match=f"batch_size must be at least 1, got {batch_size}"):
        spacy.blank("en").add_pipe("elmo_task", config={"model": "no-such-folder", "batch_size": batch_size})


def test_task_models_label_docs(tmp_path):
    from elmo.tasks.models import TaskModel
    from elmo.tasks.experiment_config import load_config
    from elmo.tasks.runner import run_experiment
    config = write_config(tmp_path, [write_task(tmp_path, "tagging"),
                                     write_task(tmp_path, "classification")],
                          variants=[{"name": "baseline"}, {"name": "elmo", "elmo": {}}],
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "r", log=lambda s: None, save_models=True)
    texts = ["the cat sat on a mat", "a big dog ran", "cow"]
    tagger = tmp_path / "r/models/my-tagging/elmo/seed-1"
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_task", config={"model": str(tagger)})
    docs = list(nlp.pipe(texts, batch_size=2))
    expected = TaskModel.load(tagger).predict([t.split() for t in texts])
    from elmo.tasks.metrics import bio_spans
    for doc, tags in zip(docs, expected):
        assert [t.tag_ for t in doc] == tags
        assert {(e.label_, e.start, e.end) for e in doc.ents} == bio_spans(tags)
    _saved_task_pipeline_keeps_its_model(tmp_path, tagger, tmp_path / "r/models/my-tagging/baseline/seed-1",
                                         texts, expected)
    _saved_task_pipeline_keeps_its_labels(tmp_path, tagger, texts)
    # a model that reads a text's first 2 tokens: those are tagged, the rest keep no tag (it
    # crashed building the batch: a tag slot for every token, a word id for the 2 read)
    import json
    import shutil
    cut = tmp_path / "cut"
    shutil.copytree(tagger, cut)
    cfg = json.loads((cut / "config.json").read_text())
    (cut / "config.json").write_text(json.dumps(dict(cfg, max_tokens=2)))
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_task", config={"model": str(cut)})
    read = TaskModel.load(tagger).predict([t.split()[:2] for t in texts])
    with pytest.warns(UserWarning, match=r"^elmo_task 'elmo_task': 2 Docs .*max_tokens 2.*first 2 words only"):
        cut_docs = list(nlp.pipe(texts))
    for doc, tags in zip(cut_docs, read):
        assert [t.tag_ for t in doc] == tags + [""] * (len(doc) - len(tags))
        assert {(e.label_, e.start, e.end) for e in doc.ents} == bio_spans(tags)
        assert doc._.elmo_tokens_read == {"elmo_task": len(tags)}
    classifier = tmp_path / "r/models/my-classification/baseline/seed-1"
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_task", config={"model": str(classifier)})
    labels = TaskModel.load(classifier).predict([[t.text for t in nlp.make_doc(x)] for x in texts])
    for doc, label in zip(nlp.pipe(texts), labels):
        assert doc.cats[label] == 1.0 and sum(doc.cats.values()) == 1.0


def _saved_task_pipeline_keeps_its_model(tmp_path, tagger, other, texts, expected):
    """A saved pipeline whose elmo_task model (a relative path) is read from another working
    folder, where that path is another tagger, is refused: it tagged with the other model."""
    import os
    import shutil
    for where, model in (("here", tagger), ("there", other)):
        shutil.copytree(model, tmp_path / where / "tagger")
    before = Path.cwd()
    try:
        os.chdir(tmp_path / "here")
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo_task", config={"model": "tagger"})
        assert [[t.tag_ for t in d] for d in nlp.pipe(texts)] == expected    # (then saved: the same digest)
        nlp.to_disk(tmp_path / "pipeline")
        assert [[t.tag_ for t in d] for d in spacy.load(tmp_path / "pipeline").pipe(texts)] == expected
        os.chdir(tmp_path / "there")
        with pytest.raises(ValueError, match="^component 'elmo_task': its model 'tagger' now loads other weights"):
            spacy.load(tmp_path / "pipeline")
        os.chdir(tmp_path)                          # (no 'tagger' there)
        with pytest.raises(ValueError, match="^component 'elmo_task': its model 'tagger' is not found"):
            spacy.load(tmp_path / "pipeline")
    finally:
        os.chdir(before)


def _saved_task_pipeline_keeps_its_labels(tmp_path, tagger, texts):
    """A saved pipeline whose elmo_task model folder now holds the same weights with its labels
    in another order (labels.json) is refused: it loaded, and gave one tag's name to another."""
    import json
    import shutil
    folder = tmp_path / "labels" / "tagger"
    shutil.copytree(tagger, folder)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_task", config={"model": str(folder)})
    nlp.to_disk(tmp_path / "labels" / "pipeline")
    labels = json.loads((folder / "labels.json").read_text())
    (folder / "labels.json").write_text(json.dumps(labels[::-1]))
    said = re.escape(f"component 'elmo_task': its model {str(folder)!r} now loads other weights than the pipeline "
                     f"was saved with, or the same weights under other options or dictionaries ({folder.resolve()}")
    with pytest.raises(ValueError, match=f"^{said}"):
        spacy.load(tmp_path / "labels" / "pipeline")


def test_whitespace_tokens_are_not_words():
    """spaCy makes a token of a double space or a newline; given to the biLM it changed the
    vectors of the words around it (and a task model's tags and labels)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    plain, spaced = nlp("The bank closed ."), nlp("  The  bank\n\nclosed .")
    assert [t.text for t in spaced if t.is_space] and len(spaced) > len(plain)
    words = [t for t in spaced if not t.is_space]
    assert [t.text for t in words] == [t.text for t in plain]
    np.testing.assert_allclose(np.stack([t.vector for t in words]), plain.tensor, rtol=0, atol=1e-6)
    for token in spaced:
        if token.is_space:
            assert not token.has_vector and not token.vector.any()
    np.testing.assert_allclose(spaced.vector, plain.vector, rtol=0, atol=1e-6)
    np.testing.assert_allclose(spaced[1:4].vector, plain[0:2].vector, rtol=0, atol=1e-6)
    only = nlp(" \n ")
    assert only.tensor.shape == (len(only), plain.tensor.shape[1]) and not only.vector.any()


def test_docs_and_spans_without_words_have_no_vector():
    """A Doc or span of whitespace tokens only, or an empty Doc, gets the zero vector, which
    holds no ELMo vector: ``has_vector`` says so, as it does for the whitespace tokens (it
    said True, and code that skips vector-less texts took the zeros for a text's vector)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    spaced, empty, only = nlp("The  bank closed ."), nlp(""), nlp(" \n ")
    assert spaced[1].is_space and spaced.has_vector and spaced[0:2].has_vector
    assert not spaced[1:2].has_vector and not spaced[1:2].vector.any()
    for doc in (empty, only):
        assert not doc.has_vector and not doc.vector.any()
        assert not doc[0:len(doc)].has_vector


def test_doc_vector_norm_is_the_norm_of_its_current_vector():
    """spaCy caches a Doc's vector_norm at its first reading: read before the 'elmo' component
    ran it stayed 0, and after another 'elmo' component embedded the Doc again it was the norm
    of the first component's vector."""
    average, top = spacy.blank("en"), spacy.blank("en")
    average.add_pipe("elmo", config={"model": "fixture", "layers": "average"})
    top.add_pipe("elmo", config={"model": "fixture", "layers": "top"})
    doc = average.make_doc("The bank closed  early .")
    assert doc.vector_norm == 0                      # (no vectors yet: cached by spaCy)
    for nlp in (average, top):
        doc = nlp(doc)
        assert doc.vector_norm == pytest.approx(float(np.linalg.norm(doc.vector)), rel=1e-6)
        assert doc.vector_norm > 0
        span = doc[1:4]
        assert span.vector_norm == pytest.approx(float(np.linalg.norm(span.vector)), rel=1e-6)


def test_similarity_is_the_cosine_of_the_elmo_vectors():
    """spaCy's similarity gave 1.0 for two tokens or spans of the same text, whatever their
    contexts (and warned that no vectors were loaded): it is the cosine of the vectors."""
    import warnings

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    river, money = nlp("I sat on the river bank today ."), nlp("The bank raised its rates .")
    empty = nlp("")

    def cosine(x, y):
        return float(x @ y) / float(np.linalg.norm(x) * np.linalg.norm(y))

    a, b = river[5], money[1]
    assert a.text == b.text and not np.allclose(a.vector, b.vector)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # no "no word vectors loaded" warning
        assert a.similarity(b) == pytest.approx(cosine(a.vector, b.vector), abs=1e-6)
        assert river[5:6].similarity(money[1:2]) == pytest.approx(cosine(a.vector, b.vector), abs=1e-6)
        assert river.similarity(money) == pytest.approx(cosine(river.vector, money.vector), abs=1e-6)
        assert river.similarity(empty) == 0.0


def test_similarity_with_something_without_elmo_vectors_says_so():
    """A Doc, span or token that never went through 'elmo' has spaCy's vector (none in a blank
    pipeline): the error spoke of another model or layers choice ("vectors of 32 and 0 values")."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc, plain = nlp("the bank closed"), spacy.blank("en")("the river bank")
    run = "run the 'elmo' component on {} first"
    for a, b, name, fix in [(doc, plain, "Doc", run.format("it")), (doc[1], plain[2], "Token", run.format("its Doc")),
                            (doc[0:2], plain[0:2], "Span", run.format("its Doc")),
                            (doc[1], plain.vocab["bank"], "Lexeme", "it has no context: compare a Token")]:
        with pytest.raises(ValueError, match=re.escape(f"similarity: the other {name} has no ELMo vectors: {fix}")):
            a.similarity(b)


def test_a_tensor_replaced_by_a_later_component_is_an_error():
    """A tok2vec after 'elmo' sets doc.tensor to its own rows: token.vector and doc.vector
    silently became tok2vec's vectors; now they are one clear error."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    width = nlp("a").tensor.shape[1]
    nlp.add_pipe("tok2vec")
    nlp.initialize()
    doc = nlp("The bank closed .")
    assert doc.tensor.shape[1] != width                     # (tok2vec's rows)
    for get in (lambda: doc[1].vector, lambda: doc.vector, lambda: doc[0:2].vector):
        with pytest.raises(ValueError, match="a component after 'elmo' replaced it"):
            get()


def test_tokens_merged_or_split_after_elmo_are_named_as_the_cause():
    """spaCy merges or splits doc.tensor's rows with the tokens (merge_entities after 'elmo'):
    the error blamed a component that replaced the tensor, as tok2vec does. Running 'elmo'
    on the retokenized Doc gives its tokens their vectors."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    merged, split = nlp("I love New York today"), nlp("I love NewYork today")
    with merged.retokenize() as retokenizer:
        retokenizer.merge(merged[2:4])
    with split.retokenize() as retokenizer:
        retokenizer.split(split[2], ["New", "York"], heads=[(split[2], 1), split[1]])
    for doc, before in [(merged, 5), (split, 4)]:
        with pytest.raises(ValueError, match=f"the Doc has {len(doc)} tokens, not the {before} its ELMo vectors "
                                             "were set for: its tokens were merged or split after 'elmo'"):
            doc[0].vector
    again = nlp.get_pipe("elmo")(merged)
    assert again[2].text == "New York" and again[2].has_vector and again[2].vector.any()


def test_a_part_of_a_doc_with_its_user_data_is_not_called_retokenized():
    """span.as_doc(copy_user_data=True) copies the whole Doc's record of its vectors: the error
    said that tokens were merged or split. It names the copy now, and set_vector_hooks gives
    the part its rows, as the Doc's own vectors."""
    from elmo.spacy_component import set_vector_hooks
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("The bank closed early today")
    part = doc[1:3].as_doc(copy_user_data=True)
    with pytest.raises(ValueError, match=r"the Doc has 2 tokens, not the 5 its ELMo vectors were set for: it is "
                                         r"a part of another Doc \(span.as_doc\(copy_user_data=True\)"):
        part[0].vector
    assert set_vector_hooks(part) is part
    np.testing.assert_array_equal(np.stack([t.vector for t in part]), doc.tensor[1:3])
    assert part[0].similarity(doc[1]) == pytest.approx(1.0) and part[0].similarity(doc[2]) < 1.0


def test_a_part_of_a_doc_without_its_user_data_has_its_rows_or_an_error():
    """span.as_doc() (copy_user_data False) shares the Doc's vector hooks but not its record:
    a similarity with the part was an error that said it had no ELMo vectors, the other way
    round it ran, and a part whose tensor was replaced since gave a cosine of those other
    values silently. A part whose tensor is a part of the recorded rows is taken now; any
    other is an error both ways round."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("The bank of the river and the bank of the loan")
    part = doc[6:11].as_doc()
    assert not part.user_data
    a, b = doc[1].vector.astype("float64"), doc[7].vector.astype("float64")
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    assert doc[1].similarity(part[1]) == pytest.approx(cosine) and part[1].similarity(doc[1]) == pytest.approx(cosine)
    np.testing.assert_array_equal(part.vector, doc[6:11].vector)
    np.testing.assert_array_equal(part[0:2].as_doc()[1].vector, doc[7].vector)   # (a part of the part)
    replaced = doc[6:11].as_doc()
    replaced.tensor = replaced.tensor + 1.0         # (what a later component does)
    for get in (lambda: replaced[1].similarity(doc[1]), lambda: doc[1].similarity(replaced[1]),
                lambda: replaced.vector):
        with pytest.raises(ValueError, match=r"^the Doc has the ELMo vector hooks but no record of its vectors "
                                             r"\(a part of a Doc made with span.as_doc\(\) without copy_user_data"):
            get()


def test_set_vector_hooks_refuses_a_doc_whose_record_names_other_rows():
    """set_vector_hooks recorded any tensor as the Doc's ELMo rows: one a later component wrote
    in their place (tok2vec), or the rows of tokens merged since, became its vectors silently.
    A Doc the 'elmo' component runs on again (another model or layers) gets its new rows."""
    from elmo.spacy_component import set_vector_hooks
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("I love New York today")
    elmo_rows = doc.tensor
    assert set_vector_hooks(doc) is doc             # (its own rows: as before)
    doc.tensor = elmo_rows + 1.0
    with pytest.raises(ValueError, match="^set_vector_hooks: the Doc's tensor holds other values than its ELMo "
                                         "vectors: a component after 'elmo' replaced it"):
        set_vector_hooks(doc)
    doc.tensor = elmo_rows
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[2:4])
    with pytest.raises(ValueError, match=r"^set_vector_hooks: the Doc's record of ELMo vectors is of 5 tokens, "
                                         r"not its 4, and its tensor is not a part of those rows"):
        set_vector_hooks(doc)
    top = spacy.blank("en")
    top.add_pipe("elmo", config={"model": "fixture", "layers": "top"})
    again = top.get_pipe("elmo")(doc)               # (other rows of the same width)
    assert set_vector_hooks(again) is again
    np.testing.assert_array_equal(again[2].vector, again.tensor[2])
    assert not np.allclose(again.tensor[0], elmo_rows[0])


def test_a_tensor_of_the_elmo_width_replaced_by_a_later_component_is_an_error():
    """A later component writing a doc.tensor of ELMo's own width passed the shape check: the
    token, span and Doc vectors silently became its rows. Copies and pickles keep working."""
    import pickle
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("The bank closed .")
    elmo_rows = doc.tensor
    for kept in (doc, doc.copy(), pickle.loads(pickle.dumps(doc))):
        np.testing.assert_array_equal(kept[1].vector, elmo_rows[1])
    for other in (elmo_rows + 1.0, np.zeros_like(elmo_rows), elmo_rows.astype("float64")):
        doc.tensor = other                                  # (what a later component does)
        for get in (lambda: doc[1].vector, lambda: doc.vector, lambda: doc[0:2].vector):
            with pytest.raises(ValueError, match="a component after 'elmo' replaced it"):
                get()
    doc.tensor = elmo_rows
    np.testing.assert_array_equal(doc[1].vector, elmo_rows[1])


def _vectors(doc):
    return doc.vector, doc[0:3].vector, [t.vector for t in doc], [t.has_vector for t in doc]


def _assert_same_vectors(a, b):
    for x, y in zip(_vectors(a)[:2], _vectors(b)[:2]):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.stack(_vectors(a)[2]), np.stack(_vectors(b)[2]), rtol=0, atol=1e-6)
    assert _vectors(a)[3] == _vectors(b)[3]


def test_serialized_docs_get_their_vectors_back():
    """spaCy drops a Doc's hooks when it serializes it (to_bytes, DocBin, nlp.pipe's worker
    processes): doc.vector and span.vector then counted the whitespace tokens' zero rows."""
    from spacy.tokens import Doc, DocBin
    from elmo.spacy_component import set_vector_hooks
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("The  bank\nclosed .")
    with pytest.warns(UserWarning, match="W109"):
        data = doc.to_bytes()
    back = Doc(nlp.vocab).from_bytes(data)
    assert not np.allclose(back.vector, doc.vector)           # (what spaCy gives without the hooks)
    assert set_vector_hooks(back) is back
    _assert_same_vectors(back, doc)
    (again,) = DocBin().from_bytes(DocBin(store_user_data=True, docs=[doc]).to_bytes()).get_docs(nlp.vocab)
    for lost in (again, spacy.blank("en")("not embedded")):  # (a DocBin keeps no tensor)
        with pytest.raises(ValueError, match="run the 'elmo' component"):
            set_vector_hooks(lost)


def test_a_doc_that_lost_its_hooks_gets_them_back_when_compared_with():
    """A Doc read back from bytes (nlp.pipe(n_process=2)) has no hooks: its token's similarity
    was spaCy's, 1.0 for "bank" by a river against "bank" of a loan. Compared with from a Doc
    that has them, it gets them back (once its rows are checked); the other way round spaCy's
    similarity runs, and nothing of the component does: set_vector_hooks is the way (README)."""
    from spacy.tokens import Doc
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("The bank of the river and the bank of the loan")
    with pytest.warns(UserWarning, match="W109"):
        back = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    cosine = doc[7].similarity(back[1])
    assert cosine < 1.0 and back[1].similarity(doc[7]) == pytest.approx(cosine)
    assert back.vector == pytest.approx(doc.vector)
    with pytest.warns(UserWarning, match="W109"):
        replaced = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    replaced.tensor = replaced.tensor + 1.0                     # (not its ELMo rows any more)
    with pytest.raises(ValueError, match="holds other values than its ELMo vectors"):
        doc[7].similarity(replaced[1])


def test_several_processes_give_the_vectors_of_one(tmp_path):
    """nlp.pipe(n_process=2) hung for ever once the parent had embedded (torch's OpenMP
    threads do not survive fork: see elmo.runtime); its Docs' tensors equal one process's."""
    import subprocess
    import sys
    script = tmp_path / "pipe.py"
    script.write_text(
        "import sys, numpy as np, spacy, torch\n"
        "from elmo.spacy_component import set_vector_hooks\n"
        "torch.set_num_threads(2)\n"
        "nlp = spacy.blank('en')\n"
        "nlp.add_pipe('elmo', config={'model': 'fixture'})\n"
        "texts = [f'The  bank {i} closed\\n early .' for i in range(12)] + ['', ' ']\n"
        "one = list(nlp.pipe(texts, batch_size=4))\n"
        "two = [set_vector_hooks(d) for d in nlp.pipe(texts, batch_size=4, n_process=2)]\n"
        "for a, b in zip(one, two):\n"
        "    np.testing.assert_allclose(a.tensor, b.tensor, rtol=0, atol=1e-6)\n"
        "    np.testing.assert_allclose(a.vector, b.vector, rtol=0, atol=1e-6)\n"
        "print('same', len(two))\n")
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True, text=True,
                              timeout=120, cwd=root, env={**__import__("os").environ, "PYTHONPATH": str(root)})
    except subprocess.TimeoutExpired:
        pytest.fail("nlp.pipe(n_process=2) did not finish in 120 s")
    assert done.returncode == 0 and "same 14" in done.stdout, done.stderr[-2000:]


def _stand_in_annotator(kind: str, labels, predict, metric: str = "accuracy", max_tokens=None):
    """An ElmoTaskAnnotator whose model is ``predict(texts, batch_size)`` (no training)."""
    from elmo.spacy_component import ElmoTaskAnnotator
    from elmo.tasks.kinds import task_kind
    annotator = ElmoTaskAnnotator.__new__(ElmoTaskAnnotator)
    model = type("Model", (), {"predict": staticmethod(predict)})
    annotator.model, annotator.saved = model, type("Saved", (), {"labels": labels, "config": {"tokenize": False}})
    annotator.kind, annotator.task_kind, annotator.metric, annotator.batch_size = kind, task_kind(kind), metric, 8
    annotator.name, annotator.max_tokens, annotator.cut_noted = f"my-{kind}", max_tokens, False
    return annotator


def test_task_tags_and_entities_skip_whitespace_tokens():
    seen = []

    def predict(texts, batch_size):     # a stand-in model: tags by word
        seen.extend(texts)
        return [["I-x" if w == "York" else "B-x" if w[0].isupper() else "O" for w in t] for t in texts]
    annotator = _stand_in_annotator("tagging", ["O", "B-x", "I-x"], predict, metric="span_f1")
    nlp = spacy.blank("en")
    doc = annotator(nlp.make_doc("in  New\nYork , Ada \n"))
    assert seen == [["in", "New", "York", ",", "Ada"]]
    assert [(t.text, t.tag_) for t in doc if t.is_space] == [(" ", ""), ("\n", ""), ("\n", "")]
    assert [(e.text, e.label_) for e in doc.ents] == [("New\nYork", "x"), ("Ada", "x")]


def test_invisible_joiners_are_dropped_as_the_tokenizer_drops_them():
    """spaCy keeps a soft hyphen or zero-width joiner inside a token ('co\\u00adoperate') and
    makes a lone direction mark a token: the biLM got other words than elmo's own tokenizer
    gives it (which drops them), and the mark, a word of its own, changed the vectors around
    it. The marks are dropped from the words, and a token of marks only is no word (as a
    whitespace token)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    plain, marked = nlp("We cooperate with them ."), nlp("We co\u00adoperate with\u200d them \u200e .")
    words = [t for t in marked if t.text != "\u200e"]
    assert len(marked) == len(plain) + 1 and len(words) == len(plain)
    np.testing.assert_allclose(np.stack([t.vector for t in words]), plain.tensor, rtol=0, atol=1e-6)
    mark = next(t for t in marked if t.text == "\u200e")
    assert not mark.has_vector and not mark.vector.any()
    np.testing.assert_allclose(marked.vector, plain.vector, rtol=0, atol=1e-6)


def test_a_byte_order_mark_or_zero_width_space_in_a_token_is_no_part_of_the_word():
    """A text that opens with a byte-order mark (a file read as 'utf-8', not 'utf-8-sig') made
    the first word '\\ufeffThe' to the biLM, three more bytes and another vector than `elmo
    embed` gives that line (it drops a BOM opening the file), and a zero-width space between
    words (which spaCy keeps as a token: it is no whitespace to str.isspace) was a word of its
    own, invisible, changing the vectors around it. elmo's tokenizer and the corpora read
    both as spaces; in a token they are dropped from the word, and a token of them only is no
    word, as a lone direction mark."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    plain, marked = nlp("The dog sat on it ."), nlp("\ufeffThe dog \u200b sat on\ufeff it \ufeff .")
    words = [t for t in marked if t.text not in ("\u200b", "\ufeff")]
    assert len(marked) == len(plain) + 2 and len(words) == len(plain)
    np.testing.assert_allclose(np.stack([t.vector for t in words]), plain.tensor, rtol=0, atol=1e-6)
    for space in (t for t in marked if t.text in ("\u200b", "\ufeff")):
        assert not space.has_vector and not space.vector.any()
    np.testing.assert_allclose(marked.vector, plain.vector, rtol=0, atol=1e-6)


def test_tokens_the_task_model_does_not_tag_lose_an_earlier_components_tag():
    """Whitespace tokens and the words past a model's max_tokens kept the tag a component
    before elmo_task gave them: one Doc held two models' tags, though the docs say such
    tokens get no tag."""
    annotator = _stand_in_annotator("tagging", ["N", "V"], max_tokens=2,
                                    predict=lambda texts, batch_size: [["N", "V"] + [None] * (len(t) - 2) for t in texts])
    doc = spacy.blank("en").make_doc("the cat  sat on")
    for token in doc:
        token.tag_ = "OLD"
    with pytest.warns(UserWarning, match="1 Doc of this batch longer than the model reads"):
        annotator(doc)
    assert [(t.text, t.tag_) for t in doc] == [("the", "N"), ("cat", "V"), (" ", ""), ("sat", ""), ("on", "")]


def test_words_a_tagger_did_not_read_are_no_entity_decision():
    """A span_f1 model's words past its max_tokens were marked outside any entity ("O"), a
    decision the model never made; their entity is now missing ("")."""
    annotator = _stand_in_annotator("tagging", ["O", "B-x", "I-x"], metric="span_f1", max_tokens=3, predict=lambda texts, batch_size: [
        ["B-x", "O", "B-x"] + [None] * (len(t) - 3) for t in texts])
    with pytest.warns(UserWarning, match="no tag and no entity annotation"):
        doc = annotator(spacy.blank("en").make_doc("Ada met Bo  in Rome"))
    assert [(t.text, t.ent_iob_) for t in doc] == [("Ada", "B"), ("met", "O"), ("Bo", "B"), (" ", "O"),
                                                   ("in", ""), ("Rome", "")]
    assert [(e.text, e.label_) for e in doc.ents] == [("Ada", "x"), ("Bo", "x")]


def test_docs_longer_than_the_model_reads_are_said_and_recorded():
    """A Doc longer than the task model's max_tokens was tagged or classified from its first
    words without a word said (`elmo predict` notes such lines on stderr). Each component now
    records the words its model read in doc._.elmo_tokens_read and warns once, with the count."""
    import warnings
    texts = ["a b c d", "x y", "p  q r"]    # 4, 2 and 3 words (and a whitespace token)
    tagger = _stand_in_annotator("tagging", ["N", "V"], max_tokens=2, predict=lambda texts, batch_size: [
        ["N", "V"][:len(t)] + [None] * (len(t) - 2) for t in texts])
    classifier = _stand_in_annotator("classification", ["pos", "neg"], max_tokens=2,
                                     predict=lambda texts, batch_size: ["neg"] * len(texts))
    nlp = spacy.blank("en")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = list(classifier.pipe(tagger.pipe(nlp.pipe(texts), batch_size=1), batch_size=3))
        list(tagger.pipe(nlp.pipe(texts)))   # (said once per component)
    assert [d._.elmo_tokens_read for d in docs] == [{"my-tagging": 2, "my-classification": 2},
                                                    {"my-tagging": 2, "my-classification": 2},
                                                    {"my-tagging": 2, "my-classification": 2}]
    assert [str(w.message) for w in caught] == [
        "elmo_task 'my-tagging': 1 Doc of this batch longer than the model reads (its max_tokens 2, as its "
        "training and test texts were cut): it read its first 2 words only; the words past them have no "
        "tag; doc._.elmo_tokens_read['my-tagging'] says how many words of each Doc it read (this is said once)",
        "elmo_task 'my-classification': 2 Docs of this batch longer than the model reads (its max_tokens 2, "
        "as its training and test texts were cut): it read their first 2 words only; the labels in doc.cats "
        "are of those words; doc._.elmo_tokens_read['my-classification'] says how many words of each Doc it "
        "read (this is said once)"]
    assert [t.tag_ for t in docs[2]] == ["N", "", "V", ""]
    assert all(issubclass(w.category, UserWarning) for w in caught)
    # a Doc the model reads whole: its count, and nothing said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh = _stand_in_annotator("classification", ["pos", "neg"], max_tokens=5,
                                    predict=lambda texts, batch_size: ["pos"] * len(texts))
        assert fresh(nlp.make_doc("p  q r"))._.elmo_tokens_read == {"my-classification": 3}


def test_a_renamed_task_component_records_under_its_new_name():
    """After nlp.rename_pipe a component that kept its old name would record the words read
    under it; spaCy (3.7+) sets the component's name at a rename, and it is used."""
    from spacy.language import Language
    if not Language.has_factory("elmo_task_stand_in"):
        Language.factory("elmo_task_stand_in")(lambda nlp, name: _stand_in_annotator(
            "classification", ["pos", "neg"], lambda texts, batch_size: ["neg"] * len(texts)))
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo_task_stand_in", name="sentiment")
    nlp.rename_pipe("sentiment", "mood")
    assert nlp.get_pipe("mood").name == "mood"
    assert nlp("a b")._.elmo_tokens_read == {"mood": 2}


def test_task_labels_are_added_to_the_cats_of_earlier_components():
    """doc.cats was replaced: a second elmo_task classifier (or spaCy's textcat) before this
    one lost its labels; spaCy's own textcat adds its labels to the Doc's."""
    nlp = spacy.blank("en")
    first = _stand_in_annotator("classification", ["pos", "neg"], lambda texts, batch_size: ["neg"] * len(texts))
    second = _stand_in_annotator("classification", ["sport", "news"], lambda texts, batch_size: ["sport"] * len(texts))
    docs = list(second.pipe(first.pipe(nlp.pipe(["a b", "c"]))))
    assert [d.cats for d in docs] == [{"pos": 0.0, "neg": 1.0, "sport": 1.0, "news": 0.0}] * 2


def test_a_merged_token_with_a_space_inside_is_one_word():
    """What the README says of tokens: a token spaCy holds with a space inside (merged by
    doc.retokenize, as merge_entities does) is one word to the biLM, space included (the
    README said the component never gave the model such a token)."""
    from elmo.embedding import Embedder
    from elmo.embedding.layers import LayerSelection
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp.make_doc("I love New York today")
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[2:4])
    doc = nlp(doc)
    words = ["I", "love", "New York", "today"]
    assert [t.text for t in doc] == words and doc[2].has_vector
    expected = Embedder("fixture").embed_sentences([words], LayerSelection.parse("average"))[0]
    np.testing.assert_allclose(doc.tensor, expected, rtol=0, atol=1e-6)


def test_a_saved_pipeline_refuses_other_weights_than_it_was_saved_with(tmp_path, monkeypatch):
    """nlp.to_disk keeps the component's config, not its model: a model folder named by a
    relative path, loaded from another working folder (or a model changed since), gave other
    weights' vectors without a word. The component now keeps a digest of its weights."""
    import torch
    from elmo import from_pretrained
    from elmo.weights import save_pretrained
    bilm = from_pretrained("fixture")
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
    save_pretrained(bilm, tmp_path / "a" / "m")
    with torch.no_grad():
        next(iter(bilm.parameters())).add_(0.5)     # another model of the same shape
    save_pretrained(bilm, tmp_path / "b" / "m")
    monkeypatch.chdir(tmp_path / "a")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "m"})
    saved = nlp("The bank closed .").tensor
    nlp.to_disk(tmp_path / "pipeline")
    data = nlp.to_bytes()
    np.testing.assert_array_equal(spacy.load(tmp_path / "pipeline")("The bank closed .").tensor, saved)
    np.testing.assert_array_equal(spacy.blank("en").from_config(nlp.config).from_bytes(data)(
        "The bank closed .").tensor, saved)
    monkeypatch.chdir(tmp_path / "b")
    other = re.escape("component 'elmo': its model 'm' now loads other weights than the pipeline was saved with")
    with pytest.raises(ValueError, match=f"^{other}"):
        spacy.load(tmp_path / "pipeline")
    with pytest.raises(ValueError, match=f"^{other}"):
        spacy.blank("en").from_config(nlp.config).from_bytes(data)
    moved = spacy.load(tmp_path / "pipeline", config={"components.elmo.model": str(tmp_path / "a" / "m")})
    np.testing.assert_array_equal(moved("The bank closed .").tensor, saved)   # (as the error says)
    # a working folder where the relative path names nothing: the error said only that 'm' was
    # no model, naming neither the component nor the saved pipeline's way to point at it
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="^component 'elmo': its model 'm' is not found from the working "
                                         "folder") as err:
        spacy.load(tmp_path / "pipeline")
    assert "config={'components.elmo.model': PATH}" in str(err.value) and "\n" not in str(err.value)


def _pipeline_of(tmp_path, model: str, monkeypatch):
    """A pipeline of one 'elmo' component of ``model`` (a folder in tmp_path), saved to tmp_path/pipeline."""
    monkeypatch.chdir(tmp_path)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": model})
    saved = nlp("The bank closed .").tensor
    nlp.to_disk(tmp_path / "pipeline")
    return nlp, saved


@pytest.mark.parametrize("section, key, value", [("char_cnn", "max_characters_per_token", 10),
                                                 ("char_cnn", "activation", "tanh"), ("lstm", "cell_clip", 0.05)])
def test_a_saved_pipeline_refuses_its_model_folder_with_other_options(tmp_path, monkeypatch, section, key, value):
    """The saved record held a digest of the weights alone: the model folder replaced by one of
    the same weights under other options (characters per token, activation, clips), whose
    vectors differ, loaded without a word. Refused now, in one line naming the folder."""
    import shutil
    from elmo import BiLM, ElmoOptions, from_pretrained
    from elmo.weights import save_pretrained
    bilm = from_pretrained("fixture")
    save_pretrained(bilm, tmp_path / "m")
    save_pretrained(bilm, tmp_path / "before")
    nlp, saved = _pipeline_of(tmp_path, "m", monkeypatch)
    data = nlp.to_bytes()
    options = bilm.options.to_dict()
    options[section][key] = value
    other = BiLM(ElmoOptions.from_dict(options))
    other.load_state_dict(bilm.state_dict())                 # (the same weights)
    shutil.rmtree(tmp_path / "m")
    save_pretrained(other, tmp_path / "m")
    said = re.escape(f"component 'elmo': its model 'm' now loads other weights than the pipeline was saved "
                     f"with, or the same weights under other options or dictionaries ({(tmp_path / 'm').resolve()}")
    for load in (lambda: spacy.load(tmp_path / "pipeline"),
                 lambda: spacy.blank("en").from_config(nlp.config).from_bytes(data)):
        with pytest.raises(ValueError, match=f"^{said}") as e:
            load()
        assert "\n" not in str(e.value)
    shutil.rmtree(tmp_path / "m")
    shutil.copytree(tmp_path / "before", tmp_path / "m")     # (the model it was saved with: loads)
    np.testing.assert_array_equal(spacy.load(tmp_path / "pipeline")("The bank closed .").tensor, saved)


def _old_weights_digest(module) -> str:
    """The weights digest a saved pipeline recorded before it recorded the model's digest."""
    import hashlib
    h = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(module.state_dict().items()):
        h.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        h.update(tensor.detach().reshape(-1).cpu().numpy().tobytes())
    return h.hexdigest()


def test_a_pipeline_saved_with_the_weights_digest_alone_still_loads(tmp_path, monkeypatch):
    """A pipeline saved before the record held the model's digest records its weights' digest
    alone: it loads with those weights, and other weights are refused as before."""
    import json
    import shutil
    import torch
    from elmo import from_pretrained
    from elmo.weights import save_pretrained
    bilm = from_pretrained("fixture")
    save_pretrained(bilm, tmp_path / "m")
    _, saved = _pipeline_of(tmp_path, "m", monkeypatch)
    record = tmp_path / "pipeline" / "elmo" / "elmo_model.json"
    assert set(json.loads(record.read_text())) == {"model", "model_digest"}
    record.write_text(json.dumps({"model": "m", "weights_digest": _old_weights_digest(bilm)}))
    np.testing.assert_array_equal(spacy.load(tmp_path / "pipeline")("The bank closed .").tensor, saved)
    with torch.no_grad():
        next(iter(bilm.parameters())).add_(0.5)
    shutil.rmtree(tmp_path / "m")
    save_pretrained(bilm, tmp_path / "m")
    with pytest.raises(ValueError, match="^component 'elmo': its model 'm' now loads other weights"):
        spacy.load(tmp_path / "pipeline")


@pytest.mark.parametrize("tokenize", [True, False])
def test_a_tokenizing_classifier_reads_a_doc_as_it_reads_the_same_text_elsewhere(tokenize):
    """A classifier trained with "tokenize": true was given spaCy's tokens ('can not',
    'e - mail'), not its tokenizer's, as in training and `elmo predict`: the same text got
    another label in a pipeline, without a word. One trained on texts split at spaces keeps
    spaCy's tokens (its texts may have been tokenized before)."""
    from elmo.tokenize import tokenize as split
    seen = []

    def predict(texts, batch_size):
        seen.extend(texts)
        return ["pos"] * len(texts)
    annotator = _stand_in_annotator("classification", ["pos", "neg"], predict, max_tokens=4)
    annotator.saved.config = {"tokenize": tokenize}
    text = "We cannot  e-mail a@b.com: I don't\nknow."
    with pytest.warns(UserWarning, match="first 4 words only"):
        doc = annotator(spacy.blank("en").make_doc(text))
    spacy_words = [t.text for t in doc if not t.is_space]
    assert spacy_words != split(text)                        # (spaCy splits it otherwise)
    assert seen == [split(text) if tokenize else spacy_words]
    assert doc._.elmo_tokens_read == {"my-classification": 4} and doc.cats == {"pos": 1.0, "neg": 0.0}


def test_similarity_refuses_vectors_of_different_components(tmp_path, monkeypatch):
    """Two Docs embedded by different 'elmo' components (other layers or mix, other weights)
    of one width got a cosine of vectors of two spaces, without a word: Doc, Span and Token
    pairs are refused now, also after pickle, to_bytes or span.as_doc(). The same component's
    settings and weights (another component, the model loaded from a copy) still compare."""
    import pickle
    import torch
    from spacy.tokens import Doc
    from elmo import from_pretrained
    from elmo.weights import save_pretrained
    bilm = from_pretrained("fixture")
    save_pretrained(bilm, tmp_path / "a" / "m")
    with torch.no_grad():
        next(iter(bilm.parameters())).add_(0.5)     # another model of the same shape
    save_pretrained(bilm, tmp_path / "b" / "m")

    def pipeline(model, layers="average"):
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": model, "layers": layers})
        return nlp
    text = "The bank of the river closed ."
    doc = pipeline("fixture")(text)
    width = doc.tensor.shape[1]
    same = [pipeline("fixture")(text), pipeline(str(tmp_path / "a" / "m"))(text)]
    for twin in same:
        assert doc.similarity(twin) == pytest.approx(1.0) and doc[1].similarity(twin[1]) == pytest.approx(1.0)
    others = {"layers 'top'": pipeline("fixture", "top")(text),
              "layers 'mix:0.2,0.3,0.5'": pipeline("fixture", "mix:0.2,0.3,0.5")(text),
              f"model {str(tmp_path / 'b' / 'm')!r}": pipeline(str(tmp_path / "b" / "m"))(text)}
    for name, other in others.items():
        assert other.tensor.shape[1] == width
        with pytest.warns(UserWarning, match="W109"):
            back = Doc(doc.vocab).from_bytes(other.to_bytes())     # (hooks lost: got back)
        for o in (other, pickle.loads(pickle.dumps(other)), back, other[0:6].as_doc()):
            for a, b in [(doc, o), (doc[1], o[1]), (doc[0:2], o[0:2]), (doc[1], o[0:2]), (doc[0:2], o),
                         (doc, o[1]), (o, doc), (o[1], doc[1]), (o[0:2], doc)]:
                with pytest.raises(ValueError, match=r"^similarity: the vectors come from different ELMo "
                                                     r"components \(.*" + re.escape(name)):
                    a.similarity(b)
    monkeypatch.chdir(tmp_path / "a")               # (one name, other weights: said so)
    here = pipeline("m")(text)
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(ValueError, match=re.escape("components (both model 'm', layers 'average', but of other "
                                                   "weights or options)")):
        pipeline("m")(text).similarity(here)


@pytest.mark.parametrize("section, key, value", [("char_cnn", "max_characters_per_token", 10),
                                                 ("char_cnn", "activation", "tanh"), ("lstm", "cell_clip", 0.05)])
def test_similarity_refuses_vectors_of_the_same_weights_under_other_options(tmp_path, section, key, value):
    """The record's digest was of the weights and layers alone: a copy of a model with the same
    weights but another options setting that changes the vectors (fewer characters per token,
    another activation, a tighter clip) compared with the original without a word."""
    from elmo import BiLM, ElmoOptions, from_pretrained
    from elmo.weights import save_pretrained
    bilm = from_pretrained("fixture")
    save_pretrained(bilm, tmp_path / "m")
    options = bilm.options.to_dict()
    options[section][key] = value
    other_bilm = BiLM(ElmoOptions.from_dict(options))
    other_bilm.load_state_dict(bilm.state_dict())                # (the same weights)
    save_pretrained(other_bilm, tmp_path / "other")

    def embedded(model):
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": str(model)})
        return nlp("The bank of the river closed .")
    doc, twin, other = embedded(tmp_path / "m"), embedded("fixture"), embedded(tmp_path / "other")
    assert doc.similarity(twin) == pytest.approx(1.0)
    assert not np.allclose(doc.tensor, other.tensor)           # (other vectors, of one width)
    with pytest.raises(ValueError, match="^similarity: the vectors come from different ELMo components"):
        doc.similarity(other)


def test_a_doc_recorded_before_the_options_were_hashed_compares_with_its_models_new_docs():
    """A Doc saved (DocBin, pickle) by the version before records the digest of its component's
    weights and layers alone: compared with a Doc the same model and layers embed now, it was
    refused as "of other weights or options"; a Doc of other layers still is."""
    import hashlib
    import pickle
    from elmo.spacy_component import _SOURCE_KEY
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    component = nlp.get_pipe("elmo")
    old = nlp("The bank of the river closed .")
    old.user_data[_SOURCE_KEY] = hashlib.blake2b(                # (as the version before wrote it)
        f"{_old_weights_digest(component.weights)} {component.selection!r}".encode(), digest_size=16).hexdigest()
    old = pickle.loads(pickle.dumps(old))
    assert old.similarity(nlp("The bank of the river closed .")) == pytest.approx(1.0)
    assert nlp("The river bank .").similarity(old) > 0
    top = spacy.blank("en")
    top.add_pipe("elmo", config={"model": "fixture", "layers": "top"})
    with pytest.raises(ValueError, match="^similarity: the vectors come from different ELMo components"):
        old.similarity(top("The bank of the river closed ."))


def test_similarity_refuses_vectors_of_the_same_weights_under_other_dictionaries(tmp_path):
    """Two ELMoForManyLangs models with the same weights and options but other character ids
    (e and t swapped in char.dic) embed a word otherwise: their Docs compared without a word."""
    import shutil
    folder = Path(__file__).parent / "fixtures" / "elmoformanylangs" / "model"
    shutil.copytree(folder, tmp_path / "other")
    rows = [line.split("\t") for line in (tmp_path / "other" / "char.dic").read_text(encoding="utf-8").splitlines()]
    ids = {row[0]: row[1] for row in rows}
    for row in rows:
        row[1] = {"e": ids["t"], "t": ids["e"]}.get(row[0], row[1])
    (tmp_path / "other" / "char.dic").write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")

    def embedded(model):
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": str(model)})
        return nlp("The bank of the river closed .")
    doc, other = embedded(folder), embedded(tmp_path / "other")
    assert doc.similarity(embedded(folder)) == pytest.approx(1.0)
    assert not np.allclose(doc.tensor, other.tensor)
    with pytest.raises(ValueError, match="^similarity: the vectors come from different ELMo components"):
        doc.similarity(other)


def test_a_pickled_part_of_a_doc_with_its_user_data_is_told_what_works():
    """A part made with span.as_doc(copy_user_data=True) and pickled since holds a copy of the
    rows, which set_vector_hooks refuses: the error told to call set_vector_hooks. It says
    what works now: run the pipeline's 'elmo' component on it."""
    import pickle
    from elmo.spacy_component import set_vector_hooks
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("The bank closed early today")
    part = pickle.loads(pickle.dumps(doc[1:3].as_doc(copy_user_data=True)))
    with pytest.raises(ValueError, match=r"the Doc has 2 tokens, not the 5 its ELMo vectors were set for: it is a "
                                         r"part of another Doc .*run the pipeline's 'elmo' component on it") as error:
        part[0].vector
    assert "set_vector_hooks" not in str(error.value)
    with pytest.raises(ValueError):
        set_vector_hooks(part)                      # (what the error suggested)
    again = nlp.get_pipe("elmo")(part)              # (what it says now)
    assert again[0].has_vector and again[0].vector.any() and again[0].similarity(doc[1]) < 1.0


def test_a_loaded_pipeline_hashes_its_model_once_for_the_load_and_the_first_doc(tmp_path, monkeypatch,
                                                                               model_digest_calls):
    """The load's check of the saved record and the first Doc's source each hashed the model
    (~0.5 s each for the original-size model): now the first Doc takes the load's digest, but
    only while the weights are those it hashed; written since, they are hashed again."""
    import torch
    from elmo import from_pretrained
    from elmo.weights import save_pretrained
    save_pretrained(from_pretrained("fixture"), tmp_path / "m")
    nlp, saved = _pipeline_of(tmp_path, "m", monkeypatch)
    model_digest_calls.clear()                  # (the save's: counted from the load on)
    loaded = spacy.load(tmp_path / "pipeline")
    doc = loaded("The bank closed .")
    np.testing.assert_array_equal(doc.tensor, saved)
    assert len(model_digest_calls) == 1
    assert doc.user_data == nlp("The bank closed .").user_data     # (the same source recorded)
    again = spacy.load(tmp_path / "pipeline")
    component = again.get_pipe("elmo")
    with torch.no_grad():
        next(iter(component.weights.parameters())).add_(0.5)        # (written after the load)
    assert component.source[0] != loaded.get_pipe("elmo").source[0]
    assert len(model_digest_calls) == 3


def test_a_published_models_name_that_does_not_load_keeps_its_own_error(tmp_path, monkeypatch):
    """The hint for a relative path that names nothing from the working folder must not take the
    place of a named model's own error (a published model's damaged cached file, say, is a
    WeightFileError that says how to clear the cache): 'small' was 'not found from the working
    folder'. A name that is no model's still gets the hint."""
    from elmo import WeightFileError

    def damaged(name, model, *args):
        raise WeightFileError(f"{model}: the cached weights are damaged; remove them from the cache")
    monkeypatch.setattr(elmo.spacy_component, "ElmoVectors", damaged)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WeightFileError, match="^small: the cached weights are damaged"):
        spacy.blank("en").add_pipe("elmo", config={"model": "small"})
    with pytest.raises(ValueError, match="^component 'elmo': its model 'smal' is not found from the working"):
        spacy.blank("en").add_pipe("elmo", config={"model": "smal"})
