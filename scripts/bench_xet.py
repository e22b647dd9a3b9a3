"""make bench rows for hf:// over Xet (issue 47), against the Xet double
(tests/lib/xetdouble.py) on 127.0.0.1 serving a store built from the
stream fixture (benchlib.fixture: 4 shards of 16 random U8 tensors of 16
MiB, 1 GiB) as revision "a", and revision "b" with three of its tensors
rewritten; xorbs of at most 64 MiB, as the Hub's, served by Debian's nginx
capping every connection at 62.5 MiB/s as for the LFS rows (benchlib's
CAPPED). bench.py runs them; each timed repetition runs the baseline and
tensorfs back to back (and the binary before, TENSORFS_BENCH_BEFORE).

  xet-stream    a cold load of revision a (every tensor file in name order, fresh mount) / aria2c -x16
                -s16 -k1M fetching the same 4 files through the LFS route (the bridge, capped alike);
                the detail gives the daemon's CPU seconds per GiB of the load
  xet-bytes     xorb bytes nginx sent for xet-stream's cold load / the files' xorb bytes (their chunks
                as stored); the detail gives one tensor read (its user.hash.sha256 on a fresh mount:
                the tensor read alone, in 4 MiB pieces) against its covering chunks and one chunk
                each side, and the same tensor read with cat (the block cache's 256 KiB blocks and
                its read-ahead one part past the tensor)
  xet-revision  xorb bytes fetched reading revision b after revision a with one -o cache_dir / the
                bytes of the chunks b does not share with a
  xet-warm      a load of revision b from a warm chunk cache (remount) / the same load through
                -o xet=off from a warm block cache (the LFS route's range cache)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "lib"))

import xetstore  # noqa: E402
from benchlib import CAPPED, before_note, cpu_seconds, fixture, read_files, tensors, triple  # noqa: E402
from xetfix import SECRET, Served  # noqa: E402

MiB = 1 << 20
ROWS = {"xet-stream", "xet-bytes", "xet-revision", "xet-warm"}
CA, CB = "a0" * 20, "b0" * 20
CHANGED = ["model.layers.21.weight", "model.layers.22.weight", "model.layers.40.weight"]
ONE = "model.layers.37.weight"  # the one tensor read


def rewrite(src, dst, names):
    """A copy of shard src with the tensors `names` given new random bytes."""
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        for name in names:
            if name in hdr:
                a, b = hdr[name]["data_offsets"]
                f.seek(8 + n + a)
                f.write(os.urandom(b - a))


def store_fixture(b):
    """DIR/xet: a/ and b/ (the revisions), store/ (built once) and
    files.json ({"a/SHARD": file hash, ...})."""
    d = os.path.join(b.DIR, "xet")
    done = os.path.join(d, "files.json")
    if os.path.exists(done):
        return d, json.load(open(done))
    src = fixture(b)
    shutil.rmtree(d, ignore_errors=True)
    paths = []
    for rev in ("a", "b"):
        os.makedirs(os.path.join(d, rev))
        for f in sorted(os.listdir(src)):
            p = os.path.join(d, rev, f)
            if rev == "a" or not f.endswith(".safetensors"):
                shutil.copyfile(os.path.join(src, f), p)
            else:
                rewrite(os.path.join(src, f), p, CHANGED)
            if f.endswith(".safetensors"):
                paths.append(p)
    print("building the Xet store of", d, "(2 GiB, once)", file=sys.stderr)
    hashes = xetstore.build(os.path.join(d, "store"), paths, xorb_max=64 << 20)
    files = {os.path.relpath(p, d): h for p, h in hashes.items()}
    for r, dirs, fs in os.walk(d):
        os.chmod(r, 0o755)
        for f in fs:
            os.chmod(os.path.join(r, f), 0o644)
    with open(done, "w") as f:
        json.dump(files, f)
    return d, files


class Env:
    """HF_ENDPOINT at the double, a fresh HF_HOME, no token, for the mounts."""

    def __init__(self, endpoint, home):
        self.set = {"HF_ENDPOINT": endpoint, "HF_HOME": home}

    def __enter__(self):
        self.saved = dict(os.environ)
        for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
            os.environ.pop(k, None)
        os.environ.update(self.set)
        return self

    def __exit__(self, *a):
        os.environ.clear()
        os.environ.update(self.saved)


def chunk_facts(meta, fh):
    """The file's chunks in order: (start in the file, raw length, stored length)."""
    out, at = [], 0
    for x, a, z, _ in meta["files"][fh]["terms"]:
        for c in range(a, z):
            off, ser, n, _ = meta["xorbs"][x]["chunks"][c]
            out.append((at, n, ser))
            at += n
    return out


