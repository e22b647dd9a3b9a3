"""Xet storage for the test double, built from files as the Hub's Xet
storage holds them (huggingface.co/docs/xet): each file cut into chunks by
a content-defined chunker of our own (a gear hash over a 64-byte window,
8-128 KiB chunks, about 64 KiB on average; the boundaries are not
xet-core's, which the spec allows), each chunk compressed the way that
makes it smallest (0 stored, 1 LZ4 frame, 2 byte planes then LZ4), chunks
not seen before packed into xorbs, and each file a list of terms (xorb,
chunk range). A chunk already stored, in any file of any revision, is
stored once: a second revision that changes a few tensors shares the rest.

Hashes as the spec defines them, BLAKE3 by Debian's b3sum: a chunk's hash
keyed with the data key; a xorb's the Merkle tree over its chunks (nodes
keyed with the node key over "HEX : LENGTH" lines); a file's that tree over
its chunks, keyed again with 32 zero bytes.

A xorb here is its chunks only: the footer a real xorb object ends with
(chunk hashes and boundaries) is never fetched by a reader, so it is left
out. build() writes DIR/xorbs/HASH, DIR/bridge/HASH (each file rebuilt by
decoding its xorbs, which the LFS-compatible bridge serves) and
DIR/store.json; python3 xetstore.py OUT FILE... builds a store (for seeds
and by hand)."""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import lz4.frame
import numpy as np

DATA_KEY = bytes([102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28, 157, 228, 33, 16,
                  155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41])
NODE_KEY = bytes([1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230, 93, 221, 83, 111, 55,
                  199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63])
ZERO_KEY = bytes(32)

MIN_CHUNK, MAX_CHUNK = 8 * 1024, 128 * 1024
MASK = (1 << 16) - 1  # a boundary about every 64 KiB past the minimum
WINDOW = 4 << 20
STORED, LZ4, BG4 = 0, 1, 2


# ---- BLAKE3 (b3sum) ----

def blake3_keyed(key, items):
    """The keyed BLAKE3 of each of items (bytes), with one b3sum run per
    few hundred items."""
    out = []
    with tempfile.TemporaryDirectory(prefix="xet-b3-") as d:
        for k in range(0, len(items), 500):
            names = []
            for i, data in enumerate(items[k:k + 500]):
                names.append(os.path.join(d, str(i)))
                with open(names[-1], "wb") as f:
                    f.write(data)
            r = subprocess.run(["b3sum", "--keyed", "--no-names", *names], input=key, capture_output=True,
                               check=True)
            out += [bytes.fromhex(line) for line in r.stdout.decode().split()]
    assert len(out) == len(items)
    return out


# ---- hashes ----

def hash_hex(h):
    """The spec's text form: each 8-byte word as a little-endian number in hex."""
    return "".join(h[8 * w:8 * w + 8][::-1].hex() for w in range(4))


def hash_from_hex(s):
    return b"".join(bytes.fromhex(s[16 * w:16 * w + 16])[::-1] for w in range(4))


def _groups(nodes):
    """The spec's cut of a level into groups of 2 to 9 nodes: a group ends
    at a node whose hash's last word is 0 mod 4, once it has 3."""
    out, i = [], 0
    while i < len(nodes):
        rest = len(nodes) - i
        if rest <= 2:
            out.append(nodes[i:])
            break
        end = min(rest, 9)
        cut = next((j + 1 for j in range(2, end) if nodes[i + j][0][24] % 4 == 0), end)
        out.append(nodes[i:i + cut])
        i += cut
    return out


def merkle(nodes):
    """The root over [(hash, length)]: all zeros for none."""
    if not nodes:
        return bytes(32)
    while len(nodes) > 1:
        groups = _groups(nodes)
        texts = ["".join(f"{hash_hex(h)} : {n}\n" for h, n in g).encode() for g in groups]
        hashes = blake3_keyed(NODE_KEY, texts)
        nodes = [(h, sum(n for _, n in g)) for h, g in zip(hashes, groups)]
    return nodes[0][0]


def file_hash(nodes):
    if not nodes:
        return bytes(32)
    return blake3_keyed(ZERO_KEY, [merkle(nodes)])[0]


# ---- chunking ----

def _gear_table():
    rng = np.random.default_rng(0x7e7f5)
    return rng.integers(0, 2**64, size=256, dtype=np.uint64)


GEAR = _gear_table()


