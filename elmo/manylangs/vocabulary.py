"""Tokens to ids for ELMoForManyLangs models: characters (code points) through ``char.dic``,
and whole words through ``word.dic`` when the model has a word embedding.

A token of a model with max_characters_per_token L becomes L character ids, the original's
layout, quirks included (the trained models saw exactly this)::

    [<eow>, c_1, ..., c_k, <bow>, <pad>, ..., <pad>]        k <= L - 2

* the two word-boundary markers are swapped: ``<eow>`` opens the row and ``<bow>`` closes it;
* a character missing from char.dic gets the ``<oov>`` id; no case folding, no normalisation;
* a token longer than L - 2 characters is cut to its first L - 2, for the word lookup too;
* the sentence boundaries, and a token spelled ``<bos>`` or ``<eos>``, have the single id of
  that char.dic entry between the markers;
* with a word embedding, one more id follows: the token's word.dic id (``<oov>`` if absent).

Every id is shifted by +1 so that 0 keeps meaning "no token here" (a padded position), as with
byte ids; the model's embeddings have a zero row 0 for it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple

import torch

from ..chars import check_tokenized, padded_rows
from .dictionary import DictionaryError, check_specials, check_writable, read_dictionary, write_dictionary

CHAR_SPECIALS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")
WORD_SPECIALS = ("<oov>", "<pad>", "<bos>", "<eos>")
CHAR_DIC = "char.dic"
WORD_DIC = "word.dic"

#: Tokens converted per vocabulary before the conversion cache is emptied.
_CACHE_LIMIT = 1 << 17


def _check_ids_fit(entries: Mapping[str, int], source: str | Path) -> None:
    """The embedding has one row per distinct token, so every id must be below their number.
    (A native folder's char.dic with a larger id loaded, and every sentence holding that
    character was refused later as ids "made for another model".)"""
    token, value = max(entries.items(), key=lambda kv: kv[1])
    if value >= len(entries):
        raise DictionaryError(f"{source}: id {value} of {token!r} is not below the number of "
                              f"distinct entries ({len(entries)}), the rows of the model's embedding")


class CharVocabulary:
    """The id scheme of an ELMoForManyLangs model (see the module doc and
    :class:`elmo.chars.ByteCharIds` for the interface).

    Args:
        chars: char.dic as token -> id (ids below the embedding's row count).
        words: word.dic as token -> id, or None for a model without word embedding.
        max_chars: L, the character slots per token.
        sources: the files the dictionaries came from, for error messages.
    """

    def __init__(self, chars: Mapping[str, int], words: Optional[Mapping[str, int]] = None,
                 max_chars: int = 50, sources: Tuple[str | Path, str | Path] = (CHAR_DIC, WORD_DIC)):
        check_specials(chars, sources[0], CHAR_SPECIALS)
        _check_ids_fit(chars, sources[0])
        if words is not None:
            check_specials(words, sources[1], WORD_SPECIALS)
            _check_ids_fit(words, sources[1])
        if max_chars < 3:
            raise ValueError("max_chars must be at least 3")
        self.chars: Dict[str, int] = dict(chars)
        self.words: Optional[Dict[str, int]] = None if words is None else dict(words)
        self.max_chars = max_chars
        self.width = max_chars + (0 if words is None else 1)
        self.n_char_rows = len(self.chars) + 1
        self.n_word_rows = 0 if words is None else len(words) + 1
        shifted = {name: self.chars[name] + 1 for name in CHAR_SPECIALS}
        self.pad_id = shifted["<pad>"]
        self._oov, self._bow, self._eow = shifted["<oov>"], shifted["<bow>"], shifted["<eow>"]
        # every row opens with <eow> (the swapped markers); checking it refuses byte ids, which
        # this model would otherwise read as dictionary ids without a word of warning
        self.start_id, self.check_start = self._eow, True
        self._markers = {"<bos>": shifted["<bos>"], "<eos>": shifted["<eos>"]}
        self._cache: Dict[str, Tuple[int, ...]] = {}
        self.bos_row = self.row("<bos>")
        self.eos_row = self.row("<eos>")

    # ------------------------------------------------------------------ files
    @classmethod
    def from_folder(cls, folder: str | Path, max_chars: int, with_words: bool) -> "CharVocabulary":
        """Read ``char.dic`` (and ``word.dic`` when ``with_words``) from a model folder."""
        folder = Path(folder)
        chars = read_dictionary(folder / CHAR_DIC)
        words = read_dictionary(folder / WORD_DIC) if with_words else None
        return cls(chars, words, max_chars, (folder / CHAR_DIC, folder / WORD_DIC))

    def save(self, folder: str | Path) -> None:
        """Write ``char.dic`` (and ``word.dic``) into ``folder``, atomically; a token that would
        not read back is refused before either is written."""
        check_writable(self.chars, Path(folder) / CHAR_DIC)
        if self.words is not None:
            check_writable(self.words, Path(folder) / WORD_DIC)
        write_dictionary(self.chars, Path(folder) / CHAR_DIC)
        if self.words is not None:
            write_dictionary(self.words, Path(folder) / WORD_DIC)

    def fingerprint(self) -> bytes:
        """A digest of both dictionaries and L (for output settings that must match)."""
        h = hashlib.blake2b(digest_size=16)
        for table in (self.chars, self.words or {}):
            for token, value in sorted(table.items()):
                h.update(f"{token}\t{value}\n".encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        h.update(str(self.max_chars).encode())
        return h.digest()

    # ------------------------------------------------------------------ conversion
    def row(self, token: str) -> Tuple[int, ...]:
        """The ``width`` ids of one token (shifted by +1)."""
        ids = self._cache.get(token)
        if ids is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            ids = self._cache[token] = self._row(token)
        return ids

    def _row(self, token: str) -> Tuple[int, ...]:
        if token in self._markers:  # (checked before cutting, so that any L has its boundaries)
            middle = [self._markers[token]]
        else:
            token = token[: self.max_chars - 2]
            get, oov = self.chars.get, self._oov - 1
            middle = [get(c, oov) + 1 for c in token]
        ids = [self._eow, *middle, self._bow] + [self.pad_id] * (self.max_chars - len(middle) - 2)
        if self.words is not None:
            ids.append(self.words.get(token, self.words["<oov>"]) + 1)
        return tuple(ids)

    def token_rows(self, words: Sequence[str]) -> torch.Tensor:
        """(N, width) long: the ids of each token."""
        return torch.tensor([self.row(w) for w in words], dtype=torch.long).reshape(len(words), self.width)

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """(B, T, width) long for B tokenized sentences, T the longest; zeros at padded positions.

        The sentence boundaries are not included: the model adds them.
        """
        # a sentence that is a string would silently become one token per character
        check_tokenized(sentences, "batch_to_ids")
        return padded_rows(sentences, self.width, self.row)

    def __getstate__(self):  # the conversion cache is not worth copying or pickling
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state
