"""spaCy pipeline components: ELMo vectors (``"elmo"``) and a trained task model
(``"elmo_task"``).

Registered through spaCy's entry points (``spacy_factories`` in pyproject.toml), so an
installed package needs no import::

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "default", "layers": "average"})
    doc = nlp("The bank closed .")
    doc.tensor            # (n_tokens, D) float32: the chosen mix of each token's layers
    doc[1].vector         # (D,): the same row; doc.vector is the mean over tokens
    doc[1].similarity(other[4])   # the cosine of the two ELMo vectors (context counts)

    nlp.add_pipe("elmo_task", config={"model": "experiments/results/.../seed-1"})
    # tagging -> token.tag_ (span_f1 models: BIO spans -> doc.ents); classification -> doc.cats

``layers`` is what ``elmo embed --layers`` takes: ``average``, ``top``, ``mix:w0,w1,...``, or
``all`` (the L + 1 layers concatenated: (n_tokens, (L + 1) * D)). Both components embed
``nlp.pipe`` batches together (``batch_size`` sentences per biLM call); the words are the
Doc's tokens as spaCy split them, but its whitespace tokens (``token.is_space``), which get a
zero row, no vector (``has_vector`` False) and no tag, and count in no mean; so do tokens of
invisible marks only (a lone direction mark), and the invisible joiners inside a token (a soft
hyphen) are dropped from the word, as :func:`elmo.tokenize.tokenize` drops them. (A
classifier trained with ``"tokenize": true`` reads the Doc's text split by its tokenizer, as
``elmo predict`` does: it gives the text ``elmo predict``'s label.)

The vectors live in ``doc.tensor``, which spaCy's ``tok2vec`` also sets: add ``elmo`` after it
(a Doc whose tensor a later component replaced, or whose tokens one merged or split, as
``merge_entities`` does, makes the vector hooks raise a ValueError: run ``elmo`` after it; a
part of a Doc made with ``span.as_doc(copy_user_data=True)`` too: :func:`set_vector_hooks` on
it gives it its rows). ``span.as_doc()`` shares the Doc's hooks but none of its record: its
rows are taken while its tensor is a part of the Doc's (a view); replaced or copied since
(pickle), they are a ValueError, not a similarity of unknown rows.

Two Docs whose vectors different ``elmo`` components made (another model, other ``layers``
or mix: vectors of different spaces, even of one width) have no similarity: a ValueError
names both. Each Doc's record (``doc.user_data``, kept through pickle and ``to_bytes``) holds
a digest of its component's weights, model options (and dictionaries) and layers; the same
model and layers in another pipeline (or loaded again) compare. A Doc recorded by the version
before (its digest of the weights and layers alone) compares with the Docs that a component of
this process with those weights and layers made. A Doc whose record has none
(``set_vector_hooks`` on a Doc without a record) is compared with any.

A Doc read back from bytes (``nlp.pipe(texts, n_process=2)``, ``Doc.from_bytes``) has lost its
vector hooks, and its tokens' ``similarity`` is spaCy's: 1.0 against any token of the same text,
whatever the contexts. Call :func:`set_vector_hooks` on each such Doc (compared with from a Doc
that has the hooks, it gets them back itself).

A saved pipeline (``nlp.to_disk``, ``nlp.to_bytes``) keeps each component's ``model`` as its
config names it, and a digest of the model it loaded (``elmo_model.json``: its options,
dictionaries and weights, :func:`elmo.model_digest.model_digest`; a task model's config and
labels too); loading it where that name gives another model (a relative path read from another
working folder, a model changed since, the same weights under other options) is a ValueError,
not other vectors or tags. (A pipeline saved before records the digest of its weights alone,
which is what its loading checks.)
"""
from __future__ import annotations

import functools
import hashlib
import json
import warnings
import weakref
from pathlib import Path
from typing import Any, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import minibatch

from .tokenize import INVISIBLE, ZERO_WIDTH_SPACES


#: The Doc extension where each ``elmo_task`` component records how many words its model read.
TOKENS_READ = "elmo_tokens_read"
if not Doc.has_extension(TOKENS_READ):
    Doc.set_extension(TOKENS_READ, default=None)

#: The file of a saved pipeline's ``elmo`` or ``elmo_task`` component folder: its model and weights digest.
SAVED_RECORD = "elmo_model.json"

#: The invisible joiners and marks (:data:`elmo.tokenize.INVISIBLE`) deleted from a token, and
#: the zero-width spaces (:data:`elmo.tokenize.ZERO_WIDTH_SPACES`): elmo's tokenizer and the
#: corpora read those as spaces, while spaCy keeps them in a token (a text opening with a
#: byte-order mark gave the word ``\ufeffThe``) or makes one of them alone a token.
_DROP_INVISIBLE = str.maketrans(dict.fromkeys(INVISIBLE + ZERO_WIDTH_SPACES))


