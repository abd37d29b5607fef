"""Tokens to character ids, exactly as the original ELMo does it.

A token becomes ``max_characters_per_token`` ids (50 in every released model)::

    [BOW, byte_0, ..., byte_{k-1}, EOW, PAD, PAD, ...]   then +1 on every id

where the bytes are the token's UTF-8 encoding cut to ``max_characters_per_token - 2`` bytes
(48), BOW = 258, EOW = 259, PAD = 260. The sentence markers ``<S>`` and ``</S>`` are the
single characters 256 and 257 between BOW and EOW. The +1 shift keeps id 0 free to mean
"no token here" (a padded position in a batch), which is how the model derives its mask.
"""
from __future__ import annotations

from collections.abc import Mapping, Set
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Sequence

import torch

from .checks import require_count, shown
from .config import too_many_characters

BOS_CHAR = 256  #: beginning of sentence
EOS_CHAR = 257  #: end of sentence
BOW_CHAR = 258  #: beginning of word
EOW_CHAR = 259  #: end of word
PAD_CHAR = 260  #: padding after the end of word
DEFAULT_MAX_CHARS = 50

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"

_STR = frozenset([str])


def _marker_ids(marker: int, max_chars: int) -> tuple[int, ...]:
    """The ``max_chars`` ids (shifted) of a sentence marker: BOW, ``marker``, EOW, then PAD."""
    ids = [PAD_CHAR + 1] * max_chars
    ids[0], ids[1], ids[2] = BOW_CHAR + 1, marker + 1, EOW_CHAR + 1
    return tuple(ids)


@lru_cache(maxsize=1 << 16)
def word_to_char_ids(word: str, max_chars: int = DEFAULT_MAX_CHARS) -> tuple[int, ...]:
    """The ``max_chars`` character ids of one token (already shifted by +1).

    ``<S>`` and ``</S>`` map to the sentence-boundary markers, as in the original.
    """
    if word == BOS_TOKEN:
        return _marker_ids(BOS_CHAR, max_chars)
    if word == EOS_TOKEN:
        return _marker_ids(EOS_CHAR, max_chars)
    # Like the original, characters that cannot be encoded (lone surrogates) are dropped.
    data = word.encode("utf-8", errors="ignore")[: max_chars - 2]
    ids = [PAD_CHAR + 1] * max_chars
    ids[0] = BOW_CHAR + 1
    for k, byte in enumerate(data, start=1):
        ids[k] = byte + 1
    ids[len(data) + 1] = EOW_CHAR + 1
    return tuple(ids)


def _string_sentence(caller: str, which: str, sentence: str) -> TypeError:
    shown = sentence if len(sentence) <= 40 else sentence[:37] + "..."
    return TypeError(f"{caller}: {which} is a string ({shown!r}), not a list of tokens; "
                     f"tokenize it first, e.g. sentence.split() or elmo.tokenize.tokenize(sentence)")


def _not_tokens(caller: str, which: str, sentence) -> TypeError:
    return TypeError(f"{caller}: {which} is {type(sentence).__name__}, not a list of tokens "
                     f"(strings)")


def check_tokenized(sentences: Sequence[Sequence[str]], caller: str) -> None:
    """Refuse a string where a list of token lists belongs, and a sentence that is a string
    (each of its characters would silently become a token), bytes (its byte values would be
    the tokens) or no sequence at all. Also refuse an iterator of sentences: this check would
    use it up, and the caller would then see no sentences at all."""
    if isinstance(sentences, str):
        raise TypeError(f"{caller} expects a list of token lists, not a string; tokenize it "
                        f"first, e.g. [text.split()]")
    if not hasattr(sentences, "__len__"):
        raise TypeError(f"{caller} expects a list of token lists, got {type(sentences).__name__}; "
                        f"for a generator or other iterator pass list(sentences)")
    refuse_unordered(sentences, caller)
    for i, sentence in enumerate(sentences):
        _check_sentence(caller, f"sentence {i}", sentence)


def refuse_unordered(items, caller: str, what: str = "a list of token lists") -> None:
    """Refuse a set or a mapping where ``caller`` takes ``what``, whose results come back in
    its order: a set's order is its hash order, and a dict's keys would be taken as the
    items, so the results could not be matched to the caller's input."""
    if isinstance(items, (Mapping, Set)):
        raise TypeError(f"{caller} expects {what}, got a {type(items).__name__}, which has no "
                        f"order of its own; pass a list")


def tokenized(sentences: Iterable[Sequence[str]], caller: str, ordered: bool = True) -> Iterator[Sequence[str]]:
    """:func:`check_tokenized` for a stream: yields the sentences, refusing a string one, and
    (``ordered``: where results are handed back one per sentence) a set or mapping of them."""
    if isinstance(sentences, str):
        check_tokenized(sentences, caller)
    if ordered:  # (a set of sentences embedded one array each came back in hash order)
        refuse_unordered(sentences, caller)
    if not hasattr(sentences, "__iter__"):  # (None was "'NoneType' object is not iterable")
        raise TypeError(f"{caller} expects an iterable of token lists, got {type(sentences).__name__}: "
                        f"{shown(sentences)}")
    for i, sentence in enumerate(sentences):
        _check_sentence(caller, f"sentence {i}", sentence)
        yield sentence


def check_sentence(sentence: Sequence[str], caller: str, batch_method: str) -> None:
    """:func:`check_tokenized` for the one sentence that ``caller`` takes; a token that is a
    list (several sentences given) is told of ``batch_method``, which takes them."""
    _check_sentence(caller, "the sentence", sentence, f"; for several sentences use {batch_method}")


