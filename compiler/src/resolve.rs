//! Name resolution: loads the root file and everything it imports (user files through
//! the [`World`], stdlib modules from [`crate::stdlib`]), builds one scope per file and
//! one table of raw definitions, and answers "what does this name mean here".
//!
//! Imports: `import std.models.llama_3_1_70b` binds one stdlib item, `import
//! std.gpus.*` every item of a module, `import "./hw.dist"` every definition of that
//! file. Names are lexically scoped per file: a file sees its own definitions and what
//! it imports, nothing else. Import cycles between files are errors.

use crate::diagnostics::{did_you_mean, Code, Diagnostic};
use crate::program::DefId;
use crate::source::{join_relative, ReadError, SourceDb, World};
use crate::span::{FileId, FileSpan, Span, Spanned};
use crate::stdlib;
use crate::syntax::ast::{Block, ImportTarget, Item, SourceAst};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A definition as written (or synthesised for an inline override), before checking.
#[derive(Debug, Clone)]
pub struct RawDef {
    pub file: FileId,
    pub kind: Spanned<String>,
    pub name: Spanned<String>,
    pub base: Option<BaseRef>,
    pub body: Option<Arc<Block>>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum BaseRef {
    Named(Spanned<String>),
    /// An inline override `name { … }` already knows its base.
    Resolved(DefId, Span),
}

/// An import binding in a file's scope.
#[derive(Debug, Clone)]
pub struct Binding {
    pub def: DefId,
    pub import_span: Span,
}

/// One loaded file.
#[derive(Debug)]
pub struct Module {
    pub file: FileId,
    pub ast: Arc<SourceAst>,
    /// Definitions of this file by (kind keyword, name): each kind is its own namespace,
    /// so `workload chat`, `slo chat` and `deploy chat` coexist.
    pub own: BTreeMap<(String, String), DefId>,
    pub imports: BTreeMap<(String, String), Binding>,
    pub is_stdlib: bool,
}

/// The state of one compilation: sources, modules, raw definitions, diagnostics.
pub struct Session<'w> {
    pub world: &'w dyn World,
    pub db: SourceDb,
    pub modules: Vec<Module>,
    pub module_of_file: HashMap<FileId, usize>,
    pub raw: Vec<RawDef>,
    pub diags: Vec<Diagnostic>,
    /// Import names used at least once, per module (for the unused-import warning).
    pub used_imports: HashMap<(usize, (String, String)), ()>,
    /// Identities ([`World::identity`]) of the user files being loaded, innermost last.
    loading: Vec<String>,
    /// Module of each loaded user file, by identity.
    by_identity: HashMap<String, usize>,
}

/// The most user files one compilation loads (imports included).
pub const MAX_USER_FILES: usize = 1000;

impl<'w> Session<'w> {
    pub fn new(world: &'w dyn World) -> Self {
        Session {
            world,
            db: SourceDb::new(),
            modules: Vec::new(),
            module_of_file: HashMap::new(),
            raw: Vec::new(),
            diags: Vec::new(),
            used_imports: HashMap::new(),
            loading: Vec::new(),
            by_identity: HashMap::new(),
        }
    }

    /// Loads a user file (and, recursively, its imports). Errors reading the root file
    /// come back as `Err` so the caller can report a usage error.
    pub fn load_root(&mut self, path: &str) -> Result<usize, ReadError> {
        let bytes = self.world.read(path)?;
        Ok(self.load_user_text(path, bytes))
    }

    /// Loads a root file from text already in hand (editors, tests).
    pub fn load_root_text(&mut self, path: &str, text: &str) -> usize {
        self.load_user_text(path, text.as_bytes().to_vec())
    }

