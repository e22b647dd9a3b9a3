"""What a new user tripped on (issue 37, item 4): --help saying what each
command does, make demo in a directory of the user's own, the --stats
table's name column, --verify with another model's manifest, --list."""

import os
import pwd
import re
import shutil
import signal
import subprocess
import time

import pytest

from test_http import gen, web  # noqa: F401 (the nginx fixture)
from tfsutil import BIN, REPO, daemon_pids, fuse_ok, is_mounted, mounted, run, unmount, wait_gone, write_st


def test_help_says_what_each_command_does():
    """Each command has a line of its own in "commands:" saying what it
    does, and each is one the usage lines show."""
    r = run(["--help"])
    assert r.returncode == 0, r.stderr
    usage, rest = r.stdout.split("\ncommands:\n", 1)
    block = rest.split("\n\n", 1)[0].splitlines()
    seen = {}
    for line in block:
        m = re.match(r"^  (SOURCE MOUNTPOINT|--inspect|--verify|--stats|diff|--list) +(\S.{15,})$", line)
        assert m, f"not a command line: {line!r}"
        seen[m.group(1)] = m.group(2)
    assert sorted(seen) == sorted(["SOURCE MOUNTPOINT", "--inspect", "--verify", "--stats", "diff", "--list"])
    for cmd in seen:
        assert cmd in usage, cmd
    assert len(block) == len(seen)  # one line each
    assert all(len(line) <= 80 for line in block)


def _table_columns(text):
    """For each line of a --stats table, the column where 'dtype' (header)
    or the dtype (rows) starts."""
    lines = text.splitlines()
    starts = [lines[0].index("  dtype ") + 2]
    for line in lines[1:]:
        starts.append(line.index("  F32 ") + 2)
    return starts


@pytest.mark.parametrize("longest", [1, 39, 40, 41, 90])
def test_stats_name_column_pads_to_the_longest(tmp, longest):
    """The name column is as wide as the longest name (quoted, as shown),
    not a fixed 40: every row's dtype starts where the header's does."""
    src = os.path.join(tmp, "m.safetensors")
    names = ["a", "b" * longest, "ccc"]
    write_st(src, [(n, "F32", [2], b"\0" * 8) for n in names])
    r = run(["--stats", src])
    assert r.returncode == 0, r.stderr
    starts = _table_columns(r.stdout)
    width = max(len("name"), max(len(n) + 2 for n in names))  # + the quotes
    assert starts == [width + 2] * 4, r.stdout


def test_stats_name_column_counts_wide_characters(tmp):
    """A name of CJK characters takes two terminal columns per character:
    the columns after it stay aligned on a terminal."""
    src = os.path.join(tmp, "m.safetensors")
    names = ["权重" * 20, "w"]
    write_st(src, [(n, "F32", [2], b"\0" * 8) for n in names])
    r = run(["--stats", src])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # the display column of each row's dtype: wide characters count two
    def col(line, what):
        i = line.index(what)
        return i + sum(1 for ch in line[:i] if ord(ch) >= 0x1100)
    assert col(lines[0], "  dtype ") == col(lines[1], "  F32 ") == col(lines[2], "  F32 ") == 80 + 2