def chunk_bounds(data):
    """The ends of data's chunks: a gear hash of the last 64 bytes (h = sum
    of GEAR[b] << age) marks a candidate where its top 16 bits are zero."""
    n = len(data)
    if n == 0:
        return []
    b = np.frombuffer(data, dtype=np.uint8)
    cands = []
    # in windows of 4 MiB (with the 63 bytes before each), so that a file
    # of gigabytes needs no arrays of its size
    for w0 in range(0, n, WINDOW):
        lo = max(0, w0 - 63)
        g = GEAR[b[lo:w0 + WINDOW]]
        m = len(g)
        h = np.zeros(m, dtype=np.uint64)
        for age in range(64):
            h[age:] += g[:m - age] << np.uint64(age)
        at = np.nonzero((h >> np.uint64(48)) & np.uint64(MASK) == 0)[0] + lo
        cands.append(at[at >= w0] + 1)
    cand = np.concatenate(cands)
    ends, start, k = [], 0, 0
    while start < n:
        lo, hi = start + MIN_CHUNK, min(start + MAX_CHUNK, n)
        k = np.searchsorted(cand, lo, side="left")
        end = int(cand[k]) if k < len(cand) and cand[k] <= hi else hi
        ends.append(end)
        start = end
    return ends


# ---- chunks ----

def bg4_split(raw):
    return b"".join(raw[k::4] for k in range(4))


def bg4_regroup(planes):
    n = len(planes)
    q, r = divmod(n, 4)
    out, at = bytearray(n), 0
    for k in range(4):
        m = q + (1 if k < r else 0)
        out[k::4] = planes[at:at + m]
        at += m
    return bytes(out)


def encode_chunk(raw, index):
    """The header and payload of a chunk: the smallest of the three forms
    (stored when compression does not pay). Every other LZ4 frame carries
    its content checksum, as the frame format allows."""
    ck = index % 2 == 1
    forms = [(STORED, raw)]
    forms.append((LZ4, lz4.frame.compress(raw, content_checksum=ck, store_size=False)))
    forms.append((BG4, lz4.frame.compress(bg4_split(raw), content_checksum=ck, store_size=False)))
    kind, payload = min(forms, key=lambda f: (len(f[1]), f[0]))
    if kind != STORED and len(payload) >= len(raw):
        kind, payload = STORED, raw
    head = bytes([0]) + len(payload).to_bytes(3, "little") + bytes([kind]) + len(raw).to_bytes(3, "little")
    return head + payload, kind


def decode_chunks(blob, count=None):
    """The chunks of a serialized run, as (raw bytes, type); strict."""
    out, at = [], 0
    while at < len(blob) and (count is None or len(out) < count):
        assert len(blob) - at >= 8 and blob[at] == 0
        clen, kind, rlen = int.from_bytes(blob[at + 1:at + 4], "little"), blob[at + 4], \
            int.from_bytes(blob[at + 5:at + 8], "little")
        pay = blob[at + 8:at + 8 + clen]
        assert len(pay) == clen
        raw = pay if kind == STORED else lz4.frame.decompress(pay)
        if kind == BG4:
            raw = bg4_regroup(raw)
        assert len(raw) == rlen, (len(raw), rlen)
        out.append((raw, kind))
        at += 8 + clen
    return out


# ---- the store ----

