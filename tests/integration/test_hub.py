"""hf:// sources against the Hub double (tests/lib/hubdouble.py,
the documented endpoints) with a real nginx as the CDN it redirects to:
the real checkpoints in every view, revision pinning, the token (to the
Hub, never to the CDN), gated repositories, paginated listings, hostile
listings, renamed repositories, and the local Hugging Face cache with and
without the network."""

import hashlib
import json
import os
import subprocess
import shutil
import tempfile
import time

import pytest

from servers import HubDouble, Nginx
from tfsutil import (EXIT_FORMAT, EXIT_SOURCE, EXIT_USAGE, REAL, fname, hf_cache, mounted, need_real, run,
                     sha256, write_st)

C1 = "1" * 40
C2 = "2" * 40
C3 = "3" * 40
TOKEN = "hf_test_token_abc"
ROTATE_BYTES = 8 << 20


def rotate_bytes():
    return hashlib.shake_256(b"rotate").digest(ROTATE_BYTES)


def layout(root):
    """The CDN's files, one directory per commit, and the double's config."""
    def put(commit_dir, rel, src=None, tensors=None):
        p = os.path.join(root, commit_dir, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if src:
            shutil.copyfile(src, p)
        else:
            write_st(p, tensors)
        return p

    if os.path.isdir(REAL):
        for f in os.listdir(REAL):
            if f.endswith(".safetensors"):
                put("files", f, os.path.join(REAL, f))
        for f in os.listdir(os.path.join(REAL, "julia-safetensors-jl-sharded")):
            put("julia", f, os.path.join(REAL, "julia-safetensors-jl-sharded", f))
    os.makedirs(os.path.join(root, "julia"), exist_ok=True)
    with open(os.path.join(root, "julia", "config.json"), "w") as f:
        f.write('{"model_type": "test"}')
    put("v1", "model.safetensors", tensors=[("w", "U8", (2,), b"v1")])
    put("v2", "model.safetensors", tensors=[("w", "U8", (2,), b"v2")])
    put("v2", "sub/model.safetensors", tensors=[("inner", "U8", (1,), b"i")])
    put("rotate", "model.safetensors", tensors=[("w", "U8", (ROTATE_BYTES,), rotate_bytes())])
    for i in range(9):
        put("many", f"model-{i + 1:05d}-of-00009.safetensors", tensors=[(f"t{i}", "U8", (1,), bytes([i]))])
    # a diffusers pipeline: checkpoints in some subfolders only
    put("pipe", "unet/diffusion_pytorch_model.safetensors", tensors=[("u", "U8", (64,), b"u" * 64)])
    put("pipe", "vae/diffusion_pytorch_model.safetensors", tensors=[("v", "U8", (8,), b"v" * 8)])
    os.makedirs(os.path.join(root, "pipe", "scheduler"), exist_ok=True)
    with open(os.path.join(root, "pipe", "scheduler", "scheduler_config.json"), "w") as f:
        f.write("{}")
    os.makedirs(os.path.join(root, "two"), exist_ok=True)
    for n in ("model.safetensors.index.json", "other.safetensors.index.json"):
        with open(os.path.join(root, "two", n), "w") as f:
            json.dump({"weight_map": {}}, f)
    for r, dirs, files in os.walk(root):
        os.chmod(r, 0o755)
        for f in files:
            os.chmod(os.path.join(r, f), 0o644)
    repos = {
        "org/files": {"refs": {"main": C1}, "commits": {C1: "files"}},
        "org/julia": {"refs": {"main": C1}, "commits": {C1: "julia"}},
        "org/versions": {"refs": {"main": C2, "v1": C1, "refs/pr/1": C3},
                         "commits": {C1: "v1", C2: "v2", C3: "v1"}},
        "org/gated": {"gated": True, "refs": {"main": C1}, "commits": {C1: "v1"}},
        "org/many": {"refs": {"main": C1}, "commits": {C1: "many"}},
        "org/two": {"refs": {"main": C1}, "commits": {C1: "two"}},
        "org/pipe": {"refs": {"main": C1}, "commits": {C1: "pipe"}},
        "org/dotdot": {"refs": {"main": C1}, "commits": {C1: "v1"}, "hostile": "dotdot"},
        "org/foreign": {"refs": {"main": C1}, "commits": {C1: "many"}, "hostile": "foreign_link"},
        "org/data": {"type": "datasets", "refs": {"main": C1}, "commits": {C1: "v1"}},
        "org/lfs": {"refs": {"main": C1}, "commits": {C1: "v2"}, "cdn": "self"},
        "org/tampered": {"refs": {"main": C1}, "commits": {C1: "v2"}, "cdn": "self", "tamper": True},
        "org/rotate": {"gated": True, "refs": {"main": C1}, "commits": {C1: "rotate"}, "cdn": "self"},
        "org/login": {"refs": {"main": C1}, "commits": {C1: "rotate"}, "cdn": "self"},
    }
    return repos


@pytest.fixture(scope="module")
def hub():
    root = tempfile.mkdtemp(prefix="tfs-cdn-")
    os.chmod(root, 0o755)
    repos = layout(root)
    with Nginx(root) as cdn:
        conf = os.path.join(root, "hub.json")
        with open(conf, "w") as f:
            json.dump({"cdn": cdn.url("plain").rstrip("/"), "cdn_root": root, "token": TOKEN,
                       "page_size": 2, "repos": repos, "renamed": {"old/name": "org/versions"}}, f)
        with HubDouble(conf) as h:
            h.cdn = cdn
            h.root = root
            yield h
    shutil.rmtree(root)


@pytest.fixture
def env(hub, tmp):
    """A clean Hugging Face environment: the double as the endpoint, an
    empty HF_HOME, no token."""
    saved = dict(os.environ)
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "XDG_CACHE_HOME"):
        os.environ.pop(k, None)
    os.environ["HF_ENDPOINT"] = hub.endpoint
    os.environ["HF_HOME"] = os.path.join(tmp, "hfhome")
    yield
    os.environ.clear()
    os.environ.update(saved)


