"""Threads calling one model directly: a stateful biLM's carried state, and the token cache.

Each test makes the interleaving that went wrong likely or certain from inside the model (a
hook that sleeps while the state is held, or a patched step that waits for the other thread),
so the old code fails every time, not by luck."""
import copy
import threading
import time

import pytest
import torch

import elmo.modules.char_cnn as char_cnn_module
from elmo import Elmo, batch_to_ids
from elmo.modules.weight_cache import WeightsState
from tests.conftest import random_bilm, tiny_options
from tests.test_embedding_threads import WAIT, finished, in_thread

EPS = torch.finfo(torch.float32).eps

SENTENCES = {
    "A": [["the", "bank", "closed"], ["a", "river"]],
    "B": [["money", "of", "the", "bank", "."], ["fish"]],
    "C": [["it", "rained"], ["so", "we", "stayed", "in"]],
}
CALLS = 6  # per thread


def run_threads(bodies):
    """Run ``{name: body}`` each in a thread named ``name``, without autograd (its switch is
    per thread); their results (an exception raised is raised here)."""
    results = {}
    started = [in_thread(name, torch.no_grad()(body), results) for name, body in bodies.items()]
    return finished(results, *started)


def bilm_tolerance(steps: int) -> float:
    """Float32 rounding's bound for two runs of the same calls: each LSTM step's dot products
    have at most cells + projection terms, its values are clipped to 3 (``tiny_options``), and
    an error may carry through every step of every call."""
    lstm = tiny_options().lstm
    return (lstm.dim + 2 * lstm.projection_dim) * 3.0 * EPS * steps


def call_bilm(bilm):
    return lambda ids: [a.clone() for a in bilm(ids)["activations"]]


def call_elmo(bilm):
    elmo = Elmo(module=bilm, num_output_representations=0, dropout=0.0)
    return lambda ids: elmo(ids, return_layers=True)["layers"]


@pytest.mark.parametrize("caller", [call_bilm, call_elmo], ids=["BiLM", "Elmo"])
def test_threads_calling_one_stateful_bilm_each_get_a_sequential_calls_vectors(caller):
    """Threads calling a stateful biLM (or an Elmo over it) directly, not through an Embedder,
    took no lock: each read the carried state, ran the LSTMs and stored its final state, so
    two calls at once started from the same state and one's final state was lost (vectors of
    no order of the calls, no error). Whole calls now take turns: replaying the calls in the
    order they ran, one at a time on a copy of the model, gives each thread's vectors."""
    bilm = random_bilm(seed=4)
    bilm.stateful = True
    replay = copy.deepcopy(bilm)           # before any call: the same weights, no state
    order = []                             # (thread, its call number), in the order they ran

    def hold_the_state(module, args):      # between reading the state and storing the next one
        name = threading.current_thread().name
        order.append((name, sum(1 for n, _ in order if n == name)))
        time.sleep(0.003)                  # another thread's call would start here
    bilm.lstm.register_forward_pre_hook(hold_the_state)
    ids = {name: [batch_to_ids(s[:1 + k % 2]) for k in range(CALLS)] for name, s in SENTENCES.items()}
    call = caller(bilm)
    with torch.no_grad():
        got = run_threads({name: (lambda name=name: [call(x) for x in ids[name]]) for name in ids})
        assert sorted(order) == sorted((name, k) for name in ids for k in range(CALLS))
        steps = sum(x.shape[1] + 2 for batches in ids.values() for x in batches)
        for name, k in order:
            want = replay(ids[name][k])["activations"]
            for g, w in zip(got[name][k], want):
                torch.testing.assert_close(g, w, rtol=0, atol=bilm_tolerance(steps))


def test_stateful_calls_lock_is_reentrant_and_stateless_calls_take_none(monkeypatch):
    """An Embedder holds the model's lock for a whole call and the biLM takes it again inside
    (re-entrant); a stateless model's call asks for no lock at all."""
    import elmo.modules.bilm as bilm_module
    asked = []
    real = bilm_module.stateful_calls

    def counting(model):
        asked.append(model.stateful)
        return real(model)
    monkeypatch.setattr(bilm_module, "stateful_calls", counting)
    bilm = random_bilm(seed=4)
    ids = batch_to_ids(SENTENCES["A"])
    with torch.no_grad():
        bilm(ids)
        assert asked == []
        bilm.stateful = True
        with real(bilm):
            bilm(ids)                      # (would hang on a lock that is not re-entrant)
    assert asked == [True]