def xorb_bytes(ng):
    return sum(r["bytes"] for r in ng.requests() if r["uri"].startswith("/xorbs/"))


def load(b, spec, *opts, binary=None, cpu=None):
    """Every tensor file of spec in name order through a fresh mount:
    seconds (and the daemon's CPU seconds appended to cpu)."""
    with b.Mount(spec, *opts, binary=binary) as m:
        names = tensors(m.mnt)
        c0 = cpu_seconds(m.pid)
        t0 = time.perf_counter()
        read_files(os.path.join(m.mnt, x) for x in names)
        t = time.perf_counter() - t0
        if cpu is not None:
            cpu.append(cpu_seconds(m.pid) - c0)
        return t


def rows(b, reps, want):
    if not shutil.which("aria2c"):
        sys.exit("bench_xet: aria2c is missing (Debian's aria2; make deps installs it)")
    d, files = store_fixture(b)
    meta = json.load(open(os.path.join(d, "store", "store.json")))
    repos = {"org/bench": {"xet": True, "refs": {"main": CB, "a": CA}, "commits": {CA: "a", CB: "b"}}}
    capped = {"xorbs-capped": CAPPED["capped"] + " " + xetstore.xorb_location(SECRET),
              "bridge-capped": CAPPED["capped"] + " " + xetstore.bridge_location(SECRET)}
    home = tempfile.mkdtemp(prefix="tfs-bench-xet-", dir=b.DIR)
    out = []
    try:
        with Served(d, os.path.join(d, "store"), files, repos, capped, "xorbs-capped", None) as sv, \
                Env(sv.double.endpoint, os.path.join(home, "hf")):
            a_files = sorted(p for p in files if p.startswith("a/"))
            if want & {"xet-stream", "xet-bytes"}:
                out += stream_rows(b, reps, want, sv, meta, files, a_files)
            if want & {"xet-revision", "xet-warm"}:
                out += cache_rows(b, reps, want, sv, meta, files, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return out


def stream_rows(b, reps, want, sv, meta, files, a_files):
    total = sum(os.path.getsize(os.path.join(sv.root, p)) for p in a_files)
    stored = sum(ser for p in a_files for _, _, ser in chunk_facts(meta, files[p]))
    ng, fetched = sv.nginx, []

    def aria2c():
        out = tempfile.mkdtemp(dir="/dev/shm")
        urls = os.path.join(out, "urls")
        with open(urls, "w") as f:
            for p in a_files:
                path = f"/bridge/{files[p]}"
                f.write(ng.url("bridge-capped", path[1:]) + "?" + xetstore.sign(path, SECRET, 3600) + "\n")
        t0 = time.perf_counter()
        subprocess.run(["aria2c", "-q", "-x16", "-s16", "-k1M", "-j1", "--file-allocation=none",
                        "--allow-overwrite=true", "-d", out, "-i", urls], check=True)
        t = time.perf_counter() - t0
        shutil.rmtree(out)
        return t

    cpu = {"ours": [], "before": []}

    def ours(binary=None):
        ng.clear_log()
        mine = binary in (None, b.BIN)
        t = load(b, "hf://org/bench@a", binary=binary, cpu=cpu["ours" if mine else "before"])
        if mine:
            fetched.append(xorb_bytes(ng))
        return t

    out = []
    bt, ot, r, bf = triple(b, reps, aria2c, ours, ours)
    if "xet-stream" in want:
        gib = total / (1 << 30)
        daemon = f"; the daemon's CPU {b.median(cpu['ours']) / gib:.2f} s/GiB"
        if cpu["before"]:
            daemon += f" (before {b.median(cpu['before']) / gib:.2f})"
        out.append(("xet-stream", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s"
                    f"{before_note(bf, total)}{daemon}", "higher"))
    if "xet-bytes" in want:
        ratio = b.median(fetched) / stored
        out.append(("xet-bytes", ratio, f"{b.median(fetched) / MiB:.1f} MiB of xorbs for {stored / MiB:.1f} MiB "
                    f"stored; {one_tensor(b, sv, meta, files)}", "lower"))
    return out


def one_tensor(b, sv, meta, files):
    """One tensor read alone (its hash asked for: 4 MiB pieces, no
    read-ahead) and with cat, on fresh mounts: xorb bytes against its
    covering chunks and one chunk each side."""
    shard = "a/model-00003-of-00004.safetensors"
    start, hdr = b.header_info(os.path.join(sv.root, shard))
    lo, hi = (start + x for x in hdr[ONE]["data_offsets"])
    chunks = chunk_facts(meta, files[shard])
    cover = [i for i, (at, n, _) in enumerate(chunks) if at < hi and at + n > lo]
    allowed = sum(chunks[i][2] for i in range(max(0, cover[0] - 1), min(len(chunks), cover[-1] + 2)))
    got = []
    for how in ("hash", "cat"):
        with b.Mount("hf://org/bench@a") as m:
            sv.nginx.clear_log()
            path = os.path.join(m.mnt, ONE)
            if how == "hash":
                os.getxattr(path, "user.hash.sha256")
            else:
                read_files([path])
            got.append(xorb_bytes(sv.nginx))
    return (f"one tensor (16 MiB) alone: {got[0] / allowed:.3f} of its chunks and one each side "
            f"({got[0] / MiB:.2f} vs {allowed / MiB:.2f} MiB), with cat {got[1] / allowed:.2f}")


def cache_rows(b, reps, want, sv, meta, files, home):
    """xet-revision, then xet-warm over the chunk cache it leaves."""
    ng, out = sv.nginx, []
    b_files = sorted(p for p in files if p.startswith("b/"))

    def used(rev):
        return {(x, c) for p in files if p.startswith(rev) for x, a, z, _ in meta["files"][files[p]]["terms"]
                for c in range(a, z)}
    need = sum(meta["xorbs"][x]["chunks"][c][1] for x, c in used("b/") - used("a/"))
    cache = os.path.join(home, "chunks")
    ratios = []
    for _ in range(reps if "xet-revision" in want else 1):
        shutil.rmtree(cache, ignore_errors=True)
        load(b, "hf://org/bench@a", "-o", f"cache_dir={cache},cache_max=8G")
        ng.clear_log()
        load(b, "hf://org/bench@main", "-o", f"cache_dir={cache},cache_max=8G")
        ratios.append(xorb_bytes(ng) / need)
    if "xet-revision" in want:
        out.append(("xet-revision", b.median(ratios), f"{b.median(ratios) * need / MiB:.1f} MiB fetched for "
                    f"{need / MiB:.1f} MiB of chunks b does not share with a ({len(CHANGED)} of 64 tensors "
                    f"changed)", "lower"))
    if "xet-warm" in want:
        blocks = os.path.join(home, "blocks")
        load(b, "hf://org/bench@main", "-o", f"cache_dir={blocks},cache_max=8G,xet=off")
        total = sum(os.path.getsize(os.path.join(sv.root, p)) for p in b_files)
        bt, ot, r = b.paired(reps, lambda: load(b, "hf://org/bench@main", "-o",
                                                f"cache_dir={blocks},cache_max=8G,xet=off"),
                             lambda: load(b, "hf://org/bench@main", "-o", f"cache_dir={cache},cache_max=8G"))
        out.append(("xet-warm", 1 / r, f"{total / ot / MiB:.0f} MiB/s vs {total / bt / MiB:.0f} MiB/s", "higher"))
    return out