class Store:
    """Xorbs and files; xorb_max bounds a xorb's serialized bytes (64 MiB
    on the Hub; less here so that test files span several)."""

    def __init__(self, xorb_max=4 << 20):
        self.xorb_max = xorb_max
        self.where = {}  # chunk hash -> (xorb index, chunk index)
        self.xorbs = []  # {"chunks": [(hash, raw len, offset, serialized len, type)], "blob": bytearray}
        self.files = {}  # file hash hex -> {...}

    def _open_xorb(self):
        if not self.xorbs or len(self.xorbs[-1]["blob"]) >= self.xorb_max or \
                len(self.xorbs[-1]["chunks"]) >= 8192:
            self.xorbs.append({"chunks": [], "blob": bytearray()})
        return len(self.xorbs) - 1

    def add(self, data):
        """Stores a file: its hash (hex)."""
        ends = chunk_bounds(data)
        raws = [data[a:b] for a, b in zip([0] + ends[:-1], ends)]
        hashes = blake3_keyed(DATA_KEY, raws)
        places = []
        for h, raw in zip(hashes, raws):
            if h not in self.where:
                x = self._open_xorb()
                xo = self.xorbs[x]
                ser, kind = encode_chunk(raw, len(xo["chunks"]))
                xo["chunks"].append((h, len(raw), len(xo["blob"]), len(ser), kind))
                xo["blob"] += ser
                self.where[h] = (x, len(xo["chunks"]) - 1)
            places.append(self.where[h])
        terms = []
        for (x, c), raw in zip(places, raws):
            if terms and terms[-1][0] == x and terms[-1][2] == c:
                terms[-1][2] += 1
                terms[-1][3] += len(raw)
            else:
                terms.append([x, c, c + 1, len(raw)])
        fh = hash_hex(file_hash(list(zip(hashes, map(len, raws)))))
        self.files[fh] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "terms": terms,
                          "chunks": len(raws)}
        return fh

    def write(self, out):
        """DIR/xorbs/HASH, DIR/bridge/HASH and DIR/store.json."""
        os.makedirs(os.path.join(out, "xorbs"), exist_ok=True)
        os.makedirs(os.path.join(out, "bridge"), exist_ok=True)
        names = []
        for xo in self.xorbs:
            name = hash_hex(merkle([(h, n) for h, n, _, _, _ in xo["chunks"]]))
            names.append(name)
            with open(os.path.join(out, "xorbs", name), "wb") as f:
                f.write(xo["blob"])
        meta = {"xorbs": {}, "files": {}}
        for name, xo in zip(names, self.xorbs):
            meta["xorbs"][name] = {"size": len(xo["blob"]),
                                   "chunks": [[off, ser, n, kind] for _, n, off, ser, kind in xo["chunks"]],
                                   "hashes": [hash_hex(h) for h, _, _, _, _ in xo["chunks"]]}
        for fh, f in self.files.items():
            terms = [[names[x], a, b, n] for x, a, b, n in f["terms"]]
            meta["files"][fh] = dict(f, terms=terms)
            with open(os.path.join(out, "bridge", fh), "wb") as w:
                w.write(rebuild(out, meta, fh))
        with open(os.path.join(out, "store.json"), "w") as f:
            json.dump(meta, f)
        return meta


def rebuild(root, meta, fh):
    """A file's bytes, decoded from its xorbs (what the bridge serves)."""
    out = bytearray()
    for xorb, a, b, n in meta["files"][fh]["terms"]:
        chunks = meta["xorbs"][xorb]["chunks"]
        first, last = chunks[a][0], chunks[b - 1][0] + chunks[b - 1][1]
        with open(os.path.join(root, "xorbs", xorb), "rb") as f:
            f.seek(first)
            blob = f.read(last - first)
        raw = b"".join(r for r, _ in decode_chunks(blob, b - a))
        assert len(raw) == n
        out += raw
    assert len(out) == meta["files"][fh]["size"]
    return bytes(out)


def _runs(ranges):
    """Chunk ranges of one xorb merged where they touch or overlap."""
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def plan(meta, fh, first, last, url_for, v2=False):
    """The reconstruction of bytes [first, last] of file fh, as the CAS
    answers it: its terms cut to the chunks that hold those bytes, the skip
    into the first, and per xorb the merged chunk runs with their byte
    ranges; url_for(xorb, [(first byte, last byte)]) signs a URL for them.
    v1: one fetch_info entry per run; v2: one URL per xorb for all its runs."""
    f = meta["files"][fh]
    terms, at, skip = [], 0, 0
    for xorb, a, b, n in f["terms"]:
        chunks = meta["xorbs"][xorb]["chunks"]
        end = at + n
        if end > first and at <= last:
            c, pos = a, at
            while pos + chunks[c][2] <= first:  # whole chunks before the range
                pos += chunks[c][2]
                c += 1
            if not terms:
                skip = first - pos
            e, epos = c, pos
            while e < b and epos <= last:
                epos += chunks[e][2]
                e += 1
            terms.append({"hash": xorb, "unpacked_length": epos - pos, "range": {"start": c, "end": e}})
        at = end
    runs = {}
    for t in terms:
        runs.setdefault(t["hash"], []).append((t["range"]["start"], t["range"]["end"]))
    fetch = {}
    for xorb, rs in runs.items():
        chunks = meta["xorbs"][xorb]["chunks"]
        merged = [(a, b, chunks[a][0], chunks[b - 1][0] + chunks[b - 1][1] - 1) for a, b in _runs(rs)]
        if v2:
            url = url_for(xorb, [(p, q) for _, _, p, q in merged])
            fetch[xorb] = [{"url": url, "ranges": [{"chunks": {"start": a, "end": b},
                                                     "bytes": {"start": p, "end": q}} for a, b, p, q in merged]}]
        else:
            fetch[xorb] = [{"range": {"start": a, "end": b}, "url": url_for(xorb, [(p, q)]),
                            "url_range": {"start": p, "end": q}} for a, b, p, q in merged]
    return {"offset_into_first_range": skip, "terms": terms, ("xorbs" if v2 else "fetch_info"): fetch}


