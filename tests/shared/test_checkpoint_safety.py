"""Issue 18 items 1 and 9: a checkpoint cannot run code when it is loaded, and corrupted weights
are refused (the SHA-256 stored with them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from contrastkit.checkpoints import (
    WEIGHTS_SHA256,
    load_backbone,
    read_metadata,
    verify_weights,
    weights_digest,
)
from contrastkit.cli import main
from contrastkit.train.resume import read_checkpoint


class _RunsCode:
    """Unpickling this calls ``os.system`` (what a malicious checkpoint does)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _malicious(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "pwned"
    ckpt = tmp_path / "pwn.ckpt"
    torch.save({"contrastkit": {"backbone": {"name": "small_convnet"}}, "state_dict": {},
                "global_step": 0, "payload": _RunsCode(marker)}, ckpt)
    return ckpt, marker


@pytest.mark.parametrize("load", [load_backbone, read_metadata, read_checkpoint])
def test_a_malicious_pickle_is_refused_before_it_runs(tmp_path, load):
    ckpt, marker = _malicious(tmp_path)
    with pytest.raises(ValueError, match=r"pwn\.ckpt holds Python objects other than tensors "
                                         r"and plain values \(posix\.system\): refused"):
        load(ckpt)
    assert not marker.exists()


@pytest.mark.parametrize("command", [
    ["export", "--output", "{tmp}/out.pth"],
    ["eval", "knn", "--data", "digits", "--output", "{tmp}/ev"],
])
def test_the_commands_refuse_it_in_one_line(tmp_path, capsys, command):
    ckpt, marker = _malicious(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in command] + ["--checkpoint", str(ckpt)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused, since loading it could run code" in err
    assert not marker.exists()


def _state() -> dict:
    torch.manual_seed(0)
    return {"a.weight": torch.randn(4, 3), "a.bias": torch.zeros(4),
            "n": torch.tensor(7), "h": torch.randn(2, dtype=torch.bfloat16)}


def test_the_digest_covers_values_names_and_dtypes():
    state = _state()
    digest = weights_digest(state)
    assert digest == weights_digest({k: v.clone() for k, v in reversed(state.items())})
    for changed in ({**state, "n": torch.tensor(8)}, {**state, "a.bias": torch.zeros(4).double()},
                    {("b" + k[1:] if k == "a.bias" else k): v for k, v in state.items()}):
        assert weights_digest(changed) != digest


def test_corrupted_weight_bytes_are_refused(tmp_path):
    state = _state()
    ckpt = tmp_path / "c.ckpt"
    torch.save({"contrastkit": {WEIGHTS_SHA256: weights_digest(state)}, "state_dict": state,
                "global_step": 3}, ckpt)
    assert read_checkpoint(ckpt)["global_step"] == 3
    raw = bytearray(ckpt.read_bytes())
    weight = state["a.weight"].numpy().tobytes()
    at = bytes(raw).index(weight)
    raw[at + 5] ^= 0xFF  # one flipped byte inside a.weight's data
    ckpt.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"c\.ckpt is corrupted: its weights do not match"):
        read_checkpoint(ckpt)
    loaded = torch.load(ckpt, weights_only=True)
    with pytest.raises(ValueError, match="corrupted"):
        verify_weights(loaded, ckpt)
