"""Real PyTorch checkpoints for the tests, written by torch.save itself
(Debian's python3-torch), and what torch holds in them.

    /usr/bin/python3 tests/integration/gen_torch.py OUTDIR

writes the checkpoints and OUTDIR/expected.json: for each file, each
tensor tensorfs must show (dtype, shape, sha256 of its bytes in C order),
the ones it must hide (not contiguous in their storage), and the plain
values it must put in the metadata. The copies in tests/data/pytorch were
written this way by torch 1.13.1 (python3-torch 1.13.1+dfsg-4); the
tests regenerate them when torch is installed, which is optional and
heavy (about 180 Debian packages)."""

import collections
import hashlib
import itertools
import json
import os
import sys

import torch

DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL", torch.complex64: "C64", torch.complex128: "C128",
}


def raw(t):
    """The tensor's bytes in C order, as torch holds them."""
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    elif t.dtype.is_complex:
        t = torch.view_as_real(t).reshape(-1)
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def entry(t):
    return {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
            "sha256": hashlib.sha256(raw(t)).hexdigest()}


def contiguous_in_storage(t):
    exp = 1
    for size, stride in reversed(list(zip(t.shape, t.stride()))):
        if size != 1 and stride != exp:
            return False
        exp *= size
    return True


def describe(obj, prefix="", out=None):
    """What tensorfs shows of a loaded checkpoint: dotted names."""
    if out is None:
        out = {"tensors": {}, "hidden": [], "metadata": {}}
    if isinstance(obj, torch.Tensor):
        name = prefix or "tensor"
        if obj.numel() and not contiguous_in_storage(obj):
            out["hidden"].append(name)
        else:
            out["tensors"][name] = entry(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            describe(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            describe(v, f"{prefix}.{i}" if prefix else str(i), out)
    elif isinstance(obj, (bool, int, float, str)) or obj is None:
        if prefix:
            out["metadata"][prefix] = repr(obj) if isinstance(obj, float) else str(obj)
    return out


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.ReLU(),
        torch.nn.Linear(16, 4), torch.nn.BatchNorm1d(4))


def checkpoints():
    torch.manual_seed(1)
    every = collections.OrderedDict()
    for dt, name in DTYPES.items():
        if dt == torch.bool:
            t = torch.rand(3, 5) > 0.5
        elif dt.is_complex:
            t = torch.randn(3, 5, dtype=dt)
        elif dt.is_floating_point:
            t = (torch.randn(3, 5) * 100).to(dt)
        else:
            t = torch.randint(-100 if dt != torch.uint8 else 0, 100, (3, 5)).to(dt)
        every[f"dtype.{name.lower()}"] = t
    every["scalar"] = torch.tensor(3.25)
    every["empty"] = torch.zeros(0, 4)
    every["wide"] = torch.randn(2, 3, 4, 5)
    yield "dtypes.pt", every

    m = model()
    yield "pytorch_model.bin", m.state_dict()

    yield "parameter.pt", {"weight": torch.nn.Parameter(torch.randn(4, 4)),
                           "frozen": torch.nn.Parameter(torch.ones(3), requires_grad=False)}
    yield "single.pt", torch.arange(7, dtype=torch.int32)

    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m(torch.randn(5, 8)).sum().backward()
    opt.step()
    yield "nested.pt", {"state_dict": m.state_dict(), "epoch": 7, "best": 0.125,
                        "name": "tiny mlp", "done": True, "note": None,
                        "optimizer": opt.state_dict(),
                        "model": {"encoder": {"w": torch.randn(2, 2)}}}

    base = torch.arange(24, dtype=torch.float32)
    grid = base.view(4, 6)
    yield "shared.pt", collections.OrderedDict([
        ("base", base), ("tied", base), ("grid", grid), ("row", grid[2]),
        ("slice", base[5:11]), ("transposed", grid.t()), ("column", grid[:, 1]),
        ("every_other", base[::2]), ("unit_dims", grid[1:2, :].unsqueeze(0))])


class BertLikeEmbeddings(torch.nn.Module):
    """The buffers transformers' BertEmbeddings registers: position_ids is
    torch.arange(n).expand((1, -1)), a view with stride 0 over a storage
    of n elements; token_type_ids is a plain zeros tensor of its size."""

    def __init__(self, vocab=50, n=16, dim=8):
        super().__init__()
        self.word_embeddings = torch.nn.Embedding(vocab, dim)
        self.position_embeddings = torch.nn.Embedding(n, dim)
        self.token_type_embeddings = torch.nn.Embedding(2, dim)
        self.LayerNorm = torch.nn.LayerNorm(dim)
        self.register_buffer("position_ids", torch.arange(n).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long))


