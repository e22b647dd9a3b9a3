#!/usr/bin/env python3
"""Writes a small example checkpoint for `make demo`: a few layers in
several dtypes, a scalar, and __metadata__, laid out as safetensors writers
do (header padded with spaces to a multiple of 8)."""

import json
import math
import struct
import sys


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def bf16(values):
    # BF16 is the top half of an F32.
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def main(path):
    tensors = [
        ("model.embed_tokens.weight", "F32", [4, 8], f32([math.sin(i / 3) for i in range(32)])),
        ("model.layers.0.self_attn.q_proj.weight", "BF16", [8, 8],
         bf16([(i % 9 - 4) / 8 for i in range(64)])),
        ("model.layers.0.mlp.down_proj.bias", "F16", [8],
         struct.pack("<8e", *[i / 4 for i in range(8)])),
        ("model.layers.0.mlp.gate", "BOOL", [8], bytes([1, 0, 1, 1, 0, 0, 1, 0])),
        ("model.norm.eps", "F64", [], struct.pack("<d", 1e-6)),
        ("step", "I64", [], struct.pack("<q", 1000)),
    ]
    header = {"__metadata__": {"format": "pt", "written_by": "tensorfs scripts/make-example.py"}}
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "example.safetensors")
