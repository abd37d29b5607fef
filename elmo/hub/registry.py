"""The published ELMo models, by name: the one table behind ``elmo.from_pretrained(NAME)``,
``elmo models list`` and ``elmo models get NAME``.

Facts that are not known are None (never guessed). No checksum is pinned: none is published
for these files, and one measured here could not be checked against its source; the shape
checks of the weight file run after every download instead.

Sizes: the released AllenNLP weight files are float32, so their size is 4 bytes times the
parameters their options imply (``size_estimated=True``: computed from the dimensions with
``elmo.original_layout.expected_shapes``, not measured on the files). Sizes of the ELMoForManyLangs
archives are not known here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple, TypedDict

#: The formats an entry can have: ``original`` (options.json + weights.hdf5, AllenNLP and
#: bilm-tf) and ``elmoformanylangs`` (HIT-SCIR's model folder, shipped as an archive).
FORMATS = ("original", "elmoformanylangs")
#: The URL keys each format needs.
URL_KEYS = {"original": ("options", "weights"), "elmoformanylangs": ("archive",)}


@dataclass(frozen=True)
class PretrainedModel:
    """One published model.

    Attributes:
        name: what ``from_pretrained`` and ``elmo models get`` take.
        format: one of :data:`FORMATS`.
        urls: ``{"options": ..., "weights": ...}`` or ``{"archive": ...}``.
        language: English name of the language; ``language_code``: its ISO 639 code.
        training_data: what the biLM was trained on.
        licence: the terms, as far as they are stated.
        output_dim: width of every layer of the representation (2 x projection_dim).
        projection_dim, lstm_dim, n_layers: LSTM projection P, cells C, layers L.
        n_filters, n_highway: total character CNN filters, highway layers.
        parameters_m: biLM parameters in millions (without the softmax).
        size_mb: download size in MB (10^6 bytes); ``size_estimated`` when computed, not measured.
        sha256: pinned checksums by URL key (none are published; see the module docstring).
        source: who released it.
    """

    name: str
    format: str
    urls: Dict[str, str]
    language: str
    language_code: str
    training_data: str
    licence: str
    output_dim: Optional[int] = None
    projection_dim: Optional[int] = None
    lstm_dim: Optional[int] = None
    n_layers: Optional[int] = None
    n_filters: Optional[int] = None
    n_highway: Optional[int] = None
    parameters_m: Optional[float] = None
    size_mb: Optional[float] = None
    size_estimated: bool = False
    sha256: Dict[str, Optional[str]] = field(default_factory=dict)
    source: str = ""


_ALLENNLP = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
_ALLENNLP_LICENCE = ("not stated with the files (AllenNLP and bilm-tf, which publish them, "
                     "are Apache-2.0)")
_BILLION_WORDS = "1 Billion Word Benchmark (about 800M tokens of WMT 2011 news crawl)"


def _allennlp(name: str, dims: str, *, folder: Optional[str] = None, weights: Optional[str] = None,
              options: Optional[str] = None, **facts) -> PretrainedModel:
    """An AllenNLP entry whose files are ``{folder}/elmo_{dims}_options.json`` and
    ``..._weights.hdf5`` unless named otherwise."""
    folder = folder or f"{_ALLENNLP}/{dims}"
    urls = {"options": options or f"{folder}/elmo_{dims}_options.json",
            "weights": weights or f"{folder}/elmo_{dims}_weights.hdf5"}
    return PretrainedModel(name=name, format="original", urls=urls, source="AllenNLP (AI2)", **facts)


def _dims(cell: int, projection: int, highway: int, params: float, mb: float) -> dict:
    """The facts that follow from a name 2x{cell}_{projection}_2048cnn_{highway}xhighway."""
    return dict(output_dim=2 * projection, projection_dim=projection, lstm_dim=cell, n_layers=2,
                n_filters=2048, n_highway=highway, parameters_m=params, size_mb=mb,
                size_estimated=True)


_ENGLISH = dict(language="English", language_code="en")

_ENTRIES = [
    _allennlp("small", "2x1024_128_2048cnn_1xhighway", training_data=_BILLION_WORDS,
              licence=_ALLENNLP_LICENCE, **_ENGLISH, **_dims(1024, 128, 1, 13.6, 54.4)),
    _allennlp("medium", "2x2048_256_2048cnn_1xhighway", training_data=_BILLION_WORDS,
              licence=_ALLENNLP_LICENCE, **_ENGLISH, **_dims(2048, 256, 1, 28.0, 112.1)),
    _allennlp("original", "2x4096_512_2048cnn_2xhighway", training_data=_BILLION_WORDS,
              licence=_ALLENNLP_LICENCE, **_ENGLISH, **_dims(4096, 512, 2, 93.6, 374.4)),
    _allennlp("original-5.5b", "2x4096_512_2048cnn_2xhighway_5.5B",
              training_data="5.5B tokens: Wikipedia (1.9B) and the WMT 2008-2012 monolingual "
                            "news crawl (3.6B)",
              licence=_ALLENNLP_LICENCE, **_ENGLISH, **_dims(4096, 512, 2, 93.6, 374.4)),
    _allennlp("pubmed", "2x4096_512_2048cnn_2xhighway", folder=f"{_ALLENNLP}/contributed/pubmed",
              weights=f"{_ALLENNLP}/contributed/pubmed/"
                      "elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
              training_data="a random selection of PubMed abstracts, 797M tokens",
              licence=_ALLENNLP_LICENCE, language="English (biomedical)", language_code="en",
              **_dims(4096, 512, 2, 93.6, 374.4)),
    PretrainedModel(
        name="pt", format="original", language="Portuguese", language_code="pt",
        urls={"options": f"{_ALLENNLP}/contributed/pt/elmo_pt_options.json",
              "weights": f"{_ALLENNLP}/contributed/pt/elmo_pt_weights.hdf5"},
        training_data="Portuguese Wikipedia (contributed 2018; size not stated)",
        licence="not stated with the files", source="contributed to AllenNLP (pvcastro)"),
]

# ELMoForManyLangs (HIT-SCIR, CoNLL 2018): one zip per language in the NLPL repository.
_NLPL = "http://vectors.nlpl.eu/repository/11"
_MANYLANGS = [
    (136, "ar", "Arabic"), (137, "bg", "Bulgarian"), (138, "ca", "Catalan"), (139, "cs", "Czech"),
    (140, "cu", "Old Church Slavonic"), (141, "da", "Danish"), (142, "de", "German"),
    (143, "el", "Greek"), (144, "en", "English"), (145, "es", "Spanish"), (146, "et", "Estonian"),
    (147, "eu", "Basque"), (148, "fa", "Persian"), (149, "fi", "Finnish"), (150, "fr", "French"),
    (151, "ga", "Irish"), (152, "gl", "Galician"), (153, "grc", "Ancient Greek"),
    (154, "he", "Hebrew"), (155, "hi", "Hindi"), (156, "hr", "Croatian"), (157, "hu", "Hungarian"),
    (158, "id", "Indonesian"), (159, "it", "Italian"), (160, "ja", "Japanese"),
    (161, "ko", "Korean"), (162, "la", "Latin"), (163, "lv", "Latvian"), (164, "nl", "Dutch"),
    (165, "nb", "Norwegian Bokmal"), (166, "nn", "Norwegian Nynorsk"), (167, "pl", "Polish"),
    (168, "pt", "Portuguese"), (169, "ro", "Romanian"), (170, "ru", "Russian"),
    (171, "sk", "Slovak"), (172, "sl", "Slovene"), (173, "sv", "Swedish"), (174, "tr", "Turkish"),
    (175, "ug", "Uyghur"), (176, "uk", "Ukrainian"), (177, "ur", "Urdu"),
    (178, "vi", "Vietnamese"), (179, "zh-hant", "Chinese (traditional)"),
]
#: Architecture shared by every ELMoForManyLangs model (Che et al. 2018): the same biLM as the
#: original ELMo, plus a 100-dim word embedding beside the character CNN.
class _Dims(TypedDict):
    """The architecture fields of :class:`PretrainedModel` that a family of models shares."""

    output_dim: int
    projection_dim: int
    lstm_dim: int
    n_layers: int
    n_filters: int


_MANYLANGS_DIMS = _Dims(output_dim=1024, projection_dim=512, lstm_dim=4096, n_layers=2,
                        n_filters=2048)
_MANYLANGS_DATA = ("about 20M words sampled from the CoNLL 2018 shared task raw text "
                   "(Wikipedia and Common Crawl)")
_MANYLANGS_LICENCE = "code MIT; the weights: see the NLPL repository terms"

_ENTRIES += [
    PretrainedModel(name=f"manylangs-{code}", format="elmoformanylangs",
                    urls={"archive": f"{_NLPL}/{number}.zip"}, language=language,
                    language_code=code,
                    training_data=_MANYLANGS_DATA + (" (Wikipedia)" if code == "zh-hant" else ""),
                    licence=_MANYLANGS_LICENCE, source="HIT-SCIR ELMoForManyLangs, hosted by NLPL",
                    **_MANYLANGS_DIMS)
    for number, code, language in _MANYLANGS
]
_ENTRIES.append(PretrainedModel(
    name="manylangs-zh-hans", format="elmoformanylangs",
    urls={"archive": "http://pbmpb9h15.bkt.gdipper.com/zhs.model.tar.xz"},
    language="Chinese (simplified)", language_code="zh-hans",
    training_data="the Xinhua part of Chinese Gigaword v5",
    licence="code MIT; the weights: not stated", source="HIT-SCIR ELMoForManyLangs",
    **_MANYLANGS_DIMS))

#: Every published model by name.
MODELS: Dict[str, PretrainedModel] = {m.name: m for m in _ENTRIES}


def close_names(name: str, names: Iterable[str], n: int = 3) -> List[str]:
    """Up to ``n`` of ``names`` closest to the mistyped model name ``name``: one equal to it but
    for capitals and surrounding spaces first, then difflib's closest in lower case. (difflib
    tells capitals apart: ``manylangs-EN`` was offered ``manylangs-vi``, and ``SMALL`` nothing.)"""
    import difflib
    by_lower: Dict[str, str] = {}
    for known in names:
        by_lower.setdefault(known.lower(), known)
    typed = name.strip().lower()
    close = difflib.get_close_matches(typed, list(by_lower), n=n)
    return [by_lower[k] for k in dict.fromkeys(([typed] if typed in by_lower else []) + close)][:n]


def get(name: str) -> PretrainedModel:
    """The entry for ``name``; an unknown name raises a ValueError naming close ones."""
    try:
        return MODELS[name]
    except KeyError:
        close = close_names(name, MODELS)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"no published model named {name!r}{hint}; `elmo models list` shows them") from None


def names() -> Tuple[str, ...]:
    """Every name, in table order."""
    return tuple(MODELS)