class BertLike(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = BertLikeEmbeddings()
        self.encoder = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        self.pooler = torch.nn.Linear(8, 8)


def config_json():
    """A training config as a JSON string of 7,192 characters."""
    layers = {f"layer_{i}": {"hidden": 4096, "heads": 32, "dropout": 0.1, "act": "gelu_new"}
              for i in range(200)}
    text = json.dumps({"model_type": "bert", "layers": layers}, sort_keys=True)
    return (text + " " * 7192)[:7191] + "}" if len(text) < 7192 else text[:7191] + "}"


def more_checkpoints():
    """Checkpoints added for issue 23: what real torch.save output broke."""
    yield "expanded.pt", {"w": torch.ones(2), "b": torch.arange(4.).expand(3, 4)}
    torch.manual_seed(3)
    yield "bert.bin", BertLike().state_dict()
    m = model()
    opt = torch.optim.Adam(m.parameters(), lr=10.0)
    m(torch.randn(5, 8)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
    yield "training.pt", {"model": m.state_dict(), "optimizer": opt.state_dict(),
                          "scheduler": sched.state_dict(), "rng_state": torch.get_rng_state(),
                          "epoch": 3, "config_json": config_json(),
                          "floats": {"ten": 10.0, "hundred": 100.0, "big": 1.2345e15, "huge": 1e16,
                                     "tiny": 1e-05, "small": 0.0001, "third": 1 / 3, "neg_zero": -0.0,
                                     "inf": float("inf"), "minus_inf": float("-inf"),
                                     "nan": float("nan"), "minus_nan": -float("nan")}}


def shards():
    """A sharded checkpoint as transformers writes one."""
    torch.manual_seed(2)
    sd = collections.OrderedDict(
        (f"model.layers.{i}.{p}", torch.randn(6, 6)) for i in range(3) for p in ("q", "k"))
    names = list(sd)
    parts = [names[:3], names[3:]]
    files = [f"pytorch_model-{i + 1:05d}-of-{len(parts):05d}.bin" for i in range(len(parts))]
    weight_map = {n: files[i] for i, part in enumerate(parts) for n in part}
    total = sum(t.numel() * t.element_size() for t in sd.values())
    return sd, parts, files, {"metadata": {"total_size": total}, "weight_map": weight_map}


def bomb():
    """x = (x, x) sixty times over one tensor: a pickle of under a
    kilobyte whose objects have 2^60 paths through them."""
    x = torch.ones(1)
    for _ in range(60):
        x = (x, x)
    return {"x": x}


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    expected = {"torch": torch.__version__, "files": {}}
    torch.save(bomb(), os.path.join(outdir, "bomb.pt"))  # refused: nothing to describe
    # (lazily: a state dict shares its tensors with a model trained later)
    for name, obj in itertools.chain(checkpoints(), more_checkpoints()):
        torch.save(obj, os.path.join(outdir, name))
        expected["files"][name] = describe(obj)
    sd, parts, files, index = shards()
    sub = os.path.join(outdir, "sharded")
    os.makedirs(sub, exist_ok=True)
    for part, fn in zip(parts, files):
        torch.save(collections.OrderedDict((n, sd[n]) for n in part), os.path.join(sub, fn))
    with open(os.path.join(sub, "pytorch_model.bin.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    expected["files"]["sharded/pytorch_model.bin.index.json"] = describe(sd)
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
