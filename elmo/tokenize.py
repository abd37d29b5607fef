"""Tokenizers: raw text to PTB-style tokens, the conventions of ELMo's training data.

The released ELMo models were trained on the 1 Billion Word Benchmark, which is tokenized
roughly like the Penn Treebank, and so are the labelled tasks here (Brown, the Twitter NER
file): punctuation is split off words, English clitics are split off their host
(``don't`` -> ``do n't``, ``John's`` -> ``John 's``), words joined by a hyphen stay one token
(``well-known``), curly quotes and apostrophes become ASCII first, and a straight double quote
becomes ```` `` ```` where it opens and ``''`` where it closes. Nothing is lower-cased.

Two English tokenizers follow these rules, for two jobs:

* :func:`tokenize` (no dependency, one regular expression): one line in, one sentence of
  tokens out. ``elmo embed --tokenize en`` and task files use it. Besides the rules above,
  numbers with inner ``. , : /`` stay whole (``3.14``, ``1,000``, ``12:30``, also with letters
  attached: ``3.14pm``, ``v2.0``, as in spaCy's tokenizer), abbreviations of
  single letters and periods stay whole (``U.S.``), and so do the period of a short form
  that takes one (``Mr.``, ``Dr.``, ``St.``, ``Inc.``, ``Jan.``: :data:`ABBREVIATIONS`) and of
  an initial (``J. R. R. Tolkien``), as the spaCy tokenizer, the Penn Treebank and the 1B Word
  Benchmark keep them. An apostrophe or ``&`` between letters that starts no clitic stays in
  its word (``O'Neill``, ``AT&T``), and so does a period with a letter or digit after it in
  the word, except between a lower-case (or caseless, as Chinese) and an upper-case letter
  (``Amazon.com``, ``results.json``, ``self._x``; ``end.The``, ``東京.Tokyo`` and
  ``end._`` split). Web and e-mail addresses
  (of any scheme: ``https://``, ``s3://``), a user named in a post (``@bbc``) and emoticons
  (``:-)``, :data:`EMOTICONS`; not where a number or short form goes on: ``<3.13``,
  ``:P.S.``) are one token each, as the spaCy tokenizer keeps them. ``...`` and ``--`` are
  single tokens, and any other symbol is a token of its own. Its own tokens come back whole
  from its own output (a clitic alone, ``It 's``, and PTB's quotes ```` `` ```` and ``''``):
  text tokenized before gives the same tokens again.

  Where :class:`Tokenizer` splits otherwise, :func:`tokenize` keeps the text whole: ``cannot``
  (PTB's ``can not``), a number with its unit (``100m``) and a score or range (``2-1``).
  A combining mark stays with the character before it (as in spaCy's
  tokenizer; :class:`Tokenizer` also keeps it with a symbol, an emoji's variation selector
  U+FE0F, which spaCy's own affix rules split off). Nothing is Unicode-normalised: a decomposed ``café`` stays decomposed, other
  bytes than the composed one and so other character ids (:mod:`elmo.chars`).
* :class:`Tokenizer` (spaCy's rule-based English tokenizer and sentencizer, no model
  download): splits raw documents into sentences and gives character spans; it builds the LM
  corpus (:mod:`elmo.data`) and task data with answer offsets. spaCy is imported when one is
  built.

:func:`split_clitics` splits clitics off corpora that keep them attached (Brown). For Chinese
(ELMoForManyLangs' models), :func:`tokenize_zh` segments words with jieba, an optional package
(``pip install 'elmo-pytorch[zh]'``) imported on first use, whose version
(:func:`jieba_version`) ``elmo embed`` records. :func:`get_tokenizer` picks a
tokenizer by name (``elmo embed --tokenize en|zh``).
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Iterable, Iterator, List, Sequence, Tuple, cast

#: The revision of what :func:`tokenize` gives (``--tokenize en``, task files with
#: ``"tokenize": true``), recorded with what it produced: an embed output's settings, a task
#: run's record and fingerprint, a saved task model's config. BUMP IT whenever the tokens of
#: any text change (not for a change that keeps every token, such as a clearer error), and
#: add a line here; a resume then refuses or trains again what the older tokens produced.
#:
#: 1. the first (embed --tokenize): PTB rules, clitics split, ``"`` kept as written;
#: 2. straight double quotes written ```` `` ```` / ``''``, curly quotes mapped (d7b06fa);
#: 3. soft hyphen, zero-width (non-)joiner, word joiner, direction marks dropped (8c14501);
#: 4. a combining mark stays with the character before it (702ad7c);
#: 5. a number with inner separators stays whole with letters attached: ``3.14pm`` (56a66c6);
#: 6. a short form's period stays with it (``Mr.``, ``Inc.``, an initial ``J.``), and so does
#:    an apostrophe, ``&`` or period inside a word (``O'Neill``, ``AT&T``, ``Amazon.com``);
#:    web and e-mail addresses (any scheme's), ``@names`` and emoticons are one token, as the
#:    corpus tokenizer (:class:`Tokenizer`) keeps them all; they were ``Mr .``, ``O ' Neill``,
#:    ``AT & T``, ``Amazon . com``, ``http : / / ...``, ``@ bbc``, ``: )``; and it gives its own
#:    tokens back from its own output (``It 's``, ```` `` ````, ``''`` were ``' s``, ``` ` ```...).
#:
#: Outputs written before revisions were recorded record none: any of revisions 1 to 5.
TOKENIZER_REVISION = 6


class TokenizerRevisionWarning(UserWarning):
    """What is resumed or loaded was tokenized by another (or an unrecorded) revision of
    :func:`tokenize` (:data:`TOKENIZER_REVISION`), or segmented by an unrecorded jieba version;
    the command line shows it as one line."""

#: Characters mapped before tokenization: curly quotes and apostrophes, odd spaces.
CHAR_MAP = str.maketrans({
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u00b4": "'",
    "\u00a0": " ", "\u2009": " ", "\u200b": " ", "\ufeff": " ",
})

#: Invisible characters that join or shape the letters around them (soft hyphen, zero-width
#: non-joiner and joiner, word joiner, direction marks and embeddings). :func:`tokenize` and
#: :func:`normalize` drop them: as any other symbol they were tokens of their own, so
#: ``co\u00adoperate`` gave three tokens, the middle one invisible. (The zero-width space and
#: the BOM separate words: CHAR_MAP makes them spaces.) :meth:`Tokenizer.spans` drops them
#: from its tokens too, its offsets still into the text as given; so does the spaCy component.
INVISIBLE = "\u00ad\u200c\u200d\u200e\u200f\u2060\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

#: The characters that separate words without showing a space (zero-width space, and the
#: byte-order mark as a zero-width no-break space): :data:`CHAR_MAP` makes them spaces. Inside a
#: token that keeps them (spaCy's, which are no whitespace to ``str.isspace``) the spaCy
#: component drops them, as it drops :data:`INVISIBLE`.
ZERO_WIDTH_SPACES = "\u200b\ufeff"

#: CHAR_MAP, and the invisible characters deleted.
TEXT_MAP = {**CHAR_MAP, **str.maketrans(dict.fromkeys(INVISIBLE))}

#: spaCy's infix alternatives between letters; the plain hyphen is taken out of them.
_HYPHEN_INFIX = "(?:-|–|—|--|---|——|~)"
_DASH_INFIX = "(?:–|—|--|---|——|~)"


_DASHES = re.compile(r"(\u2014|--+)")


def normalize(text: str) -> str:
    """Map curly quotes to ASCII, drop the invisible joiners (:data:`INVISIBLE`), set em
    dashes and ``--`` apart with spaces (so that ``word\u2014"Quote`` splits), and collapse
    every run of whitespace to one space."""
    return " ".join(_DASHES.sub(r" \1 ", text.translate(TEXT_MAP)).split())


_CLITIC = re.compile(r"^(.+?)(n't|N'T|'s|'S|'re|'RE|'ll|'LL|'ve|'VE|'d|'D|'m|'M)$")


def split_clitics(tokens: Iterable[str]) -> List[str]:
    """Split clitics off already-tokenized text the PTB way (``isn't`` -> ``is n't``,
    ``Atlanta's`` -> ``Atlanta 's``), for corpora such as Brown that keep them attached."""
    out: List[str] = []
    for t in tokens:
        m = _CLITIC.match(t)
        if m and any(c.isalnum() for c in m.group(1)):
            out.extend(m.groups())
        else:
            out.append(t)
    return out


_OPENERS = ("(", "[", "{", "--", "\u2014")


def quote_token(previous: "str | None", space_before: bool) -> str:
    """A straight double quote as PTB writes it: `` where it opens (at the start, after
    whitespace or an opening bracket or dash), '' where it closes."""
    return "``" if previous is None or space_before or previous in _OPENERS else "''"


# ------------------------------------------------------------------ regex tokenizer (no deps)

def _category_ranges(category: str, codes: Iterable[int]) -> str:
    """A regular-expression class body of the characters among ``codes`` whose Unicode
    category starts with ``category`` (Python's ``re`` has no ``\\p{...}``)."""
    ranges: List[Tuple[int, int]] = []
    for code in codes:
        if unicodedata.category(chr(code)).startswith(category):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(re.escape(chr(a)) + ("" if a == b else "-" + re.escape(chr(b))) for a, b in ranges)


@lru_cache(maxsize=None)
def _mark_ranges() -> str:
    r"""A regular-expression class body of every combining mark (Unicode categories Mn, Mc, Me:
    accents, vowel signs, variation selectors). Python's ``\w`` takes none of them, so an
    accent written as its own character (``e`` + U+0301, decomposed text) or a Devanagari vowel
    sign was a token of its own."""
    # (every mark lies in these planes; scanning them takes milliseconds, all code points not)
    return _category_ranges("M", (*range(0x300, 0x20000), *range(0xE0100, 0xE01F0)))


@lru_cache(maxsize=None)
def _upper_ranges() -> str:
    """A regular-expression class body of every upper-case letter (Unicode category Lu): an
    initial is one of them and a period (``J.``, ``É.``)."""
    return _category_ranges("Lu", range(0x20000))   # (the last one lies below U+1E922)


@lru_cache(maxsize=None)
def _lower_ranges() -> str:
    """The same for every lower-case letter (Unicode category Ll): a period between one and an
    upper-case letter ends a sentence whose next one lacks its space (``end.The``)."""
    return _category_ranges("Ll", range(0x20000))


@lru_cache(maxsize=None)
def _caseless_ranges() -> str:
    """The same for every letter of a script without case (Unicode category Lo: Chinese,
    Japanese, Korean, Arabic, Hebrew, Devanagari, ...): a period between one and an upper-case
    letter ends a sentence too (``東京.Tokyo``), as the spaCy tokenizer splits it."""
    return _category_ranges("Lo", range(0x40000))   # (Chinese runs on past U+20000)


#: Short forms whose period stays with them, in the case written here (``Mr.`` but not
#: ``mr .``), as the spaCy tokenizer that builds the corpora keeps them (its English
#: exceptions; a test holds the two to each other): titles, months, US states, firms.
#: Forms of single letters and periods (``U.S.``, ``e.g.``) need no list; ``Ph.D.`` does.
ABBREVIATIONS = (
    "Adm", "Ak", "Ala", "Apr", "Ariz", "Ark", "Aug", "Bros", "Calif", "Co", "Colo", "Conn",
    "Corp", "Dec", "Del", "Dr", "Feb", "Fla", "Ga", "Gen", "Gov", "Ia", "Id", "Ill", "Inc",
    "Ind", "Jan", "Jr", "Jul", "Jun", "Kan", "Kans", "Ky", "La", "Ltd", "Mar", "Mass", "Md",
    "Messrs", "Mich", "Minn", "Miss", "Mo", "Mont", "Mr", "Mrs", "Ms", "Mt", "Neb", "Nebr",
    "Nev", "Nov", "Oct", "Okla", "Ore", "Pa", "Prof", "Rep", "Rev", "Sen", "Sep", "Sept", "St",
    "Tenn", "Va", "Wash", "Wis", "co", "vs", "Ph.D",
)

#: A letter of any script (a word character but a digit or ``_``).
_LETTER = re.compile(r"[^\W\d_]")

#: Lower-case letters that are a token with their period (``a.``, a list's item), as spaCy's
#: English exceptions have them; an upper-case one always is (an initial).
_LOWER_INITIALS = "a-z\u00e4\u00f6\u00fc"

#: The clitics split off their host (``'s``); an apostrophe that starts none of them, between
#: letters, stays in its word (``O'Neill``).
_CLITICS = "(?:s|re|ve|ll|d|m)"

#: Emoticons kept as one token when no letter or digit follows (``:)``, not ``:`` ``)``), as
#: the spaCy tokenizer keeps them: those of its list that open with ``:``, ``;`` or ``=`` or
#: draw a heart, less the ones a number or formula holds (``:1``, ``:0``, ``=3``, ``=D``).
#: One that ends in a letter or digit is none where ``. , : /`` and a letter or digit go on
#: (``<3.13`` is ``<`` ``3.13``, ``:P.S.`` ``:`` ``P.S.``).
EMOTICONS = (
    ":)", ":))", ":)))", ":-)", ":-))", ":-)))", ":(", ":((", ":(((", ":-(", ":-((", ":-(((",
    ":'(", ":')", ":'-(", ":'-)", ":()", ":*", ":-*", ":/", ":-/", ":|", ":-|", ":]", ":-]",
    ":}", ":-}", ":>", ":->", ":3", ":-3", ":D", ":-D", ":P", ":-P", ":p", ":-p", ":O", ":-O",
    ":o", ":-o", ":o)", ":X", ":-X", ":x", ":-x", ":-0", ";)", ";-)", ";D", ";-D", ";_;",
    "=)", "=(", "=/", "=|", "=[", "=]", "<3", "<33", "<333", "</3",
)


def _letter_period() -> str:
    """A regular expression of a letter (any script) with its combining marks and a period:
    ``U.S.`` is two of them."""
    return rf"{_LETTER.pattern}[{_mark_ranges()}]*\."


@lru_cache(maxsize=None)
def _token_pattern(abbreviations: bool = True) -> "re.Pattern[str]":
    r"""The tokens of :func:`tokenize`; ``W`` is a word character or a combining mark, which
    stays with the character before it (``\w`` has no marks), as spaCy's tokenizer keeps it.
    Without ``abbreviations`` no ``U.S.`` is tried (see :func:`_token_matches`)."""
    W = rf"[\w{_mark_ranges()}]"
    M = rf"[{_mark_ranges()}]"
    short_forms = "|".join(re.escape(form) for form in ABBREVIATIONS)
    emoticons = "|".join(re.escape(face) for face in sorted(EMOTICONS, key=len, reverse=True))
    # a period inside a word, but not between a lower-case or caseless letter (with up to two
    # marks: a Devanagari vowel sign) and an upper-case one (end.The), and with a letter or
    # digit after it in the word (self._x, not anymore._)
    caseless = f"[{_caseless_ranges()}]"
    # (a look-behind has a fixed width: one for each number of marks)
    not_after_sentence = (rf"(?<![{_lower_ranges()}{_caseless_ranges()}])(?<!{caseless}{M})"
                          rf"(?<!{caseless}{M}{M})")
    inner_period = rf"(?-i:{not_after_sentence}\.|\.(?![{_upper_ranges()}]))(?=_*[^\W_])"
    abbreviation = rf"| (?:{_letter_period()}){{2,}}(?!{_LETTER.pattern})" if abbreviations else ""
    # what follows a scheme or www.: it does not end in a period, comma, quote or bracket
    address = r"""[^\s<>"]*[^\s<>".,;:!?'()\[\]{}]"""
    return re.compile(rf"""
          [a-z][a-z0-9+.-]{{0,31}}://(?:{address})?       # web addresses, any scheme's (s3://,
        | www\.{address}                              # git://; a bounded one), a scheme alone
        | \w[\w.+{_mark_ranges()}-]{{0,63}}@\w[\w{_mark_ranges()}-]*(?:\.\w[\w{_mark_ranges()}-]*)+
                                                      # e-mail addresses (a bounded search for
                                                      # the @: a long a+a+a+... line stays linear)
        | (?<!{W})@\w{W}*                              # a user named in a post: @bbc
        | (?:{emoticons})(?!\w|(?<=\w)(?:[.,:/]\w|{M})|(?<=/)/)   # emoticons: :) ;-) <3 (not of
                                                      # <3.13, :P.S., the :/ of 1://2, nor a letter's
                                                      # or digit's mark: :D\u0301)
        {abbreviation}                                # abbreviations: U.S. e.g.
        | (?-i:(?:{short_forms})\.)(?!{W}|\.)         # a short form's period: Mr. Inc. Jan. Ph.D.
        | (?-i:[{_upper_ranges()}{_LOWER_INITIALS}]){M}*\.(?!{W}|\.)   # an initial: J. (a list's a.)
        | {W}*?\d(?:[.,:/]\d+)+{W}*                   # numbers with inner separators: 3.14 1,000 12:30,
                                                      # letters attached too: 3.14pm v2.0 (not 3 . 14pm)
        | \w{W}*(?=n't\b)                             # the host of n't: do|n't
        | n't\b                                       # the clitic itself
        | '{_CLITICS}\b                               # clitics: 's 're 've 'll 'd 'm (Dr.'s; alone too:
                                                      # It 's, text this tokenizer split before)
        | ``|''                                       # PTB's quotes: tokenized text, LaTeX, ''Quote''
        | \w{W}*(?:(?:-|&|'(?!{_CLITICS}\b)|{inner_period})\w{W}*)*   # words: well-known O'Neill
                                                      # AT&T Amazon.com, plain numbers
        | \.{{2,}} | -{{2,}}                          # ellipsis, dashes
        | \S{M}*                                      # any other single character (and its marks)
    """, re.VERBOSE | re.IGNORECASE)


def _check_text(text) -> None:
    if not isinstance(text, str):  # (else an AttributeError from .translate, or bytes' own error)
        raise TypeError(f"tokenize takes a string of text, got {type(text).__name__}"
                        + ("; decode bytes first" if isinstance(text, (bytes, bytearray)) else ""))


@lru_cache(maxsize=None)
def _letter_periods() -> "re.Pattern[str]":
    """A run of letters each with its period after a period (``.B.a.B.`` of ``a.B.a.B.``; it
    opens with the period, which the search for it finds quickly)."""
    return re.compile(rf"\.(?:{_letter_period()})+")


def _token_matches(mapped: str) -> Iterator["re.Match[str]"]:
    """The matches of :func:`_token_pattern` in ``mapped``, as ``finditer`` gives them, in
    linear time. An abbreviation (``U.S.``) fails at every letter of a run of letters and
    periods that a letter ends (``a.B.a.B.x``: each try reads the run to its end), and the word
    rule cuts such a run into many tokens (``B.a`` ``.``): finditer read it again at each one,
    quadratic time. Such runs are found once; after a run's first letter no abbreviation is
    tried in it."""
    with_abbreviations, without = _token_pattern(True), _token_pattern(False)
    dead_runs = [(run.start(), run.end()) for run in _letter_periods().finditer(mapped)
                 if _LETTER.match(mapped, run.end())]
    if not dead_runs:   # (most text: finditer itself is faster than a search per token)
        yield from with_abbreviations.finditer(mapped)
        return
    position = run_index = 0
    while True:
        while run_index < len(dead_runs) and dead_runs[run_index][1] <= position:
            run_index += 1
        inside = run_index < len(dead_runs) and dead_runs[run_index][0] <= position
        match = (without if inside else with_abbreviations).search(mapped, position)
        if match is None:
            return
        yield match
        position = match.end()


def _matches(mapped: str) -> Iterator[Tuple[str, int, int]]:
    """``(token, start, end)`` of :func:`tokenize` in ``mapped``, a text already passed
    through :data:`TEXT_MAP`; offsets into ``mapped``."""
    previous: "str | None" = None
    end = 0
    for match in _token_matches(mapped):
        token = match.group()
        if token == '"':
            token = quote_token(previous, match.start() > end)
        yield token, match.start(), match.end()
        previous, end = token, match.end()


def tokenize(text: str) -> List[str]:
    """Split raw text into tokens (see the module doc). Whitespace only separates tokens."""
    _check_text(text)
    return [token for token, _, _ in _matches(text.translate(TEXT_MAP))]


def token_spans(text: str) -> List[Tuple[str, int, int]]:
    """:func:`tokenize`'s tokens with their character spans ``[start, end)`` in ``text`` as
    given: a span covers the characters the token was read from (the curly quote a ```` `` ````
    came from, an invisible joiner inside a word), so ``text[start:end]`` is what a reader saw.
    (:meth:`Tokenizer.spans` is the same for the spaCy tokenizer.)"""
    _check_text(text)
    # TEXT_MAP maps characters one to one except the invisible ones, which it deletes: the
    # positions in ``text`` of the characters kept map offsets back
    kept = [i for i, ch in enumerate(text) if ch not in INVISIBLE]
    return [(token, kept[start], kept[end - 1] + 1)
            for token, start, end in _matches(text.translate(TEXT_MAP))]


def whitespace_spans(text: str) -> List[Tuple[str, int, int]]:
    """``text.split()``'s tokens with their character spans ``[start, end)`` in ``text``."""
    out: List[Tuple[str, int, int]] = []
    position = 0
    for token in text.split():
        start = text.index(token, position)
        position = start + len(token)
        out.append((token, start, position))
    return out


# ------------------------------------------------------- spaCy tokenizer (sentences, spans)

class Tokenizer:
    """Split raw text into sentences of PTB-style tokens.

    >>> tok = Tokenizer()
    >>> tok.sentences('I don\\'t know. He said "hi."')
    [['I', 'do', "n't", 'know', '.'], ['He', 'said', '``', 'hi', '.', "''"]]
    """

    def __init__(self) -> None:
        try:
            import spacy
            from spacy.lang.char_classes import LIST_ICONS
            from spacy.tokenizer import Tokenizer as SpacyTokenizer
            from spacy.util import compile_infix_regex, compile_prefix_regex, compile_suffix_regex
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("tokenizing raw text needs spaCy: pip install 'elmo-pytorch[data]' "
                              "(or pip install spacy)") from e
        nlp = spacy.blank("en")
        # (English gives its affixes as regex strings, and a blank pipeline spaCy's own tokenizer)
        # A symbol split off as an affix (an emoji) takes the combining marks after it along:
        # its variation selector (U+FE0F) was a token of its own, where tokenize() keeps it.
        glued = {icon: f"{icon}[{_mark_ranges()}]*" for icon in LIST_ICONS}

        def affixes(patterns) -> List[str]:
            return [glued.get(p, p) for p in cast(Sequence[str], patterns)]

        infixes = [p.replace(_HYPHEN_INFIX, _DASH_INFIX) for p in affixes(nlp.Defaults.infixes)]
        assert isinstance(nlp.tokenizer, SpacyTokenizer)
        nlp.tokenizer.infix_finditer = compile_infix_regex(infixes).finditer
        nlp.tokenizer.prefix_search = compile_prefix_regex(affixes(nlp.Defaults.prefixes)).search
        nlp.tokenizer.suffix_search = compile_suffix_regex(affixes(nlp.Defaults.suffixes)).search
        nlp.add_pipe("sentencizer")
        nlp.max_length = 5_000_000
        self.nlp = nlp

    def sentences(self, text: str) -> List[List[str]]:
        """The sentences of one text, each a list of tokens."""
        return next(self.pipe([text]))

    def tokens(self, text: str) -> List[str]:
        """All tokens of one text, without splitting it into sentences."""
        return [t for sent in self.sentences(text) for t in sent]

    def spans(self, text: str) -> List[Tuple[str, int, int]]:
        """``(token, start, end)`` character spans in ``text`` itself (no whitespace
        collapsing, so answer offsets such as SQuAD's stay valid).

        The invisible joiners (:data:`INVISIBLE`) are dropped before splitting, as
        :meth:`tokens` drops them, so the token texts are the same words (``co\u00adoperate``
        is ``cooperate`` in both); a span still covers them where they sit inside a word."""
        # positions in ``text`` of the characters kept, to map spaCy's offsets back
        kept = [i for i, ch in enumerate(text) if ch not in INVISIBLE]
        doc = self.nlp("".join(text[i] for i in kept).translate(CHAR_MAP))
        texts = _ptb_tokens(doc[:])
        return [(t, kept[tok.idx], kept[tok.idx + len(tok) - 1] + 1) for t, tok in zip(texts, doc)
                if not tok.is_space]

    def pipe(self, texts: Iterable[str], batch_size: int = 256) -> Iterator[List[List[str]]]:
        """Tokenize many texts lazily; yields one list of sentences per text, in order."""
        for doc in self.nlp.pipe((normalize(t) for t in texts), batch_size=batch_size):
            yield [_ptb_tokens(sent) for sent in doc.sents if len(sent)]


def _ptb_tokens(span) -> List[str]:
    """Token texts of a spaCy span, with straight double quotes turned into `` and ''."""
    out = []
    doc = span.doc
    for tok in span:
        text = tok.text
        if text == '"':
            prev = doc[tok.i - 1] if tok.i > 0 else None
            text = quote_token(None if prev is None else prev.text,
                               prev is not None and (bool(prev.whitespace_) or prev.is_space))
        out.append(text)
    return out


# ------------------------------------------------------------------------ Chinese, by name

#: Tokenizers by name, for ``--tokenize NAME`` / ``embed_file(tokenize=NAME)``.
TOKENIZERS = ("en", "zh")


class TokenizerUnavailable(ValueError):
    """A tokenizer whose optional package is not installed (the message says how to get it)."""


def _jieba():
    """The jieba module, imported on first use, quiet."""
    try:
        import jieba
    except ImportError:
        raise TokenizerUnavailable("Chinese segmentation (--tokenize zh) needs the jieba package: "
                                   "pip install 'elmo-pytorch[zh]'") from None
    import logging
    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict ..." on every start
    return jieba


def tokenize_zh(text: str) -> List[str]:
    """Segment raw Chinese text into words with jieba (its default dictionary and HMM for
    unknown words). Whitespace separates tokens and is dropped; nothing else changes.

    Text that is already segmented needs no tokenizer: split it on whitespace.
    """
    return [t for t in _jieba().lcut(text) if not t.isspace()]


def jieba_version() -> str:
    """The installed jieba's version (``"unknown"`` where it gives none): another version can
    segment a text otherwise (its dictionary and rules change), so ``elmo embed`` records it."""
    version = getattr(_jieba(), "__version__", None)
    if not version:
        from importlib import metadata
        try:
            version = metadata.version("jieba")
        except metadata.PackageNotFoundError:
            version = "unknown"
    return str(version)


def get_tokenizer(name):
    """The tokenizer for ``name``: ``"en"`` (or True) :func:`tokenize`, ``"zh"``
    :func:`tokenize_zh`; None or False: split on whitespace. Checks that it is usable."""
    if name is None or name is False:
        return str.split
    if name is True or name == "en":
        return tokenize
    if name == "zh":
        _jieba()
        return tokenize_zh
    raise ValueError(f"tokenize must be one of {', '.join(TOKENIZERS)} (or None), got {name!r}")