def _word_text(token) -> str:
    """The token's text as elmo's tokenizer gives a word: without the invisible joiners and
    marks spaCy keeps in a token (``co\u00adoperate`` is ``cooperate``), nor a zero-width
    space or byte-order mark (``\ufeffThe`` is ``The``)."""
    return token.text.translate(_DROP_INVISIBLE)


def _is_word(token) -> bool:
    """Not a whitespace token (``is_space``: a double space, a newline) nor one of invisible
    marks only (a lone direction mark), which no biLM or task model saw in training; given to
    them, they changed the words' vectors and tags around them."""
    return not token.is_space and bool(_word_text(token))


def _words(doc) -> List[int]:
    """The positions of the Doc's words (:func:`_is_word`)."""
    return [t.i for t in doc if _is_word(t)]


#: ``doc.user_data`` key: the width D of the ELMo rows the hooks were set for.
_WIDTH_KEY = "elmo.vector_width"
#: ``doc.user_data`` key: a digest of those rows (:func:`_fingerprint`), so that a tensor a
#: later component wrote in their place is told apart even when it has their width.
_FINGERPRINT_KEY = "elmo.vector_digest"

#: Tensors already found to match their Doc's digest, by (id, digest): hashing the rows again
#: at every ``token.vector`` cost O(n_tokens * D) each. Weak: an entry goes with its array.
#: (A component that writes into the same array in place, rather than setting a new one, is
#: only seen before the first vector is read.)
_checked: "weakref.WeakValueDictionary[Tuple[int, str], np.ndarray]" = weakref.WeakValueDictionary()


#: The ELMo rows each record was set for, by id. ``span.as_doc()`` (``copy_user_data`` False)
#: gives its Doc a view of some of the Doc's rows and its hooks, but no record: such a view
#: is told to be ELMo rows by its base. Weak: an entry goes with its array.
_recorded: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()


def _part_of_recorded_rows(tensor) -> bool:
    """Whether ``tensor`` (n, D) is consecutive whole rows of an array of ELMo rows (N, D) that
    a record was set for in this process: a view of them, as ``span.as_doc`` makes. (Values
    written into those rows in place after the record are not seen, as in :func:`_elmo_rows`.)"""
    if not isinstance(tensor, np.ndarray) or tensor.base is None:
        return False
    base = tensor.base
    if not isinstance(base, np.ndarray) or _recorded.get(id(base)) is not base:
        return False
    offset = tensor.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return (tensor.ndim == 2 and tensor.dtype == base.dtype and tensor.strides == base.strides
            and tensor.shape[1] == base.shape[1] and offset % base.strides[0] == 0)


def _fingerprint(tensor: np.ndarray) -> str:
    """A digest of the rows' dtype, shape and bytes (a hex string: kept in ``doc.user_data``,
    which pickle and ``to_bytes`` carry)."""
    digest = hashlib.blake2b(f"{tensor.dtype.str}{tensor.shape}".encode(), digest_size=16)
    digest.update(np.ascontiguousarray(tensor).tobytes())
    return digest.hexdigest()


#: ``doc.user_data`` key: what made the rows (:attr:`ElmoVectors.source`: a digest of the
#: component's weights and layers choice). Two Docs of different ones are not compared: their
#: vectors are of different spaces, even of one width. (Absent: rows of unknown making.)
_SOURCE_KEY = "elmo.vector_source"
#: ``doc.user_data`` key: that component's model and layers as its config names them (for the error).
_MADE_BY_KEY = "elmo.vector_made_by"

#: The source and made-by of the rows each record was set for, by the id of its array (as
#: :data:`_recorded`): a part from ``span.as_doc()`` has no record, but its base's source.
_recorded_by: "dict[int, Tuple[Optional[str], Optional[str]]]" = {}

#: ``doc.user_data`` key: how many tokens the Doc had when the hooks were set.
_TOKENS_KEY = "elmo.vector_tokens"
#: ``doc.user_data`` key: the length of the Doc's text then. Merging or splitting tokens keeps
#: the text; a Doc of a part of another (``span.as_doc(copy_user_data=True)``) has less of it.
_TEXT_KEY = "elmo.vector_text_length"

#: The end of the error for a tensor that is no longer the ELMo rows.
_REPLACED = "a component after 'elmo' replaced it (tok2vec does); add the 'elmo' component after that one"


