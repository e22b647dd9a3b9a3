"""Mount generated checkpoints and use them as users do: cat, dd, hexdump,
numpy, xattrs, stat; hostile names; scale; refusals; read-only; signals."""

import ctypes
import errno
import json
import os
import signal
import stat
import struct
import subprocess
import time

import numpy as np
import pytest

from tfsutil import (BIN, EXIT_FORMAT, EXIT_MOUNT, EXIT_SOURCE, EXIT_USAGE,
                     daemon_pids, fname, fuse_ok, is_mounted, kernel_at_least, mounted, run,
                     unmount, wait_gone, write_raw, write_st)


def rand_bytes(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.fixture
def model(tmp):
    """A small checkpoint with several dtypes, an odd header length (the
    data starts unaligned), a scalar and a zero-size tensor."""
    path = os.path.join(tmp, "model.safetensors")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(-5, 5, dtype=np.int64)
    tensors = [
        ("layers.0.weight", "F32", a.shape, a.tobytes()),
        ("layers.0.bias", "I64", b.shape, b.tobytes()),
        ("emb", "BF16", (4, 8), rand_bytes(64, 1)),
        ("scalar", "F64", (), struct.pack("<d", 3.5)),
        ("empty", "F16", (0, 3), b""),
        ("big", "U8", (300001,), rand_bytes(300001, 2)),
    ]
    start = write_st(path, tensors, metadata={"format": "pt", "note": "é \"q\""}, pad="odd")
    assert start % 2 == 1
    return path, {t[0]: t for t in tensors}, start


def test_cat_dd_hexdump(model):
    path, tensors, _ = model
    with mounted(path) as mnt:
        for name, (_, dtype, shape, raw) in tensors.items():
            p = os.path.join(mnt, name)
            assert subprocess.run(["cat", p], capture_output=True, check=True).stdout == raw
            dd = subprocess.run(["dd", f"if={p}", "bs=4096", "status=none"],
                                capture_output=True, check=True)
            assert dd.stdout == raw
        p = os.path.join(mnt, "layers.0.weight")
        hx = subprocess.run(["hexdump", "-C", p], capture_output=True, text=True, check=True)
        assert hx.stdout.splitlines()[0].startswith("00000000  00 00 00 00 00 00 80 3f")
        # dd with skip/count reads an inner range
        dd = subprocess.run(["dd", f"if={os.path.join(mnt, 'big')}", "bs=1000", "skip=7",
                             "count=3", "status=none"], capture_output=True, check=True)
        assert dd.stdout == tensors["big"][3][7000:10000]
        assert subprocess.run(["cmp", os.path.join(mnt, "big"), os.path.join(mnt, "big")]).returncode == 0


def test_numpy_fromfile_and_memmap(model):
    path, tensors, _ = model
    with mounted(path) as mnt:
        w = np.fromfile(os.path.join(mnt, "layers.0.weight"), dtype=np.float32).reshape(3, 4)
        assert (w == np.arange(12, dtype=np.float32).reshape(3, 4)).all()
        b = np.fromfile(os.path.join(mnt, "layers.0.bias"), dtype=np.int64)
        assert (b == np.arange(-5, 5)).all()
        m = np.memmap(os.path.join(mnt, "big"), dtype=np.uint8, mode="r")
        assert m.tobytes() == tensors["big"][3]
        assert int(m[300000]) == tensors["big"][3][300000]
        del m
        s = np.fromfile(os.path.join(mnt, "scalar"), dtype=np.float64)
        assert s.tolist() == [3.5]


def test_reads_at_any_offset(model):
    path, tensors, _ = model
    raw = tensors["big"][3]
    with mounted(path) as mnt:
        fd = os.open(os.path.join(mnt, "big"), os.O_RDONLY)
        try:
            for off, n in [(0, 1), (1, 7), (4095, 2), (131071, 131074), (299999, 10),
                           (300000, 1), (300001, 5), (10 ** 9, 5)]:
                assert os.pread(fd, n, off) == raw[off:off + n], (off, n)
        finally:
            os.close(fd)
        with open(os.path.join(mnt, "empty"), "rb") as f:
            assert f.read() == b""


def test_attributes(model):
    path, tensors, _ = model
    src = os.stat(path)
    with mounted(path) as mnt:
        root = os.stat(mnt)
        assert stat.S_ISDIR(root.st_mode) and stat.S_IMODE(root.st_mode) == 0o555
        inos = {}
        for name, (_, _, _, raw) in tensors.items():
            st = os.stat(os.path.join(mnt, name))
            assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o444
            assert st.st_size == len(raw)
            assert st.st_blocks == (len(raw) + 511) // 512
            assert st.st_uid == os.getuid() and st.st_gid == os.getgid()
            assert st.st_mtime_ns == src.st_mtime_ns
            assert st.st_ctime_ns == src.st_ctime_ns
            assert st.st_nlink == 1
            inos[name] = st.st_ino
        assert len(set(inos.values())) == len(inos)
        # stable for the life of the mount
        os.listdir(mnt)
        for name, ino in inos.items():
            assert os.stat(os.path.join(mnt, name)).st_ino == ino
        sv = os.statvfs(mnt)
        assert sv.f_flag & os.ST_RDONLY
        assert sv.f_namemax == 255
        total = sum(len(t[3]) for t in tensors.values())
        assert sv.f_blocks * sv.f_frsize >= total
        assert sv.f_files == len(tensors) + 3  # tensors, __metadata__.json, __tensors__.tsv, root


def test_uid_gid_option(model):
    path, _, _ = model
    with mounted(path, "-o", "uid=1234,gid=4321") as mnt:
        st = os.stat(os.path.join(mnt, "emb"))
        assert (st.st_uid, st.st_gid) == (1234, 4321)
    r = run(["-o", "uid=abc", path, "/tmp"])
    assert r.returncode == EXIT_USAGE and "uid" in r.stderr


def test_xattrs(model):
    path, tensors, start = model
    with mounted(path) as mnt:
        p = os.path.join(mnt, "layers.0.weight")
        assert sorted(os.listxattr(p)) == sorted(
            ["user.dtype", "user.shape", "user.name", "user.offsets", "user.source", "user.xdg.comment"])
        # freedesktop's comment, which file managers can show in a column
        assert os.getxattr(p, "user.xdg.comment") == b"F32 [3, 4], 48 bytes"
        assert os.getxattr(os.path.join(mnt, "big"), "user.xdg.comment") == b"U8 [300001], 293 KiB"
        assert os.getxattr(p, "user.dtype") == b"F32"
        assert os.getxattr(p, "user.shape") == b"[3,4]"
        assert os.getxattr(p, "user.name") == b"layers.0.weight"
        assert os.getxattr(p, "user.offsets") == f"[{start},{start + 48}]".encode()
        assert os.getxattr(p, "user.source") == os.path.realpath(path).encode()
        assert os.getxattr(os.path.join(mnt, "scalar"), "user.shape") == b"[]"
        assert os.getxattr(os.path.join(mnt, "empty"), "user.shape") == b"[0,3]"
        # the offsets really are where the bytes are
        b, e = json.loads(os.getxattr(p, "user.offsets"))
        with open(path, "rb") as f:
            f.seek(b)
            assert f.read(e - b) == tensors["layers.0.weight"][3]
        with pytest.raises(OSError) as ei:
            os.getxattr(p, "user.nothing")
        assert ei.value.errno == errno.ENODATA
        # other namespaces are not supported at all (ls -l then stops asking)
        for other in ("security.selinux", "system.posix_acl_access", "trusted.x"):
            with pytest.raises(OSError) as ei:
                os.getxattr(p, other)
            assert ei.value.errno == errno.EOPNOTSUPP, other
        assert os.getxattr(p, "user.dtype") == b"F32"  # and user.* still works after that
        with pytest.raises(OSError) as ei:
            os.getxattr(os.path.join(mnt, "__metadata__.json"), "user.dtype")
        assert ei.value.errno == errno.ENODATA
        assert os.listxattr(os.path.join(mnt, "__metadata__.json")) == []
        assert os.listxattr(mnt) == []

        # the size probe and ERANGE, through libc itself
        libc = ctypes.CDLL(None, use_errno=True)
        libc.getxattr.restype = ctypes.c_ssize_t
        libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        libc.listxattr.restype = ctypes.c_ssize_t
        libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        bp = p.encode()
        assert libc.getxattr(bp, b"user.shape", None, 0) == 5
        buf = ctypes.create_string_buffer(2)
        assert libc.getxattr(bp, b"user.shape", buf, 2) == -1
        assert ctypes.get_errno() == errno.ERANGE
        buf = ctypes.create_string_buffer(5)
        assert libc.getxattr(bp, b"user.shape", buf, 5) == 5 and buf.raw == b"[3,4]"
        n = libc.listxattr(bp, None, 0)
        assert n == len(b"user.dtype\0user.shape\0user.name\0user.offsets\0user.source\0user.xdg.comment\0")
        assert libc.listxattr(bp, ctypes.create_string_buffer(3), 3) == -1
        assert ctypes.get_errno() == errno.ERANGE

        out = subprocess.run(["getfattr", "-d", p], capture_output=True, text=True, check=True).stdout
        assert 'user.dtype="F32"' in out and 'user.shape="[3,4]"' in out


def test_metadata_json(model, tmp):
    path, _, _ = model
    with mounted(path) as mnt:
        with open(os.path.join(mnt, "__metadata__.json"), "rb") as f:
            raw = f.read()
        assert json.loads(raw) == {"format": "pt", "note": "é \"q\""}
        assert raw.endswith(b"}\n") and b'\n  "format": "pt"' in raw
        assert os.stat(os.path.join(mnt, "__metadata__.json")).st_size == len(raw)
    bare = os.path.join(tmp, "bare.safetensors")
    write_st(bare, [("x", "U8", (1,), b"\x07")])
    with mounted(bare) as mnt:
        with open(os.path.join(mnt, "__metadata__.json")) as f:
            assert f.read() == "{}\n"
    nullmeta = os.path.join(tmp, "null.safetensors")
    write_raw(nullmeta, '{"__metadata__":null,"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x01")
    with mounted(nullmeta) as mnt:
        with open(os.path.join(mnt, "__metadata__.json")) as f:
            assert f.read() == "{}\n"


def test_read_only(model):
    path, _, _ = model
    before = open(path, "rb").read()
    with mounted(path) as mnt:
        p = os.path.join(mnt, "emb")
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND):
            with pytest.raises(OSError) as ei:
                os.open(p, flags)
            assert ei.value.errno in (errno.EROFS, errno.EACCES), flags
        attempts = [
            lambda: os.open(os.path.join(mnt, "new"), os.O_CREAT | os.O_WRONLY, 0o644),
            lambda: os.unlink(p),
            lambda: os.rename(p, os.path.join(mnt, "x")),
            lambda: os.mkdir(os.path.join(mnt, "d")),
            lambda: os.rmdir(mnt + "/emb"),
            lambda: os.truncate(p, 0),
            lambda: os.chmod(p, 0o777),
            lambda: os.chown(p, 1, 1),
            lambda: os.utime(p, (1, 1)),
            lambda: os.symlink("emb", os.path.join(mnt, "l")),
            lambda: os.link(p, os.path.join(mnt, "h")),
            lambda: os.setxattr(p, "user.dtype", b"F64"),
            lambda: os.removexattr(p, "user.dtype"),
        ]
        for i, f in enumerate(attempts):
            with pytest.raises(OSError) as ei:
                f()
            assert ei.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR), i
        assert os.getxattr(p, "user.dtype") == b"BF16"
    assert open(path, "rb").read() == before


