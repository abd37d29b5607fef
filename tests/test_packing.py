"""The LSTM's packing computed on the host (elmo/modules/packing.py) and the character CNN's
length groups found without a read per group: both exactly what the device computations they
replace gave (kept here as references), the checks of the lengths, and the host lengths a
language-model batch keeps for the packing."""
from __future__ import annotations

from typing import List

import pytest
import torch

from elmo.config import LSTMConfig
from elmo.data.lm_batches import LMBatch
from elmo.modules.char_cnn import best_length_groups, length_groups
from elmo.modules.lstm import BiLSTMStack
from elmo.modules.packing import Packing

from host_reads import HostReads
from training_helpers import tiny_lm_and_batch, toy_sentences


def reference_packing(lengths: torch.Tensor, max_len: int):
    """Packing.from_lengths as it was, on the lengths' device (three reads of it)."""
    lengths_sorted, order = torch.sort(lengths, descending=True, stable=True)
    device = lengths.device
    if max_len == 0 or lengths.numel() == 0:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return order, [], empty, empty
    steps = torch.arange(max_len, device=device)
    running = steps[:, None] < lengths_sorted[None, :]  # (T, B), time-major
    counts = running.sum(dim=1)
    batch_sizes: List[int] = counts[counts > 0].tolist()
    t_idx, pos = running.nonzero(as_tuple=True)  # row-major over (T, B): packed order
    rows = order[pos]
    forward_index = rows * max_len + t_idx
    backward_index = rows * max_len + (lengths[rows] - 1 - t_idx)
    return order, batch_sizes, forward_index, backward_index


def reference_length_groups(lengths: torch.Tensor, extra: int, overhead: float):
    """length_groups as it was: three reads of the distinct lengths and a nonzero per group
    (the split itself, best_length_groups, was its code unchanged)."""
    values, counts = torch.unique(lengths, return_counts=True)
    values, counts = values.tolist(), counts.tolist()
    groups = []
    for lo, hi in best_length_groups(values, counts, extra, overhead):
        index = ((lengths >= values[lo]) & (lengths <= values[hi - 1])).nonzero().squeeze(1)
        groups.append((index, values[hi - 1] + extra))
    return groups


def _length_cases():
    g = torch.Generator().manual_seed(0)
    cases = [([0, 0, 0], 4), ([5, 5, 5, 5], 5), ([3], 3), ([10_000], 10_000), ([], 0), ([], 6),
             ([0, 0], 0), ([2, 0, 7, 7, 1, 0, 2], 9), ([1, 10_000, 3, 10_000], 10_000)]
    for _ in range(30):
        steps = int(torch.randint(0, 25, (1,), generator=g))
        rows = int(torch.randint(0, 40, (1,), generator=g))
        lengths = torch.randint(0, steps + 1, (rows,), generator=g)
        lengths[torch.rand(rows, generator=g) < 0.2] = 0   # (zeros are frequent: empty rows)
        cases.append((lengths.tolist(), steps))
    return cases


@pytest.mark.parametrize("lengths, steps", _length_cases())
def test_the_packing_from_a_tensor_or_from_ints_is_the_old_one(lengths, steps):
    for dtype in (torch.long, torch.int32):
        want = reference_packing(torch.tensor(lengths, dtype=dtype).reshape(-1), steps)
        for given in (torch.tensor(lengths, dtype=dtype).reshape(-1), list(lengths), tuple(lengths)):
            got = Packing.from_lengths(given, steps)
            assert got.batch_sizes == want[1]
            for name, a, b in (("order", got.order, want[0]), ("forward", got.forward_index, want[2]),
                               ("backward", got.backward_index, want[3])):
                assert a.dtype == b.dtype == torch.long and a.device == b.device and torch.equal(a, b), name


def test_the_packing_puts_its_indices_on_the_device_asked():
    packing = Packing.from_lengths([2, 1], 3, device="meta")
    assert {t.device.type for t in (packing.order, packing.forward_index, packing.backward_index)} == {"meta"}


def _grouped_lengths(g: torch.Generator, distinct: int, n: int) -> torch.Tensor:
    values = torch.randperm(48, generator=g)[:distinct] + 3
    return values[torch.randint(0, distinct, (n,), generator=g)]


