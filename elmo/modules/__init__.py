"""The model's building blocks, one module per concern."""
from .bilm import BiLM
from .char_cnn import CharCNN, Highway
from .elmo import Elmo
from .lstm import BiLSTMStack, ProjectedLSTMLayer
from .scalar_mix import ScalarMix

__all__ = ["BiLM", "BiLSTMStack", "CharCNN", "Elmo", "Highway", "ProjectedLSTMLayer", "ScalarMix"]