def test_lookup_misses(model):
    path, _, _ = model
    with mounted(path) as mnt:
        for name in ("nope", "layers.0", "LAYERS.0.WEIGHT", "emb/"):
            assert not os.path.exists(os.path.join(mnt, name))
        with pytest.raises(OSError) as ei:
            os.stat(os.path.join(mnt, "x" * 256))
        assert ei.value.errno == errno.ENAMETOOLONG
        with pytest.raises(NotADirectoryError):
            os.listdir(os.path.join(mnt, "emb"))
        with pytest.raises(IsADirectoryError):
            open(mnt, "rb").read()


HOSTILE = [
    "a/b", "/abs", "a//b", "a/", "a/./b", "x/y", "x//y", "x/y/", "", ".", "..", "...",
    "nul\x00byte", "new\nline", "tab\tcr\r", "\x01\x1f\x7f", "%", "%2F", "a%2Fb",
    "__metadata__.json", "__index__.json", "__metadata", "__metadata__.jso",
    "é", "e\u0301", "Weight", "weight", "WEIGHT", "\u4e00" * 100, "q" * 5000,
    "😀 emoji", " leading space", "trailing space ", "-rf", "$(id)", "`x`", "*",
]


def test_hostile_names(tmp):
    path = os.path.join(tmp, "hostile.safetensors")
    tensors = [(n, "U8", (i + 1,), bytes([i]) * (i + 1)) for i, n in enumerate(HOSTILE)]
    write_st(path, tensors)
    with mounted(path) as mnt:
        entries = os.listdir(mnt)
        assert len(entries) == len(HOSTILE) + 2
        assert len(set(entries)) == len(entries)
        assert "__metadata__.json" in entries and "__tensors__.tsv" in entries
        by_name = {}
        for e in entries:
            p = os.path.join(mnt, e)
            assert len(e.encode()) <= 255 and "/" not in e and e not in ("", ".", "..")
            if e in ("__metadata__.json", "__tensors__.tsv"):
                continue
            n = os.getxattr(p, "user.name").decode("utf-8", "surrogatepass")
            assert n not in by_name
            by_name[n] = e
            with open(p, "rb") as f:
                data = f.read()
            i = HOSTILE.index(n)
            assert data == bytes([i]) * (i + 1)
        assert sorted(by_name) == sorted(HOSTILE)
        for n in HOSTILE:
            want = fname(n)
            if want is not None:
                assert by_name[n] == want, n
            else:
                assert "%~" in by_name[n] and len(by_name[n].encode()) <= 255
        assert by_name["a/b"] == "a%2Fb" and by_name[""] == "%empty"
        assert by_name[".."] == "%2E%2E" and by_name["__metadata__.json"] == "%5F_metadata__.json"
        assert by_name["é"] != by_name["e\u0301"]
        # hashed names are stable across mounts
    with mounted(path) as mnt:
        assert sorted(os.listdir(mnt)) == sorted(entries)