def _check_sentence(caller: str, which: str, sentence, nested_hint: str = "") -> None:
    """Refuse ``which`` sentence unless it is an ordered sequence of strings: a string's
    characters, bytes' values, a dict's keys or a set's hash order would silently become its
    tokens. A token that is no string is named by its place in the caller's input (the ids'
    own check saw a sorted batch, or a window of a long sentence); ``nested_hint`` ends the
    message where that token is a list or tuple."""
    if isinstance(sentence, str):
        raise _string_sentence(caller, which, sentence)
    if (isinstance(sentence, (bytes, bytearray, Mapping, Set))
            or not hasattr(sentence, "__len__") or not hasattr(sentence, "__getitem__")):
        raise _not_tokens(caller, which, sentence)
    if _STR.issuperset(map(type, sentence)):  # (the usual case, at C speed: checked every call)
        return
    for j, token in enumerate(sentence):
        if not isinstance(token, str):
            hint = nested_hint if isinstance(token, (list, tuple)) else ""
            raise TypeError(f"{caller}: {which}, token {j}: tokens must be strings, got "
                            f"{type(token).__name__}: {shown(token)}{hint}")


def batch_to_ids(sentences: Sequence[Sequence[str]], max_characters_per_token: int = DEFAULT_MAX_CHARS
                 ) -> torch.Tensor:
    """Character ids of a batch of tokenized sentences.

    Args:
        sentences: B lists of tokens (strings). Empty lists are allowed.
        max_characters_per_token: characters per token; take it from the model's options
            (``options.char_cnn.max_characters_per_token``).

    Returns:
        LongTensor (B, T, max_characters_per_token), T the longest sentence; padded positions
        are all zeros. An empty batch gives shape (0, 0, max_characters_per_token).
    """
    check_tokenized(sentences, "batch_to_ids")
    # not 50.0: else torch.zeros fails on it
    max_characters_per_token = require_count("max_characters_per_token", max_characters_per_token, least=3,
                                             hint=" (begin, end and one byte)")
    if too_many_characters(max_characters_per_token):  # (else an 8 GB allocation failed for 10**9)
        raise ValueError(f"max_characters_per_token: {too_many_characters(max_characters_per_token)}")
    return padded_rows(sentences, max_characters_per_token,
                       lambda token: word_to_char_ids(token, max_characters_per_token))


def padded_rows(sentences: Sequence[Sequence[str]], width: int,
                row: Callable[[str], Sequence[int]]) -> torch.Tensor:
    """(B, T, width) long: ``row(token)`` (``width`` ids) at each token of B sentences that
    :func:`check_tokenized` has passed (every token a string), T the longest; zeros at padded
    positions. The layout of every id scheme's ``batch_to_ids``."""
    # Counted as iterated: a len() that disagreed with the tokens (or sentences) iterated gave
    # torch's "shape of the mask does not match" or "shape mismatch" from the assignment below
    sentences = [list(sentence) for sentence in sentences]
    lengths = [len(s) for s in sentences]
    longest = max(lengths, default=0)
    out = torch.zeros(len(sentences), longest, width, dtype=torch.long)
    rows = [row(token) for sentence in sentences for token in sentence]
    if rows:
        mask = torch.arange(longest)[None, :] < torch.tensor(lengths)[:, None]
        out[mask] = torch.tensor(rows, dtype=torch.long)
    return out


class ByteCharIds:
    """How a model with byte ids turns tokens into ids (the original ELMo models).

    Every model owns one such object (``bilm.token_encoder.id_scheme``; the other kind is
    :class:`elmo.manylangs.CharVocabulary`), so ``bilm.token_ids(sentences)`` converts text
    for that model whatever its kind. The interface:

    * ``width``: ids per token (here ``max_chars``); ``max_chars``: the character slots;
    * ``pad_id``: the id of the padding character after a word (shifted: 0 means no token);
      ``start_id``: the id every token's row starts with (its opening marker); with
      ``check_start`` the model refuses rows that do not (ids made by another scheme). Byte
      models accept any ids, as AllenNLP's did (hand-made ids in its tests and users' code);
    * ``n_char_rows``: rows of the character embedding, row 0 included; ``n_word_rows``: rows
      of a word embedding (0: none; when present, the word id is the last of the ``width`` ids);
    * ``bos_row`` / ``eos_row``: the ids of the sentence boundaries;
    * :meth:`batch_to_ids` (sentences -> (B, T, width)) and :meth:`token_rows` (words -> (N, width)).
    """

    n_char_rows = 262
    n_word_rows = 0
    pad_id = PAD_CHAR + 1
    start_id = BOW_CHAR + 1
    check_start = False

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS):
        self.max_chars = self.width = max_chars
        self.bos_row = word_to_char_ids(BOS_TOKEN, max_chars)
        self.eos_row = word_to_char_ids(EOS_TOKEN, max_chars)

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """(B, T, max_chars) long, zeros at padded positions: :func:`batch_to_ids`."""
        return batch_to_ids(sentences, self.max_chars)

    def token_rows(self, words: Sequence[str]) -> torch.Tensor:
        """(N, max_chars) long: the ids of each word."""
        return torch.tensor([word_to_char_ids(w, self.max_chars) for w in words],
                            dtype=torch.long).reshape(len(words), self.max_chars)

    def fingerprint(self) -> bytes:
        """What identifies the conversion beyond the options (nothing: it is fixed)."""
        return b""
