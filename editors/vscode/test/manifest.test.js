// The extension runs whatever program `dic.path` names, so only the user may choose it:
// the setting is machine-scoped (VS Code never reads it from a workspace's
// .vscode/settings.json) and restricted in untrusted workspaces.
"use strict";
const assert = require("assert");
const fs = require("fs");
const path = require("path");

const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "package.json"), "utf8"));
const setting = manifest.contributes.configuration.properties["dic.path"];
assert.strictEqual(setting.scope, "machine", "dic.path must be machine-scoped");
const untrusted = manifest.capabilities && manifest.capabilities.untrustedWorkspaces;
assert.ok(untrusted, "capabilities.untrustedWorkspaces is missing");
assert.strictEqual(untrusted.supported, "limited");
assert.ok(
  (untrusted.restrictedConfigurations || []).includes("dic.path"),
  "dic.path must be listed in restrictedConfigurations",
);
// Every setting that names a program or its arguments is restricted the same way.
for (const [name, def] of Object.entries(manifest.contributes.configuration.properties)) {
  if (/path|command|args/i.test(name)) {
    assert.strictEqual(def.scope, "machine", `${name} must be machine-scoped`);
    assert.ok(untrusted.restrictedConfigurations.includes(name), `${name} must be restricted`);
  }
}
console.log("manifest ok: dic.path is machine-scoped and restricted in untrusted workspaces");
