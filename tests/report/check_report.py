#!/usr/bin/python3
"""check_report.py WORKBOOK FILE... -- runs `workbook report FILE... --out DIR`
and checks every plot it promised: a valid PNG (signature, every chunk's CRC,
IHDR, image data that inflates to exactly height rows of the declared width),
drawn from the series the files hold (the .dat beside it)."""
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

EXPECTED = {  # plot -> the least number of series the fixture's lines make
    "speedup.png": 2,
    "busbw.png": 4,  # shared memory and 2 emulated nodes, ring and library
    "accuracy.png": 2,
    "loss.png": 3,
    "steps.png": 1,  # ch06_train --sweep: the measured steps (perfect scaling and the fit are drawn as functions)
    # workbook model (model.jsonl): a plot per configuration, predicted and measured per
    # algorithm and the ping-pong; the steps of both links
    "model_allreduce_2nodes_100mbit.png": 10,
    "model_allreduce_2nodes_1gbit.png": 10,
    "model_steps.png": 4,
    # the pipelines: (p - 1)/(m + p - 1) for p = 2; per link, predicted and GPipe and 1F1B measured
    "model_bubble.png": 7,
}
NOT_DRAWN = ["model_allreduce_4nodes_1gbit.png"]  # model.jsonl has only an "error" line there


def check_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name}: not a PNG (signature {data[:8]!r})"
    at, chunks, idat = 8, [], b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"{path.name}: chunk {kind!r} fails its CRC"
        chunks.append(kind)
        if kind == b"IDAT":
            idat += body
        at += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND", f"{path.name}: chunks {chunks[:3]}...{chunks[-1:]}"
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    raw = zlib.decompress(idat)
    row = 1 + (width * channels * depth + 7) // 8  # a filter byte, then the pixels
    assert len(raw) == row * height, f"{path.name}: {len(raw)} bytes of pixels, expected {row * height}"
    assert depth == 8, f"{path.name}: bit depth {depth}"
    pixels = unfilter(raw, row - 1, height, channels)
    assert channels >= 3, f"{path.name}: not a colour image"
    # Axes, text and grid are grey; the curves have gnuplot's saturated
    # colours. Counted: the distinct non-grey colours (a plot with axes and
    # no curves has none).
    colours = {pixels[i:i + 3] for i in range(0, len(pixels), channels)
               if max(pixels[i:i + 3]) - min(pixels[i:i + 3]) > 64}
    return width, height, len(colours)


def unfilter(raw: bytes, stride: int, height: int, bpp: int) -> bytes:
    """The pixels of a PNG's inflated data: each row undoes its filter (PNG spec, section 9)."""
    out, previous = bytearray(), bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = previous[x]
            c = previous[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += line
        previous = line
    return bytes(out)


def main() -> int:
    workbook, files = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([workbook, "report", *files, "--out", out], capture_output=True, text=True, timeout=120)
        print(done.stdout, done.stderr, sep="")
        assert done.returncode == 0, f"workbook report exited {done.returncode}"
        for name, least in EXPECTED.items():
            png = Path(out) / name
            assert png.exists(), f"{name} was not drawn"
            width, height, colours = check_png(png)
            dat = (Path(out) / name).with_suffix(".dat").read_text()
            series = dat.count("\n# ") + dat.startswith("# ")
            assert series >= least, f"{name}: {series} series, expected at least {least}"
            assert colours >= series, f"{name}: {colours} saturated colours for {series} series: curves are missing"
            print(f"{name}: a valid {width}x{height} PNG, {series} series, {colours} saturated colours")
        for name in NOT_DRAWN:
            assert not (Path(out) / name).exists(), f"{name} was drawn from no measurements"
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"check_report: {e}", file=sys.stderr)
        sys.exit(1)
