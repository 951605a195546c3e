// Builds console/dist: index.html, favicon.svg, app.js (one minified
// bundle) and app.css. Deterministic (no hashes, no timestamps), so CI can check that
// the committed dist is what the sources build to.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

mkdirSync("dist", { recursive: true });
await esbuild.build({
  entryPoints: { app: "src/main.ts" },
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2022",
  outdir: "dist",
  legalComments: "eof",
  logLevel: "warning",
});
for (const file of ["index.html", "favicon.svg"]) copyFileSync(`src/${file}`, `dist/${file}`);