def tree_bytes(mnt):
    out = {}
    for root, dirs, files in os.walk(mnt):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), mnt)] = hashlib.sha256(fh.read()).hexdigest()
    return out


VIEWS = [(), ("-o", "format=npy"), ("-o", "convert=f32,layout=tree")]


def test_real_checkpoints_from_the_hub(hub, env):
    """Every real single file (by PATH) and the sharded set (the whole
    repository: its index is found in the listing) give the local mount's
    bytes in every view, and the tensors of expected.json."""
    need_real()
    exp = json.load(open(os.path.join(REAL, "expected.json")))["files"]
    sources = [(f"hf://org/files/{f}", os.path.join(REAL, f))
               for f in sorted(os.listdir(REAL)) if f.endswith(".safetensors")]
    sources.append(("hf://org/julia", os.path.join(REAL, "julia-safetensors-jl-sharded")))
    for url, local in sources:
        for view in VIEWS:
            with mounted(local, *view) as a, mounted(url, *view) as b:
                assert tree_bytes(a) == tree_bytes(b), (url, view)
        with mounted(url) as b:
            for rel, e in exp.items():
                if e["kind"] != "safetensors" or not (rel == os.path.basename(local) or
                                                       rel.startswith("julia") and url.endswith("julia")):
                    continue
                for name, t in e["tensors"].items():
                    p = os.path.join(b, fname(name))
                    assert sha256(p) == t["sha256"]
                    assert os.getxattr(p, "user.revision").decode() == C1
                    src = os.getxattr(p, "user.source").decode()
                    assert src.startswith(f"{hub.endpoint}/org/") and f"/resolve/{C1}/" in src
                    assert os.getxattr(p, "user.etag").decode().startswith('"')
        a = json.loads(run(["--inspect", "--json", local]).stdout)
        b = json.loads(run(["--inspect", "--json", url]).stdout)
        a.pop("source"), b.pop("source")
        assert a == b


def read(mnt, name):
    with open(os.path.join(mnt, name), "rb") as f:
        return f.read()


