"""hf:// over Xet, mounted: tensorfs reads a repository of the Xet double
(xetdouble.py over xetstore.py, its xorbs behind nginx, each URL
presigned) from its xorbs, byte for byte in every view and revision, with
--inspect, --verify and -o originals; -o xet=off and a Hub without Xet
for the repository take the LFS route; every fault of the double is a
failed read (EIO and one line) or a retry that succeeds; the chunk cache
(-o cache_dir) serves a warm mount and the chunks a second revision
shares, and keeps nothing it could not check."""

import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

import xetstore
from tfsutil import EXIT_SOURCE, missing, mounted, run
from xetfix import C1, C2, TOKEN, World, tensors

NOBODY = 65534


@pytest.fixture(scope="module")
def world():
    if not shutil.which("b3sum"):
        missing("b3sum (Debian's b3sum)")
    with World(bridge_nginx=False) as w:
        yield w


@pytest.fixture
def env(world, tmp):
    """The double as the Hub, an empty HF_HOME, no token, no faults."""
    saved = dict(os.environ)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "XDG_CACHE_HOME"):
        os.environ.pop(k, None)
    os.environ["HF_ENDPOINT"] = world.double.endpoint
    os.environ["HF_HOME"] = os.path.join(tmp, "hfhome")
    world.double.faults()
    world.double.clear_seen()
    world.nginx.clear_log()
    yield
    world.double.faults()
    os.environ.clear()
    os.environ.update(saved)


def original(world, rev, name="model.safetensors"):
    with open(os.path.join(world.root, f"r{rev}", name), "rb") as f:
        return f.read()


def counters(mnt):
    line = os.getxattr(mnt, "user.counters").decode()
    return {k: (int(v) if v.isdigit() else v) for k, v in (f.split("=") for f in line.split())}


def xorb_requests(world):
    return [r for r in world.nginx.requests() if r["uri"].startswith("/xorbs/")]


def bridge_requests(world):
    """GETs of the double's bridge (a HEAD of the Hub follows its redirect
    there: it is on the Hub's own host here)."""
    return [s for s in world.double.seen() if s["path"].startswith("/__bridge/") and s["method"] == "GET"]


def seen_paths(world):
    return [s["path"] for s in world.double.seen()]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def read_err(path):
    """The bytes, or the errno of the read that failed."""
    try:
        return read(path)
    except OSError as e:
        return e.errno


def log_lines(log, needle):
    return [ln for ln in open(log).read().splitlines() if needle in ln] if os.path.exists(log) else []


@pytest.mark.parametrize("rev,ref", [(2, "main"), (1, "v1")])
def test_every_file_over_xet_byte_for_byte(world, env, rev, ref):
    """Every tensor file and -o originals' model.safetensors is the file's
    bytes, read from the xorbs (nginx served only xorb ranges, never the
    bridge); the counters say the route; config.json, not in Xet, comes
    from the Hub itself."""
    want = {name: data for name, _, _, data in tensors(rev)}
    with mounted(f"hf://org/xet@{ref}", "-o", "originals") as mnt:
        for name, data in want.items():
            assert read(os.path.join(mnt, name)) == data, name
        assert read(os.path.join(mnt, "__files__", "model.safetensors")) == original(world, rev)
        assert json.loads(read(os.path.join(mnt, "__files__", "config.json")))["rev"] == rev
        c = counters(mnt)
        assert c["route"] == "xet" and c["xet_files"] == 1 and c["lfs_files"] == 0, c
        assert c["xorb_bytes"] > 0 and c["chunk_bytes_fetched"] >= len(original(world, rev)), c
        assert os.getxattr(os.path.join(mnt, "b.smooth"), "user.revision").decode() == (C2 if rev == 2 else C1)
        lst = run(["--list"])
        lines = lst.stdout.splitlines()
        at = [i for i, ln in enumerate(lines) if f" {mnt} " in ln]
        mine = [ln for ln in lines[at[0] + 1 : at[0] + 3] if "counters:" in ln] if at else []
        assert lst.returncode == 0 and mine, lst.stdout
        assert "route=xet " in mine[0] and " chunk_bytes_cached=" in mine[0], lst.stdout
    assert xorb_requests(world) and not bridge_requests(world)
    assert all(r["status"] == 206 and r["auth"] == "-" for r in xorb_requests(world))
    assert any("/v1/reconstructions/" in p for p in seen_paths(world))