def test_the_length_groups_are_the_old_ones():
    g = torch.Generator().manual_seed(1)
    seen = set()
    for trial in range(60):
        n = int(torch.randint(1, 300, (1,), generator=g))
        lengths = _grouped_lengths(g, int(torch.randint(1, 20, (1,), generator=g)), n)
        for overhead in (0.0, 50.0, float(trial * 40), 1e9):
            want = reference_length_groups(lengths, 4, overhead)
            got = length_groups(lengths, 4, overhead)
            assert [w for _, w in got] == [w for _, w in want]
            assert all(a.dtype == b.dtype and torch.equal(a, b) for (a, _), (b, _) in zip(got, want))
            seen.add(len(got))
    assert min(seen) == 1 and max(seen) >= 10, seen    # (one group and many were compared)


def test_a_forward_with_lengths_as_ints_is_the_one_with_a_tensor():
    torch.manual_seed(0)
    stack = BiLSTMStack(LSTMConfig(7, 5, 2), input_dim=6).eval()
    x, lengths = torch.randn(5, 8, 6), [8, 0, 3, 8, 1]
    with torch.no_grad():
        want, want_final = stack(x, torch.tensor(lengths))
        for given in (lengths, tuple(lengths), torch.tensor(lengths, dtype=torch.int32)):
            got, got_final = stack(x, given)
            assert all(torch.equal(a, b) for a, b in zip(got, want))
            assert all(torch.equal(a, b) for s, t in zip(got_final, want_final) for a, b in zip(s, t))


@pytest.mark.parametrize("lengths, message", [
    (torch.tensor([5, 6, 1]), "0 to 5"), (torch.tensor([5, -1, 1]), "0 to 5"), ([5, 2, 7], "0 to 5"),
    (torch.tensor([5, 2]), "2 entries for 3 rows"), ([5, 2, 1, 1], "4 entries for 3 rows"),
    (torch.tensor([5.0, 2.0, 1.0]), "tensor of integers"), (torch.tensor([[5, 2, 1]]), "tensor of integers"),
    (torch.tensor([True, True, False]), "tensor of integers"), ([5, 2.0, 1], "must be ints"),
    ([5, True, 1], "must be ints"), ("521", "list or tuple of ints"), ([2**70, 1, 1], "0 to 5")])
def test_a_forward_refuses_lengths_that_do_not_fit_its_inputs(lengths, message):
    """Unchecked, a length above T packed positions of the next row, and a tensor of fewer
    lengths than rows ran without a word."""
    stack = BiLSTMStack(LSTMConfig(8, 4, 1))
    with pytest.raises(ValueError, match=message):
        stack(torch.randn(3, 5, 4), lengths)


def test_a_built_batch_keeps_its_lengths_on_the_host_while_they_are_its_lengths(tmp_path):
    lines = "\n".join(" ".join(s) for s in toy_sentences(40, 0)) + "\n"
    _, _, batch = tiny_lm_and_batch(tmp_path / "t.txt", lines, 3, 5)
    assert batch.host_lengths == tuple(batch.lengths.tolist())
    assert batch.to("cpu").host_lengths == batch.host_lengths
    assert batch.to("meta").host_lengths == batch.host_lengths       # (carried over, not read)
    assert LMBatch.concat([batch, batch]).host_lengths == 2 * batch.host_lengths
    hand_made = LMBatch(*(getattr(batch, f) for f in LMBatch.__dataclass_fields__))
    assert hand_made.host_lengths is None and LMBatch.concat([batch, hand_made]).host_lengths is None
    replaced = batch.to("cpu")
    replaced.lengths = replaced.lengths.clone()
    assert replaced.host_lengths is None and batch.host_lengths is not None
    batch.lengths[0] -= 1                           # in place: the host copy is stale
    assert batch.host_lengths is None
    with pytest.raises(ValueError, match="2 host lengths for a batch of 3 rows"):
        batch.keep_host_lengths([5, 5])


