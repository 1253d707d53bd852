// The packaged extension is one bundled file: out/extension.js (esbuild) must need
// nothing at run time but VS Code's own module and Node's built-ins, since the package
// ships without node_modules (`vsce package --no-dependencies`).
"use strict";
const assert = require("assert");
const fs = require("fs");
const path = require("path");
const { builtinModules } = require("module");

const bundle = fs.readFileSync(path.join(__dirname, "..", "out", "extension.js"), "utf8");
const required = new Set(
  [...bundle.matchAll(/require\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]),
);
const allowed = (m) => m === "vscode" || builtinModules.includes(m.replace(/^node:/, ""));
const foreign = [...required].filter((m) => !allowed(m));
assert.deepStrictEqual(foreign, [], `the bundle requires ${foreign.join(", ")} at run time`);
assert.ok(required.has("vscode"), "the bundle does not load vscode: not the extension?");
// The language client is inside the bundle, and so is the option that tells the server
// this client serves the stdlib and explain pages itself.
assert.ok(bundle.includes("dic/virtualDocument"), "the content provider is missing");
assert.ok(bundle.includes("readOnlyDocuments"), "the initialization option is missing");
console.log(`bundle ok: ${bundle.length} bytes, requires ${[...required].sort().join(", ")}`);
