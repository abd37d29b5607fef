"""Bad input given to the Python API (not the command line): each is one clear error naming
what is wrong, or a defined result, never a bare error from deep inside Python or PyTorch,
nor a silently wrong result."""
import pytest
import torch

from elmo import Embedder, ScalarMix, Vocabulary, from_pretrained, sentence_vectors

SPECIALS = ["<S>", "</S>", "<UNK>"]


@pytest.mark.parametrize("word, why", [("a\x00b", "NUL byte"), ("caf\udce9", "lone surrogate"),
                                       ("the\u00a040", "split from the text on whitespace"),
                                       ("x\u3000y", "split from the text on whitespace")])
def test_vocabulary_refuses_a_word_no_vocabulary_file_gives_back(tmp_path, word, why):
    # accepted, a NUL byte was saved and the file then refused by load; a lone surrogate (a
    # byte that was not UTF-8, decoded with surrogateescape) failed in save on a bare codec error;
    # a word holding a no-break space or U+3000 was kept, though no token (the text is split on
    # any whitespace) is ever it
    with pytest.raises(ValueError, match=rf"^word 3 of the vocabulary .* holds .*{why}"):
        Vocabulary([*SPECIALS, word, "z"])


def test_vocabulary_names_what_is_not_a_list_of_words_or_counts():
    with pytest.raises(TypeError, match="Vocabulary expects a list of words, got NoneType"):
        Vocabulary(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="counts must be a list of whole numbers, one per word, got str"):
        Vocabulary(SPECIALS, "123")  # type: ignore[arg-type]
    # a generator of counts is counts as a list is ("object of type 'generator' has no len()")
    assert Vocabulary([*SPECIALS, "a"], (c for c in [1, 2, 3, 4])).counts == [1, 2, 3, 4]


def test_vocabulary_from_counts_names_the_word_whose_count_is_wrong():
    # the count was summed into <UNK>'s, and the error named <UNK> (its "count 0.0" or -2)
    with pytest.raises(TypeError, match=r"the count of 'cat' must be an integer, got float: 2\.5"):
        Vocabulary.from_counts({"the": 3, "cat": 2.5})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="the count of 'cat' must be at least 0, got -2"):
        Vocabulary.from_counts({"the": 3, "cat": -2})
    with pytest.raises(TypeError, match="expects a mapping of words to counts .* got list"):
        Vocabulary.from_counts([("the", 3)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="min_count must be an integer, got str"):
        Vocabulary.from_counts({"the": 3}, min_count="2")  # type: ignore[arg-type]


@pytest.mark.parametrize("max_size", [0, 2])
def test_vocabulary_from_counts_refuses_a_size_below_its_special_entries(max_size):
    # the vocabulary held <S>, </S>, <UNK>: more entries than max_size, and no word said so
    with pytest.raises(ValueError, match=f"max_size must be at least 3, got {max_size}"):
        Vocabulary.from_counts({"the": 3, "cat": 2}, max_size=max_size)
    assert Vocabulary.from_counts({"the": 3, "cat": 2}, max_size=4).words == [*SPECIALS, "the"]


@pytest.mark.parametrize("token", [None, 3, b"the"])
def test_vocabulary_ids_refuses_a_token_that_is_no_string(token):
    # None, a number or bytes silently got <UNK>'s id
    vocab = Vocabulary([*SPECIALS, "the"])
    with pytest.raises(TypeError, match=f"Vocabulary.ids: token 1 is {type(token).__name__}, not a string"):
        vocab.ids(["the", token])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="expects a list of tokens, got NoneType"):
        vocab.ids(None)  # type: ignore[arg-type]
    assert vocab.ids(w for w in ["the", "dog"]) == [3, 2]


def test_masked_pool_refuses_integer_vectors_a_mask_that_is_no_tensor_and_one_elsewhere():
    from elmo.embedding import masked_pool
    vectors = torch.tensor([[[1.0], [2.0]]])            # (1, 2, 1)
    mask = torch.ones(1, 2, dtype=torch.bool)
    assert masked_pool(vectors, mask).item() == 1.5
    # integer vectors: their mean 1.5 came back as 1, cut to their type, without an error
    with pytest.raises(TypeError, match="floating-point vectors .* got torch.int64"):
        masked_pool(vectors.long(), mask)
    with pytest.raises(TypeError, match="a mask tensor .* got ndarray"):
        masked_pool(vectors, mask.numpy())  # type: ignore[arg-type]
    # (the meta device stands in for a GPU here: a mask left on the CPU beside GPU vectors)
    with pytest.raises(ValueError, match="the mask is on meta and the vectors on cpu"):
        masked_pool(vectors, mask.to("meta"))


def test_scalar_mix_names_a_mask_on_another_device_than_the_layers():
    # with layer norm it was PyTorch's "Tensor on device meta is not on the expected device cpu!"
    # from inside its ops; without layer norm the same mask passed
    layers = [torch.randn(2, 3, 4) for _ in range(3)]
    mask = torch.ones(2, 3, dtype=torch.bool, device="meta")
    for do_layer_norm in (True, False):
        with pytest.raises(ValueError, match=r"the mask is on meta and the layers on cpu: move it with mask.to\('cpu'\)"):
            ScalarMix(3, do_layer_norm=do_layer_norm)(layers, mask)


