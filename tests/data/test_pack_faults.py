"""Issue 36: ``contrastkit data pack`` under faults (docs/reliability.md counts them): a kill
midway leaves nothing a reader takes for a finished pack, and the same command finishes it
with the files a straight pack writes; a destination inside the source is refused."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from contrastkit.cli import main
from contrastkit.data.sources.registry import build_dataset

DRIVER = Path(__file__).with_name("pack_driver.py")


def _source(root: Path, per_class: int = 30) -> Path:
    """``root/<a|b>/``: ``per_class`` small PNGs per class, every fifth larger than 24 px."""
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            side = 40 if i % 5 == 0 else 12
            pixels = rng.integers(0, 255, (side, side, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / c / f"{c}{i:03d}.png")
    return root


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "pack.json"}


#: The packs killed midway: a store killed after 20 of its 60 images, shards after 3 of 8.
KILLED = {"store": (("--max-side", "24"), 20),
          "shards": (("--shards", "--shard-size", "8", "--max-side", "24"), 3)}


@pytest.fixture(scope="module")
def killed_packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each of :data:`KILLED` packed from one source and SIGKILLed midway (one child process
    forks both packs): ``{kind: (SRC, DEST)}``."""
    root = tmp_path_factory.mktemp("killed")
    src = _source(root / "src")
    packs = {kind: (src, root / kind / "packed") for kind in KILLED}
    jobs = [{"argv": [str(src), str(dest), *KILLED[kind][0]], "kill_after": KILLED[kind][1]}
            for kind, (src, dest) in packs.items()]
    proc = subprocess.run([sys.executable, str(DRIVER), json.dumps(jobs)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [signal.SIGKILL] * len(jobs), proc.stderr
    return packs


@pytest.mark.parametrize("kind", KILLED)
def test_a_pack_killed_midway_is_refused_by_readers_and_finished_by_the_same_command(
        killed_packs, tmp_path, capsys, kind):
    """The store held 77 of 180 files, one class missing, and training ran on it without a
    word; packing again was refused ("not empty")."""
    src, dest = killed_packs[kind]
    options = KILLED[kind][0]
    name = "shards" if kind == "shards" else "folder"
    with pytest.raises(ValueError, match=rf"data.root {dest} is an incomplete pack .*: run the "
                                         rf"same command again to finish it: contrastkit data "
                                         rf"pack {src} {dest}"):
        build_dataset(name, str(dest), "train")
    assert main(["data", "pack", str(src), str(dest), *options]) == 0
    assert capsys.readouterr().out == f"wrote {kind} {dest}: train 60 images\n"
    assert main(["data", "pack", str(src), str(tmp_path / "straight"), *options]) == 0
    assert _files(dest) == _files(tmp_path / "straight")  # as if it had never stopped
    assert len(build_dataset(name, str(dest), "train")) == 60
    assert not list(dest.parent.glob(".*"))  # no staging folder left


def test_a_destination_inside_the_source_is_refused(tmp_path, capsys):
    """It succeeded, and the source gained a class `out` of 150 copies, test images too."""
    src = tmp_path / "src"
    _source(src / "train", per_class=5)
    _source(src / "test", per_class=2)
    before = sorted(str(p) for p in src.rglob("*"))
    assert main(["data", "pack", str(src), str(src / "train" / "out")]) == 2
    err = capsys.readouterr().err
    assert err == (f"contrastkit data pack: error: DEST {src / 'train' / 'out'} is inside SRC "
                   f"{src}: the pack would read what it writes (its folders would become "
                   "classes); choose a DEST outside SRC\n")
    assert sorted(str(p) for p in src.rglob("*")) == before


class _Stop(Exception):
    """Stands for a kill: raised by the n-th write."""


@pytest.mark.parametrize("shards", [False, True])
def test_a_stopped_pack_finished_after_its_source_changed_follows_the_source(tmp_path,
                                                                             monkeypatch,
                                                                             shards):
    from contrastkit.data.loading import pack

    src = _source(tmp_path / "src", per_class=20)
    dest = tmp_path / "packed"
    options = {"shards": shards, "shard_size": 8, "max_side": 24}
    name = "_write_shard" if shards else "write_bytes_atomic"
    real, calls = getattr(pack, name), [0]

    def stopping(path, *args, **kwargs):
        if path.suffix in (".png", ".jpg", ".tar"):
            calls[0] += 1
            if calls[0] > 2:
                raise _Stop
        return real(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(pack, name, stopping)
        with pytest.raises(_Stop):
            pack.pack_folder(src, dest, **options)
    (src / "a" / "a000.png").unlink()  # written before the stop: its copy must go
    Image.fromarray(np.zeros((12, 12, 3), np.uint8)).save(src / "b" / "b999.png")  # new
    assert pack.pack_folder(src, dest, **options) == {"train": 40}
    pack.pack_folder(src, tmp_path / "straight", **options)
    assert _files(dest) == _files(tmp_path / "straight")
    assert not (dest / "train" / "a" / "a000.png").exists()
