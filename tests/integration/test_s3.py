"""s3:// sources: against s3rver (a real S3-compatible server from the npm
registry) every real checkpoint and the sharded set in every view; against
the signing-checking double (s3double.py) a wrong secret, an expired
session token, credentials from profile files, an object that changes
while mounted, and a listing of thousands of keys over many pages."""

import hashlib
import json
import os
import threading
import shutil
import subprocess
import tempfile
import time

import pytest

from servers import S3Double, S3rver
from tfsutil import (BIN, EXIT_SOURCE, EXIT_USAGE, REAL, fname, is_mounted, mounted, need_real,
                     real_files, run, sha256, write_st)

VIEWS = [(), ("-o", "format=npy"), ("-o", "convert=f32,layout=tree")]


@pytest.fixture
def aws_env(tmp):
    """No AWS settings of the machine's own: a clean environment."""
    saved = dict(os.environ)
    for k in list(os.environ):
        if k.startswith("AWS_"):
            del os.environ[k]
    os.environ["HOME"] = tmp  # no ~/.aws of the machine's
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def s3rver():
    with S3rver() as s:
        if os.path.isdir(REAL):
            for rel in real_files():
                s.put("real/" + rel, os.path.join(REAL, rel))
            d = os.path.join(REAL, "julia-safetensors-jl-sharded")
            for f in os.listdir(d):
                s.put("julia/" + f, os.path.join(d, f))
        yield s


def creds(endpoint, key="S3RVER", secret="S3RVER"):
    os.environ.update({"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
                       "AWS_ENDPOINT_URL": endpoint})


def tree_bytes(mnt):
    out = {}
    for root, dirs, files in os.walk(mnt):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), mnt)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_real_checkpoints_from_s3rver(s3rver, aws_env):
    """Each real file (by key) and the sharded set (by prefix, its index
    found by ListObjectsV2 and by its key) give the local mount's bytes in
    every view, and expected.json's tensors."""
    need_real()
    creds(s3rver.endpoint)
    exp = json.load(open(os.path.join(REAL, "expected.json")))["files"]
    julia = os.path.join(REAL, "julia-safetensors-jl-sharded")
    sources = [(f"s3://models/real/{rel}", os.path.join(REAL, rel), [rel]) for rel in real_files()]
    shards = [r for r in exp if r.startswith("julia-safetensors-jl-sharded/") and exp[r]["kind"] == "safetensors"]
    sources += [("s3://models/julia/", julia, shards),
                ("s3://models/julia/model.safetensors.index.json", julia, shards)]
    for url, local, rels in sources:
        for view in VIEWS:
            with mounted(local, *view) as a, mounted(url, *view) as b:
                assert tree_bytes(a) == tree_bytes(b), (url, view)
        with mounted(url) as b:
            for rel in rels:
                for name, t in exp[rel]["tensors"].items():
                    p = os.path.join(b, fname(name))
                    assert sha256(p) == t["sha256"]
                    src = os.getxattr(p, "user.source").decode()
                    assert src.startswith("s3://models/") and src.endswith(os.path.basename(rel))
                    assert os.getxattr(p, "user.etag").decode().startswith('"')
                    for a in os.listxattr(p):
                        assert b"S3RVER" not in os.getxattr(p, a)
        a = json.loads(run(["--inspect", "--json", local]).stdout)
        b = json.loads(run(["--inspect", "--json", url]).stdout)
        a.pop("source"), b.pop("source")
        assert a == b


@pytest.fixture
def double(tmp):
    root = os.path.join(tmp, "s3root")
    os.makedirs(os.path.join(root, "models", "m"))
    write_st(os.path.join(root, "models", "m", "model.safetensors"),
             [("w", "U8", (3 << 20,), os.urandom(3 << 20))])
    with S3Double(root, page=100) as s:
        s.root = root
        yield s


def read(mnt, name="w"):
    with open(os.path.join(mnt, name), "rb") as f:
        return f.read()


