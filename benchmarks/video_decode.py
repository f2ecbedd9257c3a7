"""Decoded clips per second with PyAV through a DataLoader (SCE 4.2 clip sampling).

Writes synthetic videos (moving noise blocks, 320x240, 25 fps, 10 s, H.264 when the local PyAV
build has an encoder for it, else MPEG-4) into a temporary folder, then times
``video.VideoFolder(frames=8, short_side=112, crop_size=112)`` items (random 2.56 s clip,
8 frames kept, seek + decode + resize + crop) loaded by a ``DataLoader`` with 2 workers.

Run: ``.venv/bin/python benchmarks/video_decode.py [--videos 32] [--epochs 2]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from contrastkit.data.sources import video


def _encoder(av: object) -> tuple[str, str]:
    for codec, ext in (("libx264", "mp4"), ("h264", "mp4"), ("mpeg4", "avi")):
        try:
            av.codec.Codec(codec, "w")  # type: ignore[attr-defined]
        except Exception:  # encoder absent from this build
            continue
        return codec, ext
    raise RuntimeError("no H.264 or MPEG-4 encoder in this PyAV build")


def write_videos(root: Path, count: int, seconds: float, width: int, height: int) -> str:
    """Write ``count`` videos under ``root/<class>/``; return the codec used."""
    import av

    codec, ext = _encoder(av)
    rng = np.random.default_rng(0)
    frames = round(25 * seconds)
    for i in range(count):
        path = root / f"class{i % 4}" / f"video{i:03d}.{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 256, (height // 16 + 2, width // 16 + 2, 3), dtype=np.uint8)
        with av.open(str(path), "w") as container:
            stream = container.add_stream(codec, rate=25)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.codec_context.gop_size = 25
            for t in range(frames):
                shift = t % 16
                big = np.kron(base, np.ones((16, 16, 1), np.uint8))
                image = np.ascontiguousarray(big[shift:shift + height, shift:shift + width])
                for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
    return codec


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Time decoding; print and return clips/s and frames/s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="contrastkit-video-bench-") as tmp:
        codec = write_videos(Path(tmp), args.videos, args.seconds, 320, 240)
        data = video.VideoFolder(tmp, frames=8, short_side=112, crop_size=112)
        loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True,
                                             num_workers=args.workers,
                                             persistent_workers=args.workers > 0)
        clips, best = 0, 0.0
        for epoch in range(args.epochs + 1):  # epoch 0 warms up the workers
            start = time.perf_counter()
            count = 0
            for batch, _ in loader:
                assert tuple(batch.shape[1:]) == (8, 3, 112, 112)
                count += batch.shape[0]
            rate = count / (time.perf_counter() - start)
            if epoch > 0:
                clips += count
                best = max(best, rate)
                print(f"epoch {epoch}: {rate:.1f} clips/s")
    result = {"clips_per_s": best, "frames_per_s": 8 * best}
    print(f"{codec}, {args.videos} videos of {args.seconds:g} s 320x240 @25 fps, "
          f"8x112x112 clips, {args.workers} workers: best {best:.1f} clips/s "
          f"({8 * best:.0f} frames/s)")
    return result


if __name__ == "__main__":
    main()
