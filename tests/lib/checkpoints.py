"""The one writer of test checkpoints, shared by the tests
(tests/integration) and the benches (scripts/bench*.py): safetensors files
(whole, with a header of any bytes, or of tensors of a given size without
their data), sharded safetensors models with their index, and GGUF files
(tests/lib/gen_gguf.py lays them out)."""

import json
import os
import struct

import gen_gguf

MiB = 1 << 20


def write_raw(path, header, data=b"", n=None):
    """Writes N, the header bytes and the data; N defaults to len(header)."""
    if isinstance(header, str):
        header = header.encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header) if n is None else n))
        f.write(header)
        f.write(data)


def write_st(path, tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, data) in data order; data is
    bytes or any buffer (a C-contiguous numpy array), written a tensor at a
    time. pad: spaces up to a multiple of 8 (True), none (False), or up to
    an odd data start ("odd"). Returns where the data starts."""
    hdr = {}
    if metadata is not None:
        hdr["__metadata__"] = metadata
    off = 0
    for name, dtype, shape, raw in tensors:
        n = memoryview(raw).nbytes
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(hdr, ensure_ascii=False).encode()
    if pad == "odd":
        text += b" " * (1 - len(text) % 2)  # data starts at an odd offset
    elif pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t in tensors:
            f.write(t[3])
    return 8 + len(text)


def write_sharded(directory, shards, metadata=None, stem="model", pad=True):
    """shards: a list of tensor lists as write_st takes them, one per shard:
    STEM-0000K-of-0000N.safetensors each, and STEM.safetensors.index.json
    mapping every tensor to its shard. Returns the shards' names."""
    names, weight_map, total = [], {}, 0
    for k, tensors in enumerate(shards):
        name = f"{stem}-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        write_st(os.path.join(directory, name), tensors, metadata, pad)
        for t in tensors:
            weight_map[t[0]] = name
            total += memoryview(t[3]).nbytes
        names.append(name)
    with open(os.path.join(directory, stem + ".safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return names


def write_gguf(path, kvs=(), tensors=(), **kw):
    """A GGUF file of the key/value pairs and tensors (gen_gguf.build)."""
    with open(path, "wb") as f:
        f.write(gen_gguf.build(kvs, tensors, **kw))


def write_sized(path, tensors, fill=False, odd_start=False):
    """tensors: [(name, dtype, shape, nbytes)], their data random bytes
    (fill) or a hole; odd_start: the data starts at an odd offset,
    unaligned, as in real files. Written whole before it is there."""
    hdr = {}
    off = 0
    for name, dtype, shape, nbytes in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    text = json.dumps(hdr).encode()
    text += b" " * (-len(text) % 8)
    if odd_start:
        text += b"   "
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        if fill:
            block = os.urandom(8 * MiB)
            left = off
            while left:
                n = min(left, len(block))
                f.write(block[:n])
                left -= n
        else:
            f.truncate(8 + len(text) + off)
    os.replace(path + ".tmp", path)