def test_signatures_are_checked(double, aws_env, tmp):
    creds(double.endpoint, "AKIDTEST", "SECRETTEST")
    with mounted("s3://models/m/model.safetensors") as m:
        assert read(m) == open(os.path.join(double.root, "models", "m", "model.safetensors"), "rb").read()[-(3 << 20):]
    seen = double.seen()
    assert seen and all(s["problem"] is None for s in seen)
    gets = [s for s in seen if s["query"] == ""]
    # the first request learns the ETag; every later one is pinned to it
    assert len(gets) > 1 and gets[0]["if_match"] is None and all(s["if_match"] for s in gets[1:])
    cases = [
        ({"AWS_SECRET_ACCESS_KEY": "wrong"}, "the signature does not match (SignatureDoesNotMatch): is the secret key right?"),
        ({"AWS_ACCESS_KEY_ID": "NOBODY"}, "the access key is not known (InvalidAccessKeyId)"),
        ({"AWS_SESSION_TOKEN": "expired"}, "the session token has expired (ExpiredToken): get new credentials"),
    ]
    for env, want in cases:
        creds(double.endpoint, "AKIDTEST", "SECRETTEST")
        os.environ.update(env)
        for src in ("s3://models/m/model.safetensors", "s3://models/m/"):
            r = run([src, tmp])
            assert r.returncode == EXIT_SOURCE, r.stderr
            assert r.stderr == f"tensorfs: {src}: {want}\n", r.stderr
            assert "SECRETTEST" not in r.stderr and "wrong" not in r.stderr
        os.environ.pop("AWS_SESSION_TOKEN", None)


def test_credentials_from_profile_files(double, aws_env, tmp):
    os.environ["AWS_ENDPOINT_URL"] = double.endpoint
    aws = os.path.join(tmp, ".aws")
    os.makedirs(aws)
    with open(os.path.join(aws, "credentials"), "w") as f:
        f.write("[default]\naws_access_key_id = NOBODY\naws_secret_access_key = x\n\n"
                "# a comment\n[work]\naws_access_key_id=AKIDTEST\naws_secret_access_key = SECRETTEST\n")
    with open(os.path.join(aws, "config"), "w") as f:
        f.write("[profile work]\nregion = eu-west-3\n")
    os.environ["AWS_PROFILE"] = "work"
    with mounted("s3://models/m/model.safetensors") as m:
        assert len(read(m)) == 3 << 20
    # other files named by the environment
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.path.join(tmp, "creds")
    with open(os.environ["AWS_SHARED_CREDENTIALS_FILE"], "w") as f:
        f.write("[work]\naws_access_key_id = AKIDTEST\naws_secret_access_key = SECRETTEST\n")
    with mounted("s3://models/m/model.safetensors") as m:
        assert len(read(m)) == 3 << 20
    with open(os.environ["AWS_SHARED_CREDENTIALS_FILE"], "w") as f:
        f.write("[work\naws_access_key_id = AKIDTEST\n")
    r = run(["s3://models/m/model.safetensors", tmp])
    assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1
    assert "creds: line 1: a section without its ']'" in r.stderr
    os.environ["AWS_PROFILE"] = "nobody"
    with open(os.environ["AWS_SHARED_CREDENTIALS_FILE"], "w") as f:
        f.write("[work]\naws_access_key_id = AKIDTEST\naws_secret_access_key = SECRETTEST\n")
    r = run(["s3://models/m/model.safetensors", tmp])
    assert r.returncode == EXIT_SOURCE and "no AWS credentials" in r.stderr and "'nobody'" in r.stderr


def test_object_changed_while_mounted(double, aws_env, tmp):
    """A new version of the object (a new ETag): the reads that need the
    store fail with EIO (412), one log line, never bytes of both."""
    creds(double.endpoint, "AKIDTEST", "SECRETTEST")
    path = os.path.join(double.root, "models", "m", "model.safetensors")
    old = open(path, "rb").read()
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", "-o", "cache_size=4M", "s3://models/m/model.safetensors", mnt],
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while not is_mounted(mnt) and time.time() < deadline:
            time.sleep(0.02)
        with open(os.path.join(mnt, "w"), "rb") as f:
            first = f.read(65536)
            new = bytearray(old)
            new[-(3 << 20):] = os.urandom(3 << 20)
            double.replace("models", "m/model.safetensors", bytes(new))
            with pytest.raises(OSError) as ei:
                f.read()
            assert ei.value.errno == 5
        assert first == old[-(3 << 20):][:65536]
        assert any(s["problem"] is None and s["if_match"] for s in double.seen())
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        err = p.communicate(timeout=30)[1]
    assert sum("changed since it was mounted" in l for l in err.splitlines()) == 1, err


