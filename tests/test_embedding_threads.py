"""Threads embedding with one model: the dropout switch and a stateful model's carried state.

Each test forces the interleaving that went wrong with events inside a patched forward (no
sleeps): thread B's call starts while thread A's is inside the model."""
import threading

import numpy as np
import pytest

import elmo.modules.bilm as bilm_module
from elmo import ElmoEmbedder, Embedder
from tests.conftest import random_bilm

WAIT = 30  # seconds: only a hang (a broken test) ever waits this long

A_SENTENCES = [["the", "bank", "closed"], ["a", "river"]]
B_SENTENCES = [["money", "of", "the", "bank"], ["fish"]]


def in_thread(name, target, results):
    """A started thread that stores ``target()``'s result (or its exception) in ``results``."""
    def body():
        try:
            results[name] = target()
        except BaseException as error:  # (handed to the test's thread below)
            results[name] = error
    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread


def finished(results, *threads):
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), f"{thread.name} hung"
        if isinstance(results[thread.name], BaseException):
            raise results[thread.name]
    return results


def patch_forward(model, before):
    """Call ``before(thread name)`` on each call of ``model`` before it runs."""
    real = model.forward

    def forward(*args, **kwargs):
        before(threading.current_thread().name)
        return real(*args, **kwargs)
    model.forward = forward


CALLERS = {
    "Embedder": lambda model, sentences: Embedder(model, batch_size=8).embed_sentences(sentences),
    "ElmoEmbedder.batch_to_embeddings":
        lambda model, sentences: ElmoEmbedder(model=model).batch_to_embeddings(sentences)[0].numpy(),
}


@pytest.mark.parametrize("caller", CALLERS)
def test_two_threads_on_a_model_in_training_get_no_dropout_and_leave_its_mode(caller):
    """Each call switched the model to eval() and back to train(): thread B's call began while
    A's model was in eval (so B noted eval as the mode to give back), A switched it back to
    train, and B's forward then ran with the LSTM's dropout on (other vectors, no error) and
    left a model still being trained in eval mode for good. Dropout is now off per thread,
    without touching the shared training flag."""
    embed = CALLERS[caller]
    model = random_bilm(seed=3)
    model.lstm.dropout = 0.5
    model.train()
    want_a, want_b = embed(model, A_SENTENCES), embed(model, B_SENTENCES)   # one at a time
    assert model.training

    a_inside, b_inside, a_done = threading.Event(), threading.Event(), threading.Event()

    def before(name):
        if name == "A":    # A is inside its call: let B start its own, then carry on
            a_inside.set()
            assert b_inside.wait(WAIT)
        elif name == "B":  # B runs its model only once A's call is over
            b_inside.set()
            assert a_done.wait(WAIT)
    patch_forward(model, before)

    def call_a():
        try:
            return embed(model, A_SENTENCES)
        finally:
            a_done.set()
    results = {}
    a = in_thread("A", call_a, results)
    assert a_inside.wait(WAIT)
    b = in_thread("B", lambda: embed(model, B_SENTENCES), results)
    finished(results, a, b)
    assert model.training and model.lstm.training
    for got, want in ((results["A"], want_a), (results["B"], want_b)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


class _Signalling:
    """A re-entrant lock that sets ``waiting`` when a thread other than its holder asks for it
    (the holder holds it until its outermost block ends: the model's own calls nest in it)."""

    def __init__(self, waiting):
        self.lock, self.waiting, self.holder, self.depth = threading.RLock(), waiting, None, 0

    def __enter__(self):
        if self.holder not in (None, threading.get_ident()):
            self.waiting.set()
        self.lock.acquire()
        self.holder = threading.get_ident()
        self.depth += 1

    def __exit__(self, *exc):
        self.depth -= 1
        if self.depth == 0:
            self.holder = None
        self.lock.release()


class _Locks(dict):
    def __init__(self, waiting):
        super().__init__()
        self.waiting = waiting

    def setdefault(self, key, default=None):
        return super().setdefault(key, _Signalling(self.waiting))


def test_a_shared_stateful_model_serves_whole_calls_one_at_a_time(monkeypatch):
    """Two threads embedding with one stateful model interleaved their batches: B's call ran
    between A's first and second batch, so A's second batch started from B's carried state
    and B's from A's half-done one (vectors of neither order, no error). Whole calls now take
    turns; each equals the same call made after the other."""
    model = random_bilm(seed=3)
    model.stateful = True
    embed = lambda sentences: Embedder(model, batch_size=1).embed_sentences(sentences)  # noqa: E731
    want_a, want_b = embed(A_SENTENCES), embed(B_SENTENCES)   # A, then B, from a fresh state
    model.reset_states()

    # B is out of A's way once it has finished its call (it ran between A's batches) or once
    # it waits for the model (the lock's wait is what tells)
    b_out_of_the_way, a_inside = threading.Event(), threading.Event()
    monkeypatch.setattr(bilm_module, "_STATEFUL_LOCKS", _Locks(b_out_of_the_way))
    calls = {"A": 0}

    def before(name):
        if name == "A":
            calls["A"] += 1
            if calls["A"] == 2:  # between A's two batches
                a_inside.set()
                assert b_out_of_the_way.wait(WAIT)
    patch_forward(model, before)

    def call_b():
        try:
            return embed(B_SENTENCES)
        finally:
            b_out_of_the_way.set()
    results = {}
    a = in_thread("A", lambda: embed(A_SENTENCES), results)
    assert a_inside.wait(WAIT)
    b = in_thread("B", call_b, results)
    finished(results, a, b)
    for got, want in ((results["A"], want_a), (results["B"], want_b)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
