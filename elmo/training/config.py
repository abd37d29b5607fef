"""A training run's settings: :class:`TrainConfig` (saved as ``train_config.json``), the
recipe's defaults for the settings left unset (:func:`recipe_defaults`,
:func:`with_recipe_defaults`) and the digest that recognises a warm restart's command
(:func:`restart_settings`)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..text_files import read_json
from ..jobconfig import build, setting
from .schedule import PlateauDecay


#: The original's Adagrad initial accumulator and gradient-norm clip, on its gradient (that of
#: unroll_steps times the mean loss): :func:`recipe_defaults` turns them into ours.
ORIGINAL_ADAGRAD_INIT = 1.0
ORIGINAL_CLIP_NORM = 10.0
#: The default time steps per batch of the packed layout (``--unroll-steps``).
UNROLL_STEPS = 20
#: The default relative improvement that counts as progress for the decay (``--lr-decay-threshold``).
LR_DECAY_THRESHOLD = 0.01
#: The largest float32 number: the weights' type, and that of the step sizes PyTorch's updates take.
FLOAT32_MAX = (2 - 2 ** -23) * 2 ** 127
#: How much larger than --lr an optimizer's first step size is: Adam's is lr / (1 - beta1), with
#: PyTorch's beta1 of 0.9 (which build_optimizer keeps); Adagrad's at most lr.
FIRST_STEP_FACTOR = {"adagrad": 1.0, "adam": 1 / (1 - 0.9)}
#: The largest ``--seed`` (in size): the run seeds torch's generators with ``seed * 1000 + 17 +
#: rank``, and torch takes 64-bit seeds only (a larger one failed at the start as "Overflow when
#: unpacking long long", naming no option); 2**53 times 1000 plus any rank stays below 2**63.
MAX_SEED = 2 ** 53


def _setting_list(text: str) -> List[str]:
    return [x for x in text.split(",") if x]


@dataclass
class TrainConfig:
    """Everything that defines a training run (saved as ``train_config.json``). The options of
    ``elmo train`` and ``elmo finetune`` are made from the fields with help text
    (:mod:`elmo.jobconfig`); the model's shape is ``options``, set by the model flags."""

    train: List[str]                      # files, globs or folders; one tokenized sentence a line
    vocab: str = setting(help="vocabulary file (words by descending frequency); with --from, the model's")
    output: str = setting(help="run folder", short="-o", aliases=("--out",))
    options: Dict[str, Any] = field(default_factory=dict)  # model options (lstm, char_cnn)
    valid: List[str] = setting(default_factory=list, help="held-out text for perplexity")
    init_from: Optional[str] = setting(
        None, flag="--from", help="warm start: continue training this trained model folder (weights and "
                                  "vocabulary kept, a fresh optimizer)")
    batch_size: int = setting(128, help="rows per process")
    unroll_steps: int = setting(UNROLL_STEPS, help="time steps per batch (packed layout)")
    layout: str = setting("packed", choices=["packed", "bucketed"],
                          help="packed: sentences end to end, state carried across batches (the original); "
                               "bucketed: one sentence a row, zero state")
    state_reset_every: int = setting(0, help="packed layout: zero each row's carried state every K batches, "
                                             "staggered over the rows (bounds the context age; 0 = carry "
                                             "forever, as the original)")
    epochs: float = setting(10.0, help="passes over the text")
    max_steps: Optional[int] = setting(None, help="stop after this many steps (overrides --epochs)")
    max_seconds: Optional[float] = setting(None, flag="--max-hours", scale=3600.0,
                                           help="stop after this much training time, then evaluate and export")
    optimizer: str = setting("adagrad", choices=["adagrad", "adam"], help="the optimizer")
    lr: Optional[float] = setting(None, show_default=False,
                                  help="learning rate (default 0.2 for adagrad, 0.001 for adam)")
    adagrad_init: Optional[float] = setting(
        None, show_default=False, help="Adagrad initial accumulator (default 1/unroll-steps^2, 0.0025: the "
                                       "original's 1.0 on its gradient, which is unroll-steps times ours; "
                                       "1.0 for a warm start, --from or finetune)")
    lr_decay: float = setting(1.0, help="multiply the learning rate by this at every validation run whose "
                                        "perplexity is not --lr-decay-threshold below the best so far (needs "
                                        "--valid and --eval-every; 1 = never; Kim et al. 2016 halve it: 0.5)")
    lr_decay_threshold: float = setting(LR_DECAY_THRESHOLD, help="relative improvement of the validation perplexity that "
                                                   "counts as progress for --lr-decay")
    lr_restart: bool = setting(False, help="on resume: start the learning rate again at --lr (a warm "
                                           "restart), also when --lr is the rate the run started from; "
                                           "once: the same command run again goes on from the restart; "
                                           "without it a resume keeps the decayed rate", show_default=False)
    clip_norm: Optional[float] = setting(
        None, show_default=False, help="global gradient-norm clip (default for adagrad 10/unroll-steps, 0.5: "
                                       "the original's 10 on its gradient, which is unroll-steps times ours; "
                                       "10 for adam and for a warm start)")
    dropout: float = setting(0.1, help="on LSTM inputs and before the softmax")
    n_negative: int = setting(8192, flag="--negatives",
                              help="shared sampled-softmax negatives per batch; 0 = full softmax")
    shuffle: bool = setting(True, help="read shards and sentences in file order", show_default=False)
    seed: int = setting(0, help="seed of the data order, dropout and sampling")
    checkpoint_every: int = setting(1000, help="steps between checkpoints")
    keep_checkpoints: int = setting(3, help="newest checkpoints kept")
    log_every: int = setting(20, help="steps between log lines")
    eval_every: int = setting(0, help="steps between validation runs; 0 = at the end")
    eval_batch_size: int = setting(32, help="sentences per validation batch")
    device: str = setting("auto", help="cpu, cuda, cuda:N or auto (CUDA when present)")
    bf16: bool = setting(False, help="bfloat16 autocast (opt-in; default exact fp32)", show_default=False)
    progress: bool = setting(True, help="no progress bar", show_default=False, aliases=("--quiet",))
    export: bool = True
    metadata: Dict[str, Any] = field(default_factory=dict)  # extra facts for metadata.json
    allow_change: List[str] = setting(
        default_factory=list, parse=_setting_list, metavar="SETTING[,SETTING]",
        help="on resume, let these settings differ from the checkpoint's: lr, lr-decay, lr-decay-threshold, "
             "state-reset-every, dropout, "
             "clip-norm, bf16 (e.g. a learning-rate decay between phases). Run length, intervals, validation "
             "text, device and threads may always change; anything else is refused")

    def __post_init__(self):
        if self.lr is None:  # the optimizer's usual rate
            self.lr = 0.2 if self.optimizer == "adagrad" else 0.001
        self._check_ranges()
        self.new_schedule()  # checks the decay settings now, not at the first validation run
        if self.lr_decay < 1.0 and not self.valid:
            raise ValueError("--lr-decay needs held-out text (--valid) and validation runs (--eval-every STEPS)")
        if self.lr_decay < 1.0 and not self.eval_every:
            raise ValueError("--lr-decay needs validation runs (--eval-every STEPS)")
        self._check_combinations()

    def _check_combinations(self) -> None:
        """Refuse a setting that the rest of the config leaves without effect (it was ignored
        without a word), naming it.

        A value is taken as given when it differs from the setting's default: the config does
        not know where a value came from (an option, ``--config``, ``--set``, a saved
        ``train_config.json``), and a default there is never a problem, so a saved config
        (which holds every setting) and ``--print-config`` round trips pass. A default given
        explicitly (``--unroll-steps 20 --layout bucketed``) is taken, as it changes nothing.
        A resume compares such settings only where they take effect (:mod:`.resume`)."""
        if self.layout == "bucketed" and self.state_reset_every:
            raise ValueError(f"--state-reset-every {self.state_reset_every} applies to --layout packed, whose rows "
                             f"carry their LSTM state from batch to batch; --layout bucketed starts every row "
                             f"from a zero state")
        if self.layout == "bucketed" and self.unroll_steps != UNROLL_STEPS:
            raise ValueError(f"--unroll-steps {self.unroll_steps} applies to --layout packed; --layout bucketed "
                             f"reads one whole sentence a row")
        # (1.0: the default in configs saved before the default followed the gradient's scale)
        if self.optimizer != "adagrad" and self.adagrad_init not in (None, ORIGINAL_ADAGRAD_INIT):
            raise ValueError(f"--adagrad-init {self.adagrad_init} applies to --optimizer adagrad, not "
                             f"{self.optimizer}")
        if self.eval_every and not self.valid:
            raise ValueError(f"--eval-every {self.eval_every} needs held-out text (--valid) to validate on")
        if self.lr_decay >= 1.0 and self.lr_decay_threshold != LR_DECAY_THRESHOLD:
            raise ValueError(f"--lr-decay-threshold {self.lr_decay_threshold} applies to a decay (--lr-decay below "
                             f"1); with --lr-decay {self.lr_decay:g} the rate is never decayed")

    def _check_ranges(self) -> None:
        """Refuse numbers that would crash later, train nothing or corrupt the weights (a NaN
        clip norm made every gradient NaN), each named by its option."""
        counts = {"--batch-size": (self.batch_size, 1), "--unroll-steps": (self.unroll_steps, 1),
                  "--state-reset-every": (self.state_reset_every, 0), "--negatives": (self.n_negative, 0),
                  "--checkpoint-every": (self.checkpoint_every, 1), "--keep-checkpoints": (self.keep_checkpoints, 1),
                  "--log-every": (self.log_every, 1), "--eval-every": (self.eval_every, 0),
                  "--eval-batch-size": (self.eval_batch_size, 1)}
        if self.max_steps is not None:
            counts["--max-steps"] = (self.max_steps, 1)
        for flag, (value, least) in counts.items():
            if value < least:
                raise ValueError(f"{flag} must be at least {least}, got {value}")
        # positive (inf allowed: no limit, no clipping); NaN fails every comparison
        positive = {"--epochs": self.epochs}
        if self.clip_norm is not None:
            positive["--clip-norm"] = self.clip_norm
        if self.max_seconds is not None:
            positive["--max-hours"] = self.max_seconds / 3600.0
        for flag, number in positive.items():
            if not number > 0:
                raise ValueError(f"{flag} must be a positive number, got {number}")
        if self.epochs == math.inf and self.max_steps is None:  # (an OverflowError counting steps)
            raise ValueError("--epochs inf needs --max-steps: the step count of the schedule must be finite")
        assert self.lr is not None, "__post_init__ sets the optimizer's usual rate"
        if not 0.0 <= self.lr < math.inf:  # (0 keeps the weights as they are)
            raise ValueError(f"--lr must be a finite number of 0 or more, got {self.lr}")
        # (a step size that is no float32 number stopped the run at its first step with a traceback,
        # "value cannot be converted to type float without overflow")
        factor = FIRST_STEP_FACTOR.get(self.optimizer, 1.0)
        if self.lr * factor > FLOAT32_MAX:
            raise ValueError(f"--lr must be at most {FLOAT32_MAX / factor:.4g} with --optimizer {self.optimizer} (its "
                             f"step size, up to {factor:g} times --lr, must be a float32 number), got {self.lr:g}")
        if self.adagrad_init is not None and not 0.0 <= self.adagrad_init < math.inf:
            raise ValueError(f"--adagrad-init must be a finite number of 0 or more, got {self.adagrad_init}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"--dropout must be in [0, 1), got {self.dropout}")
        if not -MAX_SEED <= self.seed <= MAX_SEED:
            raise ValueError(f"--seed must be a whole number from -2**53 to 2**53 (the generators' seeds are "
                             f"made from it and must fit in 64 bits), got {self.seed}")

    def new_schedule(self) -> PlateauDecay:
        """The learning-rate schedule of this config, at its start."""
        assert self.lr is not None, "__post_init__ sets the optimizer's usual rate"
        return PlateauDecay(self.lr_decay, self.lr_decay_threshold, base_lr=self.lr, lr=self.lr)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainConfig":
        return build(cls, json.loads(text), source="train_config.json")


def recipe_defaults(optimizer: str, unroll_steps: int, warm_start: bool = False) -> Dict[str, Optional[float]]:
    """The initial accumulator and clip a run takes when they are not given.

    From scratch, the original's updates. The original differentiates T = ``unroll_steps``
    times the mean loss; for a gradient T g, Adagrad's step lr T g / sqrt(a + T^2 sum g^2) is
    lr g / sqrt(a / T^2 + sum g^2), and a clip of T g at N is a clip of g at N / T. So its
    accumulator of 1.0 and clip of 10 are 1/T^2 and 10/T on our gradient (the mean loss's,
    which ``log.jsonl``'s grad_norm shows). Taken as they were, they trained with steps up to
    T times smaller (experiments/recipe).

    A warm start (``init_from``: ``--from``, ``elmo finetune``) keeps 1.0 and 10 on our
    gradient. Its optimizer starts afresh on trained weights, and a small accumulator makes
    the first steps about lr (0.2) for every weight with a gradient, whatever its size: the
    default model adapted to 100 lines of Brown went from held-out perplexity 176 to 299 with
    1/T^2, to 162 with 1.0 (experiments/recipe). Adam's steps do not follow the gradient's
    scale; its clip stays 10."""
    if optimizer == "adagrad" and not warm_start:
        return {"adagrad_init": ORIGINAL_ADAGRAD_INIT / unroll_steps ** 2,
                "clip_norm": ORIGINAL_CLIP_NORM / unroll_steps}
    return {"adagrad_init": ORIGINAL_ADAGRAD_INIT if optimizer == "adagrad" else None,
            "clip_norm": ORIGINAL_CLIP_NORM}


#: What a run begun before :func:`recipe_defaults` took for an unset setting.
_EARLIER_DEFAULTS = {"adagrad_init": ORIGINAL_ADAGRAD_INIT, "clip_norm": ORIGINAL_CLIP_NORM}


def with_recipe_defaults(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with its unset accumulator and clip filled in: a run folder with a checkpoint
    keeps the values it was trained with (``train_config.json``; the earlier defaults, 1.0 and
    10, for a run begun before they were written or before the defaults followed the gradient's
    scale), so the command that began a run still resumes it; a new run takes
    :func:`recipe_defaults` (those of a warm start where it has ``init_from``). Values given
    are kept."""
    unset = [name for name in ("adagrad_init", "clip_norm") if getattr(cfg, name) is None]
    if not unset:
        return cfg
    from .checkpoint import latest_checkpoint   # (here: torch, which `elmo train --help` needs not)

    fill: Dict[str, Any]   # (values of the Optional[float] fields named in ``unset``)
    out = Path(cfg.output)
    if latest_checkpoint(out / "checkpoints") is not None:
        path = out / "train_config.json"
        # (absent: a run begun before it was written, which took the earlier defaults; damaged,
        # it is one error naming it: taken as absent, the run resumed with the earlier defaults)
        stored = read_json(path, hint="correct the file, or give --adagrad-init and --clip-norm") \
            if path.exists() or path.is_symlink() else {}
        if not isinstance(stored, dict):
            raise ValueError(f"{path}: holds no training settings (a JSON object is needed, got "
                             f"{type(stored).__name__}); correct the file, or give --adagrad-init and --clip-norm")
        fill = {name: _EARLIER_DEFAULTS[name] if stored.get(name) is None else stored[name] for name in unset}
        for name, value in fill.items():   # (a hand-edited file: checked here, where it is named)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{path}: {name} is {json.dumps(value)}, not a number; "
                                 f"give --{name.replace('_', '-')} or correct the file")
        if cfg.optimizer != "adagrad" and "adagrad_init" in fill:
            fill["adagrad_init"] = None    # (without effect; an earlier run's 1.0 is not carried on)
    else:
        defaults = recipe_defaults(cfg.optimizer, cfg.unroll_steps, warm_start=bool(cfg.init_from))
        fill = {name: defaults[name] for name in unset}
    return dataclasses.replace(cfg, **fill)


#: Settings that do not make another training phase (:func:`restart_settings`).
_NOT_A_PHASE = frozenset({"progress", "device", "log_every", "eval_batch_size", "checkpoint_every",
                          "keep_checkpoints", "export", "allow_change"})


def restart_settings(cfg: TrainConfig) -> str:
    """A digest of the settings of the command that makes a warm restart (``--lr-restart``),
    recorded with it in the schedule: a rerun of the same command is recognised by it, while a
    later phase (another --max-steps or --lr, say) is not. Where it runs and how it is shown
    and written (--device, --no-progress, --log-every, --eval-batch-size, checkpoints) are left
    out: a rerun may change them freely (see :mod:`.resume`), and they change nothing trained."""
    settings = {k: v for k, v in asdict(cfg).items() if k not in _NOT_A_PHASE}
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode("utf-8")).hexdigest()