def _demo(env, tmp):
    repo_bin = os.path.join(REPO, "tensorfs")
    if BIN != repo_bin:
        pytest.skip("the demo runs ./tensorfs, not the sanitizer build")
    fuse_ok()
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run([os.path.join(REPO, "scripts", "demo.sh")], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("where", ["xdg", "tmpdir"])
def test_demo_uses_a_directory_of_the_users_own(tmp, where):
    """Without TENSORFS_DEMO_DIR, make demo mounts under $XDG_RUNTIME_DIR
    (the login's own) or else ${TMPDIR:-/tmp}/tensorfs-demo-UID, never a
    /tmp/tensorfs-demo that two users or checkouts would share; it says
    which directory and how to choose another."""
    # no tensorfs on the PATH: the demo says how to put it there
    env = dict(os.environ, TENSORFS_DEMO_DIR=None, PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    if where == "xdg":
        run_dir = os.path.join(tmp, "run")
        os.mkdir(run_dir, 0o700)
        env["XDG_RUNTIME_DIR"] = run_dir
        env["TMPDIR"] = os.path.join(tmp, "not-this")
        d = os.path.join(run_dir, "tensorfs-demo")
    else:
        env["XDG_RUNTIME_DIR"] = None
        env["TMPDIR"] = tmp
        d = os.path.join(tmp, f"tensorfs-demo-{os.getuid()}")
    r = _demo(env, tmp)
    mnt = os.path.join(d, "mnt")
    try:
        assert r.returncode == 0, r.stderr
        assert f"make demo: in {d} (set TENSORFS_DEMO_DIR" in r.stdout
        assert "fusermount3 -u " + mnt in r.stdout
        assert r.stdout.endswith("To call it as tensorfs: sudo make install, or make install "
                                 "PREFIX=$HOME/.local (with ~/.local/bin on your PATH)\n"), r.stdout[-300:]
        assert is_mounted(mnt)
        assert os.stat(d).st_mode & 0o777 == 0o700
        assert open(os.path.join(mnt, "model.embed_tokens.weight"), "rb").read(4) == b"\0" * 4
        assert not os.path.exists(os.path.join(tmp, "not-this"))
    finally:
        unmount(mnt, daemon_pids(mnt))


def test_two_checkouts_of_one_user_share_the_demo_directory(tmp):
    """The README said that two checkouts never unmount each other's demo:
    for one user both use $XDG_RUNTIME_DIR/tensorfs-demo, and the second
    make demo replaces the first one's mount. It says so now, and that
    TENSORFS_DEMO_DIR keeps them apart."""
    readme = " ".join(open(os.path.join(REPO, "README.md")).read().split())
    assert "two checkouts on one machine never" not in readme
    assert ("Two checkouts of one user share it: the second `make demo` unmounts the first one's example and "
            "mounts its own; give each its own `TENSORFS_DEMO_DIR`") in readme
    other = os.path.join(tmp, "other-checkout")
    os.makedirs(os.path.join(other, "scripts"))
    for f in ("scripts/demo.sh", "scripts/make-example.py", "tensorfs"):
        shutil.copy2(os.path.join(REPO, f), os.path.join(other, f))
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir, 0o700)
    env = dict(os.environ, TENSORFS_DEMO_DIR=None, XDG_RUNTIME_DIR=run_dir)
    mnt = os.path.join(run_dir, "tensorfs-demo", "mnt")
    r = _demo(env, tmp)
    try:
        assert r.returncode == 0, r.stderr
        first = daemon_pids(mnt)
        assert len(first) == 1 and os.readlink(f"/proc/{first[0]}/exe") == os.path.join(REPO, "tensorfs")
        env = {k: v for k, v in env.items() if v is not None}
        r = subprocess.run([os.path.join(other, "scripts", "demo.sh")], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert wait_gone(first[0])
        second = daemon_pids(mnt)
        assert len(second) == 1 and os.readlink(f"/proc/{second[0]}/exe") == os.path.join(other, "tensorfs")
    finally:
        unmount(mnt, daemon_pids(mnt))


def test_demo_refuses_a_directory_another_user_made(tmp):
    """In a shared /tmp another user can make tensorfs-demo-UID first: the
    demo refuses it with one line rather than mount into it."""
    if os.getuid() != 0:
        pytest.skip("needs root to make a directory another user owns")
    d = os.path.join(tmp, f"tensorfs-demo-{os.getuid()}")
    os.mkdir(d)
    nobody = pwd.getpwnam("nobody")
    os.chown(d, nobody.pw_uid, nobody.pw_gid)
    r = _demo(dict(os.environ, TENSORFS_DEMO_DIR=None, XDG_RUNTIME_DIR=None, TMPDIR=tmp), tmp)
    assert r.returncode == 1
    assert r.stderr == f"make demo: {d} is not a directory of yours; set TENSORFS_DEMO_DIR to one\n"
    assert os.listdir(d) == []
    # and a link planted in its place
    os.rmdir(d)
    os.mkdir(os.path.join(tmp, "elsewhere"))
    os.symlink(os.path.join(tmp, "elsewhere"), d)
    r = _demo(dict(os.environ, TENSORFS_DEMO_DIR=None, XDG_RUNTIME_DIR=None, TMPDIR=tmp), tmp)
    assert r.returncode == 1 and "is not a directory of yours" in r.stderr, r.stderr
    assert os.listdir(os.path.join(tmp, "elsewhere")) == []


def _sums(tmp, name, tensors):
    src = os.path.join(tmp, name + ".safetensors")
    write_st(src, [(n, "F32", [2], bytes([i]) * 8) for i, n in enumerate(tensors)])
    return src


def test_verify_says_first_the_manifest_is_of_another_model(tmp):
    """With most of the manifest's names missing, --verify says first
    (before the line per name) that the manifest seems to be of another
    model; the lines and the exit code stay."""
    a = _sums(tmp, "a", [f"model.layers.{i}.weight" for i in range(12)])
    b = _sums(tmp, "b", [f"transformer.h.{i}.weight" for i in range(11)] + ["model.layers.0.weight"])
    r = run(["--verify", a])
    assert r.returncode == 0, r.stderr
    manifest = os.path.join(tmp, "a.sums")
    open(manifest, "w").write(r.stdout)
    r = subprocess.run([BIN, "--verify", b, manifest], capture_output=True, text=True, timeout=60)
    assert r.returncode == 6, r.stderr
    err = r.stderr.splitlines()
    assert err[0] == (f"tensorfs: {manifest}: 11 of its 12 names are not in {b}: "
                      "this manifest seems to be of another model"), r.stderr
    assert r.stdout.count("in the manifest, not in the checkpoint") == 11
    # with stdout and stderr on one pipe, the note still comes first
    r = subprocess.run([BIN, "--verify", b, manifest], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.stdout.startswith(f"tensorfs: {manifest}: 11 of its 12"), r.stdout


def test_verify_names_no_other_model_for_a_few_missing(tmp):
    """A manifest of the same model with a tensor gone or renamed is not
    "another model": only its lines."""
    names = [f"model.layers.{i}.weight" for i in range(12)]
    a = _sums(tmp, "a", names)
    b = _sums(tmp, "b", names[:10] + ["renamed.0", "renamed.1"])
    manifest = os.path.join(tmp, "a.sums")
    open(manifest, "w").write(run(["--verify", a]).stdout)
    r = run(["--verify", b, manifest])
    assert r.returncode == 6
    assert "another model" not in r.stderr, r.stderr
    assert r.stdout.count("in the manifest, not in the checkpoint") == 2


def _list_entries(out):
    """--list's output as {mount point: (pid, source, [detail lines])}."""
    lines = out.splitlines()
    assert lines[0].split() == ["PID", "MOUNTPOINT", "SOURCE"], out
    entries, cur = {}, None
    for line in lines[1:]:
        if line.startswith("         "):
            cur[2].append(line.strip())
            continue
        pid, rest = line.split(None, 1)
        mnt, source = rest.split("  ", 1)
        cur = (pid, source, [])
        entries[mnt] = cur
    return entries


def test_list_names_each_mount_its_daemon_and_options(tmp):
    """--list shows each mount of the caller's: mount point, source, the
    daemon's PID (the one that takes kill -USR1 and SIGTERM) and its -o
    options; a path with a space stays on its line."""
    fuse_ok()
    a = _sums(tmp, "a", ["x", "y"])
    mnts = [os.path.join(tmp, "m1"), os.path.join(tmp, "m 2")]
    for m in mnts:
        os.mkdir(m)
    log = os.path.join(tmp, "log")
    try:
        assert run(["-o", f"layout=tree,logfile={log}", a, mnts[0]]).returncode == 0
        assert run([a, mnts[1]]).returncode == 0
        r = run(["--list"])
        assert r.returncode == 0, r.stderr
        e = _list_entries(r.stdout)
        for m in mnts:
            assert m in e, r.stdout
            pid, source, detail = e[m]
            assert [int(pid)] == daemon_pids(m)
            assert source == a
        assert e[mnts[0]][2] == [f"options: -o layout=tree,logfile={log}"]
        assert e[mnts[1]][2] == []
        # the PID is the daemon's: SIGUSR1 logs its counters, SIGTERM unmounts
        pid = int(e[mnts[0]][0])
        os.kill(pid, signal.SIGUSR1)
        deadline = time.time() + 20
        while "counters (SIGUSR1)" not in (open(log).read() if os.path.exists(log) else ""):
            assert time.time() < deadline, "no counters in the log after SIGUSR1"
            time.sleep(0.05)
        os.kill(pid, signal.SIGTERM)
        assert wait_gone(pid)
        assert not is_mounted(mnts[0])
        assert mnts[0] not in _list_entries(run(["--list"]).stdout)
    finally:
        for m in mnts:
            unmount(m, daemon_pids(m))


def test_list_never_waits_for_a_stopped_daemon(tmp):
    """A stopped daemon is named as not answering within a few seconds, and
    the other mounts are still listed."""
    fuse_ok()
    a = _sums(tmp, "a", ["x"])
    mnts = [os.path.join(tmp, "m1"), os.path.join(tmp, "m2")]
    for m in mnts:
        os.mkdir(m)
        assert run([a, m]).returncode == 0
    pid = daemon_pids(mnts[0])[0]
    try:
        os.kill(pid, signal.SIGSTOP)
        t0 = time.time()
        r = run(["--list"])
        assert time.time() - t0 < 30
        e = _list_entries(r.stdout)
        assert e[mnts[0]] == ("-", a, ["daemon: not answering (stopped or hung?)"]), r.stdout
        assert int(e[mnts[1]][0]) == daemon_pids(mnts[1])[0]
    finally:
        os.kill(pid, signal.SIGCONT)
        for m in mnts:
            unmount(m, daemon_pids(m))


def test_list_of_a_remote_mount_shows_counters_and_no_secret(web, tmp):  # noqa: F811
    """A remote mount's entry has its counters (requests, bytes, cache),
    and neither the source nor the options show a password."""
    fuse_ok()
    gen(web, "list/one.safetensors", [("w", "U8", [4096], bytes(range(256)) * 16)])
    url = web.url(path="gen/list/one.safetensors").replace("http://", "http://me:s3cr3t@")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    try:
        r = run(["-o", "cache_size=8M", url, mnt], env=dict(os.environ, NO_PROXY="*"))
        assert r.returncode == 0, r.stderr
        assert open(os.path.join(mnt, "w"), "rb").read() == bytes(range(256)) * 16
        r = run(["--list"])
        e = _list_entries(r.stdout)
        pid, source, detail = e[mnt]
        assert int(pid) == daemon_pids(mnt)[0]
        assert "s3cr3t" not in r.stdout and source.endswith("/gen/list/one.safetensors"), r.stdout
        assert detail[0] == "options: -o cache_size=8M"
        assert detail[1].startswith("counters: ") and "request" in detail[1], detail
    finally:
        unmount(mnt, daemon_pids(mnt))


def test_list_takes_no_other_argument():
    r = run(["--list", "--json"])
    assert r.returncode == 2
    assert r.stderr == "tensorfs: --list takes no other argument (usage: tensorfs --list)\n"


def _dir_of(tmp, files):
    """files: {file name: (metadata, [tensor names])}."""
    d = os.path.join(tmp, "models")
    os.makedirs(d, exist_ok=True)
    for fn, (meta, names) in files.items():
        write_st(os.path.join(d, fn), [(n, "F32", [2], b"\1" * 8) for n in names], metadata=meta)
    return d


def _mount_warnings(d, tmp):
    """Mounts the directory (daemon mode): its stderr, after checking that
    every tensor of every file is served."""
    fuse_ok()
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    r = run([d, mnt])
    try:
        assert r.returncode == 0, r.stderr
        names = sorted(os.listdir(mnt))
        assert all(open(os.path.join(mnt, n), "rb").read() == b"\1" * 8
                   for n in names if not n.startswith("__")), names
        return r.stderr
    finally:
        unmount(mnt, daemon_pids(mnt))


def warn_tail(d, first):
    """What the warning says to do: the files are all of one format (a
    directory mounts one format's files), so -o input=FORMAT, which it
    used to suggest, cannot part them."""
    return ("yet a directory without an index is mounted as one: mount each file on its own "
            f"({d}/{first}), or give each model's files a directory or an index "
            "(model.safetensors.index.json) of their own\n")


def test_directory_of_two_models_with_other_layers_warns(tmp):
    """Two checkpoints of other architectures in one directory (no index):
    mounted as before, with one warning naming the two files and what to
    do; --inspect says the same."""
    d = _dir_of(tmp, {
        "llama.safetensors": ({"format": "pt"}, [f"model.layers.{i}.mlp.up_proj.weight" for i in range(3)]
                              + ["model.embed_tokens.weight"]),
        "gpt2.safetensors": ({"format": "pt"}, [f"transformer.h.{i}.attn.c_attn.weight" for i in range(3)]
                             + ["transformer.wte.weight"]),
    })
    want = (f"tensorfs: {d}: warning: its 2 files do not look like one model ('gpt2.safetensors' and "
            f"'llama.safetensors' have no layer names in common), " + warn_tail(d, "gpt2.safetensors"))
    assert _mount_warnings(d, tmp) == want
    r = run(["--inspect", d])
    assert r.returncode == 0 and r.stderr == want, r.stderr
    assert "8 tensors" in r.stdout


def test_directory_of_two_formats_of_metadata_warns(tmp):
    """__metadata__ whose "format" differs between files (a PyTorch export
    beside an MLX one) is named in the warning."""
    d = _dir_of(tmp, {
        "a.safetensors": ({"format": "pt"}, ["model.layers.0.w"]),
        "b.safetensors": ({"format": "mlx"}, ["model.layers.1.w"]),
    })
    assert _mount_warnings(d, tmp) == (
        f"tensorfs: {d}: warning: its 2 files do not look like one model ('a.safetensors' says format "
        f"'pt', 'b.safetensors' says 'mlx'), " + warn_tail(d, "a.safetensors"))


def test_directory_of_one_sharded_model_says_nothing(tmp):
    """Shards of one model without an index (layers split across files,
    the embedding in the first, the head in the last, a shard with no
    numbered tensor) mount without a word."""
    d = _dir_of(tmp, {
        "model-00001-of-00003.safetensors": ({"format": "pt"}, ["model.embed_tokens.weight"]
                                             + [f"model.layers.{i}.mlp.up_proj.weight" for i in range(4)]
                                             + [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(4)]),
        "model-00002-of-00003.safetensors": ({"format": "pt"}, ["model.layers.4.mlp.up_proj.weight"]),
        "model-00003-of-00003.safetensors": ({"format": "pt"}, ["lm_head.weight", "model.norm.weight"]),
    })
    assert _mount_warnings(d, tmp) == ""


def test_directory_of_the_same_model_twice_names_the_cause(tmp):
    """A base model and its fine-tune (same names) cannot be merged: the
    refusal now says the directory seems to hold more than one model."""
    names = [f"model.layers.{i}.w" for i in range(2)]
    d = _dir_of(tmp, {"base.safetensors": ({"format": "pt"}, names),
                      "tuned.safetensors": ({"format": "pt"}, names)})
    r = run(["--inspect", d])
    assert r.returncode == 4
    assert r.stderr == (f"tensorfs: {d}: tensor 'model.layers.0.w' is in two shards, 'base.safetensors' and "
                        "'tuned.safetensors': the directory seems to hold more than one model; mount one file\n")


@pytest.mark.parametrize("shape,want", [((16, 15360), (256, 1024)), ((4, 320), (80, 320)),
                                        ((320, 4), (320, 80)), ((64, 64), (256, 256))])
def test_pictures_of_lora_factors_keep_a_visible_aspect(tmp, shape, want):
    """A LoRA factor's picture ([16, 15360], [4, 320]) is at most 4:1, its
    rows (or columns) repeated, not a strip 16 pixels high that a
    thumbnail shrinks to a line; each band is one row of cells, and a
    file manager's thumbnailer (gdk-pixbuf) still reads it."""
    import numpy as np
    from test_pictures import heat_all, load
    rng = np.random.default_rng(7)
    v = rng.standard_normal(shape).astype(np.float32)
    src = os.path.join(tmp, "lora.safetensors")
    write_st(src, [("lora_A.weight", "F32", shape, v.tobytes())])
    with mounted(src, "-o", "pictures") as mnt:
        png = os.path.join(mnt, "lora_A.weight.png")
        pix, comment, _ = load(png)
        assert pix.shape == want, pix.shape
        assert max(want) <= 4 * min(want)
        assert (pix == heat_all(v)).all()
        # rows repeated: every band of a cell row is one row of pixels
        fy = want[0] // min(shape[0], 1024)
        assert (pix.reshape(-1, fy, pix.shape[1]) == pix[::fy][:, None, :]).all()
        assert os.stat(png).st_size == len(open(png, "rb").read())
        if shutil.which("gdk-pixbuf-thumbnailer"):
            thumb = os.path.join(tmp, "thumb.png")
            r = subprocess.run(["gdk-pixbuf-thumbnailer", "-s", "128", png, thumb], capture_output=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
            from PIL import Image
            with Image.open(thumb) as im:
                assert min(im.size) >= 128 // 4, im.size


def test_plain_make_builds_tensorfs_without_werror():
    """`make` alone links ./tensorfs (the first rule of the Makefile once
    was a flag stamp's, and a plain make rebuilt nothing), and never with
    -Werror, which only make check and CI ask for (WERROR=1)."""
    env = {k: v for k, v in os.environ.items() if k not in ("WERROR", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    r = subprocess.run(["make", "-n", "-B"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    links = [line for line in r.stdout.splitlines() if re.search(r"(^|\s)-o tensorfs(\s|$)", line)]
    assert len(links) == 1, r.stdout[-2000:]
    assert "-Werror" not in r.stdout


# What only the tests need: make demo must not ask for them.
TEST_PACKAGES = {"clang", "libclang-rt-14-dev", "clang-format", "valgrind", "nginx-light",
                 "libnginx-mod-http-echo", "python3-pytest", "python3-pytest-xdist", "python3-numpy",
                 "python3-zarr", "python3-dask", "python3-xarray", "python3-pil", "libgdk-pixbuf2.0-bin",
                 "xxhash", "curl", "aria2", "ca-certificates", "psmisc", "nodejs", "npm", "python3-torch"}
BUILD_PACKAGES = {"gcc", "make", "pkg-config", "libc6-dev", "libfuse3-dev", "fuse3", "libjson-c-dev",
                  "libcurl4-openssl-dev", "libxxhash-dev", "libssl-dev", "libpng-dev", "liblz4-dev"}


def _make_n(target, *flags):
    """make -n TARGET's output. Never for check: make runs a line that
    holds $(MAKE) even under -n, and check's would run the suite (which
    holds this test)."""
    assert target != "check"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    r = subprocess.run(["make", "-n", *flags, target], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _packages_asked(target):
    """The Debian packages `make TARGET` asks for: its install-deps.sh
    command, read from make -n, asked to --list (which installs nothing)."""
    cmds = [line.strip().lstrip("@") for line in _make_n(target).splitlines() if "install-deps.sh" in line]
    assert len(cmds) == 1, cmds
    r = subprocess.run(["bash", "-c", cmds[0] + " --list"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_make_demo_asks_for_the_build_toolchain_and_fuse_only():
    """make demo installed the whole test toolchain (clang, valgrind,
    nginx, dask...); it asks for the build toolchain, FUSE and what the
    demo itself runs (python3, getfattr, hexdump), and make check (through
    make deps) for everything."""
    demo = _packages_asked("demo")
    assert BUILD_PACKAGES | {"python3", "attr", "bsdextrautils"} == demo, demo
    check = _packages_asked("deps")
    assert demo <= check and (TEST_PACKAGES - {"python3-torch", "nodejs", "npm"}) <= check, check
    # check needs deps: make's database, printed by a make -n of deps
    db = _make_n("deps", "-p")
    assert re.search(r"^check: test-tools$", db, flags=re.M) and re.search(r"^test-tools: deps$", db, flags=re.M)


def test_options_of_other_sources_are_said_to_do_nothing(web, tmp):  # noqa: F811
    """-o cache_size= (remote sources) or -o path_style (S3) with a local
    file is accepted, as sshfs accepts what does not apply, but said once
    each, naming the sources it is for; the remote source's own options
    say nothing."""
    fuse_ok()
    src = os.path.join(tmp, "m.safetensors")
    write_st(src, [("w", "U8", [4], b"abcd")])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    try:
        r = run(["-o", "cache_size=8M,path_style,retries=2", "-o", "cache_size=9M", src, mnt])
        assert r.returncode == 0, r.stderr
        assert open(os.path.join(mnt, "w"), "rb").read() == b"abcd"
        lines = r.stderr.splitlines()
        assert len(lines) == 3, r.stderr
        for line, opt, whose in zip(lines, ("cache_size", "path_style", "retries"),
                                    ("http://", "s3://", "http://")):
            assert line.startswith(f"tensorfs: {src}: warning: -o {opt} is an option of "), line
            assert whose in line.split(" sources")[0] and line.endswith("it does nothing here"), line
        assert "s3://" in lines[0] and "http://" not in lines[1], lines
    finally:
        unmount(mnt, daemon_pids(mnt))
    r = run(["--inspect", "-o", "warm", src])
    assert r.returncode == 0 and r.stderr.count("\n") == 1 and "-o warm is an option of" in r.stderr, r.stderr
    gen(web, "foreign/one.safetensors", [("w", "U8", [4], b"abcd")])
    url = web.url(path="gen/foreign/one.safetensors")
    r = run(["--inspect", "-o", "cache_size=8M,retries=2", url], env=dict(os.environ, NO_PROXY="*"))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    r = run(["--inspect", "-o", "path_style", url], env=dict(os.environ, NO_PROXY="*"))
    assert r.returncode == 0 and "-o path_style is an option of s3:// sources" in r.stderr, r.stderr


def _list_all(out):
    """--list's output as a list of (mount point, pid, source, [detail lines]),
    in its order (two mounts may share a mount point)."""
    lines = out.splitlines()
    assert lines[0].split() == ["PID", "MOUNTPOINT", "SOURCE"], out
    entries = []
    for line in lines[1:]:
        if line.startswith("         "):
            entries[-1][3].append(line.strip())
            continue
        pid, rest = line.split(None, 1)
        mnt, source = rest.split("  ", 1)
        entries.append((mnt, pid, source, []))
    return entries


def test_list_names_a_covered_mount_covered(tmp):
    """Two mounts on one mount point (-o overmount): --list showed the upper
    daemon's PID and options for the lower mount too, and killing that PID
    killed the wrong daemon. Each entry shows its own daemon, or says that
    it is covered; so does a mount hidden by a mount on a directory above
    it. Once the upper one is gone, the lower one's own daemon shows."""
    fuse_ok()
    a = _sums(tmp, "a", ["x"])
    b = _sums(tmp, "b", ["y"])
    top = os.path.join(tmp, "top")
    mnt = os.path.join(top, "m")
    os.makedirs(mnt)
    covered = "daemon: covered by another mount on top of it: unmount that one first to reach this one's daemon"
    try:
        assert run(["-o", "layout=tree", a, mnt]).returncode == 0
        lower = daemon_pids(mnt)
        assert len(lower) == 1
        r = run(["-o", "overmount,notsv", b, mnt])
        assert r.returncode == 0, r.stderr
        upper = [p for p in daemon_pids(mnt) if p not in lower]
        assert len(upper) == 1
        mine = [e for e in _list_all(run(["--list"]).stdout) if e[0] == mnt]
        assert mine == [(mnt, "-", a, [covered]), (mnt, str(upper[0]), b, ["options: -o overmount,notsv"])], mine
        # a mount on a directory above hides it too
        r = run(["-o", "overmount", b, top])
        assert r.returncode == 0, r.stderr
        mine = [e for e in _list_all(run(["--list"]).stdout) if e[0] in (mnt, top)]
        assert [(e[0], e[1], e[3]) for e in mine[:2]] == [(mnt, "-", [covered])] * 2, mine
        assert mine[2][0] == top and mine[2][1] != "-", mine
        subprocess.run(["fusermount3", "-u", top], check=True)
        subprocess.run(["fusermount3", "-u", mnt], check=True)
        assert wait_gone(upper[0])
        mine = [e for e in _list_all(run(["--list"]).stdout) if e[0] == mnt]
        assert mine == [(mnt, str(lower[0]), a, ["options: -o layout=tree"])], mine
    finally:
        for m in (top, mnt, mnt):
            unmount(m)
