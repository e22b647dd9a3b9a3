"""A fleet behind the shipped cache (contrib/fleet-cache/run, docs/fleet.md):
four tensorfs daemons reading one sharded checkpoint at once through it from
an origin that counts what it sends (nginx's access log), over http and from
a Hub double whose CDN URLs are signed anew on every resolve; an origin
object replaced mid-read; the gated-repository rule; and -o proxy= through
a forward proxy of our own (tests/lib/fwdproxy.py)."""

import errno
import hashlib
import json
import os
import pwd
import select
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest

from servers import FaultProxy, FleetCache as ShippedCache, FwdProxy, HubDouble, Nginx, S3Double, free_port, stop_proc
from tfsutil import EXIT_SOURCE, EXIT_USAGE, daemon_pids, missing, mounted, run, write_st

MiB = 1 << 20
COMMIT = "c" * 40
TOKEN = "hf_fleet_token_123"
SECRET = "cdn-signing-secret"
# nginx's secure_link, as a CDN checks a signed URL: md5 of the expiry, the
# path, the nonce, the secret (tests/lib/hubdouble.py signs so)
SIGNED = ('secure_link $arg_md5,$arg_expires; '
          f'secure_link_md5 "$secure_link_expires$uri$arg_n {SECRET}"; '
          'if ($secure_link = "") { return 403; } if ($secure_link = "0") { return 410; }')
# A cached slice is revalidated after this long: the staleness bound the
# replaced-object test waits out (docs/fleet.md: at most this plus 1 s).
VALID_S = 2


def FleetCache(origin, **env):
    """The shipped cache with slices of 1 MiB: a shard of a few MiB is
    several slices."""
    return ShippedCache(origin, **{"FLEET_CACHE_SLICE": "1m", **env})


def checkpoint(d, seed=0, shards=4, per=3, size=MiB - 4096):
    """A sharded safetensors checkpoint with its index: shards x per
    tensors of `size` random bytes (not slice-aligned); {name: bytes}."""
    os.makedirs(d, exist_ok=True)
    rng = __import__("random").Random(seed)
    tensors, wm = {}, {}
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        ts = []
        for t in range(per):
            name = f"layers.{s * per + t}.weight"
            raw = rng.randbytes(size)
            ts.append((name, "U8", (size,), raw))
            tensors[name] = raw
            wm[name] = fn
        write_st(os.path.join(d, fn), ts)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    for r, dirs, files in os.walk(d):
        os.chmod(r, 0o755)
        for f in files:
            os.chmod(os.path.join(r, f), 0o644)
    return tensors


