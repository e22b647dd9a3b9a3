"""Fitting the system like sshfs does (issue 28): what a new user meets
first. Warnings for what is left out, messages that name the real cause."""

import os

import numpy as np

import gen_gguf as G
from tfsutil import mounted, run, write_st


def test_other_formats_in_a_directory_are_named(tmp):
    """A directory is one model of one format: files of another format
    beside it are not mounted, and one warning names them."""
    d = os.path.join(tmp, "d")
    os.mkdir(d)
    write_st(os.path.join(d, "model.safetensors"), [("w", "F32", [2], np.ones(2, "<f4").tobytes())])
    open(os.path.join(d, "model-q4.gguf"), "wb").write(G.build([], [("v", 0, [1], b"\0" * 4)]))
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run([d, mnt])
    try:
        assert r.returncode == 0, r.stderr
        lines = [l for l in r.stderr.splitlines() if "warning" in l]
        assert len(lines) == 1 and "model-q4.gguf" in lines[0] and "not mounted" in lines[0], r.stderr
        assert sorted(n for n in os.listdir(mnt) if not n.startswith("__")) == ["w"]
    finally:
        os.system(f"fusermount3 -u {mnt} 2>/dev/null")
    # alone, no warning
    os.unlink(os.path.join(d, "model-q4.gguf"))
    with mounted(d) as m:
        assert "w" in os.listdir(m)
    r = run(["--inspect", d])
    assert r.returncode == 0 and "warning" not in r.stderr


def test_readme_first_example_is_true(tmp):
    """The README's first example, run again: every command's output is
    the one shown (dates, owner and the source's directory aside)."""
    import re
    import shutil
    import subprocess
    from tfsutil import BIN, REPO
    text = open(os.path.join(REPO, "README.md")).read()
    block = text.split("this is the output of a real run:\n\n```console\n", 1)[1].split("```", 1)[0]
    subprocess.run(["/usr/bin/python3", os.path.join(REPO, "scripts", "make-example.py"),
                    os.path.join(tmp, "example.safetensors")], check=True, capture_output=True)
    os.mkdir(os.path.join(tmp, "mnt"))
    env = dict(os.environ, PATH=os.path.dirname(BIN) + ":" + os.environ["PATH"])
    if os.path.basename(BIN) != "tensorfs":
        shutil.copy(BIN, os.path.join(tmp, "tensorfs"))
        env["PATH"] = tmp + ":" + env["PATH"]

    def norm(s):
        s = re.sub(r"\S+ \S+ +(\d+) \w{3} [ \d]\d \d\d:\d\d ", r"OWNER \1 DATE ", s)
        s = re.sub(r'user.source="[^"]*/example.safetensors"', 'user.source=".../example.safetensors"', s)
        return re.sub(r"^total \d+\n", "", s, flags=re.M).rstrip("\n")

    cmds = re.split(r"^\$ ", block, flags=re.M)[1:]
    try:
        for c in cmds:
            cmd, _, want = c.partition("\n")
            r = subprocess.run(["bash", "-c", cmd], cwd=tmp, env=env, capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, (cmd, r.stderr)
            assert norm(r.stdout) == norm(want), (cmd, r.stdout, want)
    finally:
        subprocess.run(["fusermount3", "-u", os.path.join(tmp, "mnt")], capture_output=True)


def test_archives_and_compressed_files_are_named(tmp):
    """A tar, gzip, zstd, xz, bzip2 or 7-Zip file (what a download often
    is) gets a message that says what it is and what to do, exit 4, not a
    header length of 19 digits or "a text file"."""
    import bz2
    import gzip
    import lzma
    import tarfile
    from tfsutil import EXIT_FORMAT
    st = os.path.join(tmp, "model.safetensors")
    write_st(st, [("w", "F32", [256], np.ones(256, "<f4").tobytes())])
    raw = open(st, "rb").read()
    cases = {
        "model.safetensors.gz": (gzip.compress(raw), "gzip-compressed", "gunzip"),
        "model.safetensors.xz": (lzma.compress(raw), "xz-compressed", "xz -d"),
        "model.safetensors.bz2": (bz2.compress(raw), "bzip2-compressed", "bunzip2"),
        "model.safetensors.zst": (b"\x28\xb5\x2f\xfd" + b"\0" * 64, "zstd-compressed", "zstd -d"),
        "model.7z": (b"7z\xbc\xaf\x27\x1c" + b"\0" * 64, "7-Zip archive", "7z x"),
    }
    tar = os.path.join(tmp, "model.tar")
    with tarfile.open(tar, "w") as t:
        t.add(st, arcname="model.safetensors")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    for name, (data, what, fix) in cases.items():
        p = os.path.join(tmp, name)
        open(p, "wb").write(data)
        cases[name] = (p, what, fix)
    cases["model.tar"] = (tar, "tar archive", "tar -xf")
    for name, (p, what, fix) in cases.items():
        for args in ([p, mnt], ["--inspect", p]):
            r = run(args)
            assert r.returncode == EXIT_FORMAT, (name, r.stderr)
            assert r.stderr.count("\n") == 1 and what in r.stderr and fix in r.stderr, (name, r.stderr)


def test_readahead_as_non_root_warns(tmp):
    """-o readahead_kb needs root: as another user, one warning says the
    kernel's readahead stays (the mount itself may still go on)."""
    import shutil
    import subprocess
    import tempfile
    from tfsutil import BIN, missing
    if os.getuid() != 0 or not shutil.which("setpriv"):
        missing("root and setpriv (to run tensorfs as another user)")
    top = tempfile.mkdtemp(prefix="tfs-ra-")
    try:
        os.chmod(top, 0o755)
        p = os.path.join(top, "a.safetensors")
        write_st(p, [("w", "F32", [1], np.ones(1, "<f4").tobytes())])
        os.chmod(p, 0o644)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BIN,
                            "-o", "readahead_kb=8192", p, os.path.join(top, "absent")],
                           capture_output=True, text=True, timeout=60)
        lines = r.stderr.splitlines()
        assert any("warning: -o readahead_kb=8192 needs root" in l for l in lines), r.stderr
        assert r.returncode != 0  # the mount point is absent: exit 5, after the warning
    finally:
        shutil.rmtree(top)


