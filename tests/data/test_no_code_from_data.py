"""Issue 52, item 1: no code runs from a data set. A CIFAR batch file is a pickle; a malicious
one names a callable that runs when it is unpickled. Its payload here only creates a marker
file, and nothing may create it: not opening the data set (folder or archive), not
``contrastkit pretrain --data.dataset cifar10``, not ``contrastkit eval ... --data cifar10``.
At 0f3dae1 plain ``pickle.load`` ran it and the error that followed ("missing key
'label_names'") hid it (docs/reliability.md counts this fault)."""

from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from contrastkit.cli import main
from contrastkit.data.sources.images import datasets as D
from contrastkit.data.sources.images._cifar import _unpickle

pytestmark = pytest.mark.usefixtures("one_thread")


class _Payload:
    """Unpickled, it calls ``open(marker, "w")``: a file appears where code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _malicious_cifar10(root: Path, marker: Path) -> Path:
    """cifar-10-batches-py whose ``data_batch_1`` holds the payload beside valid-looking data;
    the other files are valid."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rows = np.zeros((2, 3072), np.uint8)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rows, "labels": [0, 1]}
        if name == "data_batch_1":
            batch["batch_label"] = _Payload(marker)
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    meta = {"label_names": [f"class{i}" for i in range(10)]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return folder


def test_the_payload_runs_under_plain_pickle(tmp_path):
    """The fixture is a real attack: plain unpickling creates the marker."""
    marker = tmp_path / "RAN"
    folder = _malicious_cifar10(tmp_path / "data", marker)
    pickle.loads((folder / "data_batch_1").read_bytes())
    assert marker.exists()


def test_a_malicious_batch_file_is_refused_from_a_folder_and_an_archive(tmp_path):
    marker = tmp_path / "RAN"
    folder = _malicious_cifar10(tmp_path / "data", marker)
    with pytest.raises(ValueError) as err:
        D.CIFAR10(tmp_path / "data", split="train")
    assert str(err.value) == (
        f"{folder / 'data_batch_1'}: refused: not a CIFAR batch file, its pickle calls "
        "io.open (a data set may hold only arrays, labels and names; nothing in it is "
        "run)")
    archive_root = tmp_path / "archive"
    archive_root.mkdir()
    with tarfile.open(archive_root / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    with pytest.raises(ValueError, match=r"cifar-10-batches-py/data_batch_1: refused: .* "
                                         r"io\.open"):
        D.CIFAR10(archive_root, split="train")
    assert not marker.exists()


@pytest.mark.parametrize("module", ["numpy.core.multiarray", "numpy._core.multiarray"])
def test_official_batches_pickled_by_numpy_1_and_2_still_read(module):
    """The official files are Python-2 pickles of numpy 1 arrays (``numpy.core``); numpy 2
    writes ``numpy._core``. Both name only the array reconstruction the unpickler allows."""
    rows = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    data = pickle.dumps({"data": rows, "labels": [3, 4], "batch_label": b"training batch"},
                        protocol=2)
    data = data.replace(b"numpy._core.multiarray", module.encode())
    assert module.encode() in data
    batch = _unpickle(data, "x")
    assert np.array_equal(batch["data"], rows) and batch["labels"] == [3, 4]


@pytest.mark.parametrize("callable_", [("os", "system"), ("builtins", "eval"),
                                       ("numpy", "load")])
def test_any_other_callable_is_refused_before_it_is_called(callable_, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the command would have run
    module, name = callable_
    # protocol 0 by hand: GLOBAL module name, a string argument, TUPLE1, REDUCE, STOP
    data = f"c{module}\n{name}\n(S'touch RAN'\ntR.".encode()
    with pytest.raises(ValueError, match=f"its pickle calls {module}.{name} "):
        _unpickle(data, "x")
    assert not (tmp_path / "RAN").exists()


def test_pretrain_and_eval_on_a_malicious_cifar_folder_run_nothing(tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "RAN"
    folder = _malicious_cifar10(tmp_path / "data", marker)
    config = Path(__file__).resolve().parents[2] / "configs" / "demo" / "digits_sce.yaml"
    code = main(["pretrain", "--config", str(config), "--data.dataset", "cifar10",
                 "--data.root", str(tmp_path / "data"), "--data.val_split", "null",
                 "--trainer.max_epochs", "1",
                 "--trainer.accelerator", "cpu", "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "refused" in err and "io.open" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not marker.exists()
    weights = tmp_path / "r18.pth"
    import torch

    from contrastkit.models.resnet import resnet18
    from contrastkit.models.torchvision_layout import to_torchvision_state_dict

    torch.save(to_torchvision_state_dict(resnet18(cifar_stem=True, width=4)), weights)
    code = main(["eval", "knn", "--checkpoint", str(weights), "--data", "cifar10", "--root",
                 str(tmp_path / "data"), "--output", str(tmp_path / "knn"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and f"{folder / 'data_batch_1'}: refused" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not marker.exists()


def test_a_batch_that_is_not_a_pickle_is_still_a_corrupt_file_message():
    with pytest.raises(ValueError, match="not a valid CIFAR pickle"):
        _unpickle(io.BytesIO(b"\x80\x02}q").getvalue(), "x")