def reconstruct(p, get):
    """The bytes a plan (v1 or v2) gives: get(url, first, last) fetches a
    xorb range; each term decoded from the fetch holding it, cut by the
    skip. A test's own reader of the double, independent of tensorfs."""
    fetches = []
    for xorb, entries in p.get("fetch_info", {}).items():
        fetches += [(xorb, e["range"]["start"], e["range"]["end"], e["url"], e["url_range"]["start"],
                     e["url_range"]["end"]) for e in entries]
    for xorb, entries in p.get("xorbs", {}).items():
        fetches += [(xorb, r["chunks"]["start"], r["chunks"]["end"], e["url"], r["bytes"]["start"],
                     r["bytes"]["end"]) for e in entries for r in e["ranges"]]
    out, got = bytearray(), {}
    for t in p["terms"]:
        a, b = t["range"]["start"], t["range"]["end"]
        f = next(f for f in fetches if f[0] == t["hash"] and f[1] <= a and b <= f[2])
        if f not in got:
            got[f] = decode_chunks(get(f[3], f[4], f[5]), f[2] - f[1])
        raw = b"".join(r for r, _ in got[f][a - f[1]:b - f[1]])
        assert len(raw) == t["unpacked_length"]
        out += raw
    return bytes(out[p["offset_into_first_range"]:])


# ---- the CDN's presigned URLs (nginx's secure_link) ----

def xorb_location(secret):
    """nginx directives for the xorbs: a URL is good until its expiry and
    only with the Range it was signed for (r=: the set of ranges; the
    header may name the whole set or one range of it), as the Hub's CDN
    wants each url_range sent with its URL."""
    return ('secure_link $arg_md5,$arg_expires; '
            f'secure_link_md5 "$secure_link_expires$uri$arg_r {secret}"; '
            'if ($secure_link = "") { return 403; } if ($secure_link = "0") { return 403; } '
            'set $xr "$http_range|$arg_r"; set $xok 0; '
            r'if ($xr ~ "^bytes=([0-9,-]+)\|\1$") { set $xok 1; } '
            r'if ($xr ~ "^bytes=([0-9]+-[0-9]+)\|([0-9-]*,)*\1(,[0-9-]*)*$") { set $xok 1; } '
            'if ($xok = 0) { return 403; }')


def bridge_location(secret):
    """nginx directives for the bridge's files: signed, any range."""
    return ('secure_link $arg_md5,$arg_expires; '
            f'secure_link_md5 "$secure_link_expires$uri {secret}"; '
            'if ($secure_link = "") { return 403; } if ($secure_link = "0") { return 403; }')


def _md5(text):
    return base64.urlsafe_b64encode(hashlib.md5(text.encode()).digest()).decode().rstrip("=")


def sign(path, secret, ttl, ranges=None):
    """The query of a presigned URL for path, good for ttl seconds (< 0:
    already expired) and, with ranges [(first, last)], only for them."""
    expires = int(time.time()) + ttl
    if ranges is None:
        return f"expires={expires}&md5={_md5(f'{expires}{path} {secret}')}"
    r = ",".join(f"{a}-{b}" for a, b in ranges)
    return f"r={r}&expires={expires}&md5={_md5(f'{expires}{path}{r} {secret}')}"


def signed_ok(path, secret, query, rng):
    """What xorb_location checks, for the double's own xorb URLs."""
    q = {k: v[0] for k, v in __import__("urllib.parse").parse.parse_qs(query).items()}
    r, expires = q.get("r", ""), q.get("expires", "")
    if not expires.lstrip("-").isdigit() or q.get("md5") != _md5(f"{expires}{path}{r} {secret}"):
        return False
    m = re.fullmatch(r"bytes=([0-9,-]+)", rng or "")
    return int(expires) >= time.time() and bool(m) and (m.group(1) == r or m.group(1) in r.split(","))


def build(out, paths, xorb_max=4 << 20):
    """A store in out of the files at paths: {path: file hash hex}."""
    st = Store(xorb_max)
    hashes = {p: st.add(open(p, "rb").read()) for p in paths}
    st.write(out)
    return hashes


if __name__ == "__main__":
    print(json.dumps(build(sys.argv[1], sys.argv[2:]), indent=1))
