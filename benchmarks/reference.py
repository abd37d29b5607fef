"""The plain per-step ELMo that the speed benchmarks compare against. It lives with the tests
(tests/reference_bilm.py), which check the library's packed LSTM against it; this name stays
for the benchmarks that import it from here."""
from tests.reference_bilm import ReferenceBiLM, lstm_direction, reference_lstm_stack

__all__ = ["ReferenceBiLM", "lstm_direction", "reference_lstm_stack"]