def test_listing_of_thousands_of_keys(aws_env, tmp):
    """3,000 keys, 100 a page: the checkpoint's files are found across 30
    pages; keys of deeper prefixes are not this directory's."""
    root = os.path.join(tmp, "big")
    d = os.path.join(root, "models", "many")
    os.makedirs(os.path.join(d, "deeper"))
    for i in range(2990):
        open(os.path.join(d, f"notes-{i:05d}.txt"), "w").close()
    for i in range(10):
        write_st(os.path.join(d, f"model-{i:05d}-of-00010.safetensors"), [(f"t{i}", "U8", (1,), bytes([i]))])
    write_st(os.path.join(d, "deeper", "x.safetensors"), [("deep", "U8", (1,), b"d")])
    with S3Double(root, page=100) as s:
        creds(s.endpoint, "AKIDTEST", "SECRETTEST")
        with mounted("s3://models/many/") as m:
            assert sorted(x for x in os.listdir(m) if not x.startswith("__")) == [f"t{i}" for i in range(10)]
            assert read(m, "t7") == b"\x07"
        pages = [x for x in s.seen() if "list-type=2" in x["query"]]
        assert len(pages) == 30 and all(x["problem"] is None for x in pages)


def test_no_sign_request_and_bad_references(s3rver, aws_env, tmp):
    os.environ["AWS_ENDPOINT_URL"] = s3rver.endpoint
    # s3rver lets unsigned requests in: a public bucket
    need_real()
    with mounted("s3://models/real/tinygrad_mnist_cnn_f32.safetensors", "-o", "no_sign_request") as m:
        assert len(os.listdir(m)) == 8
    for bad in ("s3://", "s3://AB/x", "s3://a/x", "s3://bucket/a\tb"):
        r = run([bad, tmp])
        assert r.returncode == EXIT_USAGE and r.stderr.count("\n") == 1, (bad, r.stderr)
    creds(s3rver.endpoint)
    r = run(["s3://models/none/x.safetensors", tmp])
    assert r.returncode == EXIT_SOURCE and "not found" in r.stderr
    r = run(["s3://nosuchbucket/x.safetensors", tmp])
    assert r.returncode == EXIT_SOURCE and "NoSuchBucket" in r.stderr
    r = run(["-o", "endpoint=ftp://x", "s3://models/x.safetensors", tmp])
    assert r.returncode == EXIT_USAGE and "must be an http(s) URL" in r.stderr


def test_profile_and_endpoint_as_options(double, aws_env, tmp):
    """-o aws_profile= and -o endpoint=, what an fstab line can carry: the
    profile named wins over wrong keys in the environment (as the AWS CLI's
    --profile does)."""
    aws = os.path.join(tmp, ".aws")
    os.makedirs(aws)
    with open(os.path.join(aws, "credentials"), "w") as f:
        f.write("[work]\naws_access_key_id = AKIDTEST\naws_secret_access_key = SECRETTEST\n")
    os.environ.update({"AWS_ACCESS_KEY_ID": "NOBODY", "AWS_SECRET_ACCESS_KEY": "wrong"})
    with mounted("s3://models/m/model.safetensors", "-o", f"aws_profile=work,endpoint={double.endpoint}") as m:
        assert len(read(m)) == 3 << 20
    r = run(["-o", f"endpoint={double.endpoint}", "s3://models/m/model.safetensors", tmp])
    assert r.returncode == EXIT_SOURCE and "InvalidAccessKeyId" in r.stderr


