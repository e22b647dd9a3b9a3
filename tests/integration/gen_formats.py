"""bintensors and tensorsafe files for the tests, written from their
specifications (bintensors' specs/encoding.md and tensor.rs; our
docs/tensorsafe.md) with the Python standard library and numpy."""

import json
import struct

# bintensors' Dtype enum, in declaration order
BT_DTYPES = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
             "I32", "U32", "F32", "F64", "I64", "U64"]
BT_ID = {n: i for i, n in enumerate(BT_DTYPES)}


def varint(v):
    """bincode 2, standard config: little-endian variable-length integers."""
    if v < 251:
        return bytes([v])
    if v < 1 << 16:
        return b"\xfb" + struct.pack("<H", v)
    if v < 1 << 32:
        return b"\xfc" + struct.pack("<I", v)
    return b"\xfd" + struct.pack("<Q", v)


def bstr(s):
    if isinstance(s, str):
        s = s.encode()
    return varint(len(s)) + s


def bt_header(tensors, metadata=None, offsets=None):
    """tensors: (name, dtype, shape, data bytes); offsets default to the
    writer's: contiguous from 0 in the given order."""
    out = bytearray()
    if metadata is None:
        out += b"\x00"
    else:
        out += b"\x01" + varint(len(metadata))
        for k in sorted(metadata):
            out += bstr(k) + bstr(metadata[k])
    out += varint(len(tensors))
    pos = 0
    for i, (name, dt, shape, data) in enumerate(tensors):
        start, end = offsets[i] if offsets else (pos, pos + len(data))
        pos += len(data)
        out += bstr(name) + varint(BT_ID[dt] if isinstance(dt, str) else dt)
        out += varint(len(shape)) + b"".join(varint(d) for d in shape)
        out += varint(start) + varint(end)
    return bytes(out)


def bt_file(tensors, metadata=None, offsets=None, header=None, n=None, tail=b"", pad=True):
    h = bt_header(tensors, metadata, offsets) if header is None else header
    if pad:
        h += b" " * (-len(h) % 8)
    return (struct.pack("<Q", len(h) if n is None else n) + h +
            b"".join(t[3] for t in tensors) + tail)


# ---- tensorsafe ----

def fnv1a64(b):
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def footer(meta, prev=0, checksum=None):
    return struct.pack("<QQQ", len(meta), prev, fnv1a64(meta) if checksum is None else checksum) + b"TSAFEEND"


def ts_file(tensors, metadata=None, align=64, version=1, flags=0, magic=b"TNSRSAFE"):
    """tensors: (name, dtype, shape, data bytes); each aligned to `align`."""
    out = bytearray(magic + struct.pack("<II", version, flags))
    hdr = {}
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for name, dt, shape, data in tensors:
        out += b"\0" * (-len(out) % align)
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(out), len(out) + len(data)]}
        out += data
    meta = json.dumps(hdr).encode()
    return bytes(out + meta + footer(meta)), hdr


def ts_append(blob, new_tensors, hdr, align=64):
    """Appends tensors as docs/tensorsafe.md says: new data after the
    footer, a complete new metadata block, a footer that links back."""
    out = bytearray(blob)
    prev = len(out)
    hdr = dict(hdr)
    for name, dt, shape, data in new_tensors:
        out += b"\0" * (-len(out) % align)
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(out), len(out) + len(data)]}
        out += data
    meta = json.dumps(hdr).encode()
    return bytes(out + meta + footer(meta, prev)), hdr
