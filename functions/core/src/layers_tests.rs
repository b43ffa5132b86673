//! The layers inside core, held by a test: each source file is read as text, and a file
//! of a lower layer that names a module of a layer it may not import fails here, naming
//! the file, the line and the module.
//!
//! The layers, lowest first (`lib.rs`, "Layers"; docs/design.md, "Layers inside core"):
//! records import nothing else of the crate; decisions import records; ports import
//! records; handlers import all three. Within a layer, modules import one another.
//! A module of the crate that no layer lists fails too, so a new module is placed on
//! purpose. Comments are not read: a doc line may point anywhere (a port names its fake).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each layer, with its modules and the layers it may import besides its own.
const LAYERS: &[Layer] = &[
    Layer {
        name: "records",
        modules: &["lifecycle", "message", "model", "names", "unrouted"],
        imports: &[],
    },
    Layer {
        name: "decisions",
        modules: &[
            "backoff", "breaker", "clock", "config", "costs", "metrics", "pace", "prices", "rerun",
            "routing", "screen", "sizing", "timeline", "webhook",
        ],
        imports: &["records"],
    },
    Layer {
        name: "ports",
        modules: &["ports"],
        imports: &["records"],
    },
    Layer {
        name: "handlers",
        modules: &["apps", "handlers", "memory", "releases"],
        imports: &["records", "decisions", "ports"],
    },
];

/// Files that belong to no layer: the crate root, which declares every module, and
/// this test, which names them all.
const OUTSIDE: &[&str] = &["lib.rs", "layers_tests.rs"];

struct Layer {
    name: &'static str,
    modules: &'static [&'static str],
    imports: &'static [&'static str],
}

fn layer_of(module: &str) -> Option<&'static Layer> {
    LAYERS.iter().find(|layer| layer.modules.contains(&module))
}

/// A source file as the guard sees it: where it is under `src/`, the top module it
/// belongs to, how deep in that module it sits, and its text.
struct Source {
    path: PathBuf,
    module: String,
    depth: usize,
    text: String,
}

/// One import across the layers that the table forbids (`to`), or a file of a module
/// that no layer lists (`to` is `None`).
#[derive(Debug, PartialEq, Eq)]
struct Violation {
    path: PathBuf,
    line: usize,
    from: String,
    to: Option<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let layer = |module: &str| layer_of(module).map_or("no layer", |l| l.name);
        let place = format!("src/{}:{}", self.path.display(), self.line);
        match &self.to {
            Some(to) => write!(
                f,
                "{place}: {} ({}) names crate::{to} ({})",
                self.from,
                layer(&self.from),
                layer(to)
            ),
            None => write!(f, "{place}: module {} is in no layer", self.from),
        }
    }
}

/// The top modules a line of code names: `crate::x`, each `x` of `crate::{x, y::z}`, and
/// `super::` chains from a file `depth` modules deep that climb to the crate root.
fn modules_named(code: &str, depth: usize) -> Vec<String> {
    let mut named = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            named.extend(group_heads(group));
        } else {
            named.push(ident(after));
        }
        rest = after;
    }
    let supers = code.matches("super::").count();
    if depth > 0 && supers >= depth {
        if let Some(at) = code.find(&"super::".repeat(depth)) {
            named.push(ident(&code[at + "super::".len() * depth..]));
        }
    }
    named.retain(|name| !name.is_empty());
    named
}

/// The first path segment of each item of a `{...}` group (the text after its `{`).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = vec![ident(group.trim_start())];
    let mut depth = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => heads.push(ident(group[i + 1..].trim_start())),
            _ => {}
        }
    }
    heads
}

fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Every import in `sources` that the layer table forbids, and every file of a module
/// that no layer lists.
fn violations(sources: &[Source]) -> Vec<Violation> {
    let mut found = Vec::new();
    for source in sources {
        let Some(layer) = layer_of(&source.module) else {
            found.push(Violation {
                path: source.path.clone(),
                line: 0,
                from: source.module.clone(),
                to: None,
            });
            continue;
        };
        // A `use crate::{...}` group may span lines: read each statement whole.
        let mut statement = String::new();
        let mut first_line = 0;
        for (number, line) in source.text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if statement.is_empty() {
                first_line = number + 1;
            }
            statement.push_str(code);
            statement.push(' ');
            let open = statement.matches('{').count() > statement.matches('}').count();
            if open && statement.starts_with("use ") {
                continue;
            }
            for to in modules_named(&statement, source.depth) {
                let Some(target) = layer_of(&to) else {
                    continue;
                };
                let allowed = target.name == layer.name || layer.imports.contains(&target.name);
                if !allowed {
                    found.push(Violation {
                        path: source.path.clone(),
                        line: first_line,
                        from: source.module.clone(),
                        to: Some(to),
                    });
                }
            }
            statement.clear();
        }
    }
    found
}

