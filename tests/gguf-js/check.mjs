// Parses a GGUF file with @huggingface/gguf (the npm package the Hub uses)
// and prints what it found as one JSON object on stdout: version, the
// typed metadata, every tensor's info and the offset where data starts.
// Exit 1 with the parser's message when it refuses the file.
import { gguf } from "@huggingface/gguf";

const path = process.argv[2];
try {
  const r = await gguf(path, { allowLocalFile: true, typedMetadata: true });
  const meta = {};
  for (const [k, v] of Object.entries(r.typedMetadata)) meta[k] = v;
  const out = {
    metadata: meta,
    tensorInfos: r.tensorInfos,
    tensorDataOffset: r.tensorDataOffset,
  };
  process.stdout.write(JSON.stringify(out, (k, v) => (typeof v === "bigint" ? v.toString() : v)));
} catch (e) {
  process.stderr.write(`gguf-js: ${path}: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
}
