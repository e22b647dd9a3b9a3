"""-o originals: the source's own files (shards, index, and beside them
config.json, tokenizer files, README) byte for byte in __files__/, from a
local directory, over http (the index's files: http cannot list), from a
Hub double with companion files and from S3 (a listed prefix)."""

import contextlib
import hashlib
import json
import os
import shutil

from servers import HubDouble, Nginx, S3Double
from tfsutil import fname, mounted, write_st

COMPANIONS = {"config.json": b'{"model_type": "llama", "hidden_size": 8}\n',
              "generation_config.json": b'{"do_sample": false}\n',
              "tokenizer.json": b'{"version": "1.0", "model": {"vocab": {"a": 0}}}\n' * 50,
              "README.md": b"# A model\n"}


def checkpoint(d):
    """Two shards, the index, and the companion files; returns every
    file's bytes by name."""
    os.makedirs(d, exist_ok=True)
    wm = {}
    for s in range(2):
        fn = f"model-{s + 1:05d}-of-00002.safetensors"
        write_st(os.path.join(d, fn), [(f"layer.{s}.w", "U8", (300000,), os.urandom(300000))])
        wm[f"layer.{s}.w"] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 600000}, "weight_map": wm}, f)
    for n, data in COMPANIONS.items():
        with open(os.path.join(d, n), "wb") as f:
            f.write(data)
    os.chmod(d, 0o755)
    for n in os.listdir(d):
        os.chmod(os.path.join(d, n), 0o644)
    return {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)}


@contextlib.contextmanager
def environment(drop, **set_):
    """os.environ without the variables `drop` names (a predicate) and with
    set_, put back as it was afterwards."""
    saved = dict(os.environ)
    try:
        for k in [k for k in os.environ if drop(k)]:
            del os.environ[k]
        os.environ.update(set_)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def files_in(mnt):
    d = os.path.join(mnt, "__files__")
    return {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)}


def sha(b):
    return hashlib.sha256(b).hexdigest()


def test_local_directory(tmp):
    want = checkpoint(os.path.join(tmp, "ckpt"))
    with mounted(os.path.join(tmp, "ckpt"), "-o", "originals") as mnt:
        got = files_in(mnt)
        assert {n: sha(b) for n, b in got.items()} == {n: sha(b) for n, b in want.items()}
        assert os.stat(os.path.join(mnt, "__files__", "config.json")).st_size == len(want["config.json"])
        assert open(os.path.join(mnt, "layer.0.w"), "rb").read() == want["model-00001-of-00002.safetensors"][-300000:]
        # cp -r of the directory gives the model directory back
        out = os.path.join(tmp, "copy")
        shutil.copytree(os.path.join(mnt, "__files__"), out)
        assert sorted(os.listdir(out)) == sorted(want)
    with mounted(os.path.join(tmp, "ckpt")) as mnt:
        assert "__files__" not in os.listdir(mnt)  # only when asked for


def test_single_file_shows_only_itself(tmp):
    """A file named by SOURCE: its directory may be anyone's downloads."""
    checkpoint(os.path.join(tmp, "ckpt"))
    src = os.path.join(tmp, "ckpt", "model-00001-of-00002.safetensors")
    with mounted(src, "-o", "originals") as mnt:
        assert os.listdir(os.path.join(mnt, "__files__")) == ["model-00001-of-00002.safetensors"]


def test_a_tensor_named_like_the_directory(tmp):
    """A tensor named __files__ keeps a file of its own (rule 3's escape),
    with or without the option."""
    src = os.path.join(tmp, "t.safetensors")
    write_st(src, [("__files__", "U8", (3,), b"abc")])
    assert fname("__files__") == "%5F_files__"
    for opts in ((), ("-o", "originals")):
        with mounted(src, *opts) as mnt:
            assert open(os.path.join(mnt, "%5F_files__"), "rb").read() == b"abc"


def test_over_http(tmp):
    """http cannot list a directory: the index and its shards."""
    root = os.path.join(tmp, "www")
    want = checkpoint(os.path.join(root, "ckpt"))
    os.chmod(root, 0o755)
    with Nginx(root) as ng:
        with mounted(ng.url("plain", "ckpt/model.safetensors.index.json"), "-o", "originals") as mnt:
            got = files_in(mnt)
    assert sorted(got) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                           "model.safetensors.index.json"]
    assert all(got[n] == want[n] for n in got)


def test_from_the_hub_with_companion_files(tmp):
    root = os.path.join(tmp, "cdn")
    os.makedirs(root)
    os.chmod(root, 0o755)
    commit = "c" * 40
    want = checkpoint(os.path.join(root, "repo"))
    with Nginx(root) as cdn:
        conf = os.path.join(tmp, "hub.json")
        with open(conf, "w") as f:
            json.dump({"cdn": cdn.url("plain").rstrip("/"), "cdn_root": root, "token": "t",
                       "page_size": 3,
                       "repos": {"org/model": {"refs": {"main": commit}, "commits": {commit: "repo"}}}}, f)
        with HubDouble(conf) as hub, environment(
                lambda k: k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"),
                HF_ENDPOINT=hub.endpoint, HF_HOME=os.path.join(tmp, "hfhome")):
            with mounted("hf://org/model", "-o", "originals") as mnt:
                got = files_in(mnt)
    assert {n: sha(b) for n, b in got.items()} == {n: sha(b) for n, b in want.items()}


def test_from_s3(tmp):
    root = os.path.join(tmp, "s3")
    want = checkpoint(os.path.join(root, "models", "ckpt"))
    with S3Double(root) as s3, environment(lambda k: k.startswith("AWS_"), HOME=tmp,
                                           AWS_ACCESS_KEY_ID="AKIDTEST", AWS_SECRET_ACCESS_KEY="SECRETTEST",
                                           AWS_ENDPOINT_URL=s3.endpoint):
        with mounted("s3://models/ckpt/", "-o", "originals") as mnt:
            got = files_in(mnt)
    assert {n: sha(b) for n, b in got.items()} == {n: sha(b) for n, b in want.items()}