/// The crate's source files, each with its top module: `src/x.rs` and everything under
/// `src/x/` are module `x`, and a file brought in by `#[path = "..."]` belongs to the
/// module of the file that names it.
fn read_sources(src: &Path) -> Vec<Source> {
    let mut files = BTreeMap::new();
    collect(src, src, &mut files);
    let mut owners: BTreeMap<PathBuf, (String, usize)> = BTreeMap::new();
    for (path, text) in &files {
        let (module, depth) = module_of(path);
        for target in path_attributes(text) {
            let target = path.parent().unwrap_or(Path::new("")).join(target);
            owners.insert(target, (module.clone(), depth + 1));
        }
    }
    files
        .into_iter()
        .filter(|(path, _)| !OUTSIDE.iter().any(|outside| path == Path::new(outside)))
        .map(|(path, text)| {
            let (module, depth) = owners
                .get(&path)
                .cloned()
                .unwrap_or_else(|| module_of(&path));
            Source {
                path,
                module,
                depth,
                text,
            }
        })
        .collect()
}

fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(root, &path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let relative = path.strip_prefix(root).expect("a file under src/");
            files.insert(relative.to_path_buf(), text);
        }
    }
}

/// The top module of a file under `src/` and how many modules deep it sits
/// (`x.rs` and `x/mod.rs`: 1; `x/y.rs`: 2).
fn module_of(path: &Path) -> (String, usize) {
    let parts: Vec<String> = path
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    let depth = parts.len() - usize::from(parts.len() > 1 && parts[parts.len() - 1] == "mod");
    (parts[0].clone(), depth)
}

fn path_attributes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("#[path = \""))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

fn source(path: &str, text: &str) -> Source {
    let (module, depth) = module_of(Path::new(path));
    Source {
        path: PathBuf::from(path),
        module,
        depth,
        text: text.to_string(),
    }
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let sources = read_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        sources.iter().any(|s| s.path == Path::new("model/mod.rs")),
        "the guard reads the crate's sources"
    );
    let found: Vec<String> = violations(&sources).iter().map(|v| v.to_string()).collect();
    assert!(
        found.is_empty(),
        "imports across the layers:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_module_the_crate_declares_is_in_a_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';'))
        .collect();
    assert!(declared.contains(&"ports"), "lib.rs declares its modules");
    let unplaced: Vec<&&str> = declared.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules in no layer: {unplaced:?}");
}

#[test]
fn a_record_that_names_a_port_or_a_decision_is_refused() {
    let model = source(
        "model/mod.rs",
        "use crate::ports::Market;\nuse crate::{lifecycle::JobStatus, prices::JobCost};\n",
    );
    let found = violations(&[model]);
    let to: Vec<&str> = found.iter().filter_map(|v| v.to.as_deref()).collect();
    assert_eq!(to, ["ports", "prices"]);
    assert_eq!(found[1].line, 2);
}

#[test]
fn a_decision_may_name_records_and_decisions_but_not_ports_or_handlers() {
    let routing = source(
        "routing.rs",
        "use crate::config::PoolConfig;\nuse crate::model::JobRecord;\n\
         fn f(s: &dyn crate::ports::RunnerStore) {}\n\
         use crate::{\n    handlers::error_chain,\n    names,\n};\n",
    );
    let found = violations(&[routing]);
    let lines: Vec<(usize, Option<&str>)> =
        found.iter().map(|v| (v.line, v.to.as_deref())).collect();
    assert_eq!(lines, [(3, Some("ports")), (4, Some("handlers"))]);
}

#[test]
fn a_port_that_climbs_to_the_root_through_super_is_refused() {
    let port = source(
        "ports/fleet.rs",
        "use super::super::sizing::SizingRequest;\n",
    );
    let sibling = source("ports/fleet.rs", "use super::FleetError;\n");
    assert_eq!(violations(&[port]).len(), 1);
    assert!(violations(&[sibling]).is_empty());
}

#[test]
fn comments_may_point_anywhere_and_handlers_may_import_everything() {
    let port = source(
        "ports/forge.rs",
        "//! Fake: [`crate::memory::FakeForge`], over several Apps [`crate::apps::SeveralApps`].\n",
    );
    let handler = source(
        "handlers/reaper/mod.rs",
        "use crate::ports::Fleet;\nuse crate::prices::cost_of;\nuse crate::model::RunnerRecord;\n",
    );
    assert!(violations(&[port, handler]).is_empty());
}

#[test]
fn a_file_of_a_module_in_no_layer_is_refused() {
    let found = violations(&[source("gadgets.rs", "pub fn f() {}\n")]);
    assert_eq!(found.len(), 1);
    assert!(found[0].to_string().contains("no layer"));
}