def total_size(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def read_all(mnt, names, out, key):
    try:
        got = {}
        for n in names:
            with open(os.path.join(mnt, n), "rb") as f:
                got[n] = f.read()
        out[key] = got
    except OSError as e:
        out[key] = e


def four_nodes(source, tensors, *opts):
    """4 daemons (4 mount points), each reading every tensor, at once."""
    mnts = [tempfile.mkdtemp(prefix="tfs-node-") for _ in range(4)]
    pids = []
    try:
        for m in mnts:
            r = run(list(opts) + [source, m])
            assert r.returncode == 0, r.stderr
            pids += daemon_pids(m)
        assert len(set(pids)) == 4, "four separate daemons"
        out = {}
        th = [threading.Thread(target=read_all, args=(m, sorted(tensors), out, i)) for i, m in enumerate(mnts)]
        for t in th:
            t.start()
        for t in th:
            t.join(120)
        for i in range(4):
            assert not isinstance(out.get(i), Exception), out.get(i)
            assert out[i] == tensors, f"node {i} read other bytes"
    finally:
        for m in mnts:
            subprocess.run(["fusermount3", "-u", m], capture_output=True)
            os.rmdir(m)


def origin_bytes(ng, port=None):
    return sum(r["sent"] for r in ng.requests() if port is None or r["port"] == port)


def test_four_nodes_behind_the_cache_over_http(tmp):
    d = os.path.join(tmp, "www")
    tensors = checkpoint(d)
    with Nginx(d) as ng, FleetCache(ng.url("plain").rstrip("/")) as cache:
        four_nodes(cache.url("model.safetensors.index.json"), tensors)
        sent = origin_bytes(ng)
        # every request the origin answered came from the cache, in slices
        assert all(r["range"].startswith("bytes=") for r in ng.requests() if r["status"] == 206)
        assert sent <= 1.25 * total_size(d), f"the origin sent {sent} bytes for {total_size(d)}"
        assert sent >= total_size(d)
        # If-Match is checked against the cache's copy
        url = cache.url("model-00002-of-00004.safetensors")
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=0-9"}), timeout=20) as r:
            etag = r.headers["ETag"]
        assert http_status(url, rng="bytes=0-9", if_match=etag)[0] == 206
        assert http_status(url, rng="bytes=0-9", if_match='"another"')[0] == 412


def test_retries_behind_the_cache(tmp):
    """The origin failing (503, a reset) reaches tensorfs through the cache,
    which keeps no error: retried, and every byte right."""
    d = os.path.join(tmp, "www")
    tensors = checkpoint(d, shards=2, per=2)
    with Nginx(d) as ng, FaultProxy(ng.ports["plain"]) as fp, FleetCache(fp.url().rstrip("/")) as cache:
        with mounted(cache.url("model.safetensors.index.json")) as m:
            fp.faults({"match": "model-", "fault": "status", "status": 503, "times": 2},
                      {"match": "model-", "fault": "reset", "after": 3000, "times": 2})
            for n, raw in tensors.items():
                with open(os.path.join(m, n), "rb") as f:
                    assert f.read() == raw
            counters = os.getxattr(m, "user.counters").decode()
            assert " retries=0 " not in counters, counters


def hub_config(tmp, root, cdn, repos, **extra):
    conf = os.path.join(tmp, "hub.json")
    with open(conf, "w") as f:
        json.dump({"cdn": cdn, "cdn_root": root, "token": TOKEN, "page_size": 2, "cdn_secret": SECRET,
                   "sign_ttl": 30, "repos": repos, **extra}, f)
    return conf


@pytest.fixture
def hf_env(tmp):
    saved = dict(os.environ)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "XDG_CACHE_HOME",
              "HF_ENDPOINT", "http_proxy", "https_proxy", "all_proxy", "HTTPS_PROXY", "ALL_PROXY",
              "no_proxy", "NO_PROXY"):
        os.environ.pop(k, None)
    os.environ["HF_HOME"] = os.path.join(tmp, "hfhome")
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def hub_fleet(tmp, hf_env):
    """A Hub double whose LFS files are on a signing nginx CDN, with a
    public and a gated repository of one checkpoint."""
    root = os.path.join(tmp, "cdn")
    tensors = checkpoint(os.path.join(root, "fleet"))
    with Nginx(root, extra_servers={"signed": SIGNED}) as cdn:
        repos = {"org/fleet": {"refs": {"main": COMMIT}, "commits": {COMMIT: "fleet"}, "cdn": "signed"},
                 "org/gated": {"refs": {"main": COMMIT}, "commits": {COMMIT: "fleet"}, "cdn": "signed",
                               "gated": True}}
        with HubDouble(hub_config(tmp, root, cdn.url("signed").rstrip("/"), repos)) as hub:
            hub.cdn, hub.tensors, hub.dir = cdn, tensors, os.path.join(root, "fleet")
            yield hub


def test_four_nodes_behind_the_cache_from_the_hub(hub_fleet):
    hub, cdn = hub_fleet, hub_fleet.cdn
    with FleetCache(hub.endpoint, FLEET_CACHE_HUB="1", FLEET_CACHE_VALID="1s") as cache:
        four_nodes("hf://org/fleet", hub.tensors, "-o", f"hf_endpoint={cache.endpoint}")
        filled = time.time()
        sent = origin_bytes(cdn, cdn.ports["signed"])
        lfs = sum(os.path.getsize(os.path.join(hub.dir, f)) for f in os.listdir(hub.dir)
                  if f.endswith(".safetensors"))
        assert lfs <= sent <= 1.25 * lfs, f"the CDN sent {sent} bytes for {lfs}"
        # every CDN request came with a signature of its own, and none
        # carried the token; the cache keyed the bytes without them
        gets = [r for r in cdn.requests() if r["port"] == cdn.ports["signed"]]
        assert all(r["status"] == 206 and r["auth"] == "-" for r in gets), gets
        # the pinned commit, the LFS sha256 and one version, through the cache
        with mounted("hf://org/fleet/model-00001-of-00004.safetensors", "-o",
                     f"hf_endpoint={cache.endpoint}") as m:
            w = os.path.join(m, "layers.0.weight")
            assert os.getxattr(w, "user.revision").decode() == COMMIT
            assert os.getxattr(w, "user.etag").decode() == '"%s"' % hashlib.sha256(
                open(os.path.join(hub.dir, "model-00001-of-00004.safetensors"), "rb").read()).hexdigest()
        r = run(["--verify", "-o", f"hf_endpoint={cache.endpoint}", "hf://org/fleet"])
        assert r.returncode == 0, r.stdout + r.stderr
        # the shards against their LFS sha256 (the X-Linked-Etag the cache kept)
        assert "4 checked, 0 mismatched" in r.stderr and "X-Linked-Etag" not in r.stderr, r.stderr
        # the bytes were resolved at the commit only (a branch is asked
        # for with HEAD, to pin it, and the cache sends that to the commit)
        seen = [s for s in hub.seen() if "/resolve/" in s["path"]]
        assert seen and all(f"/resolve/{COMMIT}/" in s["path"] for s in seen if s["method"] == "GET"), seen
        # a file at a commit is kept past FLEET_CACHE_VALID: it never changes
        time.sleep(max(0, filled + 2.2 - time.time()))
        req = urllib.request.Request(resolve_url(cache, "org/fleet", "model-00001-of-00004.safetensors"),
                                     headers={"Range": "bytes=0-9"})
        with urllib.request.urlopen(req, timeout=20) as r:
            assert r.headers["X-Cache-Status"] == "HIT"