def test_duplicate_names_last_wins(tmp):
    path = os.path.join(tmp, "dup.safetensors")
    write_raw(path, '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                    '"a":{"dtype":"U16","shape":[2],"data_offsets":[0,4]}}', b"\x01\x02\x03\x04")
    with mounted(path) as mnt:
        assert sorted(os.listdir(mnt)) == ["__metadata__.json", "__tensors__.tsv", "a"]
        assert os.getxattr(os.path.join(mnt, "a"), "user.dtype") == b"U16"
        assert open(os.path.join(mnt, "a"), "rb").read() == b"\x01\x02\x03\x04"


def test_70000_tensors(tmp):
    path = os.path.join(tmp, "many.safetensors")
    n = 70000
    hdr = {f"model.layers.{i}.w": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]}
           for i in range(n)}
    data = bytes(i & 0xFF for i in range(n))
    write_raw(path, json.dumps(hdr), data)
    with mounted(path) as mnt:
        names = os.listdir(mnt)
        assert len(names) == n + 2 and len(set(names)) == n + 2
        for i in (0, 1, 65535, 65536, 69999):
            p = os.path.join(mnt, f"model.layers.{i}.w")
            assert open(p, "rb").read() == bytes([i & 0xFF])
        # ls -l through readdirplus, with every size right
        out = subprocess.run(["ls", "-l", "--time-style=+", mnt], capture_output=True, text=True, check=True)
        assert len(out.stdout.splitlines()) == n + 3  # "total" line, the two synthetic files
        sizes = {line.split()[-1]: int(line.split()[4]) for line in out.stdout.splitlines()[1:]}
        assert sizes["model.layers.69999.w"] == 1