def test_xet_off_and_a_hub_without_xet_take_the_lfs_route(world, env):
    """-o xet=off reads the same bytes through the LFS bridge with no CAS
    request, and so does a mount of a repository whose Xet token the Hub
    does not give (404); an unknown value is refused with one line."""
    want = dict((n, d) for n, _, _, d in tensors(2))
    with mounted("hf://org/xet", "-o", "xet=off") as mnt:
        assert all(read(os.path.join(mnt, n)) == d for n, d in want.items())
        c = counters(mnt)
        assert c["route"] == "lfs" and c["xet_files"] == 0 and c["lfs_files"] == 1, c
    assert bridge_requests(world) and not xorb_requests(world)
    assert not any("reconstructions" in p or "xet-read-token" in p for p in seen_paths(world))
    with mounted("hf://org/noxet") as mnt:
        assert all(read(os.path.join(mnt, n)) == d for n, d in want.items())
        c = counters(mnt)
        assert c["route"] == "lfs" and c["xet_files"] == 0 and c["lfs_files"] == 1, c
    assert any("/xet-read-token/" in p for p in seen_paths(world))
    r = run(["-o", "xet=maybe", "hf://org/xet", "/nonexistent"])
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "-o xet= takes on or off" in r.stderr


def test_inspect_and_verify_over_xet(world, env):
    """--inspect reads the header over Xet; --verify compares each file's
    SHA-256 (the Hub's X-Linked-Etag) with the bytes rebuilt from the
    xorbs."""
    r = run(["--inspect", "hf://org/xet"])
    assert r.returncode == 0, r.stderr
    assert "c.random" in r.stdout and "f.new" in r.stdout
    r = run(["--verify", "hf://org/xet@v1"])
    assert r.returncode == 0, r.stderr
    assert "1 checked, 0 mismatched" in r.stderr
    assert any("/v1/reconstructions/" in p for p in seen_paths(world))


# ---- faults: a failed read (EIO and one line) or a retry that succeeds ----

def fault_mount(*opts):
    """A mount whose log is kept (-o logfile): (context, log path)."""
    log = os.path.join(os.path.dirname(os.environ["HF_HOME"]), "xet.log")
    return mounted("hf://org/xet", "-o", f"logfile={log}", *opts), log


def test_tokens_are_renewed_before_they_expire_and_on_a_401(world, env):
    """A token about to expire is renewed before the CAS is asked (no
    refusal needed); a token the CAS refuses (revoked) is renewed once and
    the request sent again; a CAS that refuses every token (each expired
    when issued) fails the read with one line, and the next read after it
    heals succeeds."""
    want = {n: d for n, _, _, d in tensors(2)}
    world.double.faults(token_ttl=2)
    ctx, log = fault_mount()
    with ctx as mnt:
        time.sleep(2.5)
        world.double.clear_seen()
        assert read(os.path.join(mnt, "c.random")) == want["c.random"]
        seen = seen_paths(world)
        assert "xet-read-token" in seen[0] and any("/v1/reconstructions/" in p for p in seen), seen
        world.double.faults(revoke=1)
        world.double.clear_seen()
        assert read(os.path.join(mnt, "b.smooth")) == want["b.smooth"]
        assert sum("xet-read-token" in p for p in seen_paths(world)) == 1
    assert not log_lines(log, "over Xet")
    ctx, log = fault_mount()
    with ctx as mnt:
        # (a fresh mount: the first one's read-ahead holds the whole file)
        world.double.faults(token_ttl=0, revoke=1)
        assert read_err(os.path.join(mnt, "e.random")) == 5
        world.double.faults()
        assert read(os.path.join(mnt, "e.random")) == want["e.random"]
    lines = log_lines(log, "over Xet")
    assert len(lines) == 1 and "refuses the token" in lines[0] and TOKEN not in open(log).read(), lines


@pytest.mark.parametrize("fault,count", [("url_expired", 1), ("short", 1), ("corrupt", 1), ("wrong_range", 1)])
def test_a_fault_once_is_a_retry_that_succeeds(world, env, fault, count):
    """An expired URL, a range cut short, a damaged chunk header and an
    answer for another range, each once: the read asks again and gets the
    right bytes, with nothing in the log."""
    want = {n: d for n, _, _, d in tensors(2)}
    ctx, log = fault_mount()
    with ctx as mnt:
        if fault == "corrupt":
            world.double.faults(corrupt="header", corrupt_count=count)
        else:
            world.double.faults(**{fault: count})
        assert read(os.path.join(mnt, "c.random")) == want["c.random"]
        assert read(os.path.join(mnt, "d.smooth")) == want["d.smooth"]
    assert not log_lines(log, "over Xet")


