"""What the biLM layers hold: probes, word senses, neighbours in context, contrast pairs, word
similarity.

Each tool works on frozen vectors, so it runs on any model the package can load:

* :mod:`.probes`     - a linear POS probe per layer and on a learned mix (the paper's Table 6);
* :mod:`.wsd`        - word-sense nearest sense centroid per layer on WordNet examples (Table 5);
* :mod:`.neighbors`  - nearest tokens in context across a corpus, from a cached index (Table 4);
* :mod:`.contrast`   - sentence pairs with the same words and a swapped relation;
* :mod:`.similarity` - word similarity per layer (WordSim-353, SimLex-999), Spearman's rho;
* :mod:`.plots`      - the pictures; :mod:`.report` runs everything and writes the report.

Shared pieces: :mod:`.vectors` (embedding and gathering token vectors), :mod:`.datasets`
(reading the standard-form corpora of ``elmo data``), :mod:`.stats` (paired bootstrap, resampled
intervals).
"""
