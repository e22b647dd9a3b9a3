"""The Xet double's world for tests and benches: a repository of two
revisions in Xet storage (xetstore.py), served by the double (xetdouble.py)
with its xorbs and bridge files behind the test's nginx (servers.Nginx),
each URL presigned as nginx's secure_link checks it.

Revision 1's model.safetensors holds tensors of three kinds, so that its
chunks take the three compression types: zeros (LZ4), smooth float32
values (byte planes then LZ4) and random bytes (stored). Revision 2
changes two tensors and adds one; everything else is chunk for chunk the
same, so it shares most chunks with revision 1."""

import json
import os
import shutil
import tempfile

import numpy as np

import xetstore
from servers import Nginx, Proc
from tfsutil import write_st

C1 = "a1" * 20
C2 = "b2" * 20
TOKEN = "hf_xet_test_token"
SECRET = "xet-cdn-secret"


def tensors(rev, scale=1):
    rng = np.random.default_rng(7)
    n = 256 * 1024 * scale
    t = [("a.zeros", "F32", (n // 4,), bytes(n)),
         ("b.smooth", "F32", (n,), (np.sin(np.arange(n) / 500.0) * 0.02).astype(np.float32).tobytes()),
         ("c.random", "U8", (n,), rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()),
         ("d.smooth", "F32", (n // 2,), (np.cos(np.arange(n // 2) / 300.0)).astype(np.float32).tobytes()),
         ("e.random", "U8", (n // 2,), rng.integers(0, 256, size=n // 2, dtype=np.uint8).tobytes())]
    if rev == 2:
        t[2] = ("c.random", "U8", (n,), np.random.default_rng(8).integers(0, 256, size=n, dtype=np.uint8).tobytes())
        t[4] = ("e.random", "U8", (n // 2,), bytes(range(256)) * (n // 512))
        t.append(("f.new", "F32", (1000,), np.arange(1000, dtype=np.float32).tobytes()))
    return t


def layout(root, scale=1, xorb_max=1 << 20):
    """The files of both revisions under root/r1 and root/r2, the store in
    root/store; returns the double's xet_files."""
    paths = {}
    for rev, d in ((1, "r1"), (2, "r2")):
        os.makedirs(os.path.join(root, d), exist_ok=True)
        p = os.path.join(root, d, "model.safetensors")
        write_st(p, tensors(rev, scale), metadata={"rev": str(rev)})
        with open(os.path.join(root, d, "config.json"), "w") as f:
            json.dump({"model_type": "xet-test", "rev": rev}, f)
        paths[p] = f"{d}/model.safetensors"
    hashes = xetstore.build(os.path.join(root, "store"), list(paths), xorb_max=xorb_max)
    for r, dirs, files in os.walk(root):
        os.chmod(r, 0o755)
        for f in files:
            os.chmod(os.path.join(r, f), 0o644)
    return {paths[p]: h for p, h in hashes.items()}


class XetDouble(Proc):
    """xetdouble.py with its config; faults() sets the faults."""

    def __init__(self, config_path):
        super().__init__("xetdouble.py", config_path)

    def faults(self, **kw):
        return self.post("/__faults", kw)

    def seen(self):
        return self.get("/__seen")

    def clear_seen(self):
        return self.post("/__seen/clear", {})

    def store(self):
        return self.get("/__store")

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"


class Served:
    """A store served: nginx (the xorbs and the bridge's files, each URL
    signed; more servers in extra_servers) and the double as the Hub and
    its CAS over root (cdn_root: a directory per commit), the store in
    store_dir and files ({commit dir/path: file hash}) for the
    repositories repos (hubdouble's, with "xet": true). The xorbs' URLs
    name nginx's server `xorbs` (None: the double serves them itself),
    the bridge's `bridge` (None: the double's own, which gives the Hub's
    ETags, the files' SHA-256: nginx gives its own, which the LFS route's
    If-Match would not find)."""

    def __init__(self, root, store_dir, files, repos, extra_servers=None, xorbs="xorbs", bridge="bridge"):
        self.root, self.store_dir, self.files, self.repos = root, store_dir, files, repos
        self.extra, self.xorbs, self.bridge = extra_servers or {}, xorbs, bridge

    def __enter__(self):
        self.nginx = None
        if self.xorbs or self.bridge:
            servers = dict(xorbs=xetstore.xorb_location(SECRET), bridge=xetstore.bridge_location(SECRET),
                           **self.extra)
            self.nginx = Nginx(self.store_dir, extra_servers=servers).__enter__()
        conf = {"cdn": "http://127.0.0.1:9", "cdn_root": self.root, "token": TOKEN, "cdn_secret": SECRET,
                "repos": self.repos, "xet_store": self.store_dir, "xet_files": self.files}
        if self.xorbs:
            conf["xorb_cdn"] = self.nginx.url(self.xorbs).rstrip("/")
        if self.bridge:
            conf["bridge_cdn"] = self.nginx.url(self.bridge).rstrip("/")
        self.conf = os.path.join(self.root, "xet.json")
        with open(self.conf, "w") as f:
            json.dump(conf, f)
        try:
            self.double = XetDouble(self.conf).__enter__()
        except BaseException:
            if self.nginx:
                self.nginx.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *a):
        self.double.__exit__(*a)
        if self.nginx:
            self.nginx.__exit__(*a)


class World(Served):
    """The two revisions of layout() in a temporary directory, served;
    with nginx=False the double serves the xorbs itself, with
    bridge_nginx=False the bridge."""

    def __init__(self, scale=1, xorb_max=1 << 20, nginx=True, gated=False, extra_servers=None, bridge_nginx=True):
        self.root = tempfile.mkdtemp(prefix="tfs-xet-")
        os.chmod(self.root, 0o755)
        files = layout(self.root, scale, xorb_max)
        repos = {"org/xet": {"xet": True, "gated": gated, "refs": {"main": C2, "v1": C1},
                             "commits": {C1: "r1", C2: "r2"}},
                 # the same files, named by their Xet hashes, where the Hub has no token for them
                 "org/noxet": {"xet": True, "xet_token": False, "refs": {"main": C2}, "commits": {C2: "r2"}}}
        super().__init__(self.root, os.path.join(self.root, "store"), files, repos, extra_servers,
                         "xorbs" if nginx else None, "bridge" if nginx and bridge_nginx else None)

    def __exit__(self, *a):
        super().__exit__(*a)
        shutil.rmtree(self.root, ignore_errors=True)