def _elmo_rows(doc):
    """``doc.tensor`` (n_tokens, D), checked to still be the ELMo rows: a component after
    ``elmo`` that sets ``doc.tensor`` (spaCy's ``tok2vec``) replaced them, and the vectors were
    then its vectors without a word. The shape tells most apart; the digest of the rows kept in
    ``doc.user_data`` tells a tensor of the same width."""
    if _WIDTH_KEY not in doc.user_data:     # (hooks without a record: span.as_doc())
        _record_part(doc)
    tensor, width, tokens = doc.tensor, doc.user_data.get(_WIDTH_KEY), doc.user_data.get(_TOKENS_KEY)
    if tokens is not None and tokens != len(doc):
        text = doc.user_data.get(_TEXT_KEY)
        if text is not None and text != len(doc.text):     # (it named merged or split tokens)
            # (set_vector_hooks takes a part's rows only while they are a view of the Doc's:
            # pickled or copied since, it refuses them, and the advice to call it was false)
            fix = ("call elmo.spacy_component.set_vector_hooks(doc) on it to use its rows of them, or run the "
                   "'elmo' component on it" if _part_of_recorded_rows(tensor) else
                   "its tensor is a copy of those rows (pickled or copied since), which cannot be told from "
                   "other rows: run the pipeline's 'elmo' component on it (vectors of the part alone)")
            raise ValueError(f"the Doc has {len(doc)} tokens, not the {tokens} its ELMo vectors were set for: "
                             f"it is a part of another Doc (span.as_doc(copy_user_data=True) copied the user "
                             f"data of the whole Doc's vectors); {fix}")
        # (spaCy merges or splits the tensor's rows with the tokens: the error blamed a
        # component that replaced the tensor, as tok2vec does)
        raise ValueError(f"the Doc has {len(doc)} tokens, not the {tokens} its ELMo vectors were set for: "
                         f"its tokens were merged or split after 'elmo' (doc.retokenize, merge_entities, "
                         f"merge_noun_chunks); run the 'elmo' component on it again, or add it after them")
    if width is not None and (getattr(tensor, "ndim", 0) != 2 or tensor.shape != (len(doc), width)):
        raise ValueError(f"the Doc's tensor has shape {getattr(tensor, 'shape', None)}, not the "
                         f"({len(doc)}, {width}) of its ELMo vectors: {_REPLACED}")
    digest = doc.user_data.get(_FINGERPRINT_KEY)
    if digest is not None and _checked.get((id(tensor), digest)) is not tensor:
        # (a GPU array, from a tok2vec on cupy, is not the numpy rows this component sets)
        if not isinstance(tensor, np.ndarray) or _fingerprint(tensor) != digest:
            raise ValueError(f"the Doc's tensor holds other values than its ELMo vectors: {_REPLACED}")
        _checked[(id(tensor), digest)] = tensor
    return tensor


def _record_part(doc) -> None:
    """Record the rows of a Doc that has the vector hooks but no record of its rows:
    ``span.as_doc()`` (``copy_user_data`` False) shares the Doc's hooks, but not its
    ``user_data``. Its tensor is taken when it is a view of ELMo rows recorded (the rows of
    the span); any other (its tensor replaced since, or copied by pickle) cannot be told from
    a later component's, and is an error, not a similarity of unknown rows."""
    if not _part_of_recorded_rows(doc.tensor):
        raise ValueError("the Doc has the ELMo vector hooks but no record of its vectors (a part of a Doc made "
                         "with span.as_doc() without copy_user_data=True, its tensor changed or copied since), "
                         "and its tensor is not a part of ELMo rows: run the 'elmo' component on it")
    _record_rows(doc, _recorded_by.get(id(doc.tensor.base)))


def _token_vector(token):
    return _elmo_rows(token.doc)[token.i]


def _mean_of_words(doc, start: int, end: int):
    tensor = _elmo_rows(doc)
    rows = [i for i in _words(doc) if start <= i < end]
    return tensor[rows].mean(axis=0) if rows else np.zeros(tensor.shape[1:], "float32")


def _doc_vector(doc):
    return _mean_of_words(doc, 0, len(doc))


def _doc_vector_norm(doc) -> float:
    # spaCy caches a Doc's norm at its first reading: read before 'elmo' ran (0), or before
    # another 'elmo' component embedded the Doc again, it was that norm, not its vector's.
    # (Spans and tokens compute theirs anew; spaCy's span hook would return the vector.)
    return float(np.linalg.norm(np.asarray(_doc_vector(doc), dtype="float64")))


def _span_vector(span):
    return _mean_of_words(span.doc, span.start, span.end)


def _token_has_vector(token) -> bool:
    return _is_word(token)


def _span_has_vector(span) -> bool:
    # a span of whitespace tokens only has the zero vector: no ELMo vector, like its tokens
    return any(_is_word(t) for t in span)


def _doc_has_vector(doc) -> bool:
    return any(_is_word(t) for t in doc)     # False for an empty Doc or one of whitespace only


