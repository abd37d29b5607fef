import torch

from elmo import batch_to_ids
from elmo.chars import word_to_char_ids

PAD = 261  # 260 + 1


def test_ascii_word():
    ids = word_to_char_ids("cat")
    assert ids[:5] == (259, ord("c") + 1, ord("a") + 1, ord("t") + 1, 260)
    assert set(ids[5:]) == {PAD} and len(ids) == 50


def test_multibyte_utf8_uses_bytes():
    ids = word_to_char_ids("né€")  # n, c3 a9, e2 82 ac
    assert ids[:8] == (259, 0x6E + 1, 0xC3 + 1, 0xA9 + 1, 0xE2 + 1, 0x82 + 1, 0xAC + 1, 260)


def test_long_word_is_cut_at_48_bytes():
    ids = word_to_char_ids("x" * 60)
    assert ids[0] == 259 and ids[1:49] == (ord("x") + 1,) * 48 and ids[49] == 260


def test_a_long_word_is_cut_at_a_byte_even_inside_a_character_as_the_original():
    """The original cuts the UTF-8 bytes, not the characters (its ids are what the weights
    know): 'x' and 24 two-byte letters keep the first byte of the 24th letter; a decomposed
    word keeps a letter without its accent's bytes."""
    word = "x" + "\u00e9" * 24                       # 49 bytes
    data = word.encode("utf-8")[:48]
    assert data[-1] == 0xC3                          # the first byte of the last letter
    assert word_to_char_ids(word)[1:50] == tuple(b + 1 for b in data) + (260,)
    decomposed = "e\u0301" * 15 + "xye\u0301"        # 3 bytes a letter and its accent: 50 bytes
    data = decomposed.encode("utf-8")[:48]
    assert data.endswith(b"xye")                     # the last letter without its accent
    assert word_to_char_ids(decomposed)[1:50] == tuple(b + 1 for b in data) + (260,)


def test_sentence_markers():
    assert word_to_char_ids("<S>")[:4] == (259, 257, 260, PAD)
    assert word_to_char_ids("</S>")[:4] == (259, 258, 260, PAD)


def test_batch_shape_padding_and_max_chars_option():
    ids = batch_to_ids([["a", "bb"], [], ["c"]])
    assert ids.shape == (3, 2, 50) and ids.dtype == torch.long
    assert ids[1].abs().sum() == 0 and ids[2, 1].abs().sum() == 0
    short = batch_to_ids([["abcdefgh"]], max_characters_per_token=6)
    assert short.shape == (1, 1, 6)
    assert short[0, 0].tolist() == [259, 98, 99, 100, 101, 260]  # 4 bytes kept
    assert batch_to_ids([]).shape == (0, 0, 50)


def test_rejects_a_plain_string():
    import pytest
    with pytest.raises(TypeError):
        batch_to_ids("not tokenized")


def test_rejects_sentences_without_an_order_of_their_own():
    """A dict's keys or a set's hash order (which changes from run to run) would have become
    the tokens."""
    import pytest
    for batch in ([{"b": 1, "a": 2}], [{"a", "b"}], [["a"], frozenset({"b"})]):
        with pytest.raises(TypeError, match="not a list of tokens"):
            batch_to_ids(batch)
    with pytest.raises(TypeError, match="no order of its own"):
        batch_to_ids({("a", "b"): 1})
    assert batch_to_ids([("a", "b")]).equal(batch_to_ids([["a", "b"]]))  # tuples are ordered


def test_max_characters_per_token_must_be_an_integer():
    import numpy as np
    import pytest
    for wrong in (50.0, "50"):  # not a TypeError from inside torch.zeros
        with pytest.raises(TypeError, match="max_characters_per_token must be an integer, got"):
            batch_to_ids([["a"]], wrong)
    assert batch_to_ids([["a"]], np.int64(12)).shape == (1, 1, 12)


def test_a_token_width_no_model_takes_is_refused_before_allocating_with_the_options_files_words():
    """batch_to_ids([["a"]], 10**9) tried to allocate 8 GB and died in torch's allocator (a
    RuntimeError or MemoryError); the options file refused such a width, the API did not. Both
    now refuse past one bound, with one message; at it, both take the width."""
    import pytest

    from elmo.config import MAX_CHARACTERS_PER_TOKEN, CharCNNConfig, ConfigError
    most = MAX_CHARACTERS_PER_TOKEN
    for wide in (10**9, most + 1):
        with pytest.raises(ValueError, match=rf"^max_characters_per_token: {wide} positions are more than "
                                             rf"any model's token can have \(at most {most}: "):
            batch_to_ids([["a"]], wide)
        # a file's filter as wide as the positions left them unjudged: it took 2**23 + 1
        with pytest.raises(ConfigError, match=rf"^char_cnn\.max_characters_per_token: {wide} positions are more "
                                              rf"than any model's token can have \(at most {most}: "):
            CharCNNConfig(embedding_dim=1, filters=((wide, 1),), n_highway=0, max_characters_per_token=wide)
    assert batch_to_ids([], most).shape == (0, 0, most)     # (an empty batch: nothing to allocate)
    assert CharCNNConfig(embedding_dim=1, filters=((most, 1),), n_highway=0,
                         max_characters_per_token=most).max_characters_per_token == most


