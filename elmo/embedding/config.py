"""``EmbedConfig``: every setting of an embedding job (``elmo embed``, :func:`embed_file`).

The defaults are written here once; the ``elmo embed`` options are made from these fields
(:func:`elmo.jobconfig.add_arguments`), and :func:`embed_file` takes a config and/or the same
names as keyword arguments. The lower-level defaults (windows, segment length) stay with the
code that owns them and are only referred to here; the batch size is written here, as the
embedder that owns it imports torch, which ``elmo embed --help`` needs not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from ..jobconfig import DEVICE_CHOICES, setting
from .reader import DEFAULT_SEGMENT_LINES
from .windows import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP

__all__ = ["EmbedConfig"]

#: Sentences per model call (:class:`~elmo.embedding.Embedder`, ``--batch-size``).
DEFAULT_BATCH_SIZE = 64


@dataclass
class EmbedConfig:
    """The settings of an embedding job. The field order is the order in which the options
    are spelled out in the output's ``command_line`` attribute.

    ``layers`` may also be a :class:`~elmo.embedding.layers.LayerSelection` and ``device`` a
    ``torch.device`` when the config is made in Python. ``model`` None means
    ``elmo.DEFAULT_MODEL``; ``elmo embed`` names it, and shows a progress bar unless
    ``--quiet`` (:func:`elmo.commands.embed.command_defaults`)."""

    model: Optional[str] = setting(None, show_default=False,
                                   help="bundled or published model name, model folder or http(s) URL "
                                        "(default: the bundled `default`)")
    # what to write
    layers: str = setting("all", metavar="all|top|average|mix:w0,w1,...",
                          help="all layers (layers, tokens, dim); the top layer, the average of all "
                               "layers, or gamma * sum_j w_j layer_j (tokens, dim)")
    gamma: float = setting(1.0, help="scale of a mix")
    dtype: str = setting("float32", choices=["float32", "float16"],
                         help="stored number type; float16 halves the file")
    sentence_keys: bool = setting(False, show_default=False, help="name each dataset by its sentence instead of its line number "
                                              "(sentences must be unique and non-empty)")
    forget_sentences: bool = setting(False, show_default=False, help="do not store the sentence_to_index dataset")
    # reading the input
    tokenize: Union[bool, str, None] = setting(
        None, help="split raw text into tokens instead of on whitespace: en (the default when no name is "
                   "given) splits punctuation and clitics off as in the training data; zh segments Chinese "
                   "words with jieba (pip install 'elmo-pytorch[zh]'). Without it, pre-segmented text is "
                   "taken as is")
    errors: str = setting("strict", choices=["strict", "replace"],
                          help="bytes that are not UTF-8: an error naming the line, or replaced by U+FFFD")
    # how to run
    batch_size: int = setting(DEFAULT_BATCH_SIZE, help="sentences per model call")
    max_tokens: int = setting(DEFAULT_MAX_TOKENS, help="longer sentences are cut into overlapping windows "
                                                       "of this many tokens and stitched back")
    overlap: Optional[int] = setting(
        None, help=f"tokens shared by consecutive windows (default min({DEFAULT_OVERLAP}, max-tokens / 2, "
                   f"rounded down): {DEFAULT_OVERLAP} with the default --max-tokens)")
    sort_by_length: bool = setting(True, flag="--no-sort", show_default=False,
                                   help="batch sentences in input order instead of by length")
    token_cache: bool = setting(True, flag="--no-token-cache", show_default=False,
                                help="do not cache the character-CNN vectors of frequent words")
    cache_min_count: int = setting(2, help="cache words seen this often in the first --cache-sample lines")
    cache_max_words: int = setting(50_000, help="at most this many cached words")
    cache_sample_lines: int = setting(100_000, flag="--cache-sample",
                                      help="lines counted to choose the cached words")
    stateful: Optional[bool] = setting(
        None, show_default=False,
        help="carry each batch row's LSTM state to the next batch, as the original did (reset at each "
             "segment; recorded in the output's attributes); unset keeps the model's own setting")
    segment_lines: int = setting(DEFAULT_SEGMENT_LINES,
                                 help="lines per segment: the unit that is length-sorted, saved for resuming "
                                      "and given to a rank")
    # (the command line's default is auto, elmo.commands.embed.command_defaults: None loads a
    # named model as auto, and leaves a BiLM passed in where it is)
    device: Optional[str] = setting(None, help=f"{DEVICE_CHOICES}; auto and cuda under torchrun: each "
                                               f"rank's own GPU, cuda:LOCAL_RANK")
    overwrite: bool = setting(False, show_default=False,
                              help="start again, ignoring an existing OUTPUT and OUTPUT.parts/ (the same "
                                   "--overwrite command run again after a stop resumes it)")
    wait_timeout: float = setting(1800.0, metavar="S",
                                  help="under torchrun: rank 0 stops with an error when no other rank has "
                                       "finished a segment for S seconds")
    # a progress bar by default on the command line only (``elmo embed`` sets it True)
    progress: bool = setting(False, flag="--quiet", boolean="negated", show_default=False, help="no progress bar",
                             aliases=("--no-progress",))
