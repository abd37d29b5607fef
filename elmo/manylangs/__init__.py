"""ELMoForManyLangs (HIT-SCIR) models: 44 languages plus Simplified Chinese.

    import elmo
    bilm = elmo.from_pretrained("path/to/zh.model")        # the unpacked released folder
    ids = bilm.token_ids([["我", "爱", "北京"]])              # (B, T, 51): chars + word id
    layers = bilm(ids)["activations"]                       # 3 tensors (B, T, 1024)

* :mod:`.dictionary`: char.dic / word.dic, read exactly as the original does;
* :mod:`.vocabulary`: :class:`CharVocabulary`, tokens to character (and word) ids;
* :mod:`.folder`: the model folder (config resolution, .pkl state dicts) into a BiLM.
"""
from .dictionary import DictionaryError, read_dictionary, write_dictionary
from .folder import is_manylangs_folder, load_manylangs, resolve_config_path
from .vocabulary import CharVocabulary

__all__ = ["CharVocabulary", "DictionaryError", "is_manylangs_folder", "load_manylangs",
           "read_dictionary", "resolve_config_path", "write_dictionary"]
