// The built package: the exports map serves each module system its own build,
// there are no runtime dependencies, and nothing in it needs Node.

import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const root = fileURLToPath(new URL("../../", import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

function filesUnder(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

test("import and require of the package name load the ESM and CommonJS builds", async () => {
  // A package can import itself by name through its own exports map.
  const esm = await import("@tocsin/client");
  const cjs = createRequire(import.meta.url)("@tocsin/client");
  const esmDirect = await import("../../dist/esm/index.js");
  const cjsDirect = createRequire(import.meta.url)("../../dist/cjs/index.js");
  assert.equal(esm.Tocsin, esmDirect.Tocsin);
  assert.equal(cjs.Tocsin, cjsDirect.Tocsin);
  assert.notEqual(esm.Tocsin, cjs.Tocsin);
  const names = [
    "Tocsin", "TocsinError", "ApiError", "ValidationError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "ConflictError", "RateLimitError", "InternalServerError", "TimeoutError", "ConnectionError", "AbortError", "isTocsinError",
  ];
  for (const name of names) {
    assert.equal(typeof esm[name], "function", `ESM exports ${name}`);
    assert.equal(typeof cjs[name], "function", `CommonJS exports ${name}`);
  }
});

test("the CommonJS build is marked as CommonJS and both builds have declarations", () => {
  assert.deepEqual(JSON.parse(readFileSync(join(root, "dist/cjs/package.json"), "utf8")), { type: "commonjs" });
  for (const target of [pkg.exports["."].import, pkg.exports["."].require]) {
    assert.ok(statSync(join(root, target.types)).isFile(), target.types);
    assert.ok(statSync(join(root, target.default)).isFile(), target.default);
  }
});

test("there are no runtime dependencies", () => {
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.peerDependencies, undefined);
  assert.equal(pkg.optionalDependencies, undefined);
});

test("the built code uses no Node-only API", () => {
  const nodeOnly = /\bnode:|require\(["'](fs|path|http|https|net|crypto|os|child_process|stream|buffer|url|util)["']\)|\bprocess\.|\bBuffer\b|\b__dirname\b/;
  const files = filesUnder(join(root, "dist")).filter((file) => file.endsWith(".js"));
  assert.ok(files.length > 10, "dist is built");
  for (const file of files) {
    assert.doesNotMatch(readFileSync(file, "utf8"), nodeOnly, file);
  }
});
