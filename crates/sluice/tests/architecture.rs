//! Architecture invariants of the whole workspace (see ARCHITECTURE.md):
//! - the layers depend only downwards: the services on no HTTP server crate and no backend, the
//!   server on no backend (the binary wires one in), the storage boundary on neither;
//! - the server built without the `peers` feature links none of the benchmark's peer drivers;
//! - no two modules of one crate import each other, directly or round a circle;
//! - no source file outside tests is longer than `SOURCE_LINES_MAX`, so each can be read in one
//!   sitting.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The clients `sluice bench --scenario peers` needs and nothing else does. tokio-postgres is not
/// here: the PostgreSQL backend (sluice-postgres) uses it too, so the slim server has it anyway.
const PEER_DRIVERS: [&str; 6] = ["async-nats", "aws-sdk-sqs", "aws-smithy-http-client", "lapin", "plotters", "redis"];

/// Crates that serve HTTP or describe the native API's wire format and its OpenAPI document.
/// (tower-http is not here: reqwest, the services' outbound client, uses it for redirects.)
const HTTP_SERVER_CRATES: [&str; 5] = ["axum", "axum-core", "sluice-server", "sluice-api", "utoipa"];

/// The storage backends and what only they use. tokio-postgres is not here: the outbox relay in
/// sluice-services uses it (with mysql_async and rusqlite) as a client of the application's own
/// database, which is a source of rows, not Sluice's storage; the backend's pool is here.
const BACKEND_CRATES: [&str; 5] = ["sluice-embedded", "sluice-postgres", "fjall", "lsm-tree", "deadpool-postgres"];

/// The longest source file outside tests, in lines.
const SOURCE_LINES_MAX: usize = 800;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The names of the crates `package` depends on at run time, with extra `cargo tree` arguments.
fn normal_dependencies(package: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none", "--locked", "--offline"])
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    tree.lines().filter_map(|line| line.split(' ').next()).map(str::to_owned).collect()
}

fn present<'a>(names: &[&'a str], dependencies: &[String]) -> Vec<&'a str> {
    names.iter().copied().filter(|name| dependencies.iter().any(|d| d == name)).collect()
}

#[test]
fn the_layers_depend_only_downwards() {
    let services = normal_dependencies("sluice-services", &[]);
    assert!(services.iter().any(|d| d == "sluice-store"), "cargo tree listed the services' crates: {services:?}");
    assert_eq!(present(&HTTP_SERVER_CRATES, &services), Vec::<&str>::new(), "HTTP server crates in sluice-services");
    assert_eq!(present(&BACKEND_CRATES, &services), Vec::<&str>::new(), "backend crates in sluice-services");

    let server = normal_dependencies("sluice-server", &[]);
    assert!(server.iter().any(|d| d == "sluice-services"), "cargo tree listed the server's crates: {server:?}");
    assert_eq!(present(&BACKEND_CRATES, &server), Vec::<&str>::new(), "backend crates in sluice-server");

    let store = normal_dependencies("sluice-store", &[]);
    assert_eq!(present(&HTTP_SERVER_CRATES, &store), Vec::<&str>::new(), "HTTP crates in sluice-store");
    assert_eq!(present(&BACKEND_CRATES, &store), Vec::<&str>::new(), "backend crates in sluice-store");
    assert_eq!(present(&["reqwest", "hyper"], &store), Vec::<&str>::new(), "HTTP clients in sluice-store");

    // The backends really are in the binary, so the checks above can fail.
    let binary = normal_dependencies("sluice", &[]);
    assert_eq!(present(&BACKEND_CRATES, &binary).len(), BACKEND_CRATES.len(), "the binary wires in every backend");
}

#[test]
fn the_services_speak_http_only_as_a_client() {
    let manifest = std::fs::read_to_string(workspace().join("crates/sluice-services/Cargo.toml")).expect("manifest");
    let direct: Vec<&str> = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split(['=', '.', ' ']).next())
        .collect();
    for forbidden in ["axum", "hyper", "hyper-util", "http", "http-body", "tower", "tower-http"] {
        assert!(!direct.contains(&forbidden), "sluice-services must not depend on {forbidden}: it serves no HTTP");
    }
    assert!(direct.contains(&"reqwest"), "the check reads the dependency list: {direct:?}");
}

