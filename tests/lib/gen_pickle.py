"""PyTorch-format checkpoints written with the Python standard library only
(no torch): the pickle of a state dict made with stand-in `torch` modules
and persistent ids, as torch.save's pickler does, in an uncompressed zip
under one directory. For tests that need shapes torch cannot write
(hostile pickles, damaged archives, protocol 4, _rebuild_tensor_v3), and
for the 10,000-tensor bench file.

    /usr/bin/python3 tests/lib/gen_pickle.py many OUT.bin N
"""

import collections
import io
import pickle
import struct
import sys
import types
import zipfile

import numpy as np

# numpy dtype -> the storage class torch pickles for it
STORAGE = {np.float64: "DoubleStorage", np.float32: "FloatStorage", np.float16: "HalfStorage",
           np.int64: "LongStorage", np.int32: "IntStorage", np.int16: "ShortStorage",
           np.int8: "CharStorage", np.uint8: "ByteStorage", np.bool_: "BoolStorage",
           np.complex64: "ComplexFloatStorage", np.complex128: "ComplexDoubleStorage"}


def _modules():
    """Stand-ins that pickle by reference as torch's own globals do."""
    mods = {}
    for name in ("torch", "torch._utils"):
        m = types.ModuleType(name)
        mods[name] = m
    torch, utils = mods["torch"], mods["torch._utils"]
    for cls in list(STORAGE.values()) + ["BFloat16Storage", "UntypedStorage", "QInt8Storage"]:
        c = type(cls, (), {"__module__": "torch"})
        setattr(torch, cls, c)
    for dt in ("float8_e4m3fn", "float8_e5m2", "uint16", "bfloat16", "qint8"):
        c = type(dt, (), {"__module__": "torch", "__reduce__": lambda self, n=dt: n})
        setattr(torch, dt, c())

    def stub(name):
        f = lambda *a: None  # noqa: E731 (never called: only pickled by name)
        f.__module__, f.__name__, f.__qualname__ = "torch._utils", name, name
        setattr(utils, name, f)

    for name in ("_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_parameter", "_rebuild_qtensor"):
        stub(name)
    return mods


MODS = _modules()


class Storage:
    def __init__(self, key, cls, numel, data):
        self.key, self.cls, self.numel, self.data = key, cls, numel, data


class Tensor:
    """Pickles as torch's Tensor.__reduce_ex__ does."""

    def __init__(self, storage, offset, size, stride, dtype=None, func="_rebuild_tensor_v2"):
        self.args = (storage, offset, tuple(size), tuple(stride))
        self.dtype, self.func = dtype, func

    def __reduce__(self):
        f = getattr(MODS["torch._utils"], self.func)
        if self.func == "_rebuild_tensor_v3":
            return (f, self.args + (False, collections.OrderedDict(), getattr(MODS["torch"], self.dtype), {}))
        return (f, self.args + (False, collections.OrderedDict()))


def contiguous_stride(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


class StateDict:
    """Builds tensors over storages; each array gets its own storage."""

    def __init__(self):
        self.storages = []

    def storage(self, data, cls=None):
        a = np.ascontiguousarray(data)
        cls = cls or STORAGE[a.dtype.type]
        s = Storage(str(len(self.storages)), cls, a.size, a.tobytes())
        if cls == "UntypedStorage":
            s.numel = len(s.data)
        self.storages.append(s)
        return s

    def tensor(self, data, **kw):
        a = np.ascontiguousarray(data)
        return Tensor(self.storage(a), 0, a.shape, contiguous_stride(a.shape), **kw)


def dumps(obj, protocol=2):
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=protocol)

    def pid(o):
        if isinstance(o, Storage):
            return ("storage", getattr(MODS["torch"], o.cls), o.key, "cpu", o.numel)
        return None

    p.persistent_id = pid
    saved = {k: sys.modules.get(k) for k in MODS}
    sys.modules.update(MODS)
    try:
        p.dump(obj)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return buf.getvalue()


def archive(path, pkl, storages, top="archive", byteorder=None, version=b"3\n",
            compress=(), extra_entries=()):
    """The zip torch.save writes: top/data.pkl, top/data/<key>, top/version."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        def put(name, data):
            method = zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED
            z.writestr(zipfile.ZipInfo(f"{top}/{name}", (1980, 1, 1, 0, 0, 0)), data, compress_type=method)
        put("data.pkl", pkl)
        if byteorder is not None:
            put("byteorder", byteorder)
        for s in storages:
            put(f"data/{s.key}", s.data)
        for name, data in extra_entries:
            z.writestr(name, data)
        if version is not None:
            put("version", version)


def write(path, obj, sd, protocol=2, **kw):
    archive(path, dumps(obj, protocol), sd.storages, **kw)


def many(path, n, seed=0):
    """n small tensors, as a 10,000-tensor state dict for the bench."""
    rng = np.random.default_rng(seed)
    sd = StateDict()
    obj = collections.OrderedDict()
    arrays = collections.OrderedDict()
    for i in range(n):
        a = rng.standard_normal((4, 8)).astype(np.float32)
        name = f"model.layers.{i // 10}.block.{i % 10}.weight"
        obj[name] = sd.tensor(a)
        arrays[name] = a
    write(path, obj, sd)
    return arrays


def hostile(module, name, arg, protocol=2):
    """A pickle that calls module.name(arg) when loaded."""
    if protocol >= 4:
        body = (b"\x8c" + bytes([len(module)]) + module.encode() + b"\x94" +
                b"\x8c" + bytes([len(name)]) + name.encode() + b"\x94\x93\x94")
    else:
        body = b"c" + module.encode() + b"\n" + name.encode() + b"\nq\x00"
    a = arg.encode()
    return (b"\x80" + bytes([protocol]) + body + b"X" + struct.pack("<I", len(a)) + a +
            b"\x85R.")


if __name__ == "__main__":
    if sys.argv[1] == "many":
        many(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(f"usage: {sys.argv[0]} many OUT.bin N")