def test_revisions_are_pinned(hub, env):
    with mounted("hf://org/versions") as m:
        assert read(m, "w") == b"v2"
        assert os.getxattr(os.path.join(m, "w"), "user.revision").decode() == C2
    with mounted("hf://org/versions@v1") as m:
        assert read(m, "w") == b"v1"
        assert os.getxattr(os.path.join(m, "w"), "user.revision").decode() == C1
    with mounted(f"hf://org/versions@{C2}/sub/model.safetensors") as m:
        assert read(m, "inner") == b"i"
    with mounted("hf://org/versions@refs%2Fpr%2F1") as m:
        assert os.getxattr(os.path.join(m, "w"), "user.revision").decode() == C3
    with mounted("hf://org/versions/sub") as m:  # a directory of the repository
        assert read(m, "inner") == b"i"
    with mounted("hf://datasets/org/data") as m:
        assert read(m, "w") == b"v1"
    with mounted("hf://old/name/model.safetensors") as m:  # a renamed repository
        assert read(m, "w") == b"v2"


def cdn_auth(hub):
    return {r["auth"] for r in hub.cdn.requests()}


@pytest.mark.parametrize("how", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "file"])
def test_token_goes_to_the_hub_only(hub, env, tmp, how):
    r = run(["--inspect", "hf://org/gated"])
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1
    assert "set HF_TOKEN" in r.stderr and "HTTP 401" in r.stderr
    if how == "file":
        os.makedirs(os.environ["HF_HOME"], exist_ok=True)
        with open(os.path.join(os.environ["HF_HOME"], "token"), "w") as f:
            f.write(TOKEN + "\n")
    else:
        os.environ[how] = TOKEN
    hub.cdn.clear_log()
    before = len(hub.seen())
    with mounted("hf://org/gated") as m:
        assert read(m, "w") == b"v1"
        for a in os.listxattr(os.path.join(m, "w")):
            assert TOKEN.encode() not in os.getxattr(os.path.join(m, "w"), a)
    seen = [s for s in hub.seen()[before:] if not s["path"].startswith("/__")]
    assert seen and all(s["token_ok"] for s in seen)  # every Hub request had it
    assert cdn_auth(hub) == {"-"}  # and the CDN never saw it
    os.environ["HF_TOKEN"] = "hf_wrong"
    r = run(["--inspect", "hf://org/gated"])
    assert r.returncode == EXIT_SOURCE and "refuses the token" in r.stderr and "hf_wrong" not in r.stderr


def test_paginated_listing(hub, env):
    """Two entries a page: nine shards over five pages and more."""
    before = len(hub.seen())
    with mounted("hf://org/many") as m:
        for i in range(9):
            assert read(m, f"t{i}") == bytes([i])
    pages = [s for s in hub.seen()[before:] if "/tree/" in s["path"]]
    assert len(pages) >= 5


@pytest.mark.parametrize("repo, code, want", [
    ("org/two", EXIT_FORMAT, "2 index files (model.safetensors.index.json, other.safetensors.index.json)"),
    ("org/pipe", EXIT_FORMAT, "; 2 of its 3 subfolders hold one (unet/, vae/): mount one of them "
                              "(hf://org/pipe/unet, the largest)\n"),
    ("org/dotdot", EXIT_FORMAT, "unsafe path '../../etc/passwd'"),
    ("org/foreign", EXIT_FORMAT, "points its next page at another host"),
    ("org/none", EXIT_SOURCE, "not on the Hub (HTTP 404)"),
    ("org/versions@nope", EXIT_SOURCE, "not on the Hub (HTTP 404)"),
])
def test_refusals(hub, env, tmp, repo, code, want):
    r = run([f"hf://{repo}", tmp])
    assert r.returncode == code, r.stderr
    assert r.stderr.count("\n") == 1 and want in r.stderr, r.stderr


@pytest.mark.parametrize("spec", ["hf://", "hf://justone", "hf://org/", "hf://a/b@", "hf://a/b/../c",
                                  "hf://a/b/x//y", "hf://o$/r"])
def test_bad_references(env, tmp, spec):
    r = run([spec, tmp])
    assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1, (spec, r.stderr)


