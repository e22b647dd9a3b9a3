"""Issue 28, item 15: -o pictures puts NAME.png beside every tensor file, a
heatmap of a 2-D tensor and a histogram of any other, drawn when read in
bounded time. The pictures are decoded with Pillow (an independent PNG
reader) and compared with numpy's account of the rules the README gives."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import gen_gguf as G
from servers import Nginx
from tfsutil import REAL, missing, mounted, need_real, write_raw, write_st

try:
    from PIL import Image
except ImportError:  # pragma: no cover - make check installs python3-pil
    Image = None

LEVELS, MID = 251, 125
BACKGROUND, AXIS, BAD = 251, 252, 253
BUDGET = 16 << 20
BINS, HIST_W, HIST_H, BAND = 128, 512, 256, 8


@pytest.fixture(autouse=True)
def pillow():
    if Image is None:
        missing("Pillow (Debian's python3-pil)")


def load(path):
    """(palette indexes as an array, the Comment text, the palette) of a PNG
    read whole, checked against its size as stat gives it."""
    data = open(path, "rb").read()
    assert len(data) == os.stat(path).st_size, path
    im = Image.open(path)
    assert im.mode == "P" and im.format == "PNG"
    return np.array(im), im.info["Comment"], im.getpalette()


def bf16(a):
    u = np.asarray(a, np.float32).view(np.uint32)
    return (u >> 16).astype(np.uint16)


def levels(v, limit):
    if not limit > 0:
        return np.full(v.shape, MID, np.int64)
    q = np.clip(v / limit, -1, 1)
    return np.floor((q + 1) * MID + 0.5).astype(np.int64)


def scale(gh, gw):
    f = min(max(256 // max(gh, gw), 1), 64)
    fy = fx = f
    if gh * fy < 16:
        fy = -(-16 // gh)
    if gw * fx < 16:
        fx = -(-16 // gw)
    # at most 4:1: the short side's rows (or columns) repeated
    if gh * fy * 4 < gw * fx:
        fy = -(-(gw * fx) // (4 * gh))
    elif gw * fx * 4 < gh * fy:
        fx = -(-(gh * fy) // (4 * gw))
    return fy, fx


def heat_reference(cells_sum, cells_cnt, bad, gh, gw):
    """The picture the README describes from each cell's sum, count and
    whether it met a NaN or infinity."""
    good = ~bad & (cells_cnt > 0)
    mean = np.where(good, cells_sum / np.maximum(cells_cnt, 1), 0)
    a = np.abs(mean[good])
    limit = 0.0
    if a.size:
        stride = -(-a.size // 65536)
        a = np.sort(a[::stride])
        limit = a[int(0.99 * (a.size - 1))]
    grid = np.where(bad, BAD, np.where(good, levels(mean, limit), MID)).reshape(gh, gw)
    fy, fx = scale(gh, gw)
    return np.repeat(np.repeat(grid, fy, 0), fx, 1)


def heat_all(v):
    """Every element of a 2-D array to its cell."""
    r, c = v.shape
    gh, gw = min(r, 1024), min(c, 1024)
    cell = ((np.arange(r) * gh // r)[:, None] * gw + (np.arange(c) * gw // c)[None, :]).ravel()
    x = v.astype(np.float64).ravel()
    fin = np.isfinite(x)
    s = np.bincount(cell[fin], weights=x[fin], minlength=gh * gw)
    n = np.bincount(cell[fin], minlength=gh * gw)
    bad = np.bincount(cell[~fin], minlength=gh * gw) > 0
    return heat_reference(s, n, bad, gh, gw)


def heat_sampled(v):
    """The documented sample: the middle row of each cell row, whole when
    it has at most 16,384 elements, else a run at each cell's start."""
    r, c = v.shape
    gh, gw = min(r, 1024), min(c, 1024)
    s, n, bad = np.zeros(gh * gw), np.zeros(gh * gw), np.zeros(gh * gw, bool)
    run = BUDGET // (gh * gw)
    for y in range(gh):
        row = v[(2 * y + 1) * r // (2 * gh)].astype(np.float64)
        if c <= BUDGET // 1024:
            cols = np.arange(c)
        else:
            c0 = (np.arange(gw) * c + gw - 1) // gw
            c1 = ((np.arange(gw) + 1) * c + gw - 1) // gw
            cols = np.concatenate([np.arange(a, a + min(b - a, run)) for a, b in zip(c0, c1)])
        x, cell = row[cols], y * gw + cols * gw // c
        fin = np.isfinite(x)
        s += np.bincount(cell[fin], weights=x[fin], minlength=gh * gw)
        n += np.bincount(cell[fin], minlength=gh * gw)
        bad |= np.bincount(cell[~fin], minlength=gh * gw) > 0
    return heat_reference(s, n, bad, gh, gw)


def hist_expect(x):
    """(bins, lo, hi, non-finite count) of the elements a histogram reads."""
    x = x.astype(np.float64).ravel()
    if x.size > BUDGET:
        run = BUDGET // 1024
        x = np.concatenate([x[i * (x.size - run) // 1023:][:run] for i in range(1024)])
    fin = x[np.isfinite(x)]
    lo, hi = fin.min(), fin.max()
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    k = ((fin - lo) * (BINS / (hi - lo))).astype(np.int64)
    return np.bincount(np.clip(k, 0, BINS - 1), minlength=BINS), lo, hi, x.size - fin.size, x.size


def check_histogram(path, x):
    pix, comment, _ = load(path)
    assert pix.shape == (HIST_H, HIST_W)
    bins, lo, hi, nbad, nread = hist_expect(x)
    assert f"{nread} of {x.size} elements read, {nbad} NaN" in comment, comment
    assert (pix[:BAND] == BAD).all() == (nbad > 0)
    assert (pix[-1] == AXIS).all()
    room, limit = HIST_H - 1 - BAND - 2, max(abs(lo), abs(hi))
    for b in range(BINS):
        col = pix[:-1, b * 4 + 1]
        bar = col[(col != BACKGROUND) & (col != AXIS) & (col != BAD)]
        tall = int(np.floor(bins[b] / bins.max() * room + 0.5)) if bins[b] else 0
        assert bar.size == (max(tall, 1) if bins[b] else 0), (b, bins[b], bar.size)
        if bins[b]:
            want = levels(np.array([lo + (b + 0.5) * (hi - lo) / BINS]), limit)[0]
            assert (bar == want).all(), b


def test_heatmaps_and_histograms_against_numpy(tmp):
    rng = np.random.default_rng(28)
    w = rng.standard_normal((40, 30)).astype(np.float32)
    w[3, 4], w[7, 0] = np.nan, np.inf
    down = (rng.standard_normal((2048, 1500)) * 0.02).astype(np.float32)
    down[100:110, 200:260] = 5  # a block the picture must show
    thin = np.arange(-25, 25, dtype=np.int8).reshape(1, 50)
    wide = rng.standard_normal((5, 3000)).astype(np.float16)
    b16 = rng.standard_normal((64, 64)).astype(np.float32)
    vec = np.concatenate([rng.standard_normal(5000), [np.nan, -np.inf]]).astype(np.float32)
    cube = rng.integers(-100, 100, size=(4, 5, 6)).astype(np.int32)
    const = np.full(10, 3.0, np.float64)
    src = os.path.join(tmp, "p.safetensors")
    write_st(src, [("w", "F32", w.shape, w.tobytes()), ("down", "F32", down.shape, down.tobytes()),
                   ("thin", "I8", thin.shape, thin.tobytes()), ("wide", "F16", wide.shape, wide.tobytes()),
                   ("b16", "BF16", b16.shape, bf16(b16).tobytes()), ("vec", "F32", vec.shape, vec.tobytes()),
                   ("cube", "I32", cube.shape, cube.tobytes()), ("const", "F64", const.shape, const.tobytes()),
                   ("scalar", "F32", (), np.float32(2).tobytes()), ("empty", "F32", (0, 4), b""),
                   ("cplx", "C64", (3, 3), np.ones(9, np.complex64).tobytes())])
    b16v = (bf16(b16).astype(np.uint32) << 16).view(np.float32)
    with mounted(src, "-o", "pictures") as mnt:
        for name, v in [("w", w), ("thin", thin), ("wide", wide), ("b16", b16v)]:
            pix, comment, pal = load(os.path.join(mnt, name + ".png"))
            want = heat_all(v)
            assert pix.shape == want.shape, name
            assert (pix == want).all(), (name, np.argwhere(pix != want)[:5])
            assert comment.startswith("tensorfs: heatmap") and "sampled" not in comment
        assert pal[3 * MID:3 * MID + 3] == [247, 247, 247] and pal[3 * BAD:3 * BAD + 3] == [0, 230, 0]
        blue, red = pal[0:3], pal[3 * (LEVELS - 1):3 * LEVELS]
        assert blue[2] > blue[0] and red[0] > red[2]
        pix, _, _ = load(os.path.join(mnt, "down.png"))
        want = heat_all(down)
        assert pix.shape == (1024, 1024)
        # cells are means of 2 x 1.46 elements: a sum in another order may
        # round to the next colour, never further
        diff = np.abs(pix.astype(int) - want)
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01
        assert (pix[50:55, 137:173] == LEVELS - 1).all()  # the block of 5s, at the top of the scale
        for name, v in [("vec", vec), ("cube", cube), ("const", const), ("scalar", np.array([2.0]))]:
            check_histogram(os.path.join(mnt, name + ".png"), v)
        pix, comment, _ = load(os.path.join(mnt, "empty.png"))
        assert pix.shape == (HIST_H, HIST_W) and "0 of 0 elements read" in comment
        assert set(np.unique(pix[:-1])) == {BACKGROUND}
        # a 2-D complex tensor: no numbers to draw, an empty histogram that says why
        pix, comment, _ = load(os.path.join(mnt, "cplx.png"))
        assert pix.shape == (HIST_H, HIST_W) and "C64 holds no plain numbers" in comment
        assert set(np.unique(pix[:-1])) == {BACKGROUND}


def test_quantized_gguf_heatmap(tmp):
    """A Q4_K tensor is drawn from its dequantized values."""
    rng = np.random.default_rng(5)
    raw = G.random_blocks(G.ID["Q4_K"], 16, rng)
    src = os.path.join(tmp, "q.gguf")
    open(src, "wb").write(G.build(tensors=[("blk.0.w", G.ID["Q4_K"], [512, 8], raw)]))
    v = G.dequant("Q4_K", raw).reshape(8, 512)
    with mounted(src, "-o", "pictures") as mnt:
        pix, _, _ = load(os.path.join(mnt, "blk.0.w.png"))
    assert (pix == heat_all(v)).all()


def test_large_tensors_are_sampled(tmp):
    """Over the budget (16 Mi elements) a picture reads the documented
    sample: whole middle rows, runs at each cell's start for rows of over
    16,384 elements, 1,024 runs spread evenly for a histogram."""
    rng = np.random.default_rng(7)
    tall = rng.integers(-128, 128, size=(4100, 4100), dtype=np.int8)
    wide = rng.integers(-128, 128, size=(2, 9_000_000), dtype=np.int8)
    flat = rng.integers(-128, 128, size=17_000_000, dtype=np.int8)
    src = os.path.join(tmp, "big.safetensors")
    write_st(src, [("tall", "I8", tall.shape, tall.tobytes()), ("wide", "I8", wide.shape, wide.tobytes()),
                   ("flat", "I8", flat.shape, flat.tobytes())])
    with mounted(src, "-o", "pictures") as mnt:
        for name, v in [("tall", tall), ("wide", wide)]:
            pix, comment, _ = load(os.path.join(mnt, name + ".png"))
            assert "sampled" in comment
            assert (pix == heat_sampled(v)).all(), name
        check_histogram(os.path.join(mnt, "flat.png"), flat)


def fetched(mnt):
    c = dict(f.split("=") for f in os.getxattr(mnt, "user.counters").decode().split())
    return int(c["bytes_fetched"])


def test_remote_picture_reads_a_bounded_sample(tmp):
    """A 1 GiB tensor over http: its picture fetches a bounded part of it
    (1,024 rows 1 MiB apart: at most one 256 KiB block each)."""
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    rows, cols = 1 << 18, 1024
    src = os.path.join(root, "huge.safetensors")
    write_raw(src, json.dumps({"w": {"dtype": "F32", "shape": [rows, cols],
                                     "data_offsets": [0, rows * cols * 4]}}).encode())
    with open(src, "r+b") as f:  # sparse: zeros
        f.truncate(os.path.getsize(src) + rows * cols * 4)
    with Nginx(root) as ng, mounted(ng.url("plain", "huge.safetensors"), "-o", "pictures") as mnt:
        before = fetched(mnt)
        pix, comment, _ = load(os.path.join(mnt, "w.png"))
        got = fetched(mnt) - before
    assert "sampled" in comment and (pix == MID).all()  # zeros: white
    assert 0 < got <= 1024 * (256 << 10) + (8 << 20), got


def test_sizes_names_and_layouts(tmp):
    """Sizes are known before reading and do not depend on the values; a
    tensor named like a picture keeps its own file ('.' as %2E); a name
    with no room gets __picture_INODE__.png; format=npy and layout=tree
    put NAME.npy.png and a/b.png beside the tensor; stats and pictures go
    together."""
    rng = np.random.default_rng(3)
    long = "y" * 252
    ts = [("a.b", "F32", (30, 20), rng.standard_normal(600).astype(np.float32).tobytes()),
          ("a.c", "F32", (30, 20), np.zeros(600, np.float32).tobytes()),
          ("x.png", "F32", (3,), np.ones(3, np.float32).tobytes()),
          ("__picture_9__.png", "U8", (2,), b"\1\2"),
          (long, "U8", (3,), b"\1\2\3")]
    src = os.path.join(tmp, "n.safetensors")
    write_st(src, ts)
    with mounted(src, "-o", "pictures,stats") as mnt:
        files = set(os.listdir(mnt))
        assert {"a.b.png", "a.c.png", "x%2Epng", "x%2Epng.png", "x%2Epng.stats.json"} <= files
        assert os.getxattr(os.path.join(mnt, "x%2Epng"), "user.name") == b"x.png"
        # (its '_' escaped as a reserved shape's, then its '.' as a picture's)
        assert "%5F_picture_9__%2Epng" in files and "%5F_picture_9__%2Epng.png" in files
        fallback = [f for f in files if f.startswith("__picture_")]
        assert len(fallback) == 1 and fallback[0].endswith("__.png")
        assert load(os.path.join(mnt, fallback[0]))[0].shape == (HIST_H, HIST_W)
        sizes = {f: os.stat(os.path.join(mnt, f)).st_size for f in files if f.endswith(".png")}
        assert sizes["a.b.png"] == sizes["a.c.png"]  # the same shape, other values
        for f in sizes:
            whole = open(os.path.join(mnt, f), "rb").read()
            with open(os.path.join(mnt, f), "rb") as fh:  # odd pieces give the same bytes
                parts = b"".join(iter(lambda: fh.read(4093), b""))
            assert whole == parts and len(whole) == sizes[f]
    with mounted(src, "-o", "pictures,format=npy,layout=tree") as mnt:
        assert os.path.exists(os.path.join(mnt, "a", "b.npy.png"))
        assert load(os.path.join(mnt, "a", "c.npy.png"))[0].shape == (240, 160)
    with mounted(src) as mnt:
        assert sorted(os.listdir(mnt)) == sorted(["__metadata__.json", "__tensors__.tsv", "a.b", "a.c", "x.png",
                                                  "%5F_picture_9__.png", long])


def test_thumbnailer_reads_the_pictures(tmp):
    """gdk-pixbuf-thumbnailer, the thumbnailer freedesktop file managers run
    for PNG files, makes a thumbnail of a picture on the mount that shows
    the tensor: red where it is positive, blue where negative."""
    tool = shutil.which("gdk-pixbuf-thumbnailer")
    if not tool:
        missing("gdk-pixbuf-thumbnailer (Debian's libgdk-pixbuf2.0-bin)")
    v = np.concatenate([np.full((32, 64), -1.0), np.full((32, 64), 1.0)]).astype(np.float32)
    src = os.path.join(tmp, "t.safetensors")
    write_st(src, [("w", "F32", v.shape, v.tobytes())])
    out = os.path.join(tmp, "thumb.png")
    with mounted(src, "-o", "pictures") as mnt:
        r = subprocess.run([tool, "-s", "128", os.path.join(mnt, "w.png"), out], capture_output=True,
                           text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    th = np.array(Image.open(out).convert("RGB")).astype(int)
    assert max(th.shape[:2]) == 128
    top, bottom = th[: th.shape[0] // 4].mean((0, 1)), th[-th.shape[0] // 4:].mean((0, 1))
    assert top[2] > top[0] + 50 and bottom[0] > bottom[2] + 50, (top, bottom)


def test_real_checkpoints_pictures():
    """Every tensor of two real checkpoints gets a picture Pillow reads."""
    need_real()
    for f in ["tinygrad_mnist_cnn_f32.safetensors", "diffusers_sd15_lora_naruto_bf16.safetensors"]:
        with mounted(os.path.join(REAL, f), "-o", "pictures") as mnt:
            pics = [p for p in os.listdir(mnt) if p.endswith(".png")]
            tensors = [p for p in os.listdir(mnt) if not p.endswith(".png") and not p.startswith("__")]
            assert len(pics) == len(tensors) > 0
            for p in pics:
                pix, comment, _ = load(os.path.join(mnt, p))
                assert comment.startswith("tensorfs: ") and pix.size > 0


def test_extreme_values_draw_safely(tmp):
    """Ranges a double cannot hold as hi - lo, a constant where lo - 0.5 is
    lo, cells whose sums overflow: every picture is drawn at its size (the
    fuzzer found the constant), and the bins follow the values."""
    big = np.array([1e308, -1e308, 5.0, 1e308])
    const = np.full(3, 2.3e18, np.float32)
    cells = np.full((2, 2048), 1e308)  # two elements a cell: sums of inf
    cells[1, ::2] = -1e308
    src = os.path.join(tmp, "x.safetensors")
    write_st(src, [("big", "F64", big.shape, big.tobytes()), ("const", "F32", const.shape, const.tobytes()),
                   ("cells", "F64", cells.shape, cells.tobytes())])
    with mounted(src, "-o", "pictures") as mnt:
        pix, comment, _ = load(os.path.join(mnt, "big.png"))
        assert "from -1e+308 to 1e+308" in comment
        heights = [(pix[:-1, b * 4 + 1] != BACKGROUND).sum() for b in (0, 64, 127)]
        assert all(h > 0 for h in heights) and heights[2] > heights[0]  # two at the top, one at -1e308
        pix, _, _ = load(os.path.join(mnt, "const.png"))
        assert (pix[:-1] != BACKGROUND).any()
        pix, _, _ = load(os.path.join(mnt, "cells.png"))
        assert pix.shape == (256, 1024) and pix.max() < LEVELS  # 2 rows, at most 4:1


def test_concurrent_readers_of_many_pictures(tmp):
    """More pictures read at once than are kept (8), by 12 threads in
    different orders, each read in pieces with direct_io (every piece asks
    the daemon, which draws pictures again as they leave): every read gets
    the picture a lone reader gets."""
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(11)
    ts = [(f"t{i:02d}", "F32", (64, 32 + i), rng.standard_normal((64, 32 + i)).astype(np.float32).tobytes())
          for i in range(24)]
    src = os.path.join(tmp, "c.safetensors")
    write_st(src, ts)
    with mounted(src, "-o", "pictures,direct_io") as mnt:
        want = {}
        with mounted(src, "-o", "pictures") as other:  # a lone reader, on a mount of its own
            for name, *_ in ts:
                want[name] = open(os.path.join(other, name + ".png"), "rb").read()

        def reader(k):
            order = [ts[(k * 7 + j) % len(ts)][0] for j in range(len(ts))]
            for name in order:
                with open(os.path.join(mnt, name + ".png"), "rb") as f:
                    got = b"".join(iter(lambda: f.read(8191), b""))
                assert got == want[name], name
            return len(order)

        with ThreadPoolExecutor(12) as ex:
            assert sum(ex.map(reader, range(12))) == 12 * len(ts)