def help_text():
    r = run(["--help"])
    assert r.returncode == 0
    return r.stdout


def man_text():
    from tfsutil import REPO
    return open(os.path.join(REPO, "docs", "tensorfs.1")).read()


def man_section(man, name):
    return man.split(f"\n.SH {name}\n", 1)[1].split("\n.SH ", 1)[0]


def test_man_page_formats_are_true(tmp):
    """What the man page says of PyTorch files holds: the zip format is
    read, the legacy format and a bare pickle are refused (the page used
    to say "zip and legacy"), whatever the name (.bin, .pt, .pth)."""
    import pickle
    import re
    from tfsutil import EXIT_FORMAT
    desc = man_section(man_text(), "DESCRIPTION")
    formats = re.sub(r"\\f[BIRP]|\n", " ", desc.split("Formats:", 1)[1].split("\n.PP\n", 1)[0])
    assert "zip and legacy" not in formats
    assert re.search(r"legacy format .* refused", formats), formats
    assert ".bin" in formats and ".pt" in formats and ".pth" in formats
    legacy = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."  # torch.save before 1.6
    bare = pickle.dumps({"w": 1}, protocol=2)
    for data, want in ((legacy, "legacy format"), (bare, "a bare pickle")):
        for ext in (".bin", ".pt", ".pth"):
            p = os.path.join(tmp, "m" + ext)
            open(p, "wb").write(data)
            r = run(["--inspect", p])
            assert r.returncode == EXIT_FORMAT and want in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_man_page_agrees_with_help():
    """docs/tensorfs.1 names every -o option --help names and no other,
    every exit status, every environment variable, and --version's
    version; --help names the remote sources and the environment."""
    import re
    import shutil
    import subprocess
    from tfsutil import REPO
    help_ = help_text()
    man = man_text()
    listed = help_.split("-o opt[,opt...]", 1)[1].split("\n", 1)[1].split("\n\n")[0]
    help_opts = set(re.findall(r"^ {7}([a-z_]+)", listed, flags=re.M))
    opts = man_section(man, "OPTIONS").split("\n.SS Mount options\n", 1)[1]
    man_opts = set()
    for tag in re.findall(r"^\.TP\n(\.B[IR]? .*)$", opts, flags=re.M):
        word = re.sub(r"\\f[BIR]|\\-|\"", "", tag.split(" ", 1)[1]).strip()
        name = re.split(r"[=, ]", word)[0]
        if re.fullmatch(r"[a-z_]+", name):
            man_opts.add(name)
    assert help_opts and help_opts == man_opts, (help_opts ^ man_opts)
    codes = set(re.findall(r"(\d) [a-z-]", help_.split("exit status:", 1)[1].split("Unmount", 1)[0]))
    assert codes == set(re.findall(r"^\.B (\d)$", man_section(man, "EXIT STATUS"), flags=re.M))
    env = set(re.findall(r"\b([A-Z][A-Z_]{3,})\b", help_.split("environment:", 1)[1].split("\n\n")[0]))
    man_env = re.sub(r"\\f[BIRP]", " ", man_section(man, "ENVIRONMENT"))
    assert env and env <= set(re.findall(r"\b([A-Z][A-Z_]{3,})\b", man_env)), env
    for scheme in ("http(s)://", "hf://", "s3://"):
        assert scheme in help_
    version = run(["--version"]).stdout.split()[1]
    assert f'"tensorfs {version}"' in man.split("\n.TH ", 1)[1].split("\n", 1)[0]
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", os.path.join(REPO, "docs", "tensorfs.1")], capture_output=True,
                           text=True, env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0"))
        assert r.returncode == 0 and "tensorfs - mount a model checkpoint" in r.stdout, r.stderr
        assert not r.stderr.strip(), r.stderr