def _similarity(obj, other) -> float:
    """The cosine of the two objects' vectors (D,), 0.0 where either is zero.

    spaCy's own similarity answers 1.0 for two tokens (or spans) of the same text before it
    looks at a vector: right for static vectors, wrong for ELMo's, where "bank" by a river and
    "bank" of a loan are two vectors. It also warned that no vectors were loaded."""
    doc = other if isinstance(other, Doc) else getattr(other, "doc", None)
    if doc is None or (_WIDTH_KEY not in doc.user_data and doc.user_hooks.get("similarity") is not _similarity):
        # (its vector, spaCy's static one or none, was compared: "vectors of 256 and 0 values
        # (another model or layers choice)", or a cosine of unrelated vectors of one width)
        fix = ("it has no context: compare a Token" if doc is None else
               f"run the 'elmo' component on {'it' if doc is other else 'its Doc'} first")
        raise ValueError(f"similarity: the other {type(other).__name__} has no ELMo vectors: {fix}")
    _hooks_back(doc)
    a, b = np.asarray(obj.vector, dtype="float64"), np.asarray(other.vector, dtype="float64")
    _check_same_source(obj if isinstance(obj, Doc) else obj.doc, doc)   # (after .vector: a part's record)
    if a.shape != b.shape:
        raise ValueError(f"similarity: vectors of {a.shape[0]} and {b.shape[0]} values "
                         "(another model or layers choice) cannot be compared")
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0


#: Each ``elmo`` component of this process by its :attr:`ElmoVectors.source` digest (weak: an
#: entry goes with its component), for :func:`_earlier_form_of`.
_components: "weakref.WeakValueDictionary[str, ElmoVectors]" = weakref.WeakValueDictionary()


def _earlier_form_of(source: str, recorded: str) -> bool:
    """Whether ``recorded``, a Doc's record, is the digest the version before this one wrote for
    the component of ``source`` (of its weights and layers alone: :attr:`ElmoVectors.legacy_source`),
    so a Doc saved then compares with the Docs that model embeds now. Hashed on the first such
    comparison only."""
    component = _components.get(source)
    return component is not None and component.legacy_source == recorded


def _check_same_source(mine: Doc, theirs: Doc) -> None:
    """Refuse two Docs whose rows different ``elmo`` components made (other weights, options,
    dictionaries, layers or mix): a cosine of vectors of two spaces, of one width, was a number
    without a meaning.
    (A stored string compared: the weights are hashed once per component, not per call.)"""
    a, b = mine.user_data.get(_SOURCE_KEY), theirs.user_data.get(_SOURCE_KEY)
    if a is None or b is None or a == b or _earlier_form_of(a, b) or _earlier_form_of(b, a):
        return
    made_a, made_b = mine.user_data.get(_MADE_BY_KEY), theirs.user_data.get(_MADE_BY_KEY)
    which = f"{made_a} and {made_b}" if made_a != made_b else f"both {made_a}, but of other weights or options"
    raise ValueError(f"similarity: the vectors come from different ELMo components ({which}), whose vectors "
                     f"are of different spaces: embed both Docs with one 'elmo' component")


def _hooks_back(doc: Doc) -> None:
    """Put the vector hooks back on a Doc that has ELMo rows but lost its hooks (``to_bytes``,
    ``nlp.pipe(n_process=2)``), once they are checked to be its rows still: its own similarity
    then took spaCy's, which is 1.0 for two tokens of the same text whatever their contexts.
    (A similarity called on such a Doc's token is spaCy's: nothing here runs to refuse it.)"""
    if doc.user_hooks.get("similarity") is not _similarity:
        _elmo_rows(doc)         # (else the error of a tensor replaced, or tokens retokenized)
        _install_hooks(doc)


