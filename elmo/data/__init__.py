"""Corpora, readers and language-model batches."""
