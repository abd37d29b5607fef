"""The model's building blocks, one module per concern."""
from .bilm import BiLM, BiLMOutput
from .char_cnn import CharCNN, Highway
from .elmo import Elmo, ElmoOutput
from .lstm import BiLSTMLayer, BiLSTMStack
from .scalar_mix import ScalarMix

#: (BiLMOutput and ElmoOutput: the typed dicts BiLM and Elmo return, for annotating a caller's code)
__all__ = ["BiLM", "BiLMOutput", "BiLSTMLayer", "BiLSTMStack", "CharCNN", "Elmo", "ElmoOutput", "Highway",
           "ScalarMix"]