def test_a_cache_that_drops_the_lfs_hash_is_named(tmp, hf_env):
    """In front of the Hub, a cache or proxy that does not pass
    X-Linked-Etag on (not the shipped recipe) takes the LFS sha256 from
    --verify: tensorfs says so in one line, and the bytes stay right."""
    root = os.path.join(tmp, "cdn")
    tensors = checkpoint(os.path.join(root, "fleet"), shards=2, per=1)
    with Nginx(root, extra_servers={"signed": SIGNED}) as cdn:
        repos = {"org/fleet": {"refs": {"main": COMMIT}, "commits": {COMMIT: "fleet"}, "cdn": "signed"}}
        # (one page of listing: a plain proxy would pass the Hub's next-page
        # link on as it is, which tensorfs refuses as another host's)
        with HubDouble(hub_config(tmp, root, cdn.url("signed").rstrip("/"), repos, page_size=1000)) as hub:
            drop = {"drop": f"proxy_pass {hub.endpoint}; proxy_hide_header X-Linked-Etag;"}
            with Nginx(root, extra_servers=drop) as mid:
                endpoint = mid.url("drop").rstrip("/")
                r = run(["--verify", "-o", f"hf_endpoint={endpoint}", "hf://org/fleet"])
                assert r.returncode == 0, r.stderr
                lines = [l for l in r.stderr.splitlines() if "X-Linked-Etag" in l]
                assert len(lines) == 1 and f"{endpoint} gives no X-Linked-Etag" in lines[0], r.stderr
                with mounted("hf://org/fleet", "-o", f"hf_endpoint={endpoint}") as m:
                    for n, raw in tensors.items():
                        with open(os.path.join(m, n), "rb") as f:
                            assert f.read() == raw


def resolve_url(cache, repo, name):
    return cache.url(f"{repo}/resolve/{COMMIT}/{name}")


def http_status(url, token=None, rng="bytes=0-99", if_match=None):
    headers = {"Range": rng}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if if_match:
        headers["If-Match"] = if_match
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_gated_repositories_are_not_opened_to_the_network(hub_fleet):
    """The default keys the slices by token: bytes a node fetched with its
    token are not served to a request without it (or with another)."""
    hub = hub_fleet
    name = "model-00001-of-00004.safetensors"
    want = open(os.path.join(hub.dir, name), "rb").read()[:100]
    with FleetCache(hub.endpoint, FLEET_CACHE_HUB="1") as cache:
        url = resolve_url(cache, "org/gated", name)
        assert http_status(url, TOKEN) == (206, want)
        assert http_status(url)[0] == 401
        assert http_status(url, "hf_someone_else")[0] == 401
        os.environ["HF_TOKEN"] = TOKEN
        os.environ["HF_ENDPOINT"] = cache.endpoint  # as -o hf_endpoint= elsewhere
        with mounted("hf://org/gated/" + name) as m:
            with open(os.path.join(m, "layers.0.weight"), "rb") as f:
                assert f.read() == hub.tensors["layers.0.weight"]
    with FleetCache(hub.endpoint, FLEET_CACHE_HUB="1", FLEET_CACHE_AUTH="refuse") as cache:
        url = resolve_url(cache, "org/fleet", name)
        assert http_status(url)[0] == 206
        code, body = http_status(url, TOKEN)
        assert code == 403 and b"FLEET_CACHE_AUTH" in body
    # shared: as documented, anyone reaching the cache reads what a token fetched
    with FleetCache(hub.endpoint, FLEET_CACHE_HUB="1", FLEET_CACHE_AUTH="shared") as cache:
        url = resolve_url(cache, "org/gated", name)
        assert http_status(url)[0] == 401
        assert http_status(url, TOKEN) == (206, want)
        assert http_status(url) == (206, want)


def read_chunks(path, old, chunk=64 << 10):
    """Reads the file in chunks: each is the old bytes at its offset, or
    the read fails with EIO (and the file is not read further). 'old',
    'eio' or 'mixed'."""
    try:
        with open(path, "rb", buffering=0) as f:
            off = 0
            while True:
                b = f.read(chunk)
                if not b:
                    return "old"
                if b != old[off:off + len(b)]:
                    return "mixed"
                off += len(b)
    except OSError as e:
        assert e.errno == errno.EIO, e
        return "eio"