class _BatchedComponent:
    """What both components share: spaCy calls a component on one Doc, or ``pipe`` on a stream;
    each subclass sets its annotations on a list of Docs at once in ``_set``."""

    batch_size: int
    name: str

    def _set(self, docs: List[Doc]) -> None:
        raise NotImplementedError

    def __call__(self, doc: Doc) -> Doc:
        self._set([doc])
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: Optional[int] = None) -> Iterator[Doc]:
        for batch in minibatch(docs, size=batch_size or self.batch_size):
            self._set(list(batch))
            yield from batch

    # spaCy keeps a component's config (its model's name or path) with a saved pipeline, not
    # its model: a relative path read from another working folder, or a model changed since,
    # loaded other weights, whose vectors or labels replaced the saved pipeline's without a word.
    #: The model as the config names it; the module whose weights it loaded.
    model_spec: str
    weights: Any

    def _digest_settings(self) -> Any:
        """What defines the model besides its biLM's options and its weights (for its digest)."""
        return None

    #: The digest :meth:`_record` hashed last and the state of the weights it hashed, for
    #: :meth:`_digest_again` (None: none kept).
    _hashed: Optional[Tuple[Any, str]] = None

    def _weight_tensors(self) -> List[Any]:
        """Every tensor the model's digest hashes (its ``state_dict``'s, as they are held)."""
        return list(self.weights.state_dict(keep_vars=True).values())

    def _record(self) -> dict:
        """What a saved pipeline keeps of this component: its model and its digest (options,
        dictionaries and weights: :func:`~elmo.model_digest.model_digest`; hashed at each save
        and load: a model changed in place since is told apart)."""
        from .model_digest import model_digest
        from .modules.weight_cache import WeightsState
        state = WeightsState(self._weight_tensors())       # (taken before the hash reads them)
        digest = model_digest(self.weights, self._digest_settings())
        self._hashed = (state, digest)
        return {"model": self.model_spec, "model_digest": digest}

    def _digest_again(self) -> str:
        """The model's digest now: the one :meth:`_record` hashed last (at the pipeline's load)
        where the weights are still those it hashed, unchanged as PyTorch counts writes
        (:class:`~elmo.modules.weight_cache.WeightsState`: never for shared or inference
        weights), else hashed anew. The first Doc after a load hashed the model a second time
        (~0.5 s for the original-size model). Used once: none is kept after."""
        from .model_digest import model_digest
        kept, self._hashed = self._hashed, None
        if kept is not None and kept[0].matches(self._weight_tensors()):
            return kept[1]
        return model_digest(self.weights, self._digest_settings())

    def _check_record(self, record: object) -> None:
        """Refuse a saved pipeline whose record names another model than the one loaded now. A
        pipeline saved before the record held ``model_digest`` holds ``weights_digest``, of
        the weights alone (:func:`~elmo.model_digest.legacy_weights_digest`): checked as such,
        so that it still loads (its options cannot be checked)."""
        from .model_digest import legacy_weights_digest
        if not isinstance(record, dict):
            return
        if record.get("model_digest") is not None:
            same = record["model_digest"] == self._record()["model_digest"]
        elif record.get("weights_digest") is not None:
            same = record["weights_digest"] == legacy_weights_digest(self.weights)
        else:
            return
        if not same:
            folder = Path(self.model_spec).expanduser()
            where = f"{folder.resolve()}, " if folder.exists() else ""
            raise ValueError(f"component {self.name!r}: its model {self.model_spec!r} now loads other weights than "
                             f"the pipeline was saved with, or the same weights under other options or "
                             f"dictionaries ({where}a relative path read from another working folder, or a model "
                             f"changed since); load it where {self.model_spec!r} names that model, or give its "
                             f"place: spacy.load(..., config={{'components.{self.name}.model': PATH}})")

    def to_bytes(self, *, exclude: Iterable[str] = ()) -> bytes:
        return json.dumps(self._record()).encode()

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = ()) -> "_BatchedComponent":
        self._check_record(json.loads(data))
        return self

    def to_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = ()) -> None:
        from .io import atomic_write_text
        Path(path).mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(path) / SAVED_RECORD, json.dumps(self._record()))

    def from_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = ()) -> "_BatchedComponent":
        from .text_files import read_json
        file = Path(path) / SAVED_RECORD
        if file.exists():       # (a pipeline saved before the record was kept has none)
            self._check_record(read_json(file))
        return self


class ElmoVectors(_BatchedComponent):
    """Sets ``doc.tensor`` (n_tokens, D) and, through the Doc's hooks, ``token.vector``,
    ``span.vector`` and ``doc.vector`` from an :class:`elmo.Embedder`."""

    def __init__(self, name: str, model: str = "default", layers: str = "average",
                 batch_size: int = 64):
        from .embedding import Embedder
        from .embedding.layers import LayerSelection
        self.name = name
        self.embedder = Embedder(model, batch_size=batch_size)
        self.layers = layers
        self.selection = LayerSelection.parse(layers)
        self.selection.check(self.embedder.num_layers)
        self.batch_size = batch_size
        self.model_spec = model
        self.weights: Any = self.embedder.bilm

    @functools.cached_property
    def source(self) -> Tuple[str, str]:
        """What makes this component's rows: a digest of its weights, its model's options, an
        ELMoForManyLangs model's dictionaries and its layers choice (a hex string, the same for
        the same model loaded twice), and its model and layers as named. The same weights under
        other options (characters per token, activation, clips) or other dictionaries give other
        rows. Hashed at the first Doc, once (or taken from the load's check, where the weights
        are unchanged since: :meth:`_digest_again`): weights changed in place since are not seen."""
        digest = hashlib.blake2b(f"{self._digest_again()} {self.selection!r}".encode(), digest_size=16)
        _components[digest.hexdigest()] = self
        return digest.hexdigest(), f"model {self.model_spec!r}, layers {self.layers!r}"

    @functools.cached_property
    def legacy_source(self) -> str:
        """The digest of :attr:`source` as Docs' records held it before it hashed the model's
        options and dictionaries: of the weights alone
        (:func:`~elmo.model_digest.legacy_weights_digest`) and the layers choice."""
        from .model_digest import legacy_weights_digest
        return hashlib.blake2b(f"{legacy_weights_digest(self.weights)} {self.selection!r}".encode(),
                               digest_size=16).hexdigest()

    def _set(self, docs: List[Doc]) -> None:
        words = [_words(d) for d in docs]
        arrays = self.embedder.embed_sentences([[_word_text(d[i]) for i in w] for d, w in zip(docs, words)],
                                               self.selection)
        for doc, rows, arr in zip(docs, words, arrays):
            if arr.ndim == 3:                                # "all": (L + 1, n, D) -> (n, (L+1) D)
                arr = arr.transpose(1, 0, 2).reshape(arr.shape[1], arr.shape[0] * arr.shape[2])
            tensor = np.zeros((len(doc), arr.shape[1]), dtype="float32")   # whitespace: zero
            tensor[rows] = arr
            doc.tensor = tensor
            _record_rows(doc, self.source)      # (these rows replace any the Doc had: their record too)
            _install_hooks(doc)


