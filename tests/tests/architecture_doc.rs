//! Keeps `ARCHITECTURE.md` true to the workspace (issue 60), so that it cannot drift again:
//!
//! - its "Crates" table has exactly one row per package under `crates/` and `plugins/`,
//!   with that package's path and, in "depends on", its normal dependencies (not dev, not
//!   build; optional ones included) that are workspace packages, sorted, or `—` for none,
//!   as `cargo metadata --no-deps` reports them;
//! - the file stays at most 400 lines: the bird's-eye view, the crates, one line per
//!   module, the invariants; details belong in the modules' `//!` headers.
//!
//! `cargo metadata --no-deps` reads only the manifests: no network, no build, no timing.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The most lines `ARCHITECTURE.md` may have.
const MAX_LINES: usize = 400;

/// One row of the crate table: the package's path and its workspace dependencies.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    path: String,
    depends_on: Vec<String>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn read_doc() -> String {
    let path = workspace_root().join("ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The rows the workspace's manifests give, by package name.
fn rows_from_metadata() -> BTreeMap<String, Row> {
    let root = workspace_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("running {cargo:?} metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let ws_root = PathBuf::from(meta["workspace_root"].as_str().expect("workspace_root"));
    let packages = meta["packages"].as_array().expect("packages");
    // With `--no-deps`, `packages` holds the workspace's packages and nothing else.
    let members: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("package name"))
        .collect();
    let mut rows = BTreeMap::new();
    for p in packages {
        let manifest = PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"));
        let dir = manifest.parent().expect("a manifest has a folder");
        let rel = dir
            .strip_prefix(&ws_root)
            .unwrap_or_else(|_| panic!("{} is outside the workspace", dir.display()));
        let rel = rel.to_string_lossy().replace('\\', "/");
        if !(rel.starts_with("crates/") || rel.starts_with("plugins/")) {
            continue;
        }
        let depends_on: BTreeSet<String> = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().expect("dependency name"))
            .filter(|name| members.contains(name))
            .map(str::to_string)
            .collect();
        let name = p["name"].as_str().expect("package name").to_string();
        let row = Row {
            path: rel,
            depends_on: depends_on.into_iter().collect(),
        };
        assert!(
            rows.insert(name.clone(), row).is_none(),
            "package {name} twice"
        );
    }
    rows
}

/// The text between `## Crates` and the next `## ` heading.
fn crates_section(doc: &str) -> &str {
    let start = doc
        .find("\n## Crates\n")
        .expect("ARCHITECTURE.md has a `## Crates` section");
    let body = &doc[start + "\n## Crates\n".len()..];
    match body.find("\n## ") {
        Some(end) => &body[..end],
        None => body,
    }
}

fn cell_name(cell: &str) -> String {
    cell.trim().trim_matches('`').to_string()
}

/// The rows of the doc's crate table, by package name.
fn rows_from_doc(doc: &str) -> BTreeMap<String, Row> {
    let table: Vec<&str> = crates_section(doc)
        .lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .collect();
    assert!(table.len() > 2, "the Crates section has no table");
    let header: Vec<String> = split_row(table[0])
        .iter()
        .map(|c| c.trim().to_string())
        .collect();
    assert_eq!(
        header,
        ["crate", "path", "depends on", "what"],
        "the Crates table's columns must be `| crate | path | depends on | what |`"
    );
    let mut rows = BTreeMap::new();
    for line in &table[2..] {
        let cells = split_row(line);
        assert_eq!(cells.len(), 4, "a Crates row needs 4 cells: {line}");
        let deps = cells[2].trim();
        let depends_on = if deps == "—" || deps == "-" {
            Vec::new()
        } else {
            deps.split(',').map(cell_name).collect()
        };
        let name = cell_name(cells[0]);
        let row = Row {
            path: cell_name(cells[1]),
            depends_on,
        };
        assert!(
            rows.insert(name.clone(), row).is_none(),
            "ARCHITECTURE.md lists {name} twice"
        );
    }
    rows
}

fn split_row(line: &str) -> Vec<&str> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').collect()
}

fn deps_cell(deps: &[String]) -> String {
    if deps.is_empty() {
        "—".to_string()
    } else {
        deps.iter()
            .map(|d| format!("`{d}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[test]
fn crate_table_matches_cargo_metadata() {
    let doc = read_doc();
    let truth = rows_from_metadata();
    let written = rows_from_doc(&doc);
    assert!(
        !truth.is_empty(),
        "cargo metadata found no package under crates/ or plugins/"
    );

    let mut problems = Vec::new();
    for (name, want) in &truth {
        match written.get(name) {
            None => problems.push(format!(
                "missing row: | `{name}` | `{}` | {} | … |",
                want.path,
                deps_cell(&want.depends_on)
            )),
            Some(got) if got != want => {
                let mut why = format!("row `{name}` differs:");
                if got.path != want.path {
                    why += &format!(
                        "\n    path: written `{}`, manifest `{}`",
                        got.path, want.path
                    );
                }
                if got.depends_on != want.depends_on {
                    let g: BTreeSet<_> = got.depends_on.iter().collect();
                    let w: BTreeSet<_> = want.depends_on.iter().collect();
                    let extra: Vec<_> = g.difference(&w).collect();
                    let missing: Vec<_> = w.difference(&g).collect();
                    why += &format!(
                        "\n    depends on: not dependencies {extra:?}, missing {missing:?}\
                         \n    should read: {}",
                        deps_cell(&want.depends_on)
                    );
                }
                problems.push(why);
            }
            Some(_) => {}
        }
    }
    for name in written.keys().filter(|n| !truth.contains_key(*n)) {
        problems.push(format!(
            "row `{name}`: no such package under crates/ or plugins/"
        ));
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's Crates table disagrees with `cargo metadata` (normal dependencies \
         on workspace packages, sorted):\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn architecture_doc_is_short() {
    let lines = read_doc().lines().count();
    assert!(
        lines <= MAX_LINES,
        "ARCHITECTURE.md has {lines} lines, at most {MAX_LINES}: move detail into the modules' \
         `//!` headers"
    );
}
