"""MemoryQueue: FIFO order with wrap-around, oversize batches, state, accumulation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from queue_inspect import is_full, ordered, staged_rows

from contrastkit.methods.queue import MemoryQueue


def _rows(start: int, n: int, dim: int = 3) -> torch.Tensor:
    """Distinct rows whose first coordinate is the row id (no normalisation in tests)."""
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return torch.stack([ids, torch.ones(n), -ids], dim=1)[:, :dim]


def _reference_fifo(size: int, batches: list[torch.Tensor]) -> tuple[torch.Tensor, int, int]:
    """Brute force: write rows one at a time at ptr, wrap to 0."""
    store = torch.zeros(size, batches[0].shape[1])
    ptr, filled = 0, 0
    for batch in batches:
        for row in batch:
            store[ptr] = row
            ptr = (ptr + 1) % size
            filled = min(filled + 1, size)
    return store, ptr, filled


def test_starts_empty_and_returns_only_filled_rows() -> None:
    q = MemoryQueue(10, 3, normalize=False)
    assert not q.is_ready and not is_full(q)
    assert q.negatives().shape == (0, 3)
    q.enqueue(_rows(0, 4))
    assert q.is_ready and not is_full(q) and q.num_valid == 4
    torch.testing.assert_close(q.negatives(), _rows(0, 4))


def test_fifo_wraparound_size_not_multiple_of_batch() -> None:
    q = MemoryQueue(10, 3, normalize=False)
    batches = [_rows(4 * i, 4) for i in range(7)]  # 28 rows through a queue of 10
    for i, b in enumerate(batches):
        q.enqueue(b)
        store, ptr, filled = _reference_fifo(10, batches[: i + 1])
        torch.testing.assert_close(q.keys, store)
        assert int(q.ptr) == ptr and int(q.filled) == filled
    # After 28 rows the newest 10 (ids 18..27) remain, oldest first from ptr = 8.
    assert int(q.ptr) == 8
    torch.testing.assert_close(ordered(q)[:, 0], torch.arange(18.0, 28.0))
    # third batch (ids 8..11) wrapped: rows 8, 9 then 0, 1
    q2 = MemoryQueue(10, 3, normalize=False)
    for b in batches[:3]:
        q2.enqueue(b)
    torch.testing.assert_close(q2.keys[:, 0], torch.tensor([10.0, 11, 2, 3, 4, 5, 6, 7, 8, 9]))
    assert int(q2.ptr) == 2 and is_full(q2)


@pytest.mark.parametrize("ptr_rows", [0, 3, 7])
@pytest.mark.parametrize("n", [10, 13, 25])
def test_batch_larger_than_queue_keeps_newest(ptr_rows: int, n: int) -> None:
    q = MemoryQueue(10, 3, normalize=False)
    batches = [_rows(100, ptr_rows)] if ptr_rows else []
    batches.append(_rows(0, n))
    for b in batches:
        q.enqueue(b)
    store, ptr, filled = _reference_fifo(10, batches)
    torch.testing.assert_close(q.keys, store)
    assert int(q.ptr) == ptr and int(q.filled) == filled == 10
    torch.testing.assert_close(ordered(q)[:, 0], torch.arange(n - 10.0, n))


def test_normalize_and_detach() -> None:
    q = MemoryQueue(5, 3)
    x = torch.randn(2, 3, requires_grad=True)
    q.enqueue(x * 4.0)
    out = q.negatives()
    assert not out.requires_grad
    torch.testing.assert_close(out, F.normalize(x.detach(), dim=1))


def test_negatives_is_a_copy_safe_for_backward() -> None:
    q = MemoryQueue(4, 3, normalize=False)
    q.enqueue(torch.randn(4, 3))
    z = torch.randn(2, 3, requires_grad=True)
    loss = (z @ q.negatives().T).sum()
    q.enqueue(torch.randn(2, 3))  # in-place write before backward must not break autograd
    loss.backward()
    assert z.grad is not None


def test_random_init_is_full_normalised_and_seeded() -> None:
    a = MemoryQueue(8, 4, init="random", seed=3)
    b = MemoryQueue(8, 4, init="random", seed=3)
    assert is_full(a) and a.negatives().shape == (8, 4)
    torch.testing.assert_close(a.keys.norm(dim=1), torch.ones(8))
    torch.testing.assert_close(a.keys, b.keys)


def test_state_dict_round_trip_restores_keys_ptr_filled() -> None:
    q = MemoryQueue(10, 3, normalize=False)
    for i in range(3):
        q.enqueue(_rows(4 * i, 4))
    state = q.state_dict()
    assert set(state) == {"keys", "ptr", "filled"}
    r = MemoryQueue(10, 3, normalize=False)
    r.load_state_dict(state)
    torch.testing.assert_close(r.keys, q.keys)
    assert int(r.ptr) == int(q.ptr) == 2 and int(r.filled) == 10
    q.enqueue(_rows(50, 4))
    r.enqueue(_rows(50, 4))
    torch.testing.assert_close(r.keys, q.keys)


def test_gradient_accumulation_stage_then_commit_equals_one_large_batch() -> None:
    micro = [_rows(3 * i, 3) for i in range(4)]  # 4 micro-batches of 3, queue of 10
    acc = MemoryQueue(10, 3, normalize=False)
    big = MemoryQueue(10, 3, normalize=False)
    acc.enqueue(_rows(100, 5))
    big.enqueue(_rows(100, 5))
    before = acc.negatives()
    for m in micro:
        acc.stage(m)
        # every micro-batch of the step sees the same queue
        torch.testing.assert_close(acc.negatives(), before)
    assert staged_rows(acc) == 12
    assert acc.commit() == 12 and staged_rows(acc) == 0
    big.enqueue(torch.cat(micro))
    torch.testing.assert_close(acc.keys, big.keys)
    assert int(acc.ptr) == int(big.ptr) and int(acc.filled) == int(big.filled)
    assert acc.commit() == 0


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="size"):
        MemoryQueue(0, 3)
    with pytest.raises(ValueError, match="dim"):
        MemoryQueue(4, 0)
    with pytest.raises(ValueError, match="init"):
        MemoryQueue(4, 3, init="zeros")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keys"):
        MemoryQueue(4, 3).enqueue(torch.randn(2, 5))


def test_gather_option_is_identity_single_process() -> None:
    q = MemoryQueue(6, 3, normalize=False, gather=True)
    q.enqueue(_rows(0, 2))
    torch.testing.assert_close(q.negatives(), _rows(0, 2))


@pytest.mark.parametrize(("size", "n"), [(10, 3), (8, 4), (6, 9), (5, 5)])
def test_a_write_at_the_device_pointer_equals_the_host_write(size: int, n: int) -> None:
    """``write_at_pointer`` (captured steps: the position read on the device) writes what
    ``commit`` writes, batch after batch, wrapping and oversize included; the host copies kept
    by ``advance_host_copies`` follow the device buffers."""
    host = MemoryQueue(size, 3, normalize=False)
    device = MemoryQueue(size, 3, normalize=False)
    batches = [_rows(100 * i, n) for i in range(5)]
    for batch in batches:
        host.stage(batch)
        host.commit()
        device.stage(batch)
        device.write_at_pointer(device.take_staged())
        device.advance_host_copies(n)
        assert torch.equal(device.keys, host.keys)
        assert int(device.ptr) == int(host.ptr) == device._ptr == host._ptr
        assert int(device.filled) == int(host.filled) == device.num_valid == host.num_valid
    store, ptr, filled = _reference_fifo(size, batches)
    assert torch.equal(device.keys, store) and (ptr, filled) == (device._ptr, device.num_valid)