def set_vector_hooks(doc: Doc) -> Doc:
    """Make ``token.vector``, ``span.vector`` and ``doc.vector`` read the ELMo rows in
    ``doc.tensor`` (a span's and the Doc's: the mean over its words, whitespace left out).

    The ``elmo`` component does this for each Doc. spaCy keeps these hooks through ``pickle``
    and ``doc.copy()``, but drops them when it serializes a Doc with ``to_bytes`` (spaCy's
    warning W109), as ``nlp.pipe(..., n_process=2)`` does to send Docs back from its worker
    processes, and ``Doc.from_docs`` leaves them off the Doc it joins. ``doc.tensor`` comes
    back intact (joined), and this puts the hooks back: without them,
    ``doc.vector`` and ``span.vector`` count the whitespace tokens' zero rows in the mean,
    and with a pipeline of static vectors ``token.vector`` is the static vector instead.
    (A ``DocBin`` keeps no tensor at all: embed such Docs again.)

    A Doc with a record of its ELMo rows (``doc.user_data``) must still hold them, or a part of
    them (``span.as_doc(copy_user_data=True)``): a tensor a later component wrote in their
    place (``tok2vec``) was recorded as ELMo rows, and its vectors compared with ELMo's. A Doc
    without a record (``Doc.from_docs``, ``to_bytes(exclude=["user_data"])``) is taken as it is.
    Returns ``doc``; a Doc with no tensor of one row per token, or other rows than its record
    names, is a ValueError."""
    if not isinstance(doc, Doc):  # (None, a Span or a string: "... has no attribute 'tensor'")
        hint = ": give its Doc (span.doc), or span.as_doc()" if isinstance(doc, Span) else ""
        raise TypeError(f"set_vector_hooks takes a spaCy Doc, got {type(doc).__name__}{hint}")
    tensor = doc.tensor
    if getattr(tensor, "ndim", 0) != 2 or tensor.shape[0] != len(doc) or not tensor.shape[1]:
        raise ValueError(f"set_vector_hooks: the Doc's tensor has shape {getattr(tensor, 'shape', None)}, not "
                         f"one row per token ({len(doc)}); run the 'elmo' component on it first")
    if _WIDTH_KEY in doc.user_data:
        _check_record(doc)
    _record_rows(doc)
    _install_hooks(doc)
    return doc


def _check_record(doc: Doc) -> None:
    """Refuse a Doc whose record of ELMo rows names other rows than its tensor (n_tokens, D)."""
    tokens = doc.user_data.get(_TOKENS_KEY)
    if tokens == len(doc) and doc.user_data.get(_TEXT_KEY) == len(doc.text):
        try:                    # (its own record: the rows must be those it was made for)
            _elmo_rows(doc)
        except ValueError as e:
            raise ValueError(f"set_vector_hooks: {e}") from None
    elif not _part_of_recorded_rows(doc.tensor):
        raise ValueError(f"set_vector_hooks: the Doc's record of ELMo vectors is of {tokens} tokens, not its "
                         f"{len(doc)}, and its tensor is not a part of those rows (its tokens merged or split, "
                         f"or a part of another Doc changed or copied since): run the 'elmo' component on it")


def _record_rows(doc: Doc, source: Optional[Tuple[Optional[str], Optional[str]]] = None) -> None:
    """Record in ``doc.user_data`` what the Doc's tensor (n_tokens, D) is, as its ELMo rows:
    their width, the Doc's tokens and text length, a digest of the rows, and ``source`` (what
    made them and its name: :attr:`ElmoVectors.source`); without one, the record's is kept."""
    tensor = doc.tensor
    doc.user_data[_WIDTH_KEY], doc.user_data[_TOKENS_KEY] = tensor.shape[1], len(doc)
    doc.user_data[_TEXT_KEY] = len(doc.text)
    if source is not None:
        for key, value in zip((_SOURCE_KEY, _MADE_BY_KEY), source):
            doc.user_data[key] = value
    if isinstance(tensor, np.ndarray):
        doc.user_data[_FINGERPRINT_KEY] = _fingerprint(tensor)
        _checked[(id(tensor), doc.user_data[_FINGERPRINT_KEY])] = tensor
        if id(tensor) not in _recorded_by:      # (the entry goes with its array, as _recorded's)
            weakref.finalize(tensor, _recorded_by.pop, id(tensor), None)
        _recorded[id(tensor)] = tensor
        _recorded_by[id(tensor)] = (doc.user_data.get(_SOURCE_KEY), doc.user_data.get(_MADE_BY_KEY))
    else:  # (not rows this component set: no digest to compare later)
        doc.user_data.pop(_FINGERPRINT_KEY, None)


