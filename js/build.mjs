// Builds one self-contained ES module per widget front end (anywidget imports it from a Blob URL,
// so no chunks, no relative imports, nothing fetched at run time) into ../rlviz_widgets/static/.
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";

const entries = readdirSync("src").filter((f) => /\.(ts|js)$/.test(f)).map((f) => `src/${f}`);
const options = {
  entryPoints: entries,
  outdir: "../rlviz_widgets/static",
  bundle: true,
  format: "esm",
  minify: true,
  target: "es2020",
  define: { "define.amd": "false" }, // UMD dependencies must not look for an AMD loader
  loader: { ".css": "text" },
  logLevel: "info",
};
if (process.argv.includes("--watch")) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
