//! The module graph, read from the source: no import circle between files or folders, the
//! edges `docs/architecture.md` lists are the real ones, and no file in `src/` outgrows a
//! room (400 lines).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 400;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/index/node.rs` → `["index", "node"]`; `mod.rs` is its folder. The binaries and
/// the crate root are not modules of the library.
fn module_of(path: &Path) -> Option<Vec<String>> {
    let relative = path.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).ok()?;
    let mut parts: Vec<String> = relative.with_extension("").iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    let root = matches!(parts.as_slice(), [one] if one == "lib" || one == "main");
    (!root && parts.first().is_some_and(|p| p != "bin")).then_some(parts)
}

/// The module paths a file's code names, resolved against the known modules, its tests
/// left out (they may reach anywhere).
fn uses(text: &str, me: &[String], is_mod_rs: bool, modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.as_str();
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("::") {
        // The path this `::` belongs to: back to its first segment.
        let start = code[..at].rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).map_or(0, |i| i + 1);
        if code[start..at].contains("::") {
            continue;
        }
        let end =
            at + code[at..].find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(code.len() - at);
        let path: Vec<&str> = code[start..end].split("::").filter(|s| !s.is_empty()).collect();
        let Some((&first, rest)) = path.split_first() else { continue };
        let base: Vec<String> = match first {
            "crate" => Vec::new(),
            // A folder's `mod.rs` and a file alike: `super` is the module that holds `me`.
            "super" => me[..me.len().saturating_sub(1)].to_vec(),
            "self" if is_mod_rs => me.to_vec(),
            "self" => me[..me.len().saturating_sub(1)].to_vec(),
            _ => continue,
        };
        let target: Vec<String> = base.into_iter().chain(rest.iter().map(|s| s.to_string())).collect();
        if let Some(found) = (1..=target.len()).rev().map(|n| target[..n].to_vec()).find(|m| modules.contains(m))
            && found != me
            && !me.starts_with(&found)
        {
            out.insert(found);
        }
    }
    out
}

struct Graph {
    files: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    lines: Vec<(PathBuf, usize)>,
}

fn graph() -> Graph {
    let mut paths = Vec::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut paths);
    let modules: BTreeSet<Vec<String>> = paths.iter().filter_map(|p| module_of(p)).collect();
    let mut files = BTreeMap::new();
    let mut lines = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        lines.push((path.clone(), text.lines().count()));
        if let Some(me) = module_of(path) {
            let is_mod_rs = path.file_name().is_some_and(|f| f == "mod.rs");
            files.insert(me.clone(), uses(&text, &me, is_mod_rs, &modules));
        }
    }
    Graph { files, lines }
}

/// A circle through `from`, if there is one.
fn circle<T: Ord + Clone>(edges: &BTreeMap<T, BTreeSet<T>>) -> Option<Vec<T>> {
    fn visit<T: Ord + Clone>(
        node: &T,
        edges: &BTreeMap<T, BTreeSet<T>>,
        path: &mut Vec<T>,
        done: &mut BTreeSet<T>,
    ) -> Option<Vec<T>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

fn folders(graph: &Graph) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in &graph.files {
        for to in targets {
            if from[0] != to[0] {
                out.entry(from[0].clone()).or_default().insert(to[0].clone());
            }
        }
    }
    out
}

#[test]
fn no_import_circle_between_files_or_folders() {
    let graph = graph();
    assert!(graph.files.len() > 40, "the source was not found: {:?}", graph.files.keys());
    assert_eq!(circle(&graph.files), None, "files that import each other");
    assert_eq!(circle(&folders(&graph)), None, "folders that import each other");
}

#[test]
fn the_architecture_doc_lists_the_real_edges() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md")).unwrap();
    let table = doc.split("<!-- edges: begin -->").nth(1).and_then(|t| t.split("<!-- edges: end -->").next());
    let table = table.expect("docs/architecture.md has the edges table");
    let documented: BTreeMap<String, BTreeSet<String>> = table
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).filter(|c| !c.is_empty()).collect();
            let [from, uses] = cells.as_slice() else { return None };
            let from = from.strip_prefix('`')?.strip_suffix('`')?;
            Some((from.to_owned(), uses.split(',').map(|u| u.trim().trim_matches('`').to_owned()).collect()))
        })
        .collect();
    assert_eq!(documented, folders(&graph()), "docs/architecture.md's edges table is out of date");
}

#[test]
fn no_file_outgrows_a_room() {
    let long: Vec<_> = graph().lines.into_iter().filter(|(_, n)| *n > MAX_LINES).collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}