def _write_profile(path, key, secret, token=None):
    """As the AWS tools renew them: a new file renamed over the old."""
    with open(path + ".new", "w") as f:
        f.write(f"[default]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
        if token:
            f.write(f"aws_session_token = {token}\n")
    os.replace(path + ".new", path)


@pytest.mark.parametrize("what", ["keys", "session_token"])
def test_credentials_rotated_during_a_mount_are_used_from_the_next_request(double, aws_env, tmp, what):
    """The shared credentials file is read again when it changes, before
    the next request: keys rotated (the old ones revoked at the store), or a
    session token renewed as it expires (the old one refused with
    ExpiredToken), while a read runs, and the read goes on, signed with the
    new ones; with the keys read at mount, every request after was refused."""
    cred = os.path.join(tmp, "credentials")
    os.environ.update({"AWS_SHARED_CREDENTIALS_FILE": cred, "AWS_ENDPOINT_URL": double.endpoint})
    _write_profile(cred, "AKIDTEST", "SECRETTEST", "tok-1" if what == "session_token" else None)
    data = open(os.path.join(double.root, "models", "m", "model.safetensors"), "rb").read()[-(3 << 20):]
    try:
        with mounted("s3://models/m/model.safetensors", "-o", "direct_io,cache_size=1M,retries=0") as m:
            fd = os.open(os.path.join(m, "w"), os.O_RDONLY)
            try:
                assert os.pread(fd, 1 << 20, 0) == data[:1 << 20]
                if what == "keys":
                    _write_profile(cred, "AKIDNEW", "SECRETNEW")
                    double.rotate_keys({"AKIDNEW": "SECRETNEW"})
                else:
                    _write_profile(cred, "AKIDTEST", "SECRETTEST", "tok-2")
                    double.expire("tok-1")
                n = len(double.seen())
                assert os.pread(fd, 3 << 20, 1 << 20) == data[1 << 20:], "the read after the rotation"
            finally:
                os.close(fd)
        after = double.seen()[n:]
        assert after and all(r["problem"] is None for r in after), after
        if what == "keys":
            assert all(r["akid"] == "AKIDNEW" for r in after), after
        else:
            assert all(r["token"] == "tok-2" for r in after), after
    finally:
        double.rotate_keys({"AKIDTEST": "SECRETTEST"})


def test_a_request_refused_as_its_keys_were_rotated_is_tried_again_with_the_new_ones(double, aws_env, tmp):
    """Keys rotated while a request is in flight (taken with the old ones,
    answered after the store revoked them: InvalidAccessKeyId): the request
    is tried once more at once with the new ones, not counted as a retry
    (retries=0), and the read gets its bytes."""
    cred = os.path.join(tmp, "credentials")
    os.environ.update({"AWS_SHARED_CREDENTIALS_FILE": cred, "AWS_ENDPOINT_URL": double.endpoint})
    _write_profile(cred, "AKIDTEST", "SECRETTEST")
    data = open(os.path.join(double.root, "models", "m", "model.safetensors"), "rb").read()[-(3 << 20):]
    try:
        with mounted("s3://models/m/model.safetensors", "-o", "direct_io,cache_size=1M,retries=0") as m:
            fd = os.open(os.path.join(m, "w"), os.O_RDONLY)
            try:
                assert os.pread(fd, 4096, 0) == data[:4096]
                double.hold(5)
                got = []
                t = threading.Thread(target=lambda: got.append(os.pread(fd, 4096, 2 << 20)))
                t.start()
                for _ in range(400):  # until the request, signed with the old keys, is held (bounded)
                    if double.holding():
                        break
                    time.sleep(0.01)
                assert double.holding() == 1, "the request never came"
                _write_profile(cred, "AKIDNEW", "SECRETNEW")
                double.rotate_keys({"AKIDNEW": "SECRETNEW"})
                t.join(timeout=60)
                assert got == [data[2 << 20:(2 << 20) + 4096]]
            finally:
                os.close(fd)
        problems = [r["problem"] for r in double.seen()]
        assert "InvalidAccessKeyId" in problems, problems
    finally:
        double.rotate_keys({"AKIDTEST": "SECRETTEST"})