def test_cache_serves_what_it_holds(hub, env, tmp):
    """Files already in the Hugging Face cache for the pinned commit are
    read from it: the CDN sees no request for them."""
    hf_cache(os.path.join(os.environ["HF_HOME"], "hub"), "org/versions", C2,
             {"model.safetensors": open(os.path.join(hub.root, "v2", "model.safetensors"), "rb").read()})
    hub.cdn.clear_log()
    with mounted("hf://org/versions/model.safetensors") as m:
        assert read(m, "w") == b"v2"
        assert os.getxattr(os.path.join(m, "w"), "user.revision").decode() == C2
        assert os.getxattr(os.path.join(m, "w"), "user.etag").decode() == hashlib.sha256(
            open(os.path.join(hub.root, "v2", "model.safetensors"), "rb").read()).hexdigest()
    assert hub.cdn.requests() == []


def test_offline(hub, env, tmp):
    """HF_HUB_OFFLINE=1: only the cache, no request at all, and a clear
    error for what it lacks."""
    hf_cache(os.path.join(os.environ["HF_HOME"], "hub"), "org/versions", C2,
             {"model.safetensors": open(os.path.join(hub.root, "v2", "model.safetensors"), "rb").read()})
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing there
    def hub_requests():
        return [s for s in hub.seen() if not s["path"].startswith("/__")]
    before = len(hub_requests())
    hub.cdn.clear_log()
    with mounted("hf://org/versions") as m:
        assert read(m, "w") == b"v2"
    with mounted(f"hf://org/versions@{C2}/model.safetensors") as m:
        assert read(m, "w") == b"v2"
    assert len(hub_requests()) == before and hub.cdn.requests() == []
    r = run(["hf://org/versions/sub/model.safetensors", tmp])
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1
    assert "HF_HUB_OFFLINE=1" in r.stderr and "sub/model.safetensors" in r.stderr
    r = run(["hf://org/versions@v7", tmp])
    assert r.returncode == EXIT_SOURCE and "does not know revision 'v7'" in r.stderr
    r = run(["hf://org/julia", tmp])
    assert r.returncode == EXIT_SOURCE and "HF_HUB_OFFLINE=1" in r.stderr


def test_verify_checks_the_lfs_oid(hub, env):
    """--verify reads each LFS file whole and compares it with the SHA-256
    the Hub vouches for (X-Linked-Etag, the LFS oid): a CDN serving other
    bytes under it is caught, naming the file and both hashes (exit 6)."""
    good = run(["--verify", "hf://org/lfs"])
    assert good.returncode == 0, good.stderr
    assert "1 checked, 0 mismatched" in good.stderr
    true = hashlib.sha256(open(os.path.join(hub.root, "v2", "model.safetensors"), "rb").read()).hexdigest()
    with mounted("hf://org/lfs") as mnt:
        assert os.getxattr(os.path.join(mnt, "w"), "user.etag").decode().strip('"') == true
    bad = run(["--verify", "hf://org/tampered"])
    assert bad.returncode == 6, bad.stderr
    assert "model.safetensors" in bad.stdout and "LFS oid" in bad.stdout and true in bad.stdout
    served = bytearray(open(os.path.join(hub.root, "v2", "model.safetensors"), "rb").read())
    served[-1] ^= 1
    assert hashlib.sha256(bytes(served)).hexdigest() in bad.stdout
    js = json.loads(run(["--verify", "--json", "hf://org/tampered"]).stdout)
    assert js["ok"] is False and js["mismatches"][0]["expected"] == true


