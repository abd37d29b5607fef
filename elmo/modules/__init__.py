"""The model's building blocks, one module per concern."""
from .bilm import BiLM
from .char_cnn import CharCNN, Highway
from .elmo import Elmo
from .lstm import BiLSTMLayer, BiLSTMStack
from .scalar_mix import ScalarMix

__all__ = ["BiLM", "BiLSTMLayer", "BiLSTMStack", "CharCNN", "Elmo", "Highway", "ScalarMix"]