def _install_hooks(doc: Doc) -> None:
    """Set the Doc's token, span and Doc hooks for ``vector``, ``has_vector`` and ``similarity``,
    and the Doc's for ``vector_norm``."""
    doc.user_token_hooks["vector"] = _token_vector
    doc.user_token_hooks["has_vector"] = _token_has_vector
    doc.user_token_hooks["similarity"] = _similarity
    doc.user_span_hooks["vector"] = _span_vector
    doc.user_span_hooks["has_vector"] = _span_has_vector
    doc.user_span_hooks["similarity"] = _similarity
    doc.user_hooks["vector"] = _doc_vector
    doc.user_hooks["vector_norm"] = _doc_vector_norm
    doc.user_hooks["has_vector"] = _doc_has_vector
    doc.user_hooks["similarity"] = _similarity


class ElmoTaskAnnotator(_BatchedComponent):
    """Runs a saved task model (``elmo experiment --save-models``) on Docs: tags into
    ``token.tag_`` (a ``span_f1`` model's BIO tags also into ``doc.ents``), class labels into
    ``doc.cats`` (1.0 for the predicted label, 0.0 for the others; the cats an earlier
    component set are kept). A token it gives no tag (whitespace, a word past the model's
    ``max_tokens``) is left with none (``tag_`` ""), not with an earlier component's tag; a
    word past ``max_tokens`` has no entity annotation either (``ent_iob_`` "", not "O").

    ``doc._.elmo_tokens_read`` maps each such component's name to the number of the Doc's
    words (its tokens but whitespace; a ``"tokenize": true`` classifier's: its text's words as
    the model splits them) that its model read: fewer than the words for a Doc
    longer than ``max_tokens``, whose tags or label then come from its first words only (as
    the model's training and test texts were cut). The first such Doc is also a warning,
    once per component, as ``elmo predict`` notes its cut lines on stderr."""

    def __init__(self, name: str, model: str, bilm: Optional[str] = None, batch_size: int = 64,
                 glove: Union[str, bool, None] = None):
        from .checks import require_count
        from .tasks.kinds import task_kind
        from .tasks.models import TaskModel
        from .tasks.saved import SavedInfo
        # (checked when the first Doc came, after the pipeline had been built and loaded)
        batch_size = require_count("batch_size", batch_size)
        self.name = name
        self.model = TaskModel.load(model, bilm=bilm, glove=glove)
        self.model_spec, self.weights = model, self.model
        saved = self.model.saved
        assert isinstance(saved, SavedInfo)     # set by load() (mypy sees a Module attribute)
        self.saved = saved
        self.kind = saved.kind
        self.task_kind = task_kind(self.kind)
        if self.task_kind.pair:
            raise ValueError(f"{model}: a pair model labels two texts, not one Doc")
        if self.task_kind.graded:     # (doc.cats was left empty: no classes to score)
            raise ValueError(f"{model}: a {self.kind} model predicts a number, which has no "
                             f"place in a Doc's tags or cats; use TaskModel.load(folder).predict")
        self.metric = saved.config["metric"]
        self.batch_size = batch_size
        self.max_tokens: Optional[int] = saved.max_tokens
        self.cut_noted = False      # (the warning of a Doc longer than max_tokens: once)

    def _digest_settings(self) -> Any:
        """The task model's config (but its record of training: scores, times), labels and
        vocabulary: the same weights under another config.json or labels.json tag otherwise."""
        config = {k: v for k, v in self.saved.config.items() if k != "trained"}
        return [config, self.saved.labels, self.saved.vocab.itos]

    def _texts(self, docs: List[Doc], words: List[List[int]]) -> List[List[str]]:
        """The words the model reads of each Doc: the Doc's words (a tagger's: a tag for each
        token), but for a classifier trained with ``"tokenize": true``, its text split by the
        project's tokenizer, as in training and ``elmo predict``: given spaCy's tokens (``e - mail``,
        ``a@b.com``), the same text could get another label. (A classifier trained on texts split
        at spaces keeps spaCy's tokens: whether its texts were tokenized before is not known.)"""
        if self.task_kind.token_labels or not self.saved.config["tokenize"]:
            return [[_word_text(d[i]) for i in w] for d, w in zip(docs, words)]
        from .tasks.saved import to_examples
        return [ex.tokens for ex in to_examples([d.text for d in docs], self.kind, True)]

    def _set(self, docs: List[Doc]) -> None:
        from .tasks.metrics import bio_spans
        words = [_words(d) for d in docs]
        texts = self._texts(docs, words)
        predicted = self.model.predict(texts, self.batch_size)
        self._record_read(docs, texts, predicted)
        for doc, rows, pred in zip(docs, words, predicted):
            if not self.task_kind.token_labels:
                # added to the Doc's cats, as spaCy's textcat adds its own: replaced, they lost
                # the labels of a component before this one (another elmo_task classifier's)
                doc.cats.update({label: float(label == pred) for label in self.saved.labels})
                continue
            tags = [t for t in pred if t is not None]       # words past max_tokens: not read
            # whitespace tokens and words not read get no tag: they kept the tag a component
            # before this one gave them, one model's tags mixed with another's
            for token in doc:
                token.tag_ = ""
            for i, tag in zip(rows, tags):
                doc[i].tag_ = tag
            if self.metric == "span_f1":                    # word positions -> Doc positions
                ents = [Span(doc, rows[start], rows[end - 1] + 1, label=kind)
                        for kind, start, end in sorted(bio_spans(tags), key=lambda s: s[1])]
                # words past max_tokens were not read: no entity is known there (missing, "");
                # doc.ents made them outside one ("O"), as if the model had read them
                doc.set_ents(ents, missing=[Span(doc, i, i + 1) for i in rows[len(tags):]])

    def _record_read(self, docs: List[Doc], texts: List[List[str]], predicted: list) -> None:
        """Set ``doc._.elmo_tokens_read[name]`` for each Doc, and warn of the first Docs longer
        than the model reads: they were labelled from their first words without a word said."""
        cut = []
        for doc, rows, pred in zip(docs, texts, predicted):
            if self.task_kind.token_labels:   # (None: a word past max_tokens, not read)
                read = sum(t is not None for t in pred)
            else:
                read = len(rows) if not self.max_tokens else min(len(rows), self.max_tokens)
            # (a dict per Doc: the extension's default would be one dict shared by all)
            doc._.set(TOKENS_READ, {**(doc._.get(TOKENS_READ) or {}), self.name: read})
            if read < len(rows):
                cut.append(read)
        if not cut or self.cut_noted:
            return
        self.cut_noted = True
        if self.task_kind.token_labels:
            what = "the words past them have no tag" + (" and no entity annotation" if self.metric == "span_f1" else "")
        else:
            what = "the labels in doc.cats are of those words"
        limit = f"its max_tokens {self.max_tokens}" if self.max_tokens else "its max_tokens"
        docs_, its = ("Doc", "its") if len(cut) == 1 else ("Docs", "their")
        warnings.warn(f"elmo_task {self.name!r}: {len(cut)} {docs_} of this batch longer than the model reads "
                      f"({limit}, as its training and test texts were cut): it read {its} first {min(cut)} words "
                      f"only; {what}; doc._.{TOKENS_READ}[{self.name!r}] says how many words of each Doc it read "
                      f"(this is said once)", UserWarning, stacklevel=2)