#[test]
fn the_slim_server_links_no_peer_driver() {
    let slim = normal_dependencies("sluice", &["--no-default-features"]);
    assert!(slim.iter().any(|name| name == "sluice-server"), "cargo tree listed the server's crates: {slim:?}");
    assert_eq!(present(&PEER_DRIVERS, &slim), Vec::<&str>::new(), "peer drivers in `-p sluice --no-default-features`");
    // The names above are the ones the default build really links, so the check above can fail.
    let default = normal_dependencies("sluice", &[]);
    assert_eq!(present(&PEER_DRIVERS, &default), PEER_DRIVERS, "the default build links every peer driver");
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every crate's `src` directory.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let mut crates: Vec<(String, PathBuf)> = std::fs::read_dir(workspace().join("crates"))
        .expect("crates")
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path().join("src")))
        .filter(|(_, src)| src.is_dir())
        .collect();
    crates.sort();
    crates
}

/// The module path of a source file (`aws/sqs/mod.rs` → `["aws", "sqs"]`; the crate root → `[]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The code of a file without its comments and its `#[cfg(test)]` modules (tests may reach
/// anywhere).
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    code.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The module paths a file's code names: `crate::a::b::…`, `super::…` and `self::…` paths,
/// resolved against the file's own module path.
fn referenced_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (start, _) in
        code.match_indices("crate::").chain(code.match_indices("super::")).chain(code.match_indices("self::"))
    {
        // Only at the start of a path, not inside an identifier (`sluice_store::…`).
        if start > 0
            && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_' || bytes[start - 1] == b':')
        {
            continue;
        }
        let path: Vec<&str> = code[start..]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap_or_default()
            .split("::")
            .filter(|s| !s.is_empty())
            .collect();
        let mut resolved: Vec<String> = match path.first() {
            Some(&"crate") => Vec::new(),
            Some(&"self") => module.to_vec(),
            _ => module.to_vec(),
        };
        let mut rest = &path[..];
        if rest.first() == Some(&"crate") || rest.first() == Some(&"self") {
            rest = &rest[1..];
        }
        while rest.first() == Some(&"super") {
            resolved.pop();
            rest = &rest[1..];
        }
        resolved.extend(rest.iter().map(|s| s.to_string()));
        out.push(resolved);
    }
    out
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let mut circles = Vec::new();
    for (name, src) in crate_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(&src, f)).collect();
        // Edges between siblings: module A (or anything inside it) names something inside its
        // sibling B. A parent and its children may name each other; siblings may not circle.
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for file in &files {
            let from = module_path(&src, file);
            let text = std::fs::read_to_string(file).expect("source");
            for path in referenced_paths(&from, &code_of(&text)) {
                // The deepest module the path names.
                let Some(to) = (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p)) else {
                    continue;
                };
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common < from.len() && common < to.len() {
                    edges.entry(from[..=common].to_vec()).or_default().insert(to[..=common].to_vec());
                }
            }
        }
        for start in edges.keys() {
            // Depth-first from each module; meeting the start again is a circle.
            let mut stack = vec![vec![start.clone()]];
            let mut seen = BTreeSet::new();
            while let Some(route) = stack.pop() {
                let last = route.last().expect("route").clone();
                for next in edges.get(&last).into_iter().flatten() {
                    if next == start {
                        let names: Vec<String> = route.iter().chain([next]).map(|m| m.join("::")).collect();
                        circles.push(format!("{name}: {}", names.join(" -> ")));
                    } else if seen.insert(next.clone()) {
                        let mut longer = route.clone();
                        longer.push(next.clone());
                        stack.push(longer);
                    }
                }
            }
        }
    }
    assert!(circles.is_empty(), "modules that import each other:\n{}", circles.join("\n"));
}

#[test]
fn no_source_file_is_too_long_to_read_in_one_sitting() {
    let mut long = Vec::new();
    let mut counted = 0;
    for (_, src) in crate_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files.iter().filter(|f| !f.ends_with("tests.rs")) {
            let lines = std::fs::read_to_string(file).expect("source").lines().count();
            counted += 1;
            if lines > SOURCE_LINES_MAX {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(counted > 100, "the check read the sources ({counted} files)");
    assert!(long.is_empty(), "files over {SOURCE_LINES_MAX} lines; split them by concern:\n{}", long.join("\n"));
}