    fn load_user_text(&mut self, path: &str, bytes: Vec<u8>) -> usize {
        if bytes.len() > crate::source::MAX_SOURCE_BYTES {
            let file = self.db.add(path, Arc::from(""), false);
            self.diags.push(
                Diagnostic::new(
                    Code::FileTooLarge,
                    format!(
                        "`{path}` is {:.1} MiB; dic checks files of at most {} MiB",
                        bytes.len() as f64 / 1048576.0,
                        crate::source::MAX_SOURCE_BYTES >> 20
                    ),
                )
                .primary(file, Span::new(0, 0), "not checked")
                .help("split it into files that import each other"),
            );
            return self.add_module(file, Arc::new(SourceAst::default()), false);
        }
        let (text, bad_utf8) = match String::from_utf8(bytes) {
            Ok(s) => (s, None),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(at))
            }
        };
        let file = self.db.add(path, Arc::from(text.as_str()), false);
        if let Some(at) = bad_utf8 {
            self.diags.push(
                Diagnostic::new(Code::InvalidUtf8, format!("`{path}` is not valid UTF-8"))
                    .primary(file, Span::new(at, at + 1), "invalid byte sequence here")
                    .help("save the file as UTF-8"),
            );
            // Do not parse text whose bytes we had to replace.
            return self.add_module(file, Arc::new(SourceAst::default()), false);
        }
        let (ast, diags) = crate::syntax::parse(&text, file);
        self.diags.extend(diags);
        let identity = self.identity(path);
        self.loading.push(identity.clone());
        let m = self.add_module(file, Arc::new(ast), false);
        self.by_identity.insert(identity, m);
        self.process_imports(m);
        self.loading.pop();
        m
    }

    /// The file's identity: the world's canonical path where it has one, else the path.
    fn identity(&self, path: &str) -> String {
        self.world
            .identity(path)
            .unwrap_or_else(|| path.to_string())
    }

    /// Loads a stdlib module by its index in [`stdlib::MODULES`] (once per session).
    pub fn load_stdlib(&mut self, index: usize) -> usize {
        let sm = &stdlib::MODULES[index];
        if let Some(f) = self.db.find(sm.path) {
            return self.module_of_file[&f];
        }
        let file = self.db.add(sm.path, Arc::from(sm.text), true);
        let m = self.add_module(file, stdlib::parsed(index), true);
        self.process_imports(m);
        m
    }

    fn add_module(&mut self, file: FileId, ast: Arc<SourceAst>, is_stdlib: bool) -> usize {
        let idx = self.modules.len();
        let mut own: BTreeMap<(String, String), DefId> = BTreeMap::new();
        for item in &ast.items {
            let Item::Definition(d) = item else { continue };
            let key = (d.kind.node.clone(), d.name.node.clone());
            if let Some(&prev) = own.get(&key) {
                let prev_span = self.raw[prev].name.span;
                self.diags.push(
                    Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("{} `{}` is defined twice", d.kind.node, d.name.node),
                    )
                    .primary(file, d.name.span, "defined again here")
                    .secondary(FileSpan::new(file, prev_span), "first defined here")
                    .help("rename one of them"),
                );
                continue;
            }
            let id = self.raw.len();
            self.raw.push(RawDef {
                file,
                kind: d.kind.clone(),
                name: d.name.clone(),
                base: d.base.clone().map(BaseRef::Named),
                body: d.body.clone(),
                span: d.span,
            });
            own.insert(key, id);
        }
        self.modules.push(Module {
            file,
            ast,
            own,
            imports: BTreeMap::new(),
            is_stdlib,
        });
        self.module_of_file.insert(file, idx);
        idx
    }

    fn process_imports(&mut self, m: usize) {
        let ast = self.modules[m].ast.clone();
        let file = self.modules[m].file;
        for item in &ast.items {
            let Item::Import(imp) = item else { continue };
            match &imp.target {
                ImportTarget::Module(segs) => self.import_module(m, file, segs, imp.span),
                ImportTarget::File(path) => self.import_file(m, file, path, imp.span),
            }
        }
    }

    fn bind(&mut self, m: usize, key: &(String, String), def: DefId, span: Span) {
        let file = self.modules[m].file;
        let name = &key.1;
        if let Some(&own) = self.modules[m].own.get(key) {
            if own != def {
                let own_span = self.raw[own].name.span;
                self.diags.push(
                    Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("`{name}` is both imported and defined here"),
                    )
                    .primary(file, own_span, "defined here")
                    .secondary(FileSpan::new(file, span), "imported here")
                    .help(format!(
                        "give your definition another name, e.g. `my_{name}`"
                    )),
                );
            }
            return;
        }
        if let Some(prev) = self.modules[m].imports.get(key) {
            if prev.def != def {
                let prev_span = prev.import_span;
                self.diags.push(
                    Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("`{name}` is imported twice from different places"),
                    )
                    .primary(file, span, "imported again here")
                    .secondary(FileSpan::new(file, prev_span), "first imported here")
                    .help("import it once"),
                );
            }
            return;
        }
        self.modules[m].imports.insert(
            key.clone(),
            Binding {
                def,
                import_span: span,
            },
        );
    }

    fn import_module(&mut self, m: usize, file: FileId, segs: &[Spanned<String>], span: Span) {
        let names: Vec<&str> = segs.iter().map(|s| s.node.as_str()).collect();
        let full_span = segs
            .first()
            .map(|s| s.span.join(segs[segs.len() - 1].span))
            .unwrap_or(span);
        if names.first() != Some(&"std") {
            self.diags.push(
                Diagnostic::new(Code::UnknownModule, format!("unknown module `{}`", names.join(".")))
                    .primary(file, full_span, "not a stdlib module")
                    .help(format!("stdlib modules start with `std.`; to import a file write `import \"./{}.dist\"`", names.join("/"))),
            );
            return;
        }
        // The longest prefix that names a module; the rest is the item.
        let mut found = None;
        for cut in (1..=names.len()).rev() {
            if let Some((idx, _)) = stdlib::module(&names[..cut].join(".")) {
                found = Some((idx, cut));
                break;
            }
        }
        let Some((idx, cut)) = found else {
            let module_names = stdlib::MODULES.iter().map(|m| m.module);
            let wanted = names[..names.len().saturating_sub(1).max(1)].join(".");
            let mut d = Diagnostic::new(
                Code::UnknownModule,
                format!("no stdlib module in `{}`", names.join(".")),
            )
            .primary(file, full_span, "no such module");
            d = match did_you_mean(&wanted, module_names) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help(format!(
                    "the modules are {}",
                    stdlib::MODULES
                        .iter()
                        .map(|m| format!("`{}`", m.module))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            };
            self.diags.push(d);
            return;
        };
        let rest = &segs[cut..];
        let module_name = names[..cut].join(".");
        if rest.is_empty() {
            self.diags.push(
                Diagnostic::new(
                    Code::UnknownModule,
                    format!("`{module_name}` is a module, not a definition"),
                )
                .primary(file, full_span, "imports a whole module")
                .help(format!(
                    "import one item (`{module_name}.NAME`) or all of them (`{module_name}.*`)"
                )),
            );
            return;
        }
        if rest.len() > 1 {
            self.diags.push(
                Diagnostic::new(
                    Code::UnknownModule,
                    format!("no stdlib module `{}`", names[..names.len() - 1].join(".")),
                )
                .primary(
                    file,
                    rest[0].span,
                    format!("`{module_name}` has no submodule `{}`", rest[0].node),
                )
                .help(format!(
                    "import `{module_name}.{}` instead",
                    rest[rest.len() - 1].node
                )),
            );
            return;
        }
        let target = self.load_stdlib(idx);
        let item = &rest[0];
        if item.node == "*" {
            self.bind_all(m, target, span);
            return;
        }
        let matching: Vec<((String, String), DefId)> = self.modules[target]
            .own
            .iter()
            .filter(|((_, n), _)| *n == item.node)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        match matching.is_empty() {
            false => {
                for (key, def) in matching {
                    self.bind(m, &key, def, span);
                }
            }
            true => {
                let candidates: Vec<String> = self.modules[target]
                    .own
                    .keys()
                    .map(|(_, n)| n.clone())
                    .collect();
                let mut d = Diagnostic::new(
                    Code::UnknownModule,
                    format!("`{module_name}` has no definition `{}`", item.node),
                )
                .primary(file, item.span, "not in this module");
                if let Some(s) = did_you_mean(&item.node, candidates.iter().map(String::as_str)) {
                    d = d.help(format!("did you mean `{s}`?")).fix(
                        format!("use `{s}`"),
                        FileSpan::new(file, item.span),
                        s,
                    );
                } else if let Some((other, _)) = stdlib::find(&item.node) {
                    d = d.help(format!("it is in `{}`", stdlib::MODULES[other].module));
                } else {
                    d = d.help(format!("`dic list` shows what `{module_name}` holds"));
                }
                self.diags.push(d);
            }
        }
    }

    fn import_file(&mut self, m: usize, file: FileId, path: &Spanned<String>, span: Span) {
        let importer = self.db.get(file).name.clone();
        if self.modules[m].is_stdlib {
            return;
        }
        let target = join_relative(&importer, &path.node);
        let identity = self.identity(&target);
        if self.loading.contains(&identity) {
            let chain = self
                .loading
                .iter()
                .skip_while(|p| **p != identity)
                .cloned()
                .collect::<Vec<_>>();
            self.diags.push(
                Diagnostic::new(
                    Code::ImportCycle,
                    format!("import cycle: `{}` imports itself", target),
                )
                .primary(file, path.span, "this import closes the cycle")
                .note(format!("cycle: {} → {}", chain.join(" → "), target))
                .help("move the shared definitions into a third file that both import"),
            );
            return;
        }
        let loaded = self
            .by_identity
            .get(&identity)
            .copied()
            .or_else(|| self.db.find(&target).map(|f| self.module_of_file[&f]));
        if loaded.is_none() && self.by_identity.len() >= MAX_USER_FILES {
            self.diags.push(
                Diagnostic::new(
                    Code::UnreadableImport,
                    format!("cannot import `{}`: this compilation already loaded {MAX_USER_FILES} files", path.node),
                )
                .primary(file, path.span, "one file too many")
                .help("dic loads at most 1000 files per compilation; import fewer files"),
            );
            return;
        }
        let module = match loaded {
            Some(m) => m,
            None => match self.world.read(&target) {
                Ok(bytes) => self.load_user_text(&target, bytes),
                Err(e) => {
                    let mut d = Diagnostic::new(
                        Code::UnreadableImport,
                        format!("cannot import `{}`: {e}", path.node),
                    )
                    .primary(
                        file,
                        path.span,
                        format!("resolved to `{target}`"),
                    );
                    d = match e {
                        ReadError::NotFound => {
                            d.help("paths are relative to the importing file's folder")
                        }
                        ReadError::IsADirectory => d.help("import a `.dist` file inside it"),
                        ReadError::Other(_) => d,
                    };
                    self.diags.push(d);
                    return;
                }
            },
        };
        self.bind_all(m, module, span);
    }

    /// Binds every definition of module `from` in module `m` (a glob or file import).
    /// Such imports are never "unused" by one name, so each binding counts as used.
    fn bind_all(&mut self, m: usize, from: usize, span: Span) {
        let all: Vec<((String, String), DefId)> = self.modules[from]
            .own
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (key, def) in all {
            self.bind(m, &key, def, span);
            self.used_imports.insert((m, key), ());
        }
    }

    /// Looks up a definition of `kind` called `name` in the scope of module `m`.
    pub fn lookup(&mut self, m: usize, kind: &str, name: &str) -> Option<DefId> {
        let key = (kind.to_string(), name.to_string());
        if let Some(&d) = self.modules[m].own.get(&key) {
            return Some(d);
        }
        if let Some(b) = self.modules[m].imports.get(&key) {
            let def = b.def;
            self.used_imports.insert((m, key), ());
            return Some(def);
        }
        None
    }

    /// Every definition called `name` in scope, whatever its kind.
    pub fn lookup_any(&self, m: usize, name: &str) -> Vec<DefId> {
        let module = &self.modules[m];
        module
            .own
            .iter()
            .filter(|((_, n), _)| n == name)
            .map(|(_, d)| *d)
            .chain(
                module
                    .imports
                    .iter()
                    .filter(|((_, n), _)| n == name)
                    .map(|(_, b)| b.def),
            )
            .collect()
    }

    /// The diagnostic for a name not found in module `m`'s scope.
    pub fn unknown_name(&mut self, m: usize, name: &Spanned<String>, expected: &str) -> Diagnostic {
        let file = self.modules[m].file;
        let mut d = Diagnostic::new(
            Code::UnknownName,
            format!("unknown {expected} `{}`", name.node),
        )
        .primary(file, name.span, "not defined or imported in this file");
        let in_scope: Vec<String> = self.modules[m]
            .own
            .keys()
            .chain(self.modules[m].imports.keys())
            .filter(|(k, _)| k == expected)
            .map(|(_, n)| n.clone())
            .collect();
        if let Some(s) = did_you_mean(&name.node, in_scope.iter().map(String::as_str)) {
            return d.help(format!("did you mean `{s}`?")).fix(
                format!("use `{s}`"),
                FileSpan::new(file, name.span),
                s,
            );
        }
        if let Some((module, _)) = stdlib::find(&name.node).filter(|(_, k)| k == expected) {
            let line = format!("import {}.{}\n", stdlib::MODULES[module].module, name.node);
            return d
                .help(format!("add `{}` at the top of the file", line.trim_end()))
                .fix(
                    format!("import `{}` from the stdlib", name.node),
                    FileSpan::new(file, Span::new(0, 0)),
                    line,
                );
        }
        let std_names: Vec<(usize, String, String)> = stdlib::all_items()
            .into_iter()
            .filter(|(_, k, _)| k == expected)
            .collect();
        if let Some(s) = did_you_mean(&name.node, std_names.iter().map(|(_, _, n)| n.as_str())) {
            let (module, _, _) = std_names
                .iter()
                .find(|(_, _, n)| n == s)
                .expect("suggested from this list");
            d = d.help(format!(
                "did you mean `{s}`? (in the stdlib: `import {}.{s}`)",
                stdlib::MODULES[*module].module
            ));
        }
        d
    }

    /// Diagnostics for imports never used in user files.
    pub fn unused_imports(&mut self) {
        for (m, module) in self.modules.iter().enumerate() {
            if module.is_stdlib {
                continue;
            }
            for (key, b) in &module.imports {
                let name = &key.1;
                if !self.used_imports.contains_key(&(m, key.clone())) {
                    self.diags.push(
                        Diagnostic::new(
                            Code::UnusedImport,
                            format!("`{name}` is imported but never used"),
                        )
                        .primary(module.file, b.import_span, "unused import")
                        .help("remove the import")
                        .fix(
                            "remove the unused import",
                            FileSpan::new(module.file, b.import_span),
                            "",
                        ),
                    );
                }
            }
        }
    }
}