def test_an_answer_for_another_range_at_the_files_end_is_asked_again(world, env):
    """The last bytes of a file read alone, the CAS answering once for
    bytes from 0 (terms that would end past the file): the read asks again
    and gets the right bytes, with nothing in the log."""
    want = original(world, 2)
    ctx, log = fault_mount("-o", "originals")
    with ctx as mnt:
        world.double.faults(wrong_range=1)
        with open(os.path.join(mnt, "__files__", "model.safetensors"), "rb") as f:
            assert os.pread(f.fileno(), 1000, len(want) - 1000) == want[-1000:]
    assert not log_lines(log, "over Xet")


@pytest.mark.parametrize("fault", ["url_ttl", "short", "corrupt", "wrong_range"])
def test_a_lasting_fault_is_a_failed_read_and_nothing_is_cached(world, env, tmp, fault):
    """The same faults on every answer: the read fails with EIO and one
    line saying why; nothing fetched then entered the chunk cache (a
    remount with the same cache fetches those chunks again, and serves the
    right bytes)."""
    want = {n: d for n, _, _, d in tensors(2)}
    cache = os.path.join(tmp, "cache")
    ctx, log = fault_mount("-o", f"cache_dir={cache}")
    value = {"url_ttl": 0, "short": True, "corrupt": "header", "wrong_range": True}[fault]
    with ctx as mnt:
        world.double.faults(**{fault: value})
        assert read_err(os.path.join(mnt, "c.random")) == 5
        world.double.faults()
    lines = log_lines(log, "over Xet")
    assert len(lines) >= 1 and all("c.random" not in ln for ln in lines), lines
    why = {"url_ttl": "403", "short": "answered another range", "corrupt": "chunk",
           "wrong_range": "reconstruction"}[fault]
    assert all(why in ln for ln in lines), lines
    world.nginx.clear_log()
    with mounted("hf://org/xet", "-o", f"cache_dir={cache}") as mnt:
        assert read(os.path.join(mnt, "c.random")) == want["c.random"]
        assert counters(mnt)["chunk_bytes_fetched"] >= len(want["c.random"])


@pytest.mark.parametrize("where", ["token", "cas", "xorb"])
def test_429_and_503_wait_their_retry_after(world, env, where):
    """429 and 503 with Retry-After at the token endpoint (at mount), the
    CAS and the xorbs: waited for and tried again, the read succeeds."""
    want = {n: d for n, _, _, d in tensors(2)}
    code = 429 if where == "cas" else 503
    fault = {"status": {"code": code, "retry_after": 1, "count": 2, "where": where}}
    if where == "token":
        world.double.faults(**fault)
    with mounted("hf://org/xet") as mnt:
        if where != "token":
            world.double.faults(**fault)
        assert read(os.path.join(mnt, "e.random")) == want["e.random"]
        assert counters(mnt)["retries"] >= 2


def test_a_damaged_payload_is_found_by_the_file_hash_at_the_latest(world, env, tmp):
    """A flipped byte in each range's first chunk: an LZ4 chunk's frame
    may show it, a stored chunk's bytes cannot (Xet gives a reader no hash
    of a part of a xorb); once every chunk of the file has passed, its Xet
    hash does. Reading the whole file fails (EIO), the file's chunks leave
    the chunk cache, and a remount reads the right bytes."""
    cache = os.path.join(tmp, "cache")
    ctx, log = fault_mount("-o", f"cache_dir={cache},originals")
    with ctx as mnt:
        world.double.faults(corrupt="payload")
        assert read_err(os.path.join(mnt, "__files__", "model.safetensors")) == 5
        world.double.faults()
    assert log_lines(log, "over Xet") or log_lines(log, "not to its Xet hash")
    with mounted("hf://org/xet", "-o", f"cache_dir={cache},originals") as mnt:
        assert read(os.path.join(mnt, "__files__", "model.safetensors")) == original(world, 2)


# ---- the chunk cache ----

def cache_files(cache):
    out = []
    for root, _, files in os.walk(os.path.join(cache, "tensorfs-v1", "xet")):
        out += [os.path.join(root, f) for f in files]
    return out


def unshared_bytes(world, new, old):
    """The serialized bytes of the chunks file `new` uses and `old` does not."""
    meta = world.double.store()

    def used(fh):
        return {(x, c) for x, a, b, _ in meta["files"][fh]["terms"] for c in range(a, b)}
    fa, fb = world.files[f"r{old}/model.safetensors"], world.files[f"r{new}/model.safetensors"]
    return sum(meta["xorbs"][x]["chunks"][c][1] for x, c in used(fb) - used(fa))


