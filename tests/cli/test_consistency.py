"""Every command behaves alike (issue 19, item 7): export refuses to overwrite and writes with
the umask's mode, a one-class labelled folder is an error (a one-class evaluation split warns),
k larger than the bank is refused before any feature is extracted, an unlabelled folder holds
nothing out, and the README's commands (and the tour of docs/evaluation.md) run as written and
write only where .gitignore covers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from own_images import make_own_folder
from shell_lines import Block, bash_blocks

from contrastkit.cli import main
from contrastkit.outputs import file_mode
from contrastkit.train.datamodule import PretrainDataModule

REPO = Path(__file__).resolve().parents[2]
TINY_PRETRAIN = [
    "--data.dataset", "digits", "--data.batch_size", "32", "--data.subset", "64",
    "--data.monitor_bank_size", "64", "--model.views.size", "8",
    "--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.max_epochs", "1",
    "--trainer.enable_progress_bar", "false", "--trainer.log_every_n_steps", "1",
    "--model.method", "contrastkit.methods.SimCLR",
    "--model.method.backbone", '{"name": "small_convnet", "width": 4, "out_dim": 8}',
    "--model.method.projector", '{"hidden_dim": 8, "out_dim": 4}',
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from contrastkit.cli.pretrain import pretrain

    out = tmp_path_factory.mktemp("consistency") / "run"
    pretrain([*TINY_PRETRAIN, "--output", str(out)])
    return out / "checkpoints" / "last.ckpt"


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_export_refuses_to_overwrite_and_writes_the_umask_mode(checkpoint, tmp_path, capsys,
                                                               suffix):
    target = tmp_path / f"backbone{suffix}"
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(target)]) == 0
    assert target.stat().st_mode & 0o777 == file_mode()
    target.write_bytes(b"mine")
    err = _error(capsys, ["export", "--checkpoint", str(checkpoint), "--output", str(target)])
    assert f"{target} exists" in err and "--overwrite" in err
    assert target.read_bytes() == b"mine"
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(target),
                 "--overwrite"]) == 0
    assert target.read_bytes() != b"mine"


def test_k_larger_than_the_bank_is_refused_before_features_are_extracted(checkpoint, tmp_path,
                                                                         capsys):
    cache = tmp_path / "cache"
    err = _error(capsys, ["eval", "knn", "--checkpoint", str(checkpoint), "--data", "digits",
                          "--k", "5000", "--cache-dir", str(cache), "--quiet"])
    assert "k=5000 is larger than the bank" in err
    assert not cache.exists() or not any(cache.iterdir())  # nothing was extracted


def test_a_one_class_folder_is_an_error_and_a_one_class_split_warns(checkpoint, tmp_path,
                                                                    capsys):
    one = make_own_folder(tmp_path / "one", per_class=6, classes=("cat",), sizes=((8, 8),))
    data = PretrainDataModule(dataset="folder", root=str(one), batch_size=2,
                              test_fraction=0.25)
    with pytest.raises(ValueError, match=r"one class sub-folder \(cat\).*at least 2 classes"):
        data.setup("fit")
    two = make_own_folder(tmp_path / "two", per_class=6, classes=("cat", "dog"),
                          sizes=((8, 8),))
    code = main(["eval", "knn", "--checkpoint", str(checkpoint), "--data", "folder", "--root",
                 str(two), "--classes", "cat", "--test-fraction", "0.5", "--k", "2", "--quiet",
                 "--no-cache"])
    assert code == 0
    assert "has one class (cat)" in capsys.readouterr().err


def test_an_unlabelled_folder_holds_nothing_out(tmp_path, caplog):
    flat = make_own_folder(tmp_path / "flat", per_class=5, sizes=((8, 8),), labelled=False)
    data = PretrainDataModule(dataset="folder", root=str(flat), batch_size=2,
                              test_fraction=0.2)
    with caplog.at_level("INFO"):
        data.setup("fit")
    total = len(list(flat.iterdir()))
    assert len(data.train_set) == total and data.val_split is None
    assert data.evaluation_record()["test_fraction"] is None
    assert "each class" not in caplog.text and f"all {total} of them, none held out" in caplog.text


#: What the test adds to the tour's ``pretrain`` lines: one epoch of a small network, and per
#: config a smaller data set or batch (the rest of each line runs as written).
SMALL_PRETRAINING = ["--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false",
                     "--model.method.init_args.backbone",
                     '{"name": "small_convnet", "width": 4, "out_dim": 8, "cifar_stem": false}',
                     "--model.method.init_args.projector", '{"hidden_dim": 8, "out_dim": 4}']
SMALL_DATA = {"configs/demo/digits_sce.yaml": ["--data.subset", "128", "--data.batch_size",
                                               "32", "--model.method.init_args.queue_size",
                                               "64", "--data.monitor_bank_size", "128"],
              "configs/cpu/folder_simclr.yaml": ["--data.batch_size", "8"]}


def _tour() -> list[Block]:
    """The README's command blocks, and the tour of one's own folder in docs/evaluation.md."""
    guide = (REPO / "docs" / "evaluation.md").read_text()
    section = guide[guide.index("## End to end"):]
    return bash_blocks((REPO / "README.md").read_text()) + bash_blocks(
        section[:section.index("\n## ", 3)])


def _photos(root: Path) -> tuple[Path, int]:
    """A folder as a user has one: 4 classes of images of three sizes, two files that are not
    JPEGs though named so, an empty file and a text file named .png; and how many are
    unreadable."""
    make_own_folder(root, per_class=10, corrupt=2)
    (root / "car" / "empty.jpg").write_bytes(b"")
    (root / "dog" / "notes.png").write_text("not an image\n")
    return root, 4


@pytest.mark.slow
def test_the_readme_commands_run_as_written_in_a_fresh_clone(tmp_path, monkeypatch):
    """Issue 37 items 1 and 4: the README's commands and the tour of docs/evaluation.md, pasted
    as written after ``source .venv/bin/activate`` (which each block starts with; ``make``
    creates ``.venv`` with the ``contrastkit`` script), run in a folder that holds only what a
    fresh clone has (``configs/``) on a folder with unreadable files; they write only where
    .gitignore covers."""
    blocks = _tour()
    assert len(blocks) == 2 and all(block.activates_first for block in blocks)
    assert "VENV := .venv" in (REPO / "Makefile").read_text()
    assert 'contrastkit = "contrastkit.cli:main"' in (REPO / "pyproject.toml").read_text()
    commands = [c for block in blocks for c in block.commands]
    ignored = [line.strip().strip("/") for line in (REPO / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    outputs = [c[c.index("--output") + 1] for c in commands if "--output" in c]
    assert len(outputs) == len(commands) - 1  # all but the comparison write files
    for out in outputs:
        top = out.split("/")[0]
        assert top in ignored or any(Path(out).match(p) for p in ignored), out

    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(REPO / "configs")
    _, unreadable = _photos(tmp_path / "photos")
    for argv in commands:
        extra = []
        if argv[0] == "pretrain":
            extra = SMALL_PRETRAINING + SMALL_DATA[argv[argv.index("--config") + 1]]
        assert main([*argv, *extra]) == 0, argv

    run, ev = Path("runs/photos"), Path("runs/photos-eval")
    assert (run / "skipped_files.txt").read_text().count("\n") == unreadable
    knn = json.loads((ev / "knn" / "results.json").read_text())
    assert knn["data"]["test_fraction"] == 0.2 and knn["data"]["load_size"] == 64
    assert knn["data"]["num_skipped"] == unreadable and knn["num_test"] == 4 * 2
    assert knn["config"]["k"] == 32  # the default k (200) at most the bank, as the monitor
    preds = [np.load(ev / name / "predictions.npz") for name in ("knn", "knn_export")]
    assert np.array_equal(preds[0]["pred"], preds[1]["pred"])  # the export is the same model
    embedded = np.load(ev / "embed" / "embeddings.npy")
    assert embedded.shape[0] == 4 * 10  # every readable image, the unreadable ones skipped
    assert (ev / "analysis" / "similarity_histograms.png").is_file()
    for folder in (run, ev, Path("runs/sce"), Path("runs/sce-knn"), Path("runs/sce-an")):
        assert folder.is_dir() and not list(folder.rglob(".*"))  # no temporary file left