def replace(path, seed):
    """The origin's file replaced by another of the same size (a new mtime,
    so a new ETag), as a publisher does: a new file renamed over it."""
    raw = bytearray(open(path, "rb").read())
    hdr = 8 + int.from_bytes(raw[:8], "little")
    raw[hdr:] = __import__("random").Random(seed).randbytes(len(raw) - hdr)
    with open(path + ".new", "wb") as f:
        f.write(raw)
    st = os.stat(path)
    os.utime(path + ".new", (st.st_mtime + 100, st.st_mtime + 100))
    os.chmod(path + ".new", 0o644)
    os.replace(path + ".new", path)
    return bytes(raw), hdr


def test_origin_object_replaced_mid_read(tmp):
    d = os.path.join(tmp, "www")
    tensors = checkpoint(d, shards=1, per=6)
    shard = os.path.join(d, "model-00001-of-00001.safetensors")
    log = os.path.join(tmp, "tfs.log")
    with Nginx(d) as ng, FleetCache(ng.url("plain").rstrip("/"), FLEET_CACHE_VALID=f"{VALID_S}s") as cache:
        url = cache.url(os.path.basename(shard))
        # another node read the start: its slices are in the cache
        assert http_status(url, rng=f"bytes=0-{2 * MiB - 1}")[0] == 206
        with mounted(url, "-o", f"logfile={log}") as m:
            names = sorted(tensors, key=lambda n: int(n.split(".")[1]))
            assert read_chunks(os.path.join(m, names[0]), tensors[names[0]]) == "old"
            new, hdr = replace(shard, 7)
            # the rest: old slices from the cache, new ones from the origin
            seen = [read_chunks(os.path.join(m, n), tensors[n]) for n in names[1:]]
            assert "mixed" not in seen and "eio" in seen, seen
            counters = os.getxattr(m, "user.counters").decode()
            # a read of a file known to have changed fails at once: no retry
            assert " retries=0 " in counters, counters
            # and the pinned mount stays pinned: old bytes or EIO
            seen = [read_chunks(os.path.join(m, n), tensors[n]) for n in names]
            assert "mixed" not in seen, seen
        with open(log) as f:
            assert f.read().count("changed since it was mounted") == 1
        # past the staleness bound, a fresh mount has the new version
        time.sleep(VALID_S + 1.2)
        with mounted(url) as m:
            for n in names:
                with open(os.path.join(m, n), "rb") as f:
                    got = f.read()
                assert got != tensors[n] and len(got) == len(tensors[n])
            with open(shard, "rb") as f:
                assert f.read() == new


def test_the_recipe_refuses_what_it_cannot_serve(tmp):
    run_ = ShippedCache.RUN
    for args, msg in [(["ftp://x/", "1", tmp], "http:// or https://"),
                      (["http://u:p@h/", "1", tmp], "credentials"),
                      (["https://huggingface.co/sub", "1", tmp], "no path"),
                      (["http://h/", "x y", tmp], "LISTEN_PORT"),
                      (["http://h/"], "usage")]:
        r = subprocess.run([run_] + args, capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, FLEET_CACHE_USER="root"))
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    r = subprocess.run([run_, "http://h/", "1", tmp], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, FLEET_CACHE_AUTH="open"))
    assert r.returncode == 2 and "FLEET_CACHE_AUTH" in r.stderr


# ---- the recipe's own checks: what it writes, where, and when it says ready ----

WORKERS = "www-data"  # the recipe's FLEET_CACHE_USER by default


