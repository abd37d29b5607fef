"""``elmo demo``: what a contextual representation changes, measured on the bundled model.

Three measurements, each in its own module: the senses of "bank" (:mod:`.senses`), the
contextual and static neighbours of "play" (:mod:`.neighbors`), and how much a swap of
who-did-what-to-whom moves the vectors beside a change of topic (:mod:`.relations`).
:mod:`.main` runs and prints them; :mod:`.data` reads the bundled corpus sample and GloVe
subset that :mod:`.build_data` writes.
"""
from .main import run_demo
from .senses import MONEY, RIVER, sense_similarity, word_vectors

__all__ = ["MONEY", "RIVER", "run_demo", "sense_similarity", "word_vectors"]