def test_a_language_model_step_packs_from_the_batchs_host_lengths(tmp_path):
    """The batch's ints, not its (device) lengths: the packing reads nothing, nor does the
    character CNN to find the tokens (a bool and a nonzero), nor the loss to find the targets
    (a nonzero per direction: the masks are the rows' first lengths[b] positions); the same
    loss and gradients."""
    lines = "\n".join(" ".join(s) for s in toy_sentences(40, 0)) + "\n"
    model, _, batch = tiny_lm_and_batch(tmp_path / "t.txt", lines, 3, 5)
    without = LMBatch(*(getattr(batch, f) for f in LMBatch.__dataclass_fields__))
    losses, grads, reads = [], [], []
    for b in (batch, without):
        model(b)    # (first calls probe kernels and make caches once)
        with HostReads() as counted:
            losses.append(model(b)["loss"])
        reads.append(counted.counts)
        grads.append(torch.autograd.grad(losses[-1], list(model.parameters()), allow_unused=True))
    assert torch.equal(losses[0], losses[1])
    assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(*grads))
    assert reads[1] - reads[0] == {"tolist": 1, "__bool__": 1, "aten._local_scalar_dense": 1, "aten.nonzero": 3}
    assert not reads[0] - reads[1], reads


def test_a_batchs_token_count_comes_from_its_host_lengths(tmp_path):
    """n_tokens read the device (int(lengths.sum())) even where the batch held its lengths as
    ints; a batch made by hand, or whose lengths were changed, still reads them."""
    lines = "\n".join(" ".join(s) for s in toy_sentences(40, 0)) + "\n"
    _, _, batch = tiny_lm_and_batch(tmp_path / "t.txt", lines, 3, 5)
    without = LMBatch(*(getattr(batch, f) for f in LMBatch.__dataclass_fields__))
    for b, reads_wanted in ((batch, 0), (without, 1)):
        with HostReads() as counted:
            n = b.n_tokens
        assert n == int(batch.lengths.sum()) and counted.counts["__int__"] == reads_wanted, counted.counts
    batch.lengths[0] -= 1    # (in place: the host's ints are stale, so the tensor is read)
    assert batch.host_lengths is None and batch.n_tokens == int(without.lengths.sum())


def test_a_batchs_masks_follow_its_lengths_until_they_change(tmp_path):
    """The iterators' batches say their masks are the rows' first lengths[b] positions (the
    loss then takes the targets' positions from the host lengths); .to and concat keep it;
    a batch made by hand, or whose masks were changed or replaced, does not say so."""
    lines = "\n".join(" ".join(s) for s in toy_sentences(40, 0)) + "\n"
    _, _, batch = tiny_lm_and_batch(tmp_path / "t.txt", lines, 3, 5)
    assert batch.masks_follow_lengths and batch.to("cpu").masks_follow_lengths
    assert LMBatch.concat([batch, batch.to("cpu")]).masks_follow_lengths
    without = LMBatch(*(getattr(batch, f) for f in LMBatch.__dataclass_fields__))
    assert not without.masks_follow_lengths and not LMBatch.concat([batch, without]).masks_follow_lengths
    fewer = batch.to("cpu")
    fewer.fwd_mask[0, 0] = False       # (a target left out: the host lengths no longer tell them)
    assert fewer.host_lengths is not None and not fewer.masks_follow_lengths
    replaced = batch.to("cpu")
    replaced.bwd_mask = replaced.bwd_mask.clone()
    assert not replaced.masks_follow_lengths


def test_a_step_with_a_target_left_out_of_the_mask_counts_without_it(tmp_path):
    """A mask changed after the batch was built (a target left out) is read, not taken from the
    lengths: the loss is that of the batch made by hand with the same mask."""
    lines = "\n".join(" ".join(s) for s in toy_sentences(40, 0)) + "\n"
    model, _, batch = tiny_lm_and_batch(tmp_path / "t.txt", lines, 3, 5)
    batch.fwd_mask[0, 0] = False
    by_hand = LMBatch(*(getattr(batch, f) for f in LMBatch.__dataclass_fields__))
    out, want = model(batch), model(by_hand)
    assert out["n_fwd"] == want["n_fwd"] == int(batch.fwd_mask.sum()) and torch.equal(out["loss"], want["loss"])
