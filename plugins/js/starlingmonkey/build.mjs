// Builds probe.js twice with componentize-js: the default configuration and
// with wasi:http disabled. Usage: node build.mjs WIT_FILE OUT_DIR
import { componentize } from "@bytecodealliance/componentize-js";
import { readFile, writeFile } from "node:fs/promises";

const [witPath, outDir] = process.argv.slice(2);
const source = await readFile(new URL("./probe.js", import.meta.url), "utf8");
for (const [file, disableFeatures] of [
  ["starlingmonkey-default.wasm", undefined],
  ["starlingmonkey-no-http.wasm", ["http", "fetch-event"]],
]) {
  const { component } = await componentize(source, {
    witPath,
    worldName: "reconciler",
    ...(disableFeatures ? { disableFeatures } : {}),
  });
  await writeFile(`${outDir}/${file}`, component);
  console.log(`${outDir}/${file}: ${component.length} bytes`);
}