def test_the_chunk_cache_serves_a_warm_mount_and_a_second_revision(world, env, tmp):
    """Revision 1 read with -o cache_dir: a remount reads it from the chunk
    cache with no xorb fetched; revision 2 then fetches only the chunks it
    does not share with revision 1 (what the nginx log says it sent, within
    1.2 times their bytes), and serves every byte right."""
    cache = os.path.join(tmp, "cache")
    w1 = {n: d for n, _, _, d in tensors(1)}
    w2 = {n: d for n, _, _, d in tensors(2)}
    with mounted("hf://org/xet@v1", "-o", f"cache_dir={cache},originals") as mnt:
        assert read(os.path.join(mnt, "__files__", "model.safetensors")) == original(world, 1)
    assert cache_files(cache)
    world.nginx.clear_log()
    with mounted("hf://org/xet@v1", "-o", f"cache_dir={cache}") as mnt:
        assert all(read(os.path.join(mnt, n)) == d for n, d in w1.items())
        c = counters(mnt)
        assert c["chunk_bytes_cached"] >= len(original(world, 1)) and c["chunk_bytes_fetched"] == 0, c
    assert not xorb_requests(world)
    world.nginx.clear_log()
    with mounted("hf://org/xet@main", "-o", f"cache_dir={cache},originals") as mnt:
        assert read(os.path.join(mnt, "__files__", "model.safetensors")) == original(world, 2)
        assert all(read(os.path.join(mnt, n)) == d for n, d in w2.items())
    fetched = sum(r["bytes"] for r in xorb_requests(world))
    need = unshared_bytes(world, 2, 1)
    # (and two parts fetched at once may each fetch the chunk they share at
    # their edge: a few chunks on a file this small)
    assert 0 < fetched <= 1.2 * need + 2 * 131072, (fetched, need)


def test_a_damaged_chunk_in_the_cache_is_fetched_again(world, env, tmp):
    """A byte of a cached chunk flipped on disk (a torn write, a bad
    sector): its checksum fails when read, the chunk is fetched again, the
    bytes served are right."""
    cache = os.path.join(tmp, "cache")
    with mounted("hf://org/xet", "-o", f"cache_dir={cache},originals") as mnt:
        read(os.path.join(mnt, "__files__", "model.safetensors"))
    files = cache_files(cache)
    slot0 = 65536 * 64  # the first chunk's slot (sources/xorbcache.h)
    for f in files:
        with open(f, "r+b") as fh:
            fh.seek(slot0 + 100)
            b = fh.read(1)
            fh.seek(slot0 + 100)
            fh.write(bytes([b[0] ^ 0x20]))
    world.nginx.clear_log()
    with mounted("hf://org/xet", "-o", f"cache_dir={cache},originals") as mnt:
        assert read(os.path.join(mnt, "__files__", "model.safetensors")) == original(world, 2)
        c = counters(mnt)
        assert c["chunk_bytes_cached"] > 0 and c["chunk_bytes_fetched"] > 0, c
    assert xorb_requests(world)


def test_a_fetch_wider_than_its_terms_decodes_and_keeps_only_their_chunks(world, env, tmp):
    """A CAS whose fetch_info names whole xorbs for a small read: the bytes
    are right, and only the chunks the answer's terms use are decoded,
    counted and kept in the chunk cache (the rest were checked by nothing,
    and decoding them would let a few bytes of answer cost gigabytes)."""
    want = hashlib.sha256(dict((n, d) for n, _, _, d in tensors(2))["c.random"]).hexdigest()

    def one_read(cache, wide):
        with mounted("hf://org/xet", "-o", f"cache_dir={cache}") as mnt:
            xet = os.path.join(cache, "tensorfs-v1", "xet")
            held0 = sum(os.stat(os.path.join(r, f)).st_blocks for r, _, fs in os.walk(xet) for f in fs) * 512
            c0 = counters(mnt)
            world.double.faults(wide_fetch=wide)
            # (a hash reads the tensor alone, in pieces, with no read-ahead)
            assert os.getxattr(os.path.join(mnt, "c.random"), "user.hash.sha256").decode() == want
            c = counters(mnt)
            world.double.faults()
            held = sum(os.stat(os.path.join(r, f)).st_blocks for r, _, fs in os.walk(xet) for f in fs) * 512
        return (c["chunk_bytes_fetched"] - c0["chunk_bytes_fetched"], c["xorb_bytes"] - c0["xorb_bytes"],
                held - held0)

    meta = json.load(open(os.path.join(world.root, "store", "store.json")))
    raw = sum(c[2] for v in meta["xorbs"].values() for c in v["chunks"])
    wide = one_read(os.path.join(tmp, "wide"), True)
    # the wire carried whole xorbs; what was decoded and kept is the
    # tensor's chunks and the read-ahead's (how many varies with the
    # workers' timing), never the xorbs it came with
    assert wide[1] > raw // 2 > wide[0] > 0 and raw // 2 > wide[2] > 0, (wide, raw)


