"""The character CNN that turns one token's character ids into its context-free vector x_k.

    char ids (C,) -> embedding (C, d) -> for each width w: conv (C-w+1, n_w) -> max over positions
    -> activation -> concat (F,) -> highway x n -> linear projection (P,)

The ids come from the model's id scheme (``id_scheme``): UTF-8 bytes for the original models
(:class:`elmo.chars.ByteCharIds`), or characters and words through dictionaries for
ELMoForManyLangs models (:class:`elmo.manylangs.CharVocabulary`), whose projection reads
[word vector; F features] when the model has a word embedding.

Speed (the outputs are the same function as the plain computation):
  * every distinct token of a batch is encoded once;
  * character positions past the longest token are trimmed, keeping one window that is all
    padding (the padding character has a learned embedding, so an all-padding window has a
    value of its own that takes part in the max);
  * the distinct tokens are grouped by length (:func:`length_groups`), and each group is
    trimmed to its own longest token, so short words do not pay for the batch's longest;
  * an optional token cache holds the vectors of a vocabulary; cached tokens skip the CNN and
    out-of-vocabulary tokens still go through it.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import TYPE_CHECKING, NamedTuple, Optional, Sequence, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..chars import ByteCharIds
from ..checks import require_count
from ..config import CharCNNConfig
from .autocast import autocast_off
from .conv_pool import conv_max_pool
from .cudnn_precision import full_precision_convolutions
from .dense import linear
from .eager import eager_under_compile, refuse_function_transforms
from .hooks import called_as_module
from .weight_cache import WeightsState, writes_uncounted

# Row hashes used to find duplicate tokens and cached tokens. Any collision is caught by an
# exact comparison afterwards, so these only need to be "usually distinct".
_HASH_SEED = 0x5EED


@functools.lru_cache(maxsize=32)
def _row_hash_weights(width: int, device: torch.device) -> torch.Tensor:
    """(width,) int64 random multipliers, the same for every call (seeded)."""
    # cached: on a GPU each new copy was a blocking host-to-device transfer per forward
    gen = torch.Generator().manual_seed(_HASH_SEED)
    # drawn on the generator's device whatever torch.set_default_device says (a CPU generator
    # drawing onto the default "cuda" device is a RuntimeError), then moved
    return torch.randint(1, 2**62, (width,), generator=gen, dtype=torch.long, device="cpu").to(device)


def hash_rows(ids: torch.Tensor) -> torch.Tensor:
    """(N, C) long -> (N,) long: a hash per row (int64 arithmetic wraps around)."""
    return (ids * _row_hash_weights(ids.shape[1], ids.device)).sum(dim=1)


def unique_rows(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct rows of an (N, C) long tensor and, for each row, the index of its distinct row."""
    _, first, inverse = _unique_with_first(hash_rows(ids))
    distinct = ids[first]
    if not torch.equal(distinct[inverse], ids):  # a hash collision: fall back to the exact sort
        distinct, inverse = torch.unique(ids, dim=0, return_inverse=True)
    return distinct, inverse


def _unique_with_first(keys: torch.Tensor):
    """keys (N,) -> distinct values (U,) sorted, the index of each one's first occurrence (U,)
    int64, and each key's index into the distinct values (N,) int64."""
    values, inverse = torch.unique(keys, return_inverse=True)
    first = torch.full((values.shape[0],), keys.shape[0], dtype=torch.long, device=keys.device)
    first.scatter_reduce_(0, inverse, torch.arange(keys.shape[0], device=keys.device), reduce="amin")
    return values, first, inverse


#: What running the convolutions once more costs, in multiply-adds: a new length group must
#: save more convolution work than this to be worth it. On CPU one more set of calls costs
#: about as much as 28M multiply-adds of convolution (measured with benchmarks/char_cnn.py:
#: about 2,000 token positions of the default model's CNN, 140 of the original's), with
#: nn.Conv1d; not measured again for the matrix-multiply path (CONV_AS_MATMUL).
GROUP_OVERHEAD_MACS = 28_000_000