def _model_not_found(name: str, model: str, error: Exception, *, names_a_model: bool = False) -> Optional[ValueError]:
    """The error of a component whose ``model``, a path relative to the working folder that
    names nothing there, did not load: a saved pipeline read by ``spacy.load`` from another
    working folder said only that the path was no model. None where the path is there, or
    where ``model`` is a model's name (``names_a_model``: bundled, published, a URL), whose
    own error says what went wrong."""
    if names_a_model or Path(model).is_absolute() or Path(model).exists():
        return None
    return ValueError(
        f"component {name!r}: its model {model!r} is not found from the working folder {Path.cwd()} "
        f"(a relative path is read from there, also by spacy.load): run from the folder it was given "
        f"in, or give its place: spacy.load(PIPELINE, config={{'components.{name}.model': PATH}}) ({error})")


@Language.factory("elmo", default_config={"model": "default", "layers": "average",
                                          "batch_size": 64})
def make_elmo(nlp: Language, name: str, model: str, layers: str, batch_size: int) -> ElmoVectors:
    """ELMo vectors for every token (see the module docstring)."""
    from . import which_model
    from .weights import WeightFileError
    try:
        return ElmoVectors(name, model, layers, batch_size)
    except WeightFileError as e:
        named = which_model(model, warn=False).kind in ("bundled", "published", "url")
        missing = _model_not_found(name, model, e, names_a_model=named)
        if missing is None:
            raise
        raise missing from None


@Language.factory("elmo_task", default_config={"model": None, "bilm": None, "batch_size": 64,
                                               "glove": None})
def make_elmo_task(nlp: Language, name: str, model: Optional[str], bilm: Optional[str],
                   batch_size: int, glove: Union[str, bool, None]) -> ElmoTaskAnnotator:
    """A saved task model's tags, entities or class labels (see the module docstring).

    ``model`` is Optional so that spaCy's config check lets the default None through to the
    one-line error below (as ``str`` it was a multi-line ConfigValidationError about None)."""
    if not model:
        raise ValueError("the elmo_task component needs config={'model': SAVED_MODEL_FOLDER}")
    from .tasks.saved import TaskModelError
    try:
        return ElmoTaskAnnotator(name, model, bilm, batch_size, glove)
    except TaskModelError as e:
        missing = _model_not_found(name, model, e)
        if missing is None:
            raise
        raise missing from None