def cnn_tolerance(encoder, reference: torch.Tensor) -> float:
    """Float32 rounding's bound for the token vectors computed in other groups of words: the
    longest dot products are a convolution window's and the highway's and projection's over
    the F features, each value at most ``reference``'s largest."""
    config = encoder.config
    terms = config.embedding_dim * config.max_width + 2 * config.n_filters
    return terms * EPS * (1.0 + float(reference.abs().max()))


def test_a_call_during_a_rebuild_uses_one_consistent_cache_and_keeps_the_new_build(monkeypatch):
    """A call that found the cache stale remade it and stored the remade one over whatever the
    cache was by then: a build by another thread meanwhile was undone (its words lost, the old
    ones back). A reader could also pair the cache of one build with the weights key of
    another, two attributes read apart. Now a call takes one (cache, key) snapshot and uses it
    throughout, remakes it from the current weights, and its remake replaces only the snapshot
    it was made from: the newer build stays."""
    encoder = random_bilm(seed=6).token_encoder
    ids = batch_to_ids(SENTENCES["A"])
    encoder.build_token_cache(["the", "bank"])
    with torch.no_grad():
        for p in encoder.parameters():     # a training step: the cache's vectors are stale
            p.mul_(1.25)
        plain = copy.deepcopy(encoder)
        plain.clear_token_cache()
        want = plain(ids)                  # the CNN itself, with the current weights
    reading, built = threading.Event(), threading.Event()
    real_matches = WeightsState.matches

    def matches(self, params):             # the reader, between its reads: the build comes in
        if threading.current_thread().name == "reader" and not reading.is_set():
            reading.set()
            assert built.wait(WAIT)
        return real_matches(self, params)
    monkeypatch.setattr(WeightsState, "matches", matches)

    def build():
        assert reading.wait(WAIT)
        try:
            encoder.build_token_cache(["river", "a", "money"])
        finally:
            built.set()
    got = run_threads({"reader": lambda: encoder(ids), "builder": build})
    torch.testing.assert_close(got["reader"], want, rtol=0, atol=cnn_tolerance(encoder, want))
    assert encoder.token_cache_size == 2 + 3  # the boundaries and the new build's words
    assert encoder._token_cache_key.matches(list(encoder.parameters()))


def test_clearing_the_cache_during_a_call_is_no_error(monkeypatch):
    """A reader checked that there was a cache, then read it again: cleared by another thread
    in between, the call failed (AssertionError inside the CNN). It now goes on with the
    cache it read, and the cache stays cleared."""
    bilm = random_bilm(seed=7)
    encoder = bilm.token_encoder
    ids = batch_to_ids(SENTENCES["B"])
    with torch.no_grad():
        want = encoder(ids)
    encoder.build_token_cache(["money", "bank"])
    checked, cleared = threading.Event(), threading.Event()
    real = char_cnn_module.writes_uncounted

    def writes_uncounted(params):          # the reader, after it saw a cache
        if threading.current_thread().name == "reader":
            checked.set()
            assert cleared.wait(WAIT)
        return real(params)
    monkeypatch.setattr(char_cnn_module, "writes_uncounted", writes_uncounted)

    def clear():
        assert checked.wait(WAIT)
        encoder.clear_token_cache()
        cleared.set()
    got = run_threads({"reader": lambda: encoder(ids), "clearer": clear})
    torch.testing.assert_close(got["reader"], want, rtol=0, atol=cnn_tolerance(encoder, want))
    assert encoder.token_cache_size == 0


def test_a_weight_written_during_a_build_makes_the_vectors_remade(monkeypatch):
    """The build took the weights' state after computing the vectors: a weight written in
    between (another thread's training step) was taken for the one they were made from, and
    the stale vectors were used for good. The state is now taken first."""
    bilm = random_bilm(seed=8)
    encoder = bilm.token_encoder
    ids = batch_to_ids(SENTENCES["C"])
    real = type(encoder)._encode_in_batches

    def encode_then_step(self, *args, **kwargs):
        vectors = real(self, *args, **kwargs)
        with torch.no_grad():              # the other thread's step, after the vectors
            for p in self.parameters():
                p.mul_(1.25)
        return vectors
    monkeypatch.setattr(type(encoder), "_encode_in_batches", encode_then_step)
    encoder.build_token_cache(["it", "rained", "so", "we"])
    monkeypatch.setattr(type(encoder), "_encode_in_batches", real)
    with torch.no_grad():
        got = encoder(ids)
        encoder.clear_token_cache()
        want = encoder(ids)
    torch.testing.assert_close(got, want, rtol=0, atol=cnn_tolerance(encoder, want))
