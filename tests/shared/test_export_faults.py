"""Issue 52, items 5, 12 (its export part) and 13: an export is written whole or not at all and
an incomplete one is refused; a full disk is one line naming the file and keeps the earlier
export; two exports of one checkpoint are the same bytes; the model card lists the evaluations
written where pretraining's ``next:`` line writes them.

At 0f3dae1 a SIGKILL during ``export --format hf`` could leave ``model.safetensors`` alone,
which ``eval`` accepted; ``--overwrite`` removed the earlier export before writing the new one,
so a kill left nothing; a full disk during a ``.safetensors`` export was a 24-line traceback
(``[Errno 28]`` without the path during a Hub-format one); the ``.safetensors`` metadata came
in another order each time; the card listed no evaluation from ``RUN-eval/``."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from contrastkit.checkpoints import load_backbone
from contrastkit.cli import main
from contrastkit.outputs import evaluations_folder

pytestmark = pytest.mark.usefixtures("one_thread")

DRIVER = Path(__file__).with_name("export_driver.py")


def _export(checkpoint: Path, output: Path, *options: str) -> list[str]:
    """``contrastkit export`` to ``output``: a folder (``--format hf``) when it has no suffix."""
    argv = ["export", "--checkpoint", str(checkpoint), "--output", str(output), *options]
    return argv + (["--format", "hf"] if not output.suffix else [])


def _snapshot(output: Path) -> bytes | dict[str, bytes]:
    """An export's bytes: a file's, or a folder's files by name."""
    if output.is_dir():
        return {p.name: p.read_bytes() for p in sorted(output.iterdir())}
    return output.read_bytes()