def test_unknown_dtype_warns_and_strict_refuses(tmp):
    path = os.path.join(tmp, "odd.safetensors")
    write_raw(path, '{"t":{"dtype":"F8_E4M3FN","shape":[3],"data_offsets":[0,3]}}', b"abc")
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    r = run([path, mnt])
    try:
        assert r.returncode == 0
        assert r.stderr.count("\n") == 1
        assert "warning" in r.stderr and "F8_E4M3FN" in r.stderr and "odd.safetensors" in r.stderr
        assert os.getxattr(os.path.join(mnt, "t"), "user.dtype") == b"F8_E4M3FN"
        assert open(os.path.join(mnt, "t"), "rb").read() == b"abc"
    finally:
        unmount(mnt, daemon_pids(mnt))
    r = run(["-o", "strict", path, mnt])
    assert r.returncode == EXIT_FORMAT and "unknown dtype 'F8_E4M3FN'" in r.stderr
    assert not is_mounted(mnt)


def refusals(tmp):
    """(name, header, data, N override, what the message must say)."""
    t = '{"x.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,%d]}}'
    return [
        ("size", t % 12, b"\0" * 12, None,
         "tensor 'x.weight': data_offsets [0,12] hold 12 bytes but F32 [2,2] needs 16"),
        ("gap", '{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0\0", None, "gap"),
        ("overlap", '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                    '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"\0" * 3, None, "overlap"),
        ("truncated-data", t % 16, b"\0" * 10, None, "truncated"),
        ("trailing", t % 16, b"\0" * 20, None, "unexpected bytes"),
        ("truncated-header", '{"a":1}', b"", 5000, "truncated"),
        ("too-large", "{}", b"", 100000001, "100000000"),
        ("json", '{"a":', b"", None, "invalid header JSON"),
        ("utf8", b'{"\xff":1}', b"", None, "UTF-8"),
        ("nesting", '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":' + "[" * 130 + "]" * 130 + "}}",
         b"\0", None, "nested"),
        ("lone-surrogate", '{"\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0", None, "surrogate"),
        ("dup-field", '{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0", None, "twice"),
        ("missing-field", '{"a":{"dtype":"U8","shape":[1]}}', b"", None, "missing field 'data_offsets'"),
        ("meta-type", '{"__metadata__":{"a":1}}', b"", None, "strings"),
        ("f4-odd", '{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', b"\0\0", None, "whole number of bytes"),
        ("overflow", '{"a":{"dtype":"U8","shape":[18446744073709551615,2,0],"data_offsets":[0,0]}}', b"", None, "64 bits"),
        ("hostile-name-in-message", '{"evil\\nline\\u0000":{"dtype":"U8","shape":[2],"data_offsets":[0,1]}}',
         b"\0", None, "evil\\x0aline\\x00"),
    ]


def test_invalid_files_refused(tmp):
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    for name, hdr, data, n, want in refusals(tmp):
        path = os.path.join(tmp, name + ".safetensors")
        write_raw(path, hdr, data, n=n)
        before = open(path, "rb").read()
        r = run([path, mnt])
        assert r.returncode == EXIT_FORMAT, (name, r.returncode, r.stderr)
        assert r.stderr.startswith(f"tensorfs: {path}: "), (name, r.stderr)
        assert r.stderr.count("\n") == 1, (name, r.stderr)
        assert want in r.stderr, (name, r.stderr)
        assert not is_mounted(mnt)
        assert open(path, "rb").read() == before


def test_what_the_file_really_is(tmp):
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    cases = {
        "lfs": (b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 123\n",
                "Git LFS pointer"),
        "html": (b"<!DOCTYPE html>\n<html><body>Not Found</body></html>\n", "HTML"),
        "empty": (b"", "empty"),
        "tiny": (b"\x01\x02", "too short"),
        "zip": (b"PK\x03\x04" + b"\0" * 60, "zip"),
        "pickle": (b"\x80\x02}q\x00" + b"\0" * 20, "pickle"),
        "json": (b'{"weight_map": {}}', "JSON"),
    }
    for name, (content, want) in cases.items():
        path = os.path.join(tmp, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(content)
        r = run([path, mnt])
        assert r.returncode == EXIT_FORMAT, (name, r.stderr)
        assert want in r.stderr and r.stderr.count("\n") == 1, (name, r.stderr)


def test_usage_and_source_errors(model, tmp):
    path, _, _ = model
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    for args in ([], [path], [path, mnt, "extra"], ["--bogus", path, mnt], ["-o", "nonsense", path, mnt],
                 ["-o", "export_cache", path, mnt], ["-o", "rw", path, mnt], ["-o", "ro,rw", path, mnt]):
        r = run(args)
        assert r.returncode == EXIT_USAGE, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("tensorfs: "), (args, r.stderr)
        assert not (len(args) > 1 and "rw" in args[1].split(",")) or "read-only" in r.stderr, r.stderr
    r = run([os.path.join(tmp, "missing.safetensors"), mnt])
    assert r.returncode == EXIT_SOURCE and "No such file" in r.stderr
    empty_dir = os.path.join(tmp, "nothing-here")
    os.mkdir(empty_dir)
    r = run([empty_dir, mnt])
    assert r.returncode == EXIT_FORMAT and "holds no checkpoint file (.safetensors, .gguf, .bt, .tensorsafe, .bin, .npz) and no index" in r.stderr, r.stderr
    r = run(["/dev/null", mnt])
    assert r.returncode == EXIT_SOURCE and "not a regular file" in r.stderr
    # a pipe, as the shell's <(cat x.safetensors) gives one
    rfd, wfd = os.pipe()
    try:
        r = subprocess.run([BIN, f"/dev/fd/{rfd}", mnt], capture_output=True, text=True, timeout=60,
                           pass_fds=(rfd,))
    finally:
        os.close(rfd)
        os.close(wfd)
    assert r.returncode == EXIT_SOURCE and "not a regular file" in r.stderr and \
        r.stderr.count("\n") == 1, r.stderr
    r = run([path, os.path.join(tmp, "nowhere")])
    assert r.returncode == EXIT_MOUNT and "does not exist" in r.stderr
    r = run([path, path])
    assert r.returncode == EXIT_MOUNT and "not a directory" in r.stderr
    assert not is_mounted(mnt)
    h = run(["--help"])
    assert h.returncode == 0 and "usage: tensorfs" in h.stdout
    v = run(["-V"])
    assert v.returncode == 0 and v.stdout.startswith("tensorfs ")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_unmount(model, tmp, sig):
    path, _, _ = model
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    assert run([path, mnt]).returncode == 0
    pids = daemon_pids(mnt)
    assert len(pids) == 1
    os.kill(pids[0], sig)
    assert wait_gone(pids[0], timeout=5)
    deadline = time.time() + 5
    while is_mounted(mnt) and time.time() < deadline:
        time.sleep(0.01)
    assert not is_mounted(mnt)


ENDING = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)


def _ignore_the_ending_signals():
    for s in ENDING:
        signal.signal(s, signal.SIG_IGN)


def _sig_mask(pid, field):
    """The signals of /proc/PID/status's SigIgn or SigCgt."""
    with open(f"/proc/{pid}/status") as f:
        mask = int(next(line for line in f if line.startswith(field + ":")).split()[1], 16)
    return {s for s in ENDING if mask & (1 << (s - 1))}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_daemon_started_with_the_signals_ignored_ends_on_them(model, tmp, sig):
    """Started by nohup, a shell without job control, or a service manager
    or CI runner that ignores SIGHUP, SIGINT or SIGTERM, the detached
    daemon kept them ignored (libfuse installs its handler only for a
    signal that is not), so kill PID did nothing. Detached, in a session of
    its own, no terminal can send it anything: it takes the three as the
    documented ways to unmount."""
    path, _, _ = model
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    r = subprocess.run([BIN, path, mnt], preexec_fn=_ignore_the_ending_signals, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    pids = daemon_pids(mnt)
    try:
        assert len(pids) == 1
        assert _sig_mask(pids[0], "SigIgn") == set()
        assert _sig_mask(pids[0], "SigCgt") == set(ENDING)
        os.kill(pids[0], sig)
        assert wait_gone(pids[0], timeout=5)
        assert not is_mounted(mnt)
    finally:
        unmount(mnt, pids)


def test_in_the_foreground_ignored_signals_stay_ignored(model, tmp):
    """tensorfs -f keeps what it was started with, as every libfuse server
    does: nohup tensorfs -f lives through its terminal's hangup. The
    signals it was not told to ignore still end it."""
    path, _, _ = model
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", path, mnt], preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
                         stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 10
        while not is_mounted(mnt) and time.time() < deadline:
            time.sleep(0.01)
        assert is_mounted(mnt)
        assert _sig_mask(p.pid, "SigIgn") == {signal.SIGHUP}
        assert _sig_mask(p.pid, "SigCgt") == {signal.SIGINT, signal.SIGTERM}
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=5) == 0
        assert not is_mounted(mnt)
    finally:
        if p.poll() is None:
            unmount(mnt)
            p.wait(timeout=30)


def test_unmounting_a_busy_mount(tmp):
    """What Mounting says of a mount a reader holds open: fusermount3 -u
    refuses it (busy), fuser -m names the reader, fusermount3 -uz takes the
    mount out of the tree at once while the open file still reads, and the
    daemon ends with the last close; SIGTERM unmounts at once, and the
    reader's next read of bytes not in the page cache fails with ENOTCONN."""
    import errno
    import shutil
    from tfsutil import REPO, missing
    fuse_ok()
    if not shutil.which("fuser"):
        missing("fuser (Debian's psmisc)")
    n = 16 << 20
    src = os.path.join(tmp, "big.safetensors")
    data = bytes(range(256)) * (n // 256)
    write_st(src, [("w", "U8", [n], data)])
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    for how in ("-uz", "SIGTERM"):
        assert run([src, mnt]).returncode == 0
        pid = daemon_pids(mnt)[0]
        f = open(os.path.join(mnt, "w"), "rb", buffering=0)
        try:
            assert f.read(4) == data[:4]
            r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, text=True)
            assert r.returncode == 1 and r.stderr == (f"fusermount3: failed to unmount {mnt}: Device or resource "
                                                      "busy\n"), r.stderr
            assert is_mounted(mnt)
            r = subprocess.run(["fuser", "-m", mnt], capture_output=True, text=True)
            assert str(os.getpid()) in r.stdout.split(), r.stdout
            if how == "-uz":
                assert subprocess.run(["fusermount3", "-uz", mnt]).returncode == 0
                assert not is_mounted(mnt) and os.listdir(mnt) == []
                f.seek(n - 4096)
                assert f.read(4096) == data[-4096:]  # the open file still reads
                assert os.path.exists(f"/proc/{pid}")
            else:
                os.kill(pid, signal.SIGTERM)
                assert wait_gone(pid, 10)
                assert not is_mounted(mnt) and os.listdir(mnt) == []
                f.seek(n - 4096)
                with pytest.raises(OSError) as ei:
                    f.read(4096)
                assert ei.value.errno == errno.ENOTCONN
        finally:
            f.close()
            unmount(mnt)
        assert wait_gone(pid)
    guide = " ".join(open(os.path.join(REPO, "docs", "mounting.md")).read().split())
    for said in ("fuser -m", "fusermount3 -uz", "Device or resource busy", "Transport endpoint is not connected"):
        assert said in guide, said


def test_foreground_exit_status(model, tmp):
    path, _, _ = model
    fuse_ok()
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", path, mnt], stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while not is_mounted(mnt) and time.time() < deadline:
        time.sleep(0.01)
    assert is_mounted(mnt)
    assert os.listdir(mnt)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=5) == 0
    assert not is_mounted(mnt)
    assert p.stderr.read() == b""  # a clean mount says nothing
    # an external unmount also ends the daemon cleanly
    p = subprocess.Popen([BIN, "-f", "-s", path, mnt], stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while not is_mounted(mnt) and time.time() < deadline:
        time.sleep(0.01)
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    assert p.wait(timeout=5) == 0


@pytest.mark.parametrize("opts", [["-s"], ["-o", "max_threads=2"], ["-o", "direct_io"]])
def test_loop_modes_read_right(model, opts):
    path, tensors, _ = model
    with mounted(path, *opts) as mnt:
        for name, t in tensors.items():
            assert open(os.path.join(mnt, name), "rb").read() == t[3]


def test_demo_script(tmp):
    """make demo's script mounts the example and shows it."""
    fuse_ok()
    env = dict(os.environ, TENSORFS_DEMO_DIR=tmp)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if BIN != os.path.join(repo, "tensorfs"):
        pytest.skip("the demo runs ./tensorfs, not the sanitizer build")
    r = subprocess.run([os.path.join(repo, "scripts", "demo.sh")], env=env, capture_output=True,
                       text=True, timeout=60)
    mnt = os.path.join(tmp, "mnt")
    try:
        assert r.returncode == 0, r.stderr
        assert "model.embed_tokens.weight" in r.stdout
        assert 'user.dtype="BF16"' in r.stdout
        assert "00000000  00 00 00 00" in r.stdout
        assert "fusermount3 -u " + mnt in r.stdout
        assert "6 tensors, " in r.stdout  # the --inspect summary
        assert "name\tdtype\tshape\tbytes\toffsets\n" in r.stdout  # the table
        assert is_mounted(mnt)
        assert json.load(open(os.path.join(mnt, "__metadata__.json")))["format"] == "pt"
    finally:
        unmount(mnt, daemon_pids(mnt))


@pytest.mark.parametrize("opts", [[], ["-o", "nosplice"]])
def test_truncated_source_reads_fail_with_eio(tmp, opts):
    """Once the source is cut, nothing of it is served: neither the bytes
    it no longer holds (never zeros or an early end of file) nor those it
    still holds (it is no longer the file mounted), on both read paths
    (splice and buffer copy), also to readers that opened before."""
    path = os.path.join(tmp, "t.safetensors")
    a = rand_bytes(1 << 20, 3)
    b = rand_bytes(1 << 20, 4)
    start = write_st(path, [("a", "U8", (len(a),), a), ("b", "U8", (len(b),), b)])
    with mounted(path, *opts) as mnt:
        fa = os.open(os.path.join(mnt, "a"), os.O_RDONLY)
        fd = os.open(os.path.join(mnt, "b"), os.O_RDONLY)
        try:
            with open(path, "r+b") as f:
                f.truncate(start + len(a) + 1000)  # b keeps only its first 1000 bytes
            for fdx, n, off in [(fa, len(a), 0), (fa, 100, 5000), (fd, 1000, 0), (fd, 4096, 8192),
                                (fd, 10, len(b) - 10), (fd, len(b), 0)]:
                with pytest.raises(OSError) as ei:
                    os.pread(fdx, n, off)
                assert ei.value.errno == errno.EIO
        finally:
            os.close(fa)
            os.close(fd)
        # a new open fails too
        with pytest.raises(OSError) as ei:
            open(os.path.join(mnt, "a"), "rb")
        assert ei.value.errno == errno.EIO
        assert os.listdir(mnt)  # the mount still answers


def test_readahead_option(model, tmp):
    path, tensors, _ = model
    for kb in ("0", "64", "4096"):
        with mounted(path, "-o", f"readahead_kb={kb}") as mnt:
            assert open(os.path.join(mnt, "big"), "rb").read() == tensors["big"][3]
            if os.getuid() == 0 and kb != "0":
                dev = os.stat(mnt).st_dev
                ra = open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb").read()
                assert int(ra) == int(kb)
    r = run(["-o", "readahead_kb=lots", path, tmp])
    assert r.returncode == EXIT_USAGE and "readahead_kb" in r.stderr


def test_direct_io_tradeoff(model):
    """-o direct_io serves reads without the page cache. A shared mapping
    (np.memmap) works where the kernel lets a direct_io file be mapped
    shared (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6, which tensorfs asks for
    itself) and fails with ENODEV before, as the README states."""
    import mmap
    path, tensors, _ = model
    with mounted(path, "-o", "direct_io") as mnt:
        p = os.path.join(mnt, "big")
        assert open(p, "rb").read() == tensors["big"][3]
        with open(p, "rb") as f:
            if kernel_at_least(6, 6):
                m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                assert m[:] == tensors["big"][3]
                m.close()
            else:
                with pytest.raises(OSError) as ei:
                    mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                assert ei.value.errno == errno.ENODEV
    with mounted(path) as mnt:
        with open(os.path.join(mnt, "big"), "rb") as f:
            m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
            assert m[:100] == tensors["big"][3][:100]
            m.close()


def test_source_modified_in_place(tmp):
    """Same size, new bytes and mtime: new opens fail with EIO, and the
    daemon says so once."""
    fuse_ok()
    path = os.path.join(tmp, "m.safetensors")
    write_st(path, [("x", "U8", (4096,), rand_bytes(4096, 5)), ("y", "U8", (10,), b"0123456789")])
    mnt = os.path.join(tmp, "m")
    os.mkdir(mnt)
    p = subprocess.Popen([BIN, "-f", path, mnt], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 10
        while not is_mounted(mnt) and time.time() < deadline:
            time.sleep(0.01)
        assert open(os.path.join(mnt, "y"), "rb").read() == b"0123456789"
        time.sleep(0.02)
        with open(path, "r+b") as f:
            f.seek(-10, os.SEEK_END)
            f.write(b"abcdefghij")
        for name in ("y", "x", "y"):
            with pytest.raises(OSError) as ei:
                open(os.path.join(mnt, name), "rb")
            assert ei.value.errno == errno.EIO
        assert os.listdir(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", mnt])
        p.wait(timeout=10)
    err = p.stderr.read()
    assert err.count("changed since it was mounted") == 1, err
    assert err.startswith(f"tensorfs: {os.path.realpath(path)}: changed since it was mounted")


def test_source_replaced_by_rename(tmp):
    """A checkpoint replaced by rename (as downloaders do) keeps being
    served from the file that was mounted."""
    path = os.path.join(tmp, "r.safetensors")
    write_st(path, [("x", "U8", (5,), b"old!!")])
    with mounted(path) as mnt:
        held = open(os.path.join(mnt, "x"), "rb")
        new = os.path.join(tmp, "new.safetensors")
        write_st(new, [("x", "U8", (5,), b"new!!"), ("z", "U8", (1,), b"z")])
        os.rename(new, path)
        assert held.read() == b"old!!"
        held.close()
        assert open(os.path.join(mnt, "x"), "rb").read() == b"old!!"
        assert sorted(os.listdir(mnt)) == ["__metadata__.json", "__tensors__.tsv", "x"]