#: On the CPU, each convolution and its max over positions run as matrix multiplies
#: (:func:`elmo.modules.conv_pool.conv_max_pool`); False runs ``nn.Conv1d`` instead
#: (benchmarks/char_cnn.py times both). Other devices always use ``nn.Conv1d``.
CONV_AS_MATMUL = True


def best_length_groups(values: Sequence[int], counts: Sequence[int], extra: int,
                       overhead: float) -> list[tuple[int, int]]:
    """The split of :func:`length_groups`, on the host: ``values`` the distinct lengths in
    increasing order, ``counts`` their tokens. Returns each group's (first, after last) index
    into ``values``, shortest group first."""
    k = len(values)
    # best[j]: least cost of the j shortest distinct lengths; cut[j]: where its last group starts
    best, cut = [0.0] + [float("inf")] * k, [0] * (k + 1)
    for j in range(1, k + 1):
        tokens = 0
        for i in range(j, 0, -1):                               # last group: values[i-1 .. j-1]
            tokens += counts[i - 1]
            cost = best[i - 1] + tokens * (values[j - 1] + extra) + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i - 1
    bounds, j = [], k
    while j > 0:
        bounds.append((cut[j], j))
        j = cut[j]
    return bounds[::-1]


def length_groups(lengths: torch.Tensor, extra: int,
                  overhead: float) -> list[tuple[torch.Tensor, int]]:
    """Split tokens into groups by length to minimise the convolution work.

    A group of n tokens whose longest is L costs n * (L + extra) positions, plus ``overhead``
    per group; the best split of the sorted lengths is found exactly by dynamic programming
    over the (at most 50) distinct lengths (:func:`best_length_groups`).

    Args:
        lengths: (N,) long, each token's characters (including the word markers).
        extra: positions added to a group's longest length (the widest filter).
        overhead: the cost of one more group, in token positions.
    Returns:
        ``[(indices into lengths (n_g,), width kept for the group)]``, shortest group first;
        each group's indices ascending.

    Reads the device twice whatever the number of groups (on a GPU each read waits for the
    queued work): the distinct lengths, then their values and counts together.
    """
    distinct, repeats = torch.unique(lengths, return_counts=True)  # sorted distinct lengths
    values, counts = torch.stack([distinct, repeats]).tolist()
    bounds = best_length_groups(values, counts, extra, overhead)
    if len(bounds) <= 1:  # (none for no tokens)
        indices: Sequence[torch.Tensor] = [torch.arange(len(lengths), device=lengths.device)]
    else:
        # each token's group: how many groups' longest lengths it exceeds (python scalars, no
        # copy to the device); a stable sort by group keeps each group's tokens ascending, and
        # the host's counts cut it into the groups without a nonzero (a read per group)
        group = torch.zeros_like(lengths)
        for _, hi in bounds[:-1]:
            group += lengths > values[hi - 1]
        indices = torch.argsort(group, stable=True).split([sum(counts[lo:hi]) for lo, hi in bounds])
    return [(index, values[hi - 1] + extra) for index, (_, hi) in zip(indices, bounds)]


class TokenCache(NamedTuple):
    """The precomputed vectors of :meth:`CharCNN.build_token_cache`, sorted by hash: char-id
    rows ``ids`` (V, C), their ``hashes`` (V,) and the token ``vectors`` (V, P)."""

    ids: torch.Tensor
    hashes: torch.Tensor
    vectors: torch.Tensor


class _CacheEntry(NamedTuple):
    """A token cache and the state of the weights its vectors were made from: one object,
    never changed, replaced whole (a reader never pairs one build's cache with another's key)."""

    cache: TokenCache
    key: WeightsState