def _hidden(folder: Path) -> list[str]:
    """What an export left beside its output: hidden entries (staging folders, temporary
    files)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _one_line(capsys, argv: list[str], status: int = 2) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == status and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err, err
    return err.strip()


class _Failing:
    """A file opened for writing whose ``write`` raises ``error``."""

    def __init__(self, handle, error: BaseException) -> None:
        self.handle, self.error = handle, error

    def write(self, data) -> int:
        raise self.error

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.handle.close()


def _fail_writes_from(monkeypatch, first: int, error: BaseException) -> None:
    """From the ``first``-th file opened for writing (``os.fdopen``) on, writes raise
    ``error`` (the full-disk injection of ``tests/train/test_faults.py``)."""
    count, fdopen = [0], os.fdopen

    def fake(fd, mode="r", *args, **kwargs):
        handle = fdopen(fd, mode, *args, **kwargs)
        if "w" not in mode:
            return handle
        count[0] += 1
        return _Failing(handle, error) if count[0] >= first else handle

    monkeypatch.setattr(os, "fdopen", fake)


def _full_disk() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("kind", [".safetensors", ".pth", "hf"])
def test_a_full_disk_during_an_export_is_one_line_and_keeps_the_earlier_one(
        tiny_checkpoint, tmp_path, capsys, monkeypatch, kind):
    output = tmp_path / ("hub" if kind == "hf" else f"backbone{kind}")
    assert main(_export(tiny_checkpoint, output)) == 0
    earlier = _snapshot(output)
    _fail_writes_from(monkeypatch, 3 if kind == "hf" else 1, _full_disk())  # the last file
    err = _one_line(capsys, _export(tiny_checkpoint, output, "--overwrite"))
    assert err == (f"contrastkit export: error: [Errno 28] --output {output} could not be "
                   "written: No space left on device; the earlier export there is unchanged")
    assert _snapshot(output) == earlier and _hidden(tmp_path) == []
    fresh = output.with_name(f"fresh{output.suffix}")
    err = _one_line(capsys, _export(tiny_checkpoint, fresh))
    assert err.endswith(f"--output {fresh} could not be written: No space left on device; "
                        "nothing was written")
    assert not fresh.exists() and _hidden(tmp_path) == []


def test_an_export_stopped_under_overwrite_keeps_the_earlier_one(tiny_checkpoint, tmp_path,
                                                                capsys, monkeypatch):
    """A Ctrl-C while the second file of a Hub-format export is written, and a failure of the
    rename that puts the new folder in place once the earlier one is moved aside."""
    output = tmp_path / "hub"
    assert main(_export(tiny_checkpoint, output)) == 0
    earlier = _snapshot(output)
    with monkeypatch.context() as patch:
        _fail_writes_from(patch, 2, KeyboardInterrupt())
        _one_line(capsys, _export(tiny_checkpoint, output, "--overwrite"), status=130)
    assert _snapshot(output) == earlier and _hidden(tmp_path) == []
    replace = os.replace

    def failing(src, dst, *args, **kwargs):
        if Path(dst) == output:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return replace(src, dst, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", failing)
        err = _one_line(capsys, _export(tiny_checkpoint, output, "--overwrite"))
    assert f"--output {output} could not be written: Input/output error" in err
    assert _snapshot(output) == earlier and _hidden(tmp_path) == []
    load_backbone(output)


def test_an_incomplete_export_folder_is_refused_in_one_line(tiny_checkpoint, tmp_path, capsys):
    whole = tmp_path / "hub"
    assert main(_export(tiny_checkpoint, whole)) == 0
    only = tmp_path / "only_weights"  # what a kill left at 0f3dae1, evaluated there
    only.mkdir()
    shutil.copy(whole / "model.safetensors", only)
    err = _one_line(capsys, ["analyze", "--checkpoint", str(only), "--data", "digits",
                             "--no-cache", "--quiet"])
    assert "is not a whole export" in err
    folders = {name: tmp_path / name for name in ("no_card", "extra", "mixed", "edited")}
    for folder in folders.values():
        shutil.copytree(whole, folder)
    (folders["no_card"] / "README.md").unlink()
    (folders["extra"] / "pytorch_model.bin").write_bytes(b"other weights")
    for name in ("mixed", "edited"):
        path = folders[name] / "config.json"
        config = json.loads(path.read_text())
        if name == "mixed":  # the config of an export of other weights
            config["contrastkit_export"]["weights_sha256"] = "0" * 64
        else:
            config["normalize"] = "imagenet"
        path.write_text(json.dumps(config))
    expected = {only: "is not a whole export (no config.json with its contrastkit_export "
                      "record: an export stopped midway",
                folders["no_card"]: "is an incomplete export (README.md missing)",
                folders["extra"]: "holds files its export did not write (pytorch_model.bin)",
                folders["mixed"]: "mixes two exports",
                folders["edited"]: "its config.json gives normalize 'imagenet', its "
                                   "model.safetensors records None"}
    for folder, fragment in expected.items():
        err = _one_line(capsys, ["eval", "knn", "--checkpoint", str(folder), "--data", "digits",
                                 "--no-cache", "--quiet"])
        assert err.startswith(f"contrastkit eval: error: checkpoint {folder}"), err
        assert fragment in err, err
        if folder != folders["extra"]:
            assert err.endswith(f"export it again: contrastkit export --checkpoint CKPT --format "
                                f"hf --output {folder} --overwrite"), err
    (whole / ".gitattributes").write_text("*.safetensors filter=lfs\n")  # the Hub's own
    load_backbone(whole)


def test_what_a_stopped_export_left_is_named_and_put_right(tiny_checkpoint, tmp_path, capsys):
    """A kill between the two renames of ``--overwrite`` (the earlier folder moved into the
    staging folder, the new one not yet in place) loses nothing: ``eval`` names where the
    earlier export is, and the next export puts it back before anything else."""
    output = tmp_path / "hub"
    assert main(_export(tiny_checkpoint, output)) == 0
    earlier = _snapshot(output)
    stage = tmp_path / ".hub.export-partial"
    (stage / "new").mkdir(parents=True)
    (stage / "new" / "README.md").write_text("half an export")
    output.rename(stage / "earlier")
    err = _one_line(capsys, ["eval", "knn", "--checkpoint", str(output), "--data", "digits",
                             "--no-cache", "--quiet"])
    assert err == (f"contrastkit eval: error: checkpoint {output} does not exist: an export "
                   "into it was stopped midway; run the same contrastkit export again (it first "
                   f"puts back the earlier export, kept in {stage / 'earlier'})")
    err = _one_line(capsys, _export(tiny_checkpoint, output))  # no --overwrite: kept
    assert f"--output {output} is not empty" in err
    assert _snapshot(output) == earlier and _hidden(tmp_path) == []


def test_two_exports_of_one_checkpoint_are_the_same_bytes(tiny_checkpoint, tmp_path):
    for kind in (".safetensors", ".pth", "hf"):
        outputs = [tmp_path / (f"hub{i}" if kind == "hf" else f"backbone{i}{kind}")
                   for i in range(3)]
        for output in outputs:
            assert main(_export(tiny_checkpoint, output)) == 0
        first = _snapshot(outputs[0])
        assert all(_snapshot(output) == first for output in outputs[1:]), kind
    for path in (tmp_path / "backbone0.safetensors", tmp_path / "hub0" / "model.safetensors"):
        raw = path.read_bytes()
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
        keys = list(header["__metadata__"])
        assert keys == sorted(keys) and len(keys) >= 4, keys


def test_the_card_lists_the_evaluations_pretraining_suggests(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    ckpt = run / "checkpoints" / "last.ckpt"
    assert main(_export(ckpt, tmp_path / "bare")) == 0
    card = (tmp_path / "bare" / "README.md").read_text()
    assert "No evaluation of this checkpoint was found in its run folder or in the `RUN-eval` "\
           "folder beside it" in card and "--output RUN-eval/knn" in card
    assert "`--results DIR`" in card
    knn = evaluations_folder(run) / "knn"
    assert knn == tmp_path / "run-eval" / "knn"  # where pretraining's next: line writes
    assert main(["eval", "knn", "--checkpoint", str(ckpt), "--data", "digits", "--k", "5",
                 "--no-cache", "--quiet", "--output", str(knn)]) == 0
    top1 = json.loads((knn / "results.json").read_text())["metrics"]["top1"]
    assert main(_export(ckpt, tmp_path / "card")) == 0
    card = (tmp_path / "card" / "README.md").read_text()
    assert f"| knn | top1 | {top1:.4f} | knn |" in card and "No evaluation" not in card


@pytest.mark.slow
def test_a_killed_export_leaves_the_earlier_one_or_nothing(tiny_checkpoint, tmp_path, capsys):
    """Real SIGKILLs midway (``export_driver.py``: after 2 of a Hub folder's 3 files, before a
    file's rename): a new folder is not there at all, an earlier export (folder or file) is as
    it was, and running the same command again finishes the job."""
    over, single = tmp_path / "over", tmp_path / "backbone.safetensors"
    for output in (over, single):
        assert main(_export(tiny_checkpoint, output)) == 0
    earlier = {output: _snapshot(output) for output in (over, single)}
    fresh = tmp_path / "fresh"
    jobs = [{"argv": _export(tiny_checkpoint, fresh)[1:], "kill_after": 2},
            {"argv": _export(tiny_checkpoint, over, "--overwrite")[1:], "kill_after": 2},
            {"argv": _export(tiny_checkpoint, single, "--overwrite")[1:], "kill_after": 1}]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(DRIVER), json.dumps(jobs)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    killed = json.loads(done.stdout.strip().splitlines()[-1])
    assert killed[:2] == [signal.SIGKILL] * 2
    assert not fresh.exists()  # at 0f3dae1: model.safetensors alone, which eval accepted
    err = _one_line(capsys, ["eval", "knn", "--checkpoint", str(fresh), "--data", "digits",
                             "--no-cache", "--quiet"])
    assert err.endswith(f"checkpoint {fresh} does not exist: an export into it was stopped "
                        "midway; run the same contrastkit export again")
    for output, snapshot in earlier.items():
        assert _snapshot(output) == snapshot, output
        load_backbone(output)
    assert killed[2] == signal.SIGKILL  # the single file's write was staged too
    assert _hidden(tmp_path) == sorted(f".{p.name}.export-partial" for p in (single, fresh, over))
    assert main(_export(tiny_checkpoint, fresh)) == 0
    assert main(_export(tiny_checkpoint, over, "--overwrite")) == 0
    assert main(_export(tiny_checkpoint, single, "--overwrite")) == 0
    assert _snapshot(fresh) == earlier[over] and _hidden(tmp_path) == []
