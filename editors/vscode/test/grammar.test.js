// Loads the TextMate grammar with vscode-textmate (the engine VS Code uses) and
// snapshots the scopes of every token of examples/prod.dist; also checks a few tokens
// by hand so a grammar that colours everything the same cannot pass.
// `UPDATE=1 npm test` rewrites the snapshot (review the diff).
const fs = require("fs");
const path = require("path");
const assert = require("assert");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const root = path.join(__dirname, "..");
const wasm = fs.readFileSync(path.join(root, "node_modules/vscode-oniguruma/release/onig.wasm")).buffer;

async function main() {
  await oniguruma.loadWASM(wasm);
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName !== "source.dist") return null;
      const file = path.join(root, "syntaxes/dist.tmLanguage.json");
      return vsctm.parseRawGrammar(fs.readFileSync(file, "utf8"), file);
    },
  });
  const grammar = await registry.loadGrammar("source.dist");
  const example = path.join(root, "../../examples/prod.dist");
  const lines = fs.readFileSync(example, "utf8").split("\n");
  let state = vsctm.INITIAL;
  const out = [];
  const scopeOf = {};
  for (const line of lines) {
    const r = grammar.tokenizeLine(line, state);
    for (const t of r.tokens) {
      const text = line.substring(t.startIndex, t.endIndex);
      if (text.trim() === "") continue;
      const scopes = t.scopes.slice(1).join(" ");
      out.push(`${JSON.stringify(text)} ${scopes}`);
      scopeOf[text] = scopeOf[text] || scopes;
    }
    state = r.ruleStack;
  }
  // By hand: what a reader expects of each kind of token.
  assert.match(scopeOf["import"], /keyword\.control\.import/);
  assert.match(scopeOf["deploy"], /storage\.type/);
  assert.match(scopeOf["chat"] || "", /entity\.name\.type|variable/);
  assert.match(scopeOf["gpu_memory_utilization"], /variable\.other\.property/);
  assert.match(scopeOf["0.90"], /constant\.numeric/);
  assert.match(scopeOf["×"], /keyword\.operator/);
  assert.match(scopeOf["tp"], /support\.constant\.layout/);
  assert.ok(out.some((l) => /comment\.line/.test(l)), "comments are scoped");
  const snapshot = path.join(__dirname, "prod.dist.scopes");
  const text = out.join("\n") + "\n";
  if (process.env.UPDATE || !fs.existsSync(snapshot)) {
    fs.writeFileSync(snapshot, text);
    console.log(`wrote ${snapshot}`);
  } else {
    const expected = fs.readFileSync(snapshot, "utf8");
    if (expected !== text) {
      const a = expected.split("\n"), b = text.split("\n");
      const i = a.findIndex((l, k) => l !== b[k]);
      console.error(`scopes differ from ${snapshot} at token ${i + 1}:\n- ${a[i]}\n+ ${b[i]}`);
      process.exit(1);
    }
  }
  console.log(`grammar: ${out.length} tokens of examples/prod.dist match the snapshot`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
