// Compile AssemblyScript fragments with asconfig.json, several in one process (the compiler
// takes seconds to start):  node build.mjs <entry.ts> <out.wasm> [<entry.ts> <out.wasm> ...]
// Paths are relative to this folder or absolute. Used by hack/build_fragments.sh.
import asc from "assemblyscript/asc";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

process.chdir(dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2) {
  console.error("usage: node build.mjs <entry.ts> <out.wasm> [...]");
  process.exit(2);
}
let failed = false;
for (let i = 0; i < args.length; i += 2) {
  const { error } = await asc.main([args[i], "--config", "asconfig.json", "-o", args[i + 1]], {
    stdout: process.stdout,
    stderr: process.stderr,
  });
  if (error) {
    console.error(`${args[i]}: ${error.message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