def test_sentence_vectors_checks_batch_size_also_beside_an_embedder():
    embedder = Embedder(from_pretrained("fixture"))
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        sentence_vectors(embedder, [["a"]], batch_size=0)


def test_build_token_cache_names_what_is_not_a_list_of_words():
    with pytest.raises(TypeError, match="build_token_cache expects a list of words, got NoneType"):
        from_pretrained("fixture").token_encoder.build_token_cache(None)  # type: ignore[arg-type]


def test_task_model_predict_takes_progress_as_a_switch(tmp_path):
    # progress="no" is true to Python: it drew a progress bar
    from elmo.tasks.experiment_config import load_config
    from elmo.tasks.models import TaskModel
    from elmo.tasks.runner import run_experiment
    from tests.test_tasks_files import write_config, write_task
    config = write_config(tmp_path, [write_task(tmp_path, "classification")], variants=[{"name": "baseline"}],
                          train={"epochs": 1, "batch_size": 8})
    run_experiment(load_config(config), out=tmp_path / "r", log=lambda s: None, save_models=True)
    model = TaskModel.load(tmp_path / "r/models/my-classification/baseline/seed-1")
    assert len(model.predict([["a", "cat"], []], progress=False)) == 2
    with pytest.raises(TypeError, match="progress must be True or False, got str: 'no'"):
        model.predict([["a", "cat"]], progress="no")  # type: ignore[arg-type]


def test_embed_sentences_refuses_an_on_batch_that_cannot_be_called_before_it_runs(monkeypatch):
    # it was "'str' object is not callable", raised after the first batch had been computed
    embedder = Embedder(from_pretrained("fixture"))
    monkeypatch.setattr(embedder, "bilm", None)   # (so a batch run before the check fails otherwise)
    with pytest.raises(TypeError, match="on_batch must be a function of the number of tokens .* got str"):
        embedder.embed_sentences([["a"]], on_batch="progress")  # type: ignore[arg-type]


@pytest.mark.parametrize("max_words, error", [(-1, ValueError), (0, ValueError), (1.5, TypeError)])
def test_frequent_words_checks_its_counts(max_words, error):
    # -1 and 0 gave no words, without an error; 1.5 a TypeError of a slice
    from elmo.embedding import frequent_words
    with pytest.raises(error, match="max_words must be"):
        frequent_words([["a", "a", "b"]], max_words=max_words)
    assert frequent_words([["a", "a", "b"]], min_count=1, max_words=1) == ["a"]


@pytest.mark.parametrize("n_tokens, error", [(-1, ValueError), (5.0, TypeError)])
def test_plan_windows_checks_the_number_of_tokens(n_tokens, error):
    # -1 gave no window (an empty sentence has one), 5.0 "'float' object cannot be interpreted
    # as an integer"
    from elmo.embedding import plan_windows
    with pytest.raises(error, match="n_tokens must be"):
        plan_windows(n_tokens, 3, 1)
    assert len(plan_windows(0, 3, 1)) == 1


#: a model no load could give back -> the error its save gives, before anything is written:
#: on the meta device it was PyTorch's "Tensor.item() cannot be called on meta tensors" (from the
#: NaN check); float8 failed inside PyTorch, in the checksums' view of its bytes ("unsupported
#: ScalarType")
_UNSAVABLE = {"meta": (lambda bilm: bilm.to("meta"), r"is on the meta device, which holds no values"),
              "float8": (lambda bilm: bilm.to(torch.float8_e4m3fn), r"is float8_e4m3fn, which no load reads")}


@pytest.mark.parametrize("layout", ["native", "original"])
@pytest.mark.parametrize("model", _UNSAVABLE)
def test_saving_a_model_no_load_gives_back_is_refused_first(tmp_path, layout, model):
    from elmo import save_original, save_pretrained
    make, says = _UNSAVABLE[model]
    bilm = make(from_pretrained("fixture"))
    with pytest.raises(ValueError, match=r"the model's .* " + says + "; nothing was written"):
        if layout == "native":
            save_pretrained(bilm, tmp_path / "model")
        else:
            save_original(bilm, tmp_path / "options.json", tmp_path / "weights.hdf5")
    assert not any(tmp_path.iterdir())


def test_set_vector_hooks_names_what_is_not_a_doc():
    # None was "'NoneType' object has no attribute 'tensor'", a Span "... no attribute 'user_data'"
    spacy = pytest.importorskip("spacy")
    from elmo.spacy_component import set_vector_hooks
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "fixture"})
    doc = nlp("the bank closed")
    with pytest.raises(TypeError, match="set_vector_hooks takes a spaCy Doc, got NoneType"):
        set_vector_hooks(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got Span: give its Doc \(span.doc\), or span.as_doc\(\)"):
        set_vector_hooks(doc[0:2])  # type: ignore[arg-type]
    assert set_vector_hooks(doc) is doc