# Held only to swap a CharCNN's cache entry (never while vectors are computed): a remade entry
# replaces only the one it was made from (see CharCNN._current_token_cache). One for all
# modules, so that none holds a lock that deepcopy or pickle would refuse.
_SWAP_LOCK = threading.Lock()


class Highway(nn.Module):
    """Highway layers in the original convention.

    For each layer: t = sigmoid(x W_carry + b_carry); y = t * relu(x W_transform + b_transform)
    + (1 - t) * x. The carry and transform products share one matrix multiply.
    """

    def __init__(self, dim: int, n_layers: int):
        super().__init__()
        self.dim = dim
        # weight rows [0, dim) are the carry gate, rows [dim, 2 dim) the transform.
        # an nn.ModuleList, typed by its items (torch's stubs give them as plain Module)
        self.layers = cast("Sequence[nn.Linear]",
                           nn.ModuleList(nn.Linear(dim, 2 * dim) for _ in range(n_layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (N, dim) -> (N, dim)."""
        for layer in self.layers:
            # a layer with hooks, or another module in its place, is called (elmo.modules.hooks)
            both = layer(x) if called_as_module(layer, nn.Linear) else linear(x, layer.weight, layer.bias)
            carry, transform = both.split(self.dim, dim=-1)
            t = torch.sigmoid(carry)
            x = t * F.relu(transform) + (1.0 - t) * x
        return x

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward


def require_integer_ids(char_ids: torch.Tensor, start_id: Optional[int] = None) -> None:
    """TypeError unless ``char_ids`` holds integers (any integer dtype; not bool), of a type
    that holds ``start_id``, the id every token starts with (where given): byte ids converted
    to uint8 wrapped 259 .. 261 around to 3 .. 5 and were read as other characters."""
    if char_ids.dtype == torch.bool or char_ids.is_floating_point() or char_ids.is_complex():
        raise TypeError(f"char_ids must hold integer ids (torch.long), got {char_ids.dtype}: "
                        f"make them with bilm.token_ids(sentences) or elmo.batch_to_ids")
    if start_id is not None and torch.iinfo(char_ids.dtype).max < start_id:
        raise TypeError(f"char_ids are {char_ids.dtype}, which stops at {torch.iinfo(char_ids.dtype).max}; "
                        f"this model's tokens start with id {start_id}, so ids converted to it have "
                        f"wrapped around: keep them torch.long (or int32)")


def require_weights_with_values(weight: torch.Tensor, module: str) -> None:
    """ValueError for a model on the meta device (``.to("meta")``, or built under
    ``torch.device("meta")`` to be filled later): it holds no weights. The device check then
    said to move the ids to the meta device too, and the call failed inside PyTorch with
    "Cannot copy out of meta tensor; no data!"."""
    if weight.is_meta:
        raise ValueError(f"this {module} is on the meta device, which holds no weights: load them first "
                         f"(elmo.from_pretrained, or module.to_empty(device='cpu') and load_state_dict)")


class CharCNN(nn.Module):
    """Token ids (B, T, W) -> token vectors (B, T, output_dim), zeros where there is no token.

    Args:
        config: the CNN's options.
        output_dim: P, the projection width.
        id_scheme: how tokens become ids (default: byte ids, :class:`elmo.chars.ByteCharIds`);
            W = ``id_scheme.width``.
        n_char_rows, n_word_rows, word_dim: embedding sizes for a dictionary model, used when
            its id scheme is not at hand (weights only); default: those of ``id_scheme``.
    """

    def __init__(self, config: CharCNNConfig, output_dim: int, id_scheme=None, *,
                 n_char_rows: Optional[int] = None, n_word_rows: Optional[int] = None,
                 word_dim: int = 0):
        super().__init__()
        # (elmo.CharCNN is public: a dict of options failed with an AttributeError, and a width
        # of 0 made a model whose token vectors were empty)
        if not isinstance(config, CharCNNConfig):
            raise TypeError(f"CharCNN takes a CharCNNConfig (ElmoOptions.char_cnn), got {type(config).__name__}")
        output_dim = require_count("output_dim", output_dim)
        self.config = config
        self.output_dim = output_dim
        if id_scheme is None and n_char_rows is None:
            id_scheme = ByteCharIds(config.max_characters_per_token)
        self.id_scheme = id_scheme
        if n_char_rows is None:
            n_char_rows = id_scheme.n_char_rows
        if n_word_rows is None:
            n_word_rows = id_scheme.n_word_rows if id_scheme is not None else 0
        self.max_chars = config.max_characters_per_token
        # Row 0 is "no character" and stays zero; byte ids run up to 261 (padding 260 + 1).
        self.char_embedding = nn.Embedding(n_char_rows, config.embedding_dim, padding_idx=0)
        # A word embedding (dictionary models only): its id is the last of a token's ids.
        self.word_embedding = (nn.Embedding(n_word_rows, word_dim, padding_idx=0)
                               if word_dim > 0 else None)
        self.convolutions = cast("Sequence[nn.Conv1d]", nn.ModuleList(  # see Highway.layers
            nn.Conv1d(config.embedding_dim, n, kernel_size=w) for w, n in config.filters))
        self.highway = Highway(config.n_filters, config.n_highway)
        self.projection = nn.Linear(word_dim + config.n_filters, output_dim)
        self._activation = torch.tanh if config.activation == "tanh" else F.relu
        self._token_cache_entry: Optional[_CacheEntry] = None  # see build_token_cache

    # ------------------------------------------------------------------ the computation
    def encode_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """Distinct tokens (N, W) -> vectors (N, output_dim); no padding rows expected."""
        if ids.shape[0] == 0:
            return self._vectors_like.new_zeros(0, self.output_dim)
        word_vectors = (self.word_embedding(ids[:, self.max_chars])
                        if self.word_embedding is not None else None)
        ids = ids[:, :self.max_chars]
        # A token's length: up to its last id that is not padding (its closing marker).
        real = (ids != self.require_id_scheme().pad_id) & (ids != 0)
        lengths = (real * torch.arange(1, ids.shape[1] + 1, device=ids.device)).amax(dim=1)  # (N,)
        # Each group keeps its longest token plus max_width positions, so that any token
        # shorter than the kept width still sees one window of padding only.
        groups = length_groups(lengths, self.config.max_width, self._group_overhead_positions())
        if len(groups) == 1:
            pooled = self._pooled(ids, groups[0][1])
        else:
            parts = [self._pooled(ids[index], keep) for index, keep in groups]
            order = torch.cat([index for index, _ in groups])
            pooled = parts[0].new_empty(ids.shape[0], parts[0].shape[1]).index_copy(
                0, order, torch.cat(parts))
        features = self.highway(self._activation(pooled))                      # (N, F)
        if word_vectors is not None:  # the word vector comes first in the projection's input
            features = torch.cat([word_vectors, features], dim=1)
        if called_as_module(self.projection, nn.Linear):  # hooks, or another module: see hooks.py
            return self.projection(features)
        # float32: PyTorch's product (oneDNN's ran at MKL's speed here); bf16 autocast: rows rounded
        return linear(features, self.projection.weight, self.projection.bias, float32_in_onednn=False)

    @property
    def _vectors_like(self) -> torch.Tensor:
        """A weight with the dtype and device of the token vectors: the character embedding's
        (the projection may be a module without a weight tensor: see elmo.modules.hooks)."""
        return self.char_embedding.weight

    def require_id_scheme(self):
        """The id scheme; a model built from options alone may lack its dictionaries."""
        if self.id_scheme is None:
            raise RuntimeError("this model reads characters through a dictionary (char.dic) and "
                               "none is attached: load its folder with elmo.from_pretrained")
        return self.id_scheme

    def _group_overhead_positions(self) -> float:
        """:data:`GROUP_OVERHEAD_MACS` in token positions of this CNN's convolutions."""
        macs_per_position = self.config.embedding_dim * sum(w * n for w, n in self.config.filters)
        return GROUP_OVERHEAD_MACS / macs_per_position

    def _pooled(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        """(N, C) char ids -> (N, F) max over positions of every convolution, using the first
        ``keep`` character positions (before the activation)."""
        chars = self.char_embedding(ids[:, :min(ids.shape[1], keep)])   # (N, keep, d)
        # convolutions with hooks, or other modules in their place, are called (elmo.modules.hooks)
        if chars.device.type == "cpu" and CONV_AS_MATMUL and \
                not any(called_as_module(conv, nn.Conv1d) for conv in self.convolutions):
            return torch.cat([conv_max_pool(chars, conv.weight, conv.bias) for conv in self.convolutions],
                             dim=1)
        chars = chars.transpose(1, 2)                                           # (N, d, keep)
        # max with indices, not amax: its backward scatters into one position per filter
        # instead of comparing the whole (N, n_w, width) map with the maximum again
        with full_precision_convolutions(chars):
            return torch.cat([conv(chars).max(dim=2).values for conv in self.convolutions], dim=1)

    def check_ids(self, char_ids: torch.Tensor) -> None:
        """Raises TypeError unless ``char_ids`` (..., C) holds integers, and ValueError where an
        id is negative or past this model's embedding rows (ids made for another model, or not
        ids at all), or, where the id scheme says how each token's ids start
        (``check_start``: a dictionary model), a token starts otherwise. Without it, such ids
        meet an index error deep in PyTorch, a token of negative ids would silently count as
        padding, and byte ids would be read through a dictionary. One read of the device."""
        require_integer_ids(char_ids, None if self.id_scheme is None else self.id_scheme.start_id)
        self.refuse_bad_ids(char_ids, self.id_figures(char_ids).tolist())

    def _id_columns(self, char_ids: torch.Tensor) -> list[tuple[str, torch.Tensor, int]]:
        """(what, ids, embedding rows) of each kind of id ``char_ids`` holds any of: the
        characters, then the word ids of a model with a word embedding."""
        if char_ids.numel() == 0:
            return []
        columns = [("character", char_ids[..., :self.max_chars], self.char_embedding.num_embeddings)]
        if self.word_embedding is not None:  # dictionary models: the word id after the characters
            columns.append(("word", char_ids[..., self.max_chars:], self.word_embedding.num_embeddings))
        return [column for column in columns if column[1].numel() > 0]

    def _checks_start(self, char_ids: torch.Tensor) -> bool:
        return self.id_scheme is not None and self.id_scheme.check_start and char_ids.numel() > 0

    def id_figures(self, char_ids: torch.Tensor) -> torch.Tensor:
        """What :meth:`check_ids` decides by, as one (k,) int64 tensor on the ids' device, so
        that a caller can read it together with its own figures in one read: the lowest and
        highest id of each kind (:meth:`_id_columns`), then, where the scheme checks each
        token's start, 1 if a token starts otherwise, else 0. Give the values read to
        :meth:`refuse_bad_ids`."""
        parts = [torch.stack(torch.aminmax(ids)).long() for _, ids, _ in self._id_columns(char_ids)]
        if self._checks_start(char_ids):
            present = (char_ids > 0).any(dim=-1)
            parts.append((present & (char_ids[..., 0] != self.id_scheme.start_id)).any().long().reshape(1))
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long, device=char_ids.device)

    def refuse_bad_ids(self, char_ids: torch.Tensor, figures: Sequence[int]) -> None:
        """ValueError for what :meth:`id_figures` found in ``char_ids`` (``figures``: its
        values, read to the host)."""
        columns = self._id_columns(char_ids)
        for k, (what, _, rows) in enumerate(columns):
            low, high = figures[2 * k], figures[2 * k + 1]
            if low < 0 or high >= rows:
                raise ValueError(f"char_ids hold {what} id {low if low < 0 else high}, but this model's "
                                 f"{what} ids run from 0 (padding) to {rows - 1}: were they made for "
                                 f"another model? Make them with bilm.token_ids(sentences)")
        if self._checks_start(char_ids) and figures[2 * len(columns)]:
            # e.g. byte ids (batch_to_ids) given to a model whose characters go through a dictionary
            raise ValueError(f"these ids were not made for this model (each token's ids start with "
                             f"{self.require_id_scheme().start_id} here): convert with bilm.token_ids(sentences)")

    @property
    def ids_width(self) -> int:
        """W, the ids per token: the characters, then the word id of a model with a word
        embedding."""
        if self.id_scheme is not None:
            return self.id_scheme.width
        return self.max_chars + (1 if self.word_embedding is not None else 0)

    def check_shape(self, char_ids: torch.Tensor) -> None:
        """TypeError unless ``char_ids`` is a tensor, ValueError unless it is (B, T, W) on this
        model's device. Another W was read silently: fewer ids cut long words short (other
        vectors), more were ignored (or, for a model with word ids, read one as the word)."""
        if not isinstance(char_ids, torch.Tensor):
            raise TypeError(f"char_ids must be a torch.Tensor of ids, got {type(char_ids).__name__}: "
                            f"make them with bilm.token_ids(sentences) or elmo.batch_to_ids")
        if char_ids.dim() != 3 or char_ids.shape[-1] != self.ids_width:
            raise ValueError(f"char_ids must be (batch, tokens, {self.ids_width}) for this model's "
                             f"CharCNN, got shape {tuple(char_ids.shape)} (bilm.token_ids(sentences) "
                             f"makes them; a BiLM also takes any leading shape)")
        weights = self.char_embedding.weight
        require_weights_with_values(weights, "CharCNN")
        if char_ids.device != weights.device:  # else an error deep in PyTorch (or the meta backend)
            raise ValueError(f"char_ids are on {char_ids.device} and the model on {weights.device}: "
                             f"move them with char_ids.to({str(weights.device)!r})")

    @eager_under_compile
    def forward(self, char_ids: torch.Tensor, token_positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """char_ids: (B, T, W) integer ids, zeros at padded positions -> (B, T, output_dim).
        Ids of another shape (:meth:`check_shape`) or that this model cannot read
        (:meth:`check_ids`) raise.

        ``token_positions``: (N,) int64 on the ids' device, the flat positions b * T + t that
        hold a token (any id above 0), ascending, from a caller that has found them and
        checked the ids already (:class:`elmo.modules.bilm.BiLM` does, from the lengths it
        reads once): neither is done again here (each is a read of the device, a wait on a
        GPU). Positions that leave out a token, or name padding, give wrong vectors."""
        refuse_function_transforms("CharCNN")
        self.check_shape(char_ids)
        if token_positions is None:
            self.check_ids(char_ids)
        char_ids = char_ids.long()
        batch, steps, n_chars = char_ids.shape
        flat = char_ids.reshape(-1, n_chars)
        out = self._vectors_like.new_zeros(batch * steps, self.output_dim)
        if token_positions is None:
            present = (flat > 0).any(dim=1)
            if not bool(present.any()):
                return out.view(batch, steps, self.output_dim)
            token_positions = present.nonzero().squeeze(1)
        elif token_positions.numel() == 0:
            return out.view(batch, steps, self.output_dim)
        self.require_id_scheme()   # (a dictionary model without its dictionaries: said here)
        distinct, inverse = unique_rows(flat[token_positions])
        vectors = self._encode_with_cache(distinct)
        # Under autocast the vectors come in its dtype (bfloat16). The CPU's autocast promotes
        # index_copy's operands to the wider dtype; CUDA's does not, and index_copy refused
        # the mix: every bf16 autocast training step on a GPU failed here. Cast as the CPU does.
        out = out.index_copy(0, token_positions, vectors[inverse].to(out.dtype))
        return out.view(batch, steps, self.output_dim)

    if TYPE_CHECKING:  # a call runs forward; torch types it Callable[..., Any], so say what it takes
        __call__ = forward

    def _encode_with_cache(self, distinct: torch.Tensor) -> torch.Tensor:
        """Distinct tokens (N, W) int64 -> vectors (N, output_dim): from the token cache where it
        holds them and may be used (in the weights' dtype), else from the CNN (in autocast's
        dtype under autocast)."""
        # Gradients for the CNN's weights need the CNN itself: in eval() mode too, where the
        # cached vectors gave them none. Weights in shared memory may have been written by
        # another process, and inference tensors count no writes (see weight_cache): the
        # vectors could be stale.
        entry = self._token_cache_entry  # read once: this call's one snapshot (build_token_cache)
        if entry is None:
            return self.encode_tokens(distinct)
        params = list(self.parameters())
        if (torch.is_grad_enabled() and any(p.requires_grad for p in params)) or writes_uncounted(params):
            return self.encode_tokens(distinct)
        cache = self._current_token_cache(entry, params)
        hashes = hash_rows(distinct)
        slot = torch.searchsorted(cache.hashes, hashes).clamp_(max=cache.hashes.shape[0] - 1)
        hit = (cache.ids[slot] == distinct).all(dim=1)  # hash matches are verified exactly
        vectors = cache.vectors[slot].to(self._vectors_like.dtype)
        if not bool(hit.all()):
            miss = (~hit).nonzero().squeeze(1)
            # (in the weights' dtype under autocast too: see forward)
            vectors = vectors.index_copy(0, miss, self.encode_tokens(distinct[miss]).to(vectors.dtype))
        return vectors

    # ------------------------------------------------------------------ the token cache
    def _current_token_cache(self, entry: _CacheEntry, params: Sequence[torch.Tensor]) -> TokenCache:
        """``entry``'s cache, its vectors made again from its ids where a weight (``params``,
        this module's parameters) has changed since they were made (an optimizer step,
        ``load_state_dict``, ``.to()``): stale vectors gave the cached words the old weights'
        vectors and the other words the new ones. The remade entry is kept only in place of
        ``entry``: a cache built or cleared meanwhile by another thread stays."""
        if entry.key.matches(params):
            return entry.cache
        key = WeightsState(params)  # before the vectors: see build_token_cache
        remade = _CacheEntry(entry.cache._replace(vectors=self._encode_in_batches(entry.cache.ids)), key)
        self._swap_token_cache(remade, expected=entry)
        return remade.cache

    def _swap_token_cache(self, entry: Optional[_CacheEntry], expected: object = ...) -> None:
        """Set the cache entry (all writes go through here), only if it is still ``expected``
        when one is given."""
        with _SWAP_LOCK:
            if expected is ... or self._token_cache_entry is expected:
                self._token_cache_entry = entry

    @torch.no_grad()
    def _encode_in_batches(self, ids: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
        """The cache's vectors (V, output_dim) of distinct tokens ``ids`` (V, W), in the weights'
        precision: kept for later calls with autocast or without, they are made outside it
        (built or remade under bf16 autocast, they stayed rounded to bfloat16, and float32
        calls gave the cached words vectors 4e-3 off the CNN's while other words got exact ones)."""
        with autocast_off(ids.device.type):
            return torch.cat([self.encode_tokens(ids[i:i + batch_size]) for i in range(0, ids.shape[0], batch_size)])

    @torch.no_grad()
    def build_token_cache(self, words: Sequence[str], batch_size: int = 4096) -> None:
        """Precompute the vectors of ``words`` (plus the sentence boundaries).

        Cached tokens then skip the CNN; other tokens are still encoded by it, so the output is
        the same up to float32 rounding (the cached vectors were computed in other groups of
        words), only its cost changes. The vectors are made again after a change of the weights
        that PyTorch counts (optimizer steps, ``load_state_dict``, ``.to()``; after writing
        through ``param.data``, build the cache again). It is not used where gradients for the
        CNN's weights are computed, nor for weights in shared memory (``share_memory()``), which
        another process may have written uncounted (see :mod:`elmo.modules.weight_cache`).

        Threads: each call of the CNN reads the cache once and uses that one (cache, weights
        state) pair throughout, whatever other threads build, clear or remake meanwhile, so it
        never sees a half-replaced cache or fails on one cleared under it. The weights' state is
        taken before the vectors are computed: a weight written during a build or remake makes
        the vectors remade at the next use, never taken for the new weights' own. A remake
        replaces only the entry it was made from (a newer build or a clear stays).
        """
        if isinstance(words, str):  # its characters would be cached as the words
            raise TypeError("build_token_cache expects a list of words, not a string")
        if not hasattr(words, "__iter__"):  # (None was "'NoneType' object is not iterable")
            raise TypeError(f"build_token_cache expects a list of words, got {type(words).__name__}")
        words = list(words)
        for word in words:
            if not isinstance(word, str):
                raise TypeError(f"build_token_cache: words must be strings, got "
                                f"{type(word).__name__}: {word!r}")
        # (on the meta device there are no weights to make vectors with: torch.unique failed
        # there with a NotImplementedError about fake kernels)
        require_weights_with_values(self.char_embedding.weight, "CharCNN")
        scheme = self.require_id_scheme()
        rows = torch.tensor([scheme.bos_row, scheme.eos_row], dtype=torch.long)
        ids = torch.cat([rows, scheme.token_rows(list(dict.fromkeys(words)))])
        ids, _ = unique_rows(ids.to(self._vectors_like.device))
        # (the state before the vectors: taken after them, a weight written meanwhile by another
        # thread was taken for the one they were made from, and they were never remade)
        key = WeightsState(self.parameters())
        vectors = self._encode_in_batches(ids, batch_size)
        hashes = hash_rows(ids)
        order = torch.argsort(hashes)
        self._swap_token_cache(_CacheEntry(TokenCache(ids[order], hashes[order], vectors[order]), key))

    def clear_token_cache(self) -> None:
        """Drop the cache (a call already running goes on with the one it read)."""
        self._swap_token_cache(None)

    @property
    def _token_cache(self) -> Optional[TokenCache]:
        """The current cache, or None."""
        entry = self._token_cache_entry
        return None if entry is None else entry.cache

    @property
    def _token_cache_key(self) -> WeightsState:
        """The state of the weights the current cache's vectors were made from (that of no
        weights without a cache)."""
        entry = self._token_cache_entry
        return WeightsState() if entry is None else entry.key

    @contextlib.contextmanager
    def token_cache_kept(self):
        """Run a block that may build or clear the token cache, then put back the cache there
        was before it (a caller's, such as ``Elmo(vocab_to_cache=...)``'s over the same model).
        The block must not move the module (``.to()``): the cache put back is where it was."""
        saved = self._token_cache_entry
        try:
            yield
        finally:
            self._swap_token_cache(saved)

    @property
    def token_cache_size(self) -> int:
        cache = self._token_cache
        return 0 if cache is None else int(cache.ids.shape[0])

    def _apply(self, fn, *args, **kwargs):
        # Keep the cache on the module's device when it moves (.to / .cuda), and make its
        # vectors again (the weights have new values, whatever their addresses).
        result = super()._apply(fn, *args, **kwargs)
        entry = self._token_cache_entry
        if entry is not None:
            dev = self._vectors_like.device
            self._swap_token_cache(_CacheEntry(TokenCache(*(t.to(dev) for t in entry.cache)), WeightsState()))
        return result
