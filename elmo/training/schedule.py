"""Learning-rate decay on a validation plateau.

Kim et al. (2016) halve the learning rate whenever an epoch does not lower the validation
perplexity enough; our earlier PTB run did the same by hand, once (a 135 -> 119 drop within an
epoch). :class:`PlateauDecay` does it at every validation run of ``elmo train``
(``--lr-decay 0.5 --eval-every STEPS``), and its state travels in the checkpoint, so a resumed
run keeps the decayed rate and the best perplexity so far.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional


@dataclass
class PlateauDecay:
    """Multiply ``lr`` by ``factor`` when a validation perplexity is not at least ``threshold``
    (relative) below the best one so far.

    ``factor`` 1.0 never decays. ``base_lr`` is the run's configured rate this schedule started
    from; a resume with another configured rate (``--allow-change lr``) starts the schedule
    again from that rate, keeping the best perplexity.

    ``restart`` records the latest warm restart (``--lr-restart``): the step it was made at,
    the rate it restarted to and a digest of the settings of the command that made it. It
    travels in every later checkpoint, so a rerun of that same command (after a kill) sees
    that its restart was made already and goes on with the schedule instead of restarting the
    decayed rate again.
    """

    factor: float
    threshold: float
    base_lr: float
    lr: float
    best: Optional[float] = None
    decays: int = 0
    restart: Optional[Dict[str, Any]] = None

    def __post_init__(self):
        if not 0.0 < self.factor <= 1.0:
            raise ValueError(f"lr decay factor must be in (0, 1], got {self.factor}")
        if not 0.0 <= self.threshold < 1.0:
            raise ValueError(f"lr decay threshold must be in [0, 1), got {self.threshold}")

    @property
    def enabled(self) -> bool:
        return self.factor < 1.0

    def update(self, ppl: float) -> bool:
        """Record one validation perplexity; True when the rate was lowered by it."""
        if self.best is None or ppl < self.best * (1.0 - self.threshold):
            self.best = ppl if self.best is None else min(self.best, ppl)
            return False
        self.best = min(self.best, ppl)
        if not self.enabled:
            return False
        self.decay()
        return True

    def decay(self) -> None:
        """Lower the rate once (also how the other ranks follow rank 0's decision)."""
        self.lr *= self.factor
        self.decays += 1

    def state_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: Dict[str, Any], restart: bool = False) -> None:
        """Continue a stored schedule. The stored rate is kept unless the configured one
        (``self.base_lr``) differs from the one the stored schedule started from, or
        ``restart`` asks for the configured rate again (a warm restart). The best perplexity,
        the count of decays and the record of the latest restart are kept either way."""
        self.best, self.decays = state.get("best"), int(state.get("decays", 0))
        self.restart = state.get("restart")
        if state.get("base_lr") == self.base_lr and not restart:
            self.lr = float(state["lr"])