def test_a_token_that_is_no_string_is_named_where_the_caller_gave_it():
    """"tokens must be strings, got NoneType: None" said nothing of where: one None in a
    corpus was hard to find. Embedder's batches are sorted by length (and long sentences cut
    into windows), so the place is the one in the caller's input, not in a batch."""
    import pytest

    from elmo import ElmoEmbedder, Embedder
    from tests.conftest import random_bilm
    sentences = [["a"], ["b", "c", "d", "e"], ["f", None]]
    with pytest.raises(TypeError, match=r"^batch_to_ids: sentence 2, token 1: tokens must be strings, "
                                        r"got NoneType: None$"):
        batch_to_ids(sentences)
    bilm = random_bilm(seed=0)
    with pytest.raises(TypeError, match=r"^embed_sentences: sentence 2, token 1: "):
        Embedder(bilm, batch_size=1, max_tokens=2, overlap=0).embed_sentences(sentences)
    embedder = ElmoEmbedder(model=bilm)
    with pytest.raises(TypeError, match=r"^ElmoEmbedder\.embed_sentences: sentence 2, token 1: "):
        list(embedder.embed_sentences(iter(sentences), batch_size=2))


def test_embed_sentence_names_itself_and_its_one_sentence():
    """ElmoEmbedder.embed_sentence's errors named embed_batch and a "sentence 0", and a batch
    given to it was "tokens must be strings, got list"."""
    import pytest

    from elmo import ElmoEmbedder
    from tests.conftest import random_bilm
    embedder = ElmoEmbedder(model=random_bilm(seed=0))
    with pytest.raises(TypeError, match=r"^ElmoEmbedder\.embed_sentence: the sentence is NoneType, not a list"):
        embedder.embed_sentence(None)
    with pytest.raises(TypeError, match=r"^ElmoEmbedder\.embed_sentence: the sentence, token 0: .* got list: "
                                        r"\['a', 'b'\]; for several sentences use embed_batch$"):
        embedder.embed_sentence([["a", "b"], ["c"]])
    assert embedder.embed_sentence(("a", "b")).shape[1] == 2


def test_a_stream_of_sentences_that_is_no_iterable_is_named():
    """embed_sentences and build_token_cache take any iterable; None or a number was Python's
    "'NoneType' object is not iterable", which named neither the call nor the argument."""
    import pytest

    from elmo import ElmoEmbedder, Embedder
    from tests.conftest import random_bilm
    bilm = random_bilm(seed=0)
    for bad in (None, 3):
        with pytest.raises(TypeError, match=rf"^ElmoEmbedder\.embed_sentences expects an iterable of token "
                                            rf"lists, got {type(bad).__name__}: {bad}$"):
            list(ElmoEmbedder(model=bilm).embed_sentences(bad))
        with pytest.raises(TypeError, match=r"^build_token_cache expects an iterable of token lists"):
            Embedder(bilm).build_token_cache(bad)


class _OverCounted(list):
    """A list whose ``len()`` says one more than it holds."""

    def __len__(self):
        return super().__len__() + 1


def test_ids_follow_the_tokens_iterated_whatever_len_says():
    """The rows were sized by ``len()`` and filled by iteration: a sentence, or a list of
    sentences, whose len() said more stopped deep in torch ("shape mismatch", "the shape of
    the mask ... does not match"), not naming anything."""
    sentences = [["The", "bank", "."], [], ["a", "river", "bank", "closed"]]
    want = batch_to_ids(sentences)
    assert torch.equal(batch_to_ids([_OverCounted(s) for s in sentences]), want)
    assert torch.equal(batch_to_ids(_OverCounted(sentences)), want)


def test_a_lone_surrogate_is_dropped_from_a_token_as_the_readme_says():
    """As in the original (UTF-8 cannot encode one): "\\ud800" is the empty word, and a byte
    that a surrogateescape reader kept as "\\udcf1" is lost from its word."""
    assert batch_to_ids([["\ud800", "ca\udcf1n"]]).equal(batch_to_ids([["", "can"]]))
