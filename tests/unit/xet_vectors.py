#!/usr/bin/python3
"""Writes tests/unit/xet_vectors.h: what tests/unit/test_xet.c checks the C
code against, computed by implementations independent of it: BLAKE3 by
Debian's b3sum; Xet's chunk, xorb and file hashes, chunks and
reconstructions by the Xet double's Python (tests/lib/xetstore.py,
itself checked against @huggingface/hub by test_xet.py).

usage: /usr/bin/python3 tests/unit/xet_vectors.py > tests/unit/xet_vectors.h &&
       clang-format -i tests/unit/xet_vectors.h"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import xetstore  # noqa: E402

KEY2 = bytes(range(100, 132))


def pattern(n):
    return bytes(i % 251 for i in range(n))


def b3sum(data, key=None, length=32):
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        args = ["b3sum", "--no-names", "--length", str(length)] + (["--keyed"] if key else []) + [f.name]
        return subprocess.run(args, input=key or b"", capture_output=True, check=True).stdout.decode().strip()


def c_bytes(b):
    return '"' + "".join(f"\\x{c:02x}" for c in b) + '"'


def c_str(s):
    return json.dumps(s)


def blake3_vectors():
    print("/* BLAKE3 of pattern(len): plain, keyed with KEY2 (bytes 100..131), and 131 bytes of keyed output. */")
    print("static const struct b3v { size_t len; const char *plain, *keyed, *xof; } B3V[] = {")
    for n in (0, 1, 63, 64, 65, 1023, 1024, 1025, 2047, 2048, 2049, 3072, 3073, 4096, 5121, 8192, 16385, 33793, 65536,
              99331, 131073, 204800, 1048577):
        d = pattern(n)
        print(f'\t{{{n}, "{b3sum(d)}", "{b3sum(d, KEY2)}", "{b3sum(d, KEY2, 131)}"}},')
    print("};\n")


def hash_vectors():
    print("/* Xet: leaves are the chunk hashes of pattern(len) shifted by i, lengths 1000 + 37 i. */")
    print("static const struct xhv { size_t n; const char *xorb, *file; } XHV[] = {")
    for n in (1, 2, 3, 4, 5, 8, 9, 10, 17, 33, 100, 257):
        leaves = [(xetstore.blake3_keyed(xetstore.DATA_KEY, [pattern(1000 + 37 * i)[i % 7:]])[0], 1000 + 37 * i)
                  for i in range(n)]
        print(f'\t{{{n}, "{xetstore.hash_hex(xetstore.merkle(leaves))}", '
              f'"{xetstore.hash_hex(xetstore.file_hash(leaves))}"}},')
    print("};\n")


def chunk_vectors():
    rng = np.random.default_rng(3)
    raws = [bytes(5000), (np.sin(np.arange(3001)) * 0.01).astype(np.float32).tobytes()[:12003],
            rng.integers(0, 256, 3001, dtype=np.uint8).tobytes(), bytes(131072), b"\x07",
            (np.arange(2000, dtype=np.float32) / 7).tobytes()[:7999], b"ab" * 3000]
    run, kinds = b"", []
    for i, raw in enumerate(raws):
        ser, kind = xetstore.encode_chunk(raw, i)
        run += ser
        kinds.append(kind)
    assert set(kinds) == {0, 1, 2}, kinds
    assert [r for r, _ in xetstore.decode_chunks(run)] == raws
    hashes = xetstore.blake3_keyed(xetstore.DATA_KEY, raws)
    print("/* A run of serialized chunks (xetstore.encode_chunk) and, per chunk, its")
    print(" * size, compression type and Xet chunk hash. */")
    print(f"static const char CHUNK_RUN[] = {c_bytes(run)};")
    print("static const struct cv { uint32_t len; int type; const char *hash; } CV[] = {")
    for raw, kind, h in zip(raws, kinds, hashes):
        print(f'\t{{{len(raw)}, {kind}, "{xetstore.hash_hex(h)}"}},')
    print("};\n")


def plan_vectors():
    rng = np.random.default_rng(5)
    base = rng.integers(0, 256, 600000, dtype=np.uint8).tobytes()
    changed = base[:250000] + bytes(20000) + base[270000:]
    with tempfile.TemporaryDirectory() as d:
        p1, p2 = os.path.join(d, "a"), os.path.join(d, "b")
        open(p1, "wb").write(base)
        open(p2, "wb").write(changed + base[:100000])
        hashes = xetstore.build(os.path.join(d, "s"), [p1, p2], xorb_max=200000)
        meta = json.load(open(os.path.join(d, "s", "store.json")))
    fh = hashes[p2]
    size = meta["files"][fh]["size"]

    def url_for(xorb, ranges):
        return f"https://cas.example/xorbs/{xorb}?r=" + ",".join(f"{a}-{b}" for a, b in ranges)

    print("/* Reconstructions of one file (the double's plan()), v1 and v2: the bytes")
    print(" * asked, the JSON, the skip, and the terms (xorb, chunks, bytes). */")
    print(f"#define PLAN_SIZE {size}ull")
    print("struct pterm { const char *xorb; uint32_t start, end, unpacked; };")
    print("static const struct pv { uint64_t first, last; int v2; const char *json; uint64_t skip;")
    print("\tuint32_t nterm; struct pterm term[16]; } PV[] = {")
    for first, last in ((0, size - 1), (0, 0), (1, 300000), (250000, 270000), (size - 1, size - 1),
                        (123456, 654321), (0, 20000)):
        for v2 in (0, 1):
            p = xetstore.plan(meta, fh, first, last, url_for, bool(v2))
            assert len(p["terms"]) <= 16
            terms = ", ".join(f'{{"{t["hash"]}", {t["range"]["start"]}, {t["range"]["end"]}, '
                              f'{t["unpacked_length"]}}}' for t in p["terms"])
            print(f"\t{{{first}, {last}, {v2}, {c_str(json.dumps(p))}, {p['offset_into_first_range']}, "
                  f"{len(p['terms'])}, {{{terms}}}}},")
    print("};\n")


if __name__ == "__main__":
    print("/* Written by tests/unit/xet_vectors.py (b3sum and the Xet double's Python): do not edit. */")
    print("#include <stddef.h>\n#include <stdint.h>\n")
    print(f"static const char KEY2[33] = {c_bytes(KEY2)};\n")
    blake3_vectors()
    hash_vectors()
    chunk_vectors()
    plan_vectors()