def recipe(args, **env):
    """Runs the recipe, which should refuse: (exit status, stderr). One
    that starts nginx instead is stopped after 20 s."""
    p = subprocess.Popen([ShippedCache.RUN] + args, env=dict(os.environ, **{"FLEET_CACHE_USER": "root", **env}),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        err = p.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        stop_proc(p)
        err = p.communicate()[1]
    return p.returncode, err


def refused(args, code=2, **env):
    """The recipe refuses with one line and exit status `code`: the line."""
    rc, err = recipe(args, **env)
    assert rc == code and len(err.strip().splitlines()) == 1, (args, env, rc, err)
    assert "fleet-cache: ready" not in err, err
    return err


def plant(user, target, link):
    """`user` puts a symbolic link to target in place of link."""
    return as_user(user, "sh", "-c", 'rm -rf "$2" && ln -s "$1" "$2"', "sh", target, link)


def as_user(user, *cmd):
    pw = pwd.getpwnam(user)
    return subprocess.run(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", *cmd],
                          capture_output=True, text=True, timeout=30)


@pytest.fixture
def short():
    """A directory whose path is short enough for the inner server's socket
    below a CACHE_DIR in it (pytest's tmp may not be), and that the workers
    can reach (pytest's tmp is 0700)."""
    d = tempfile.mkdtemp(prefix="tfs-fleet-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def as_root(short):
    """For the recipe started as root with its workers as www-data: a
    directory those workers can reach."""
    if os.getuid() != 0 or not shutil.which("setpriv"):
        missing("root and setpriv (the recipe started as root, its workers' user acting)")
    try:
        pwd.getpwnam(WORKERS)
    except KeyError:
        missing(f"the user {WORKERS}")
    return short


def origin_dir(tmp):
    d = os.path.join(tmp, "www")
    os.makedirs(d)
    with open(os.path.join(d, "f.bin"), "wb") as f:
        f.write(os.urandom(3 * MiB))
    return d


def served(cache, d, name="f.bin"):
    """The cache serves a range of `name` as the origin (directory d) has it."""
    with open(os.path.join(d, name), "rb") as f:
        want = f.read()[:100]
    return http_status(cache.url(name)) == (206, want)


def test_the_recipe_started_as_root_gives_the_workers_only_their_slices(tmp, as_root):
    """Issue 44, 1: CACHE_DIR and its run/ (config, pid, socket, nginx's
    temporary directories) stay root's, and the workers' user owns only
    slices/. That user cannot plant a link where root writes at the next
    start, and the links it could plant in a CACHE_DIR of the recipe before
    (all of it theirs) are not followed."""
    d = origin_dir(tmp)
    cdir = os.path.join(as_root, "cache")
    conf, pid, private = (os.path.join(as_root, n) for n in ("conf", "pid", "private"))
    for p in (conf, pid):
        with open(p, "w") as f:
            f.write("root's\n")
    os.mkdir(private, 0o700)
    www = pwd.getpwnam(WORKERS).pw_uid

    def untouched():
        for p in (conf, pid):
            assert open(p).read() == "root's\n" and os.stat(p).st_uid == 0, p
        st = os.lstat(private)
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700 and os.listdir(private) == []

    def layout():
        for p in (cdir, os.path.join(cdir, "run")):
            st = os.lstat(p)
            assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022, p
        st = os.lstat(os.path.join(cdir, "slices"))
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == www and stat.S_IMODE(st.st_mode) == 0o700

    plants = {"run/nginx.conf.tmp": conf, "run/nginx.conf": conf, "run/nginx.pid": pid, "run/body": private}
    with Nginx(d) as ng:
        origin = ng.url("plain").rstrip("/")
        with FleetCache(origin, cache_dir=cdir, FLEET_CACHE_USER=WORKERS) as cache:
            assert served(cache, d)
        planted = [plant(WORKERS, target, os.path.join(cdir, name)) for name, target in plants.items()]
        with FleetCache(origin, cache_dir=cdir, FLEET_CACHE_USER=WORKERS) as cache:
            assert served(cache, d)
        untouched()
        assert all(r.returncode != 0 and "Permission denied" in r.stderr for r in planted), planted
        assert as_user(WORKERS, "test", "-w", os.path.join(cdir, "run")).returncode != 0
        layout()
        # what the recipe left before: all of CACHE_DIR the workers'
        for where in (plants, {"run": private}):
            subprocess.run(["chown", "-R", WORKERS, cdir], check=True)
            for name, target in where.items():
                r = plant(WORKERS, target, os.path.join(cdir, name))
                assert r.returncode == 0, r.stderr
            with FleetCache(origin, cache_dir=cdir, FLEET_CACHE_USER=WORKERS) as cache:
                assert served(cache, d)
            untouched()
            layout()
        # a slices/ that is a link: refused, never given to the workers
        subprocess.run(["chown", WORKERS, cdir], check=True)
        assert as_user(WORKERS, "mv", os.path.join(cdir, "slices"), os.path.join(cdir, "old")).returncode == 0
        assert plant(WORKERS, private, os.path.join(cdir, "slices")).returncode == 0
        err = refused([origin, f"127.0.0.1:{free_port()}", cdir], FLEET_CACHE_USER=WORKERS)
        assert f"{cdir}/slices" in err and "symbolic link" in err, err
        untouched()


def test_the_recipe_runs_its_workers_as_nobody(tmp, as_root):
    """FLEET_CACHE_USER=nobody: nginx's user line names nobody's group
    (nogroup; nginx would look for a group named after the user), and the
    slices are nobody's."""
    d = origin_dir(tmp)
    cdir = os.path.join(as_root, "cache")
    with Nginx(d) as ng, FleetCache(ng.url("plain").rstrip("/"), cache_dir=cdir, FLEET_CACHE_USER="nobody") as cache:
        assert served(cache, d)
        assert os.lstat(os.path.join(cdir, "slices")).st_uid == pwd.getpwnam("nobody").pw_uid


def test_the_recipe_refuses_a_link_planted_for_its_access_log(tmp, as_root):
    """nginx's master opens FLEET_CACHE_ACCESS_LOG as root: a log in a
    directory another user can write (a link could be planted there) is
    refused, and so is a log that is a link."""
    victim = os.path.join(as_root, "victim")
    with open(victim, "w") as f:
        f.write("root's\n")
    shared = os.path.join(as_root, "shared")
    os.mkdir(shared)
    os.chown(shared, pwd.getpwnam(WORKERS).pw_uid, -1)
    assert plant(WORKERS, victim, os.path.join(shared, "access.log")).returncode == 0
    cdir = os.path.join(as_root, "c")
    err = refused(["http://127.0.0.1:9/", f"127.0.0.1:{free_port()}", cdir],
                  FLEET_CACHE_ACCESS_LOG=os.path.join(shared, "access.log"))
    assert "FLEET_CACHE_ACCESS_LOG" in err and shared in err and WORKERS in err, err
    os.symlink(victim, os.path.join(as_root, "access.log"))
    err = refused(["http://127.0.0.1:9/", f"127.0.0.1:{free_port()}", cdir],
                  FLEET_CACHE_ACCESS_LOG=os.path.join(as_root, "access.log"))
    assert "FLEET_CACHE_ACCESS_LOG" in err and "symbolic link" in err, err
    assert open(victim).read() == "root's\n"


# A directory name nginx would cut at ; and { and # unquoted
ODD = "a b;c{d}#e'f\"g\\h"


def test_the_recipe_quotes_what_it_writes_into_nginx_conf(tmp, short):
    r"""Issue 44, 4: CACHE_DIR, FLEET_CACHE_CA and FLEET_CACHE_ACCESS_LOG with
    a space, ; { } # ' " or \ are written quoted and work; a value nginx
    cannot take as it is ($, a control character, a : in CACHE_DIR) or that
    is not what its variable takes is refused, and nothing is injected."""
    d = origin_dir(tmp)
    inj = os.path.join(tmp, "injected.log")
    ca_src = "/etc/ssl/certs/ca-certificates.crt"
    if not os.path.exists(ca_src):
        missing("ca-certificates")
    ca = os.path.join(tmp, f"ca {ODD}.pem")
    shutil.copy(ca_src, ca)
    log = os.path.join(tmp, f"access {ODD}.log")
    cdir = os.path.join(short, ODD, "c")
    with Nginx(d) as ng:
        origin = ng.url("plain").rstrip("/")
        with FleetCache(origin, cache_dir=cdir, FLEET_CACHE_CA=ca, FLEET_CACHE_ACCESS_LOG=log) as cache:
            assert served(cache, d)
            assert any(fs for _, _, fs in os.walk(os.path.join(cdir, "slices")))
        with open(log) as f:
            assert "GET /f.bin" in f.read()
        listen = f"127.0.0.1:{free_port()}"
        for args, env, words in [
                ([origin, listen, os.path.join(tmp, "x$y", "c")], {}, ["CACHE_DIR", "'$'"]),
                ([origin, listen, os.path.join(tmp, "x:y", "c")], {}, ["CACHE_DIR", "':'"]),
                ([origin, listen, os.path.join(tmp, "x\ny", "c")], {}, ["CACHE_DIR", "control character"]),
                ([origin, listen, cdir], {"FLEET_CACHE_ACCESS_LOG": f"{tmp}/a.log; error_log {inj}; access_log {tmp}/b.log"},
                 ["FLEET_CACHE_ACCESS_LOG", "no directory"]),
                ([origin, listen, cdir], {"FLEET_CACHE_ACCESS_LOG": f"{tmp}/$host.log"}, ["FLEET_CACHE_ACCESS_LOG", "'$'"]),
                ([origin, listen, cdir], {"FLEET_CACHE_CA": f"{tmp}/$ca.pem"}, ["FLEET_CACHE_CA", "'$'"]),
                ([origin, listen, cdir], {"FLEET_CACHE_RESOLVER": f"127.0.0.1 valid=1s; error_log {inj};#"},
                 ["FLEET_CACHE_RESOLVER", "'valid=1s;'"]),
                ([origin, listen, cdir], {"FLEET_CACHE_VALID": f"60s\n; error_log {inj}"},
                 ["FLEET_CACHE_VALID", "control character"]),
                ([origin, listen, cdir], {"FLEET_CACHE_USER": "root; error_log"}, ["FLEET_CACHE_USER"])]:
            err = refused(args, **env)
            assert all(w in err for w in words), (args, env, err)
            assert not os.path.exists(inj), (args, env, err)


def test_the_recipe_never_echoes_an_origins_credentials(tmp):
    """Issue 44, 4: a URL's user:password@ or TOKEN@ is left out of every
    message, whatever the scheme and its case; the scheme's case is not
    the recipe's business."""
    for origin, words in [("HTTP://user:pw-secret@h/", "credentials"), ("hTTps://pw-secret@h", "credentials"),
                          ("ftp://user:pw-secret@h/", "not 'ftp://h/'"), ("FTP://pw-secret@h/x", "not 'FTP://h/x'"),
                          ("user:pw-secret@h/x", "not 'h/x'")]:
        err = refused([origin, "1", tmp])
        assert words in err and "pw-secret" not in err, err
    # an upper-case scheme passes (the next check speaks)
    assert "LISTEN_PORT" in refused(["HTTP://h/", "x y", tmp])


def test_the_recipe_says_ready_only_once_nginx_answers(tmp, as_root):
    """Issue 44, 15: what would keep nginx from serving is found before the
    recipe says it is ready, and it says so once nginx answers."""
    d = origin_dir(tmp)
    www = pwd.getpwnam(WORKERS).pw_uid
    with Nginx(d) as ng:
        origin = ng.url("plain").rstrip("/")
        # a CACHE_DIR below a directory the workers cannot enter
        closed = os.path.join(as_root, "closed")
        os.mkdir(closed, 0o700)
        err = refused([origin, f"127.0.0.1:{free_port()}", os.path.join(closed, "c")], FLEET_CACHE_USER=WORKERS)
        assert f"{WORKERS} cannot enter {closed}" in err, err
        # a CACHE_DIR that is a symbolic link: the directory it names is the cache's
        real, link = os.path.join(as_root, "real"), os.path.join(as_root, "link")
        os.mkdir(real)
        os.symlink(real, link)
        with FleetCache(origin, cache_dir=link, FLEET_CACHE_USER=WORKERS) as cache:
            assert served(cache, d)
            assert os.lstat(os.path.join(real, "slices")).st_uid == www
        # a port already taken
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            err = refused([origin, f"127.0.0.1:{port}", os.path.join(as_root, "c")], code=3)
            assert f"127.0.0.1:{port}" in err and "taken" in err, err
        # nginx refusing to start (a CA file that is none): its own message, then one line of the recipe's
        bad_ca = os.path.join(tmp, "ca.pem")
        with open(bad_ca, "w") as f:
            f.write("not a certificate\n")
        rc, err = recipe([origin, f"127.0.0.1:{free_port()}", os.path.join(as_root, "c")], FLEET_CACHE_CA=bad_ca)
        assert rc == 3 and "fleet-cache: ready" not in err, err
        assert err.strip().splitlines()[-1].startswith("fleet-cache: nginx exited"), err
        # ready: said once nginx answers, and not before
        port = free_port()
        p = subprocess.Popen([ShippedCache.RUN, origin, f"127.0.0.1:{port}", os.path.join(as_root, "c")],
                             env=dict(os.environ, FLEET_CACHE_USER="root"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        try:
            deadline, line = time.time() + 20, ""
            while "fleet-cache: ready" not in line and time.time() < deadline:
                if select.select([p.stderr], [], [], 0.5)[0]:
                    line = p.stderr.readline()
                    if not line:
                        break
            assert line.startswith(f"fleet-cache: ready on 127.0.0.1:{port}: {origin} "), line
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
        finally:
            stop_proc(p)
        assert p.returncode == 0


# ---- -o proxy= ----

PROXY_CREDS = "squid:proxy-secret-pw"


def cmdline(mnt):
    pid = daemon_pids(mnt)[0]
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def test_proxy_option_sends_requests_through_the_proxy(tmp, hf_env):
    d = os.path.join(tmp, "www")
    tensors = checkpoint(d, shards=2, per=2)
    with Nginx(d) as ng, FwdProxy(PROXY_CREDS) as px:
        url = ng.url("plain", "model.safetensors.index.json")
        with mounted(url, "-o", f"proxy={px.url(PROXY_CREDS)},cache_size=64M") as m:
            for n, raw in tensors.items():
                with open(os.path.join(m, n), "rb") as f:
                    assert f.read() == raw
            shown = cmdline(m)
            assert "proxy-secret-pw" not in shown and "proxy=http://" + "*" * len(PROXY_CREDS) + "@" in shown, shown
        seen = px.get("/__seen")
        assert len(seen) == len(ng.requests()) > 4
        assert all(s["target"].startswith(f"http://127.0.0.1:{ng.ports['plain']}/") for s in seen)
        # the proxy's credentials go to the proxy, which does not pass them on
        assert all(s["headers"]["proxy-authorization"].startswith("Basic ") for s in seen)
        # the environment's proxy is curl's: used without -o proxy=, and
        # -o proxy= (empty) turns it off, as does no_proxy
        os.environ["http_proxy"] = px.url(PROXY_CREDS)
        for opts, through in [((), True), (("-o", "proxy="), False)]:
            before = len(px.get("/__seen"))
            with mounted(url, *opts) as m:
                with open(os.path.join(m, "layers.0.weight"), "rb") as f:
                    assert f.read() == tensors["layers.0.weight"]
            assert (len(px.get("/__seen")) > before) == through
        os.environ["no_proxy"] = "127.0.0.1"
        before = len(px.get("/__seen"))
        with mounted(url, "-o", f"proxy={px.url(PROXY_CREDS)}"):
            pass
        assert len(px.get("/__seen")) == before
        os.environ.pop("no_proxy")
        os.environ.pop("http_proxy")
        # a proxy that does not answer, or wants other credentials: one
        # line naming it, never its password
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        for proxy, words in [(f"http://squid:proxy-secret-pw@127.0.0.1:{dead}",
                              f"through the proxy http://127.0.0.1:{dead}"),
                             (px.url("squid:wrong-pw"), "407")]:
            r = run(["--inspect", "-o", f"proxy={proxy},retries=0", url])
            assert r.returncode == EXIT_SOURCE and words in r.stderr, r.stderr
            assert "pw" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run(["--inspect", "-o", "proxy=socks5://u:secretpw@h:1", "http://127.0.0.1:9/x.safetensors"])
    assert r.returncode == EXIT_USAGE and "-o proxy=" in r.stderr and "secretpw" not in r.stderr, r.stderr


def test_proxy_sees_the_hub_token_only_on_plain_http_and_never_the_cdns(tmp, hf_env):
    """docs/fleet.md: over http:// the proxy sees every request whole, the
    Hub's token with those to the Hub; the CDN's requests carry none; over
    https:// it sees only CONNECT host:port (checked at the end)."""
    root = os.path.join(tmp, "cdn")
    tensors = checkpoint(os.path.join(root, "fleet"), shards=2, per=2)
    os.environ["HF_TOKEN"] = TOKEN
    with Nginx(root) as cdn:
        repos = {"org/gated": {"refs": {"main": COMMIT}, "commits": {COMMIT: "fleet"}, "gated": True}}
        with HubDouble(hub_config(tmp, root, cdn.url("plain").rstrip("/"), repos)) as hub, FwdProxy() as px:
            with mounted("hf://org/gated", "-o", f"proxy={px.url()},hf_endpoint={hub.endpoint}") as m:
                for n, raw in tensors.items():
                    with open(os.path.join(m, n), "rb") as f:
                        assert f.read() == raw
            seen = px.get("/__seen")
            to_hub = [s for s in seen if s["target"].startswith(hub.endpoint)]
            to_cdn = [s for s in seen if s["target"].startswith(cdn.url("plain"))]
            assert to_hub and to_cdn and len(to_hub) + len(to_cdn) == len(seen)
            assert all(s["headers"].get("authorization") == f"Bearer {TOKEN}" for s in to_hub)
            assert not any("authorization" in s["headers"] for s in to_cdn)
    # https: a tunnel, and nothing of the origin's in the clear
    with socket.socket() as lst, FwdProxy() as px:
        lst.bind(("127.0.0.1", 0))
        lst.listen(4)
        port = lst.getsockname()[1]
        r = run(["--inspect", "-o", f"proxy={px.url()},hf_endpoint=https://127.0.0.1:{port},retries=0,timeout=1",
                 "hf://org/gated"])
        assert r.returncode == EXIT_SOURCE
        seen = px.get("/__seen")
        assert seen and all(s["method"] == "CONNECT" and s["target"] == f"127.0.0.1:{port}" for s in seen)
        assert all("authorization" not in s["headers"] and TOKEN not in json.dumps(s) for s in seen)


def test_proxy_never_sees_the_s3_secret(tmp, hf_env):
    root = os.path.join(tmp, "s3")
    os.makedirs(os.path.join(root, "models", "m"))
    raw = os.urandom(MiB)
    write_st(os.path.join(root, "models", "m", "model.safetensors"), [("w", "U8", (MiB,), raw)])
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")}
    with S3Double(root) as s3, FwdProxy() as px:
        os.environ.update(AWS_ACCESS_KEY_ID="AKIDTEST", AWS_SECRET_ACCESS_KEY="SECRETTEST",
                          AWS_ENDPOINT_URL=s3.endpoint)
        try:
            with mounted("s3://models/m/model.safetensors", "-o", f"proxy={px.url()}") as m:
                with open(os.path.join(m, "w"), "rb") as f:
                    assert f.read() == raw
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        seen = px.get("/__seen")
        assert seen and all(s["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
                            for s in seen)
        assert "SECRETTEST" not in json.dumps(seen)
        assert all(x["problem"] is None for x in s3.seen())
