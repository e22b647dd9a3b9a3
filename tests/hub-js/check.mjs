// The reference client against the Xet double: @huggingface/hub (the npm
// package the Hub's own JavaScript uses) reads files through Xet, and its
// hash functions name the double's chunks, xorbs and files. One JSON
// request on stdin, one JSON answer on stdout; exit 1 with the client's
// message when it refuses something.
//
// {"mode": "download", "hubUrl", "repo", "revision", "token"?, "files":
//  [{"path", "ranges": [[start, end)...]}], "parallel": bool}
//   -> {"files": [{"path", "xet": bool, "sha256", "size", "ranges": [sha256...]}]}
//   downloadFile({..., xet: true}) (the Hub's documented hubUrl option
//   points it at the double; http is fine for it) and each slice of the
//   blob, a slice being a reconstruction of that range.
// {"mode": "hashes", "chunks": FILE of raw chunks, "lens": [...],
//  "xorbs": [[first chunk, end chunk]...], "files": [[...chunk indices]]}
//   -> {"chunks": [hex...], "xorbs": [hex...], "files": [hex...]}
//   chunk hashes by @huggingface/blake3-jit keyed with the spec's data key,
//   xorb and file hashes by @huggingface/xetchunk-wasm.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { downloadFile } from "@huggingface/hub";
import { Hasher } from "@huggingface/blake3-jit";
import { xorbHash, fileHash, hashToHex } from "@huggingface/xetchunk-wasm";

// The spec's key for chunk hashes (huggingface.co/docs/xet, "hashing").
const DATA_KEY = new Uint8Array([
  102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28, 157, 228, 33, 16, 155, 235, 43, 88, 180,
  208, 176, 75, 147, 173, 242, 41,
]);

const sha256 = (buf) => createHash("sha256").update(buf).digest("hex");

async function download(req) {
  const out = [];
  for (const f of req.files) {
    const blob = await downloadFile({
      repo: req.repo,
      path: f.path,
      revision: req.revision,
      hubUrl: req.hubUrl,
      accessToken: req.token,
      xet: true,
      parallelDownloads: req.parallel ?? true,
    });
    if (!blob) throw new Error(`${f.path}: not found`);
    const isXet = blob.constructor.name === "XetBlob";
    const whole = new Uint8Array(await blob.arrayBuffer());
    const ranges = [];
    for (const [a, b] of f.ranges ?? []) ranges.push(sha256(new Uint8Array(await blob.slice(a, b).arrayBuffer())));
    out.push({ path: f.path, xet: isXet, size: whole.length, sha256: sha256(whole), ranges });
  }
  return { files: out };
}

function hashes(req) {
  const data = readFileSync(req.chunks);
  const chunks = [];
  let at = 0;
  for (const n of req.lens) {
    const hash = Hasher.newKeyed(DATA_KEY).update(data.subarray(at, at + n)).finalize(32);
    chunks.push({ hash, length: n });
    at += n;
  }
  return {
    chunks: chunks.map((c) => hashToHex(c.hash)),
    xorbs: req.xorbs.map(([a, b]) => hashToHex(xorbHash(chunks.slice(a, b)))),
    files: req.files.map((idx) => hashToHex(fileHash(idx.map((i) => chunks[i])))),
  };
}

try {
  const req = JSON.parse(readFileSync(0, "utf8"));
  const res = req.mode === "hashes" ? hashes(req) : await download(req);
  process.stdout.write(JSON.stringify(res));
} catch (e) {
  process.stderr.write(`hub-js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
}