def complete(words, tmp):
    """COMPREPLY of the bash completion for the command line `words` (the
    last one being completed)."""
    import subprocess
    from tfsutil import BIN, REPO
    script = os.path.join(REPO, "docs", "tensorfs.bash")
    line = " ".join(words)
    prog = f"""
source {script}
COMP_WORDS=({' '.join(repr(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE={line!r}
_tensorfs
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = dict(os.environ, PATH=os.path.dirname(BIN) + ":" + os.environ["PATH"])
    r = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, cwd=tmp, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    return [l for l in r.stdout.splitlines() if l]


def test_bash_completion(tmp):
    """Options, -o keys (after a comma too) and their values, and local
    paths for SOURCE."""
    import shutil
    from tfsutil import BIN
    if os.path.basename(BIN) != "tensorfs":
        shutil.copy(BIN, os.path.join(tmp, "tensorfs"))
    assert complete(["tensorfs", "--ins"], tmp) == ["--inspect"]
    assert "layout=" in complete(["tensorfs", "-o", "lay"], tmp)
    assert complete(["tensorfs", "-o", "layout=t"], tmp) == ["layout=tree"]
    assert complete(["tensorfs", "-o", "export,for"], tmp) == ["export,format="]
    assert sorted(complete(["tensorfs", "-o", "format="], tmp)) == ["format=npy", "format=raw"]
    assert "input=gguf" in complete(["tensorfs", "-o", "input="], tmp)
    assert "cache_dir=" in complete(["tensorfs", "-o", "cache_"], tmp)
    assert "max_shard_size=" in complete(["tensorfs", "-o", "max_"], tmp)
    open(os.path.join(tmp, "model.safetensors"), "w").close()
    os.mkdir(os.path.join(tmp, "mnt"))
    assert complete(["tensorfs", "mod"], tmp) == ["model.safetensors"]
    assert complete(["tensorfs", "model.safetensors", "mn"], tmp) == ["mnt"]
    assert complete(["tensorfs", "-o", "edits=mod"], tmp) == ["edits=model.safetensors"]


def help_options():
    """The -o keys (with '=' when they take a value) and the dashed options
    that --help lists, read from it independently of the completion: the
    name column of every line of the -o list ("uid=N, gid=N" names two),
    and every -x/--xx of the usage lines and of the option lines."""
    import re
    help_ = help_text()
    block = help_.split("-o opt[,opt...]", 1)[1].split("\n", 1)[1].split("\n\n")[0]
    keys = set()
    for line in block.splitlines():
        m = re.match(r"^ {7}(\S.*?)(?: {2,}|$)", line)
        for item in (m.group(1).split(", ") if m else []):
            k = re.match(r"([a-z_]+)(=?)", item)
            if k:
                keys.add(k.group(1) + k.group(2))
    usage = help_.split("\n\n", 1)[0]
    opt_lines = "\n".join(l for l in help_.splitlines() if re.match(r"^ {4}-", l))
    dashed = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", usage + "\n" + opt_lines))
    return keys, dashed


def test_bash_completion_offers_exactly_the_options_of_help(tmp):
    """Every -o key and every dashed option --help lists, and nothing else:
    the completion offered 'tensorfs' (a usage line) as an -o key and never
    gid= (the second key of 'uid=N, gid=N')."""
    import shutil
    from tfsutil import BIN
    if os.path.basename(BIN) != "tensorfs":
        shutil.copy(BIN, os.path.join(tmp, "tensorfs"))
    keys, dashed = help_options()
    assert {"uid=", "gid=", "layout=", "export", "cache_dir=", "allow_other"} <= keys and "tensorfs" not in keys
    assert {"-o", "--inspect", "--verify", "--xxh64", "--json", "--stats", "-h", "--help"} <= dashed
    assert set(complete(["tensorfs", "-o", ""], tmp)) == keys
    assert set(complete(["tensorfs", "-o", "export,"], tmp)) == {"export," + k for k in keys}
    assert set(complete(["tensorfs", "-"], tmp)) == dashed
    assert complete(["tensorfs", "-o", "gi"], tmp) == ["gid="]


def test_every_value_the_completion_offers_is_documented(tmp):
    """-o convert=none was documented nowhere but in the completion: each
    value the completion offers for layout=, format= and convert= is in
    --help, in the option table of Mounting and in the man page's entry of
    its key."""
    import re
    import shutil
    from tfsutil import BIN, REPO
    if os.path.basename(BIN) != "tensorfs":
        shutil.copy(BIN, os.path.join(tmp, "tensorfs"))
    help_ = help_text()
    man = man_section(man_text(), "OPTIONS")
    table = open(os.path.join(REPO, "docs", "mounting.md")).read().split("## Mount options", 1)[1]
    for key in ("layout", "format", "convert"):
        values = [c.split("=", 1)[1] for c in complete(["tensorfs", "-o", f"{key}="], tmp)]
        assert len(values) >= 2, (key, values)
        hline = re.search(rf"^ {{7}}{key}=(\S+)", help_, flags=re.M)
        assert hline and sorted(hline.group(1).split("|")) == sorted(values), (key, values)
        row = next(line for line in table.splitlines() if line.startswith(f"| `{key}="))
        tag = re.search(rf"^\.TP\n\.BR? {key}=.*?(?=^\.TP$)", man, flags=re.M | re.S)
        entry = re.sub(r"\\f[BIRP]|\\-", "", tag.group(0)) if tag else ""
        for v in values:
            assert f"`{key}={v}`" in row, (key, v, row)
            assert re.search(rf"\b{v}\b", entry), (key, v, entry)
    # what convert=none does: the stored bytes, also after convert=f32
    src = os.path.join(tmp, "b.safetensors")
    write_st(src, [("w", "BF16", [2], b"\x80\x3f\x00\x40")])
    plain, f32, none = (run(["--verify"] + o + [src]).stdout
                        for o in ([], ["-o", "convert=f32"], ["-o", "convert=f32,convert=none"]))
    assert plain == none != f32 and plain


def test_make_install_puts_manual_and_completion(tmp):
    """make install: the binary, the man page (man finds it) and the bash
    completion, under DESTDIR."""
    import subprocess
    from tfsutil import REPO
    dest = os.path.join(tmp, "root")
    # -o tensorfs: the binary as make check built it. Without it, make
    # install (no WERROR=1) saw other flags, rebuilt every object and
    # relinked ./tensorfs while the tests beside this one ran it (exec
    # then fails with EACCES until the link ends).
    r = subprocess.run(["make", "-s", "-o", "tensorfs", "install", f"DESTDIR={dest}", "PREFIX=/usr"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for p in ("usr/bin/tensorfs", "usr/share/man/man1/tensorfs.1",
              "usr/share/bash-completion/completions/tensorfs"):
        assert os.path.isfile(os.path.join(dest, p)), p
    assert open(os.path.join(dest, "usr/share/man/man1/tensorfs.1")).read() == man_text()


def test_debug_shows_fuse_requests(tmp):
    """-d prints libfuse's own trace of every request, in the foreground,
    as --help says (it printed nothing: the log callback dropped them)."""
    import subprocess
    import time
    from tfsutil import BIN, is_mounted
    p = os.path.join(tmp, "a.safetensors")
    write_st(p, [("w", "F32", [4], np.arange(4, dtype="<f4").tobytes())])
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    proc = subprocess.Popen([BIN, "-d", p, mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if is_mounted(mnt):
                break
            time.sleep(0.05)
        assert is_mounted(mnt)
        assert open(os.path.join(mnt, "w"), "rb").read() == np.arange(4, dtype="<f4").tobytes()
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "opcode: INIT" in err and "opcode: LOOKUP" in err and "opcode: READ" in err, err[:2000]


def lfs_clone(d, n=3, present=()):
    """What `git clone` without git-lfs leaves: an index and, for each
    shard, a Git LFS pointer (or the real shard for those in `present`)."""
    os.makedirs(d)
    wm = {}
    for k in range(n):
        name = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        wm[f"t{k}"] = name
        p = os.path.join(d, name)
        if k in present:
            write_st(p, [(f"t{k}", "F32", [2], np.ones(2, "<f4").tobytes())])
        else:
            open(p, "w").write("version https://git-lfs.github.com/spec/v1\n"
                               f"oid sha256:{k:064x}\nsize 12345\n")
    import json
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 24}, "weight_map": wm}, f)


def test_inspect_of_lfs_pointers(tmp):
    """--inspect of an index whose shards are Git LFS pointers (a clone
    without git-lfs) says what the index tells and exits 0, listing the
    pointers as such, with one shard missing or one real too."""
    import json
    d = os.path.join(tmp, "clone")
    lfs_clone(d)
    r = run(["--inspect", d])
    assert r.returncode == 0, r.stderr
    assert "3 Git LFS pointers" in r.stdout and r.stdout.count("LFS pointer\n") == 3, r.stdout
    d2 = os.path.join(tmp, "clone2")
    lfs_clone(d2, present=(1,))
    os.unlink(os.path.join(d2, "model-00003-of-00003.safetensors"))
    r = run(["--inspect", d2])
    assert r.returncode == 0, r.stderr
    lines = {l.split()[0]: l.split(None, 2)[2] for l in r.stdout.splitlines() if l.startswith("model-")}
    assert lines == {"model-00001-of-00003.safetensors": "LFS pointer",
                     "model-00002-of-00003.safetensors": "present",
                     "model-00003-of-00003.safetensors": "missing"}, r.stdout
    j = json.loads(run(["--inspect", "--json", d2]).stdout)
    assert [(s["present"], s["lfs_pointer"]) for s in j["shards"]] == [(False, True), (True, False),
                                                                       (False, False)]
    # mounting it says what the shard is and how to fetch it
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run([d, mnt])
    assert r.returncode != 0 and "Git LFS pointer" in r.stderr and "git lfs pull" in r.stderr, r.stderr


def test_messages_name_the_real_cause(tmp):
    """No answer is not "HTTP 0": a refused connection says so and where
    the Hub was looked for; a dataset keeps its datasets/ in messages;
    an index whose shards are absent points at --inspect."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HUB_CACHE=os.path.join(tmp, "nocache"))
    import subprocess
    from tfsutil import BIN, EXIT_SOURCE
    for ref, shown in (("hf://org/model", "org/model"), ("hf://datasets/org/data", "datasets/org/data")):
        r = subprocess.run([BIN, "--inspect", ref], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == EXIT_SOURCE, r.stderr
        assert r.stderr.count("\n") == 1 and "HTTP 0" not in r.stderr, r.stderr
        assert f"no answer from the Hub at http://127.0.0.1:{port}" in r.stderr and shown in r.stderr, r.stderr
        assert "refused" in r.stderr, r.stderr
    d = os.path.join(tmp, "only-index")
    lfs_clone(d)
    for k in range(3):
        os.unlink(os.path.join(d, f"model-{k + 1:05d}-of-00003.safetensors"))
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = run([d, mnt])
    assert r.returncode == EXIT_SOURCE and "tensorfs --inspect shows what the index alone tells" in r.stderr


def test_whole_model_and_subfolder_hints(tmp):
    """A pickled whole model (torch.save(model)) suggests state_dict(); a
    folder whose checkpoints are in subfolders (a diffusers layout) names
    them and how to mount one."""
    import gen_pickle as GP
    from tfsutil import EXIT_FORMAT
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    for mod, name in (("torch.nn.modules.linear", "Linear"), ("__main__", "Net")):
        p = os.path.join(tmp, f"{name}.bin")
        GP.archive(p, GP.hostile(mod, name, "x", 2), [])
        r = run([p, mnt])
        assert r.returncode == EXIT_FORMAT and r.stderr.count("\n") == 1, r.stderr
        assert "save model.state_dict() instead" in r.stderr, r.stderr
    d = os.path.join(tmp, "pipeline")
    for sub in ("unet", "vae"):
        os.makedirs(os.path.join(d, sub))
        write_st(os.path.join(d, sub, "diffusion_pytorch_model.safetensors"),
                 [("w", "F32", [1], np.ones(1, "<f4").tobytes())])
    r = run([d, mnt])
    assert r.returncode == EXIT_FORMAT and r.stderr.count("\n") == 1, r.stderr
    assert "2 of its 2 subfolders hold one (unet/, vae/)" in r.stderr, r.stderr
    assert "mount one of them" in r.stderr


NO_CKPT = "the directory holds no checkpoint file (.safetensors, .gguf, .bt, .tensorsafe, .bin, .npz) and no index"


def _folders(d, spec):
    """spec: {folder: {file name: size in bytes}}; checkpoint files are
    real safetensors files of about that size."""
    for sub, files in spec.items():
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        for fn, size in files.items():
            p = os.path.join(d, sub, fn)
            if fn.endswith(".safetensors"):
                write_st(p, [("w", "U8", [size], b"\1" * size)])
            else:
                open(p, "w").write("{}")


def test_subfolder_hint_names_the_folders_that_hold_a_checkpoint(tmp):
    """A diffusers pipeline: the hint named the first folder in readdir
    order, from a list holding scheduler/, tokenizer/ and empty folders,
    cut at 300 bytes. It now names the folders that hold a checkpoint,
    sorted, with how many of all, and suggests the one with the most bytes
    (the denoiser: unet/)."""
    from tfsutil import EXIT_FORMAT
    d = os.path.join(tmp, "pipe")
    _folders(d, {
        "feature_extractor": {"preprocessor_config.json": 0},
        "safety_checker": {"model.safetensors": 300, "config.json": 0},
        "scheduler": {"scheduler_config.json": 0},
        "text_encoder": {"model.safetensors": 400, "config.json": 0},
        "tokenizer": {"vocab.json": 0, "merges.txt": 0},
        "unet": {"diffusion_pytorch_model.safetensors": 2000, "config.json": 0},
        "vae": {"diffusion_pytorch_model.safetensors": 100, "config.json": 0},
        "empty": {},
    })
    open(os.path.join(d, "model_index.json"), "w").write("{}")
    want = (f"tensorfs: {d}: {NO_CKPT}; 4 of its 8 subfolders hold one (safety_checker/, text_encoder/, unet/, "
            f"vae/): mount one of them ({d}/unet, the largest)\n")
    for args in ([d, os.path.join(tmp, "mnt")], ["--inspect", d]):
        r = run(args)
        assert (r.returncode, r.stderr) == (EXIT_FORMAT, want), r.stderr
    # one holds one
    o = os.path.join(tmp, "one")
    _folders(o, {"scheduler": {"scheduler_config.json": 0}, "transformer": {"model.safetensors": 10}})
    r = run(["--inspect", o])
    assert (r.returncode, r.stderr) == (EXIT_FORMAT, (
        f"tensorfs: {o}: {NO_CKPT}; 1 of its 2 subfolders holds one (transformer/): mount it "
        f"({o}/transformer)\n")), r.stderr
    # none holds one
    e = os.path.join(tmp, "nothing")
    _folders(e, {"scheduler": {"scheduler_config.json": 0}, "empty": {}})
    r = run(["--inspect", e])
    assert (r.returncode, r.stderr) == (EXIT_FORMAT, f"tensorfs: {e}: {NO_CKPT}, nor do its 2 subfolders\n"), \
        r.stderr


def test_subfolder_hint_counts_the_rest_and_never_cuts_a_name(tmp):
    """Many folders, or long names: whole names, sorted, then "and N
    more"; the line stays one line of bounded length."""
    from tfsutil import EXIT_FORMAT
    d = os.path.join(tmp, "many")
    _folders(d, {f"part{i:02d}": {"model.safetensors": 10 + i} for i in range(9)})
    r = run(["--inspect", d])
    assert (r.returncode, r.stderr) == (EXIT_FORMAT, (
        f"tensorfs: {d}: {NO_CKPT}; 9 of its 9 subfolders hold one (part00/, part01/, part02/, part03/, "
        f"part04/, part05/ and 3 more): mount one of them ({d}/part08, the largest)\n")), r.stderr
    d = os.path.join(tmp, "long")
    names = [c * 200 for c in "abcd"]
    _folders(d, {n: {"model.safetensors": 10} for n in names})
    r = run(["--inspect", d])
    assert r.returncode == EXIT_FORMAT and r.stderr.count("\n") == 1, r.stderr
    shown = r.stderr.split("subfolders hold one (", 1)[1].split("): mount", 1)[0]
    parts = shown.split(" and ")
    assert all(n in names for n in parts[0][:-1].split("/, ")), shown
    assert parts[1] == f"{4 - len(parts[0].split(', '))} more", shown
    assert len(r.stderr) < 1500, len(r.stderr)


def test_dev_fuse_denied_says_how_to_fix(tmp):
    """A user who may not open /dev/fuse (a 0600 node, as some containers
    have) is told how to fix it, in one line, exit 5."""
    import shutil
    import subprocess
    import tempfile
    from tfsutil import BIN, missing
    if os.getuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        missing("root, unshare and setpriv (a private /dev/fuse for another user)")
    top = tempfile.mkdtemp(prefix="tfs-devfuse-")
    try:
        os.chmod(top, 0o755)
        os.mkdir(os.path.join(top, "mp"))
        p = os.path.join(top, "a.safetensors")
        write_st(p, [("w", "F32", [1], np.ones(1, "<f4").tobytes())])
        for q in (p, os.path.join(top, "mp")):
            os.chown(q, 65534, 65534)
        node = os.path.join(top, "node")
        os.mknod(node, 0o600 | 0o020000, os.stat("/dev/fuse").st_rdev)
        script = (f"mount --bind {node} /dev/fuse; setpriv --reuid=65534 --regid=65534 --clear-groups "
                  f"{BIN} {p} {top}/mp; echo rc=$?")
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           capture_output=True, text=True, timeout=60)
        assert "rc=5" in r.stdout, (r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "/dev/fuse" in r.stderr and "chmod 0666 /dev/fuse" in r.stderr, r.stderr
    finally:
        shutil.rmtree(top)