def test_fstab_line_with_hub_settings(hub, env, tmp):
    """What an fstab line can carry, with no environment: the Hub's
    address (hf_endpoint=), the token (token_file=), owners by name; a
    real `mount -T FSTAB -a` mounts it (the prog#source form, which names
    the binary by its path), and defaults (rw) is refused with a hint."""
    import shutil
    import subprocess
    from tfsutil import BIN, EXIT_USAGE, is_mounted, missing
    if os.getuid() != 0 or not shutil.which("mount") or not os.path.exists("/usr/sbin/mount.fuse3") and \
            not os.path.exists("/sbin/mount.fuse3"):
        missing("root, mount(8) and mount.fuse3 (to mount from an fstab line)")
    tok = os.path.join(tmp, "token")
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    fstab = os.path.join(tmp, "fstab")
    opts = f"ro,hf_endpoint={hub.endpoint},token_file={tok},uid=nobody,gid=nogroup"
    with open(fstab, "w") as f:
        f.write(f"# tensorfs from the Hub\n{BIN}#hf://org/gated {mnt} fuse {opts} 0 0\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    clean["HF_HOME"] = os.path.join(tmp, "empty-home")  # no token file there
    r = subprocess.run(["mount", "-T", fstab, "-a"], capture_output=True, text=True, timeout=60, env=clean)
    try:
        assert r.returncode == 0, r.stderr
        assert is_mounted(mnt)
        assert read(mnt, "w") == b"v1"
        st = os.stat(os.path.join(mnt, "w"))
        assert (st.st_uid, st.st_gid) == (65534, 65534)
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
    assert not is_mounted(mnt)
    with open(fstab, "w") as f:
        f.write(f"{BIN}#hf://org/gated {mnt} fuse defaults,hf_endpoint={hub.endpoint},token_file={tok} 0 0\n")
    r = subprocess.run(["mount", "-T", fstab, "-a"], capture_output=True, text=True, timeout=60, env=clean)
    assert r.returncode != 0 and "as defaults means rw" in r.stderr, r.stderr
    assert not is_mounted(mnt)
    # the same settings on the command line, and an unreadable token file
    r = run(["-o", f"hf_endpoint={hub.endpoint},token_file={tmp}/absent", "--inspect", "hf://org/gated"])
    assert r.returncode == EXIT_USAGE and "token_file" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = run(["-o", "uid=no-such-user-x", "hf://org/gated", mnt])
    assert r.returncode == EXIT_USAGE and "no such user" in r.stderr


def test_unreachable_hub_falls_back_to_the_cache(hub, env, tmp):
    """No answer from the Hub (nothing listens), but the Hugging Face
    cache holds the snapshot: the mount goes on from it, with one warning
    naming why, by branch and by full commit hash, as huggingface_hub does;
    without the snapshot it fails with the real cause. HF_HUB_OFFLINE=1
    is unchanged (test_offline)."""
    hf_cache(os.path.join(os.environ["HF_HOME"], "hub"), "org/versions", C2,
             {"model.safetensors": open(os.path.join(hub.root, "v2", "model.safetensors"), "rb").read()})
    os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing there
    for ref in ("hf://org/versions", f"hf://org/versions@{C2}", f"hf://org/versions@{C2}/model.safetensors"):
        mnt = os.path.join(tmp, "m")
        os.makedirs(mnt, exist_ok=True)
        r = run([ref, mnt])
        try:
            assert r.returncode == 0, r.stderr
            lines = r.stderr.splitlines()
            assert len(lines) == 1 and "warning: no answer from the Hub at http://127.0.0.1:9" in lines[0], r.stderr
            assert f"using the Hugging Face cache's snapshot of {C2[:12]}" in lines[0]
            assert read(mnt, "w") == b"v2"
        finally:
            subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
    r = run(["hf://org/julia", tmp])
    assert r.returncode == EXIT_SOURCE and r.stderr.count("\n") == 1 and "no answer from the Hub" in r.stderr


def _write_token(path, token):
    """As a tool that renews it does: a new file renamed over the old."""
    with open(path + ".new", "w") as f:
        f.write(token + "\n")
    os.replace(path + ".new", path)


def settled(hub):
    """Until the double has seen no new request for 0.3 s (at most 10 s)."""
    n, quiet = len(hub.seen()), 0
    for _ in range(100):
        time.sleep(0.1)
        m = len(hub.seen())
        quiet = quiet + 1 if m == n else 0
        n = m
        if quiet >= 3:
            return


def test_a_token_rotated_during_a_mount_is_sent_from_the_next_request(hub, env, tmp):
    """The Hub token file is read again when it changes, before the next
    request to the Hub's host: a read that runs while the token is rotated
    (the old one revoked at the Hub) goes on with the new one, where every
    request after the rotation was refused (HTTP 401) with the token read
    at mount. A new file that cannot be used (a space in it) keeps the
    token read before, with one warning in the log."""
    tok = os.path.join(tmp, "token")
    log = os.path.join(tmp, "log")
    _write_token(tok, TOKEN)
    data = rotate_bytes()
    new = "hf_rotated_token_def"
    try:
        with mounted("hf://org/rotate", "-o", f"token_file={tok},direct_io,cache_size=4M,retries=0,logfile={log}") as m:
            fd = os.open(os.path.join(m, "w"), os.O_RDONLY)
            try:
                assert os.pread(fd, 1 << 20, 0) == data[:1 << 20]
                _write_token(tok, "not a token")  # refused: the old one stays
                assert os.pread(fd, 1 << 20, 1 << 20) == data[1 << 20:2 << 20]
                # As a real rotation: the new token valid at the Hub, then
                # written, then (the read-ahead's requests with the old one
                # answered) the old one revoked.
                subprocess.run(["curl", "-sf", "-o", "/dev/null", f"{hub.endpoint}/__token?set={new}&also={TOKEN}"],
                               check=True)
                _write_token(tok, new)
                settled(hub)
                subprocess.run(["curl", "-sf", "-o", "/dev/null", hub.endpoint + "/__token?set=" + new], check=True)
                n_before = len(hub.seen())
                got = os.pread(fd, ROTATE_BYTES, 2 << 20)
                assert got == data[2 << 20:], "the read after the rotation"
            finally:
                os.close(fd)
        after = [r for r in hub.seen()[n_before:] if r["path"].startswith("/__cdn/org/rotate/")]
        assert after and all(r["token_ok"] for r in after), after
        said = [line for line in open(log) if "token file changed" in line]
        assert len(said) == 1 and "cannot be used" in said[0], said
        assert "not a token" not in open(log).read() and new not in open(log).read()
    finally:
        subprocess.run(["curl", "-sf", "-o", "/dev/null", hub.endpoint + "/__token?set=" + TOKEN], check=True)


def test_a_login_during_a_mount_is_followed(hub, env, tmp):
    """$HF_HOME/token, not there at mount, is watched all the same: once a
    `huggingface-cli login` writes it, the next request to the Hub's host
    carries its token (the file was looked at only when it was there at
    mount); once a logout removes it, none does."""
    home = os.environ["HF_HOME"]
    data = rotate_bytes()

    def hub_reads(n):
        return [r for r in hub.seen()[n:] if r["path"].startswith("/__cdn/org/login/")]

    with mounted("hf://org/login", "-o", "direct_io,cache_size=4M,retries=0") as m:
        fd = os.open(os.path.join(m, "w"), os.O_RDONLY)
        try:
            n = len(hub.seen())
            assert os.pread(fd, 1 << 20, 0) == data[:1 << 20]
            assert hub_reads(n) and not any(r["auth"] for r in hub_reads(n))
            os.makedirs(home, exist_ok=True)
            _write_token(os.path.join(home, "token"), TOKEN)  # the login
            n = len(hub.seen())
            assert os.pread(fd, 3 << 20, 2 << 20) == data[2 << 20:5 << 20]
            assert hub_reads(n) and hub_reads(n)[-1]["token_ok"], hub_reads(n)
            os.unlink(os.path.join(home, "token"))  # the logout
            n = len(hub.seen())
            assert os.pread(fd, 3 << 20, 5 << 20) == data[5 << 20:]
            assert hub_reads(n) and not hub_reads(n)[-1]["auth"], hub_reads(n)
        finally:
            os.close(fd)


def test_default_token_file_refused_in_one_line_naming_it(hub, env, tmp):
    """$HF_HOME/token that cannot be used stops the mount in one line
    naming the file as every path is named (quoted when it holds a
    newline: the line was split in two), exit 2."""
    home = os.path.join(tmp, "hf\nhome")
    os.environ["HF_HOME"] = home
    os.makedirs(home)
    with open(os.path.join(home, "token"), "w") as f:
        f.write("hf_two words\n")
    r = run(["--inspect", "hf://org/versions"])
    assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1, r.stderr
    assert "the Hub token file '" in r.stderr and "\\x0ahome/token': refused: the token holds a space (byte 7)" \
        in r.stderr, r.stderr
    assert "words" not in r.stderr
    os.unlink(os.path.join(home, "token"))
    os.mkdir(os.path.join(home, "token"))
    r = run(["--inspect", "hf://org/versions"])
    assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1, r.stderr
    assert "the Hub token file '" in r.stderr and "/token': refused: a directory, not a regular file" in r.stderr, \
        r.stderr
