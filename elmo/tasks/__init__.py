"""Task models with and without ELMo, and the experiment runner (``elmo experiment``).

| module | concern |
|---|---|
| ``datasets`` | task data from the fixed splits of ``elmo data`` |
| ``embeddings`` | task vocabularies and GloVe input vectors |
| ``batching`` | examples -> padded tensors |
| ``layer_cache`` | frozen biLM layers computed once per sentence |
| ``features`` | word, character and ELMo input features |
| ``crf`` | linear-chain CRF |
| ``models`` | tagger, sentence classifier, ESIM pair classifier |
| ``metrics`` | accuracy and span F1 |
| ``train_loop`` | training with early stopping, scoring |
| ``runner`` | experiment configs, runs over seeds, summaries |
| ``report`` | results.md and the layer-weight plot |
"""