def test_a_fifo_or_a_link_in_the_chunk_cache_is_refused_not_waited_on(world, env, tmp):
    """A FIFO in place of a xorb's file is never opened to wait on (the
    chunks are fetched again); a tensorfs-v1/xet that is a link is refused
    with one line saying why."""
    want = dict((n, d) for n, _, _, d in tensors(2))
    cache = os.path.join(tmp, "cache")
    with mounted("hf://org/xet", "-o", f"cache_dir={cache}") as mnt:
        assert read(os.path.join(mnt, "c.random")) == want["c.random"]
    xet = os.path.join(cache, "tensorfs-v1", "xet")
    files = [os.path.join(r, f) for r, _, fs in os.walk(xet) for f in fs]
    assert files
    for f in files:
        os.unlink(f)
        os.mkfifo(f, 0o600)
    with mounted("hf://org/xet", "-o", f"cache_dir={cache}") as mnt:
        r = subprocess.run(["timeout", "20", "cat", os.path.join(mnt, "c.random")], capture_output=True)
        assert r.returncode == 0 and r.stdout == want["c.random"], r.returncode
        c = counters(mnt)
        assert c["chunk_bytes_cached"] == 0 and c["chunk_bytes_fetched"] > 0, c
    shutil.rmtree(xet)
    os.symlink(tmp, xet)
    r = run(["-o", f"cache_dir={cache}", "hf://org/xet", os.path.join(tmp, "nowhere")])
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    assert "cannot use its tensorfs-v1/xet: not a directory of the user's alone" in r.stderr, r.stderr


def test_the_cache_dir_stays_within_cache_max(world, env, tmp):
    """Xorb files (sparse) are counted by what they hold on disk, with the
    block cache's files, and the oldest go past -o cache_max."""
    cache = os.path.join(tmp, "cache")
    with mounted("hf://org/xet", "-o", f"cache_dir={cache},cache_max=1M,originals") as mnt:
        assert read(os.path.join(mnt, "__files__", "model.safetensors")) == original(world, 2)
    used = 0
    for root, _, files in os.walk(os.path.join(cache, "tensorfs-v1")):
        used += sum(os.stat(os.path.join(root, f)).st_blocks * 512 for f in files)
    assert 0 < used <= (1 << 20), used


def test_as_nobody_with_a_chunk_cache(world, env):
    """The daemon run by another user (nobody, with a /dev/fuse of its own
    in a private mount namespace, as /dev/fuse may be 0600 here): its chunk
    cache in its own directory, a warm remount served from it with no
    chunk fetched, the right bytes both times."""
    import tempfile
    from tfsutil import BIN
    if os.getuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        missing("root, unshare and setpriv (a /dev/fuse for another user)")
    top = tempfile.mkdtemp(prefix="tfs-xet-nobody-")
    os.chmod(top, 0o755)
    os.chown(top, NOBODY, NOBODY)
    node = os.path.join(top, "node")
    os.mknod(node, 0o600 | 0o020000, os.stat("/dev/fuse").st_rdev)
    os.chmod(node, 0o666)
    nobody = f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env HOME={top} HF_HOME={top}/hf"
    one = (f"{nobody} {BIN} -o cache_dir={top}/cache,originals hf://org/xet {top}/mnt || exit 1; "
           f"{nobody} cat {top}/mnt/__files__/model.safetensors > {top}/got$1; "
           f"{nobody} getfattr --only-values -n user.counters {top}/mnt > {top}/counters$1; "
           f"{nobody} fusermount3 -u {top}/mnt")
    script = (f"mount --bind {node} /dev/fuse && {nobody} mkdir {top}/mnt && one() {{ {one}; }} && "
              "one 0 && one 1; echo rc=$?")
    try:
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           capture_output=True, text=True, timeout=180)
        assert "rc=0" in r.stdout, (r.stdout, r.stderr)
        for warm in (0, 1):
            assert read(os.path.join(top, f"got{warm}")) == original(world, 2)
            c = open(os.path.join(top, f"counters{warm}")).read()
            assert ("chunk_bytes_fetched=0 " in c + " ") == bool(warm) and "route=xet" in c, c
        assert cache_files(os.path.join(top, "cache"))
        assert all(os.stat(f).st_uid == NOBODY for f in cache_files(os.path.join(top, "cache")))
    finally:
        shutil.rmtree(top, ignore_errors=True)
