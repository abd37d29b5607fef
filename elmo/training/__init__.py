"""Training and adapting biLMs: the language-model head, the training loop, checkpoints,
perplexity, export to the original layout and domain adaptation."""
