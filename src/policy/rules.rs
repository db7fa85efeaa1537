//! Operator rules beyond the advertised schema, per tool: an extra JSON Schema the arguments
//! must also satisfy, and path confinement, a rule JSON Schema cannot state: after lexical
//! normalization, a path argument must stay inside a root (`../../etc/passwd` must not
//! reach `/etc/passwd`).
//!
//! Security note: normalization is lexical. Symbolic links inside the root are the server's
//! to refuse; toolgate cannot see the server's filesystem.

use crate::catalog::{Catalog, Schema};
use crate::config::{PathRule, ToolPolicy};
use crate::validate::Violation;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub struct ToolRules {
    pub extra: Option<Arc<Schema>>,
    paths: Vec<(String, PathBuf)>,
}

impl ToolRules {
    /// Compiles a tool's rules from configuration; `None` when it has none.
    pub fn from_policy(p: &ToolPolicy, catalog: &Catalog) -> Result<Option<ToolRules>, String> {
        if p.extra_schema.is_none() && p.paths.is_empty() {
            return Ok(None);
        }
        let extra = match &p.extra_schema {
            Some(text) => {
                let s = catalog.schema(text);
                if let Err(e) = s.validator() {
                    return Err(format!("extra_schema does not compile: {e}"));
                }
                // A tool's own schema is checked without such patterns; the operator's rule
                // must hold whole, or the operator must know it cannot.
                if !s.unchecked_patterns().is_empty() {
                    return Err(format!(
                        "extra_schema has patterns toolgate's regular-expression engine cannot run (a lookaround, a backreference) at {}: write them without",
                        s.unchecked_patterns().join(", ")
                    ));
                }
                Some(s)
            }
            None => None,
        };
        let paths = p.paths.iter().map(rule).collect::<Result<_, _>>()?;
        Ok(Some(ToolRules { extra, paths }))
    }

    /// Path violations in arguments.
    pub fn path_violations(&self, args: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        for (pointer, root) in &self.paths {
            let Some(v) = args.pointer(pointer) else {
                continue;
            };
            let items: Vec<(String, &Value)> = match v {
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{pointer}/{i}"), v))
                    .collect(),
                v => vec![(pointer.clone(), v)],
            };
            for (at, v) in items {
                let Some(p) = v.as_str() else { continue };
                if let Err(why) = confine(root, p) {
                    out.push(Violation {
                        pointer: at,
                        keyword: "pathConfinement".into(),
                        message: why.to_string(),
                    });
                }
            }
        }
        out
    }
}

fn rule(r: &PathRule) -> Result<(String, PathBuf), String> {
    let pointer = if r.argument.starts_with('/') {
        r.argument.clone()
    } else {
        format!("/{}", crate::text::pointer_token(&r.argument))
    };
    if !Path::new(&r.root).is_absolute() {
        return Err(format!("path rule root {:?} must be absolute", r.root));
    }
    Ok((pointer, normalize(Path::new("/"), &r.root)))
}

/// Why a path argument is refused: where it really leads, or why it cannot be read as a path.
#[derive(Debug, thiserror::Error)]
enum Escape {
    #[error("must not contain a NUL character")]
    Nul,
    #[error("must stay inside {root}, but {value:?} resolves to {resolved}")]
    Outside {
        root: String,
        value: String,
        resolved: String,
    },
    #[error("must be a local file, but the URI names the host {0:?}")]
    RemoteHost(String),
    #[error("is not a readable file URI (bad percent-encoding)")]
    BadEncoding,
}

/// `Err` says where the path really leads.
fn confine(root: &Path, value: &str) -> Result<(), Escape> {
    if value.contains('\0') {
        return Err(Escape::Nul);
    }
    let path = file_uri_path(value)?;
    let value = path.as_deref().unwrap_or(value);
    if value.contains('\0') {
        return Err(Escape::Nul);
    }
    let resolved = normalize(root, value);
    if resolved.starts_with(root) {
        Ok(())
    } else {
        Err(Escape::Outside {
            root: root.display().to_string(),
            value: value.to_owned(),
            resolved: resolved.display().to_string(),
        })
    }
}

/// The path a `file:` URI names, read as a URL parser reads it (the scheme in any case;
/// `file:/p`, `file:///p` and `file://localhost/p`; `\` as `/`; percent-decoded before `..` is
/// resolved), so that no spelling of a URI reaches a path the plain form could not. Any other
/// host is refused: the file is not on this machine. `Ok(None)`: not a `file:` URI.
fn file_uri_path(value: &str) -> Result<Option<String>, Escape> {
    // First what a URL parser does to its input (WHATWG URL, "basic URL parser"): leading and
    // trailing C0 controls and spaces go, and tabs and newlines go wherever they are, so
    // `"\tfile:///etc/passwd"` and `"fi\tle:///w/.\t./x"` name what they seem not to.
    let cleaned: String = value
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let Some(rest) = cleaned
        .get(..5)
        .filter(|s| s.eq_ignore_ascii_case("file:"))
        .map(|_| &cleaned[5..])
    else {
        return Ok(None);
    };
    let rest = rest.replace('\\', "/");
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let (host, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
                return Err(Escape::RemoteHost(host.to_owned()));
            }
            path
        }
        None => rest,
    };
    let decoded = crate::text::percent_decode(path)
        .ok_or(Escape::BadEncoding)?
        .replace('\\', "/");
    Ok(Some(format!("/{}", decoded.trim_start_matches('/'))))
}

/// Resolves `.` and `..` without touching the filesystem; relative paths start at `base`.
fn normalize(base: &Path, p: &str) -> PathBuf {
    let mut out = base.to_path_buf();
    for c in Path::new(p).components() {
        match c {
            Component::RootDir => out = PathBuf::from("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_root() {
        let root = Path::new("/workspace");
        assert!(confine(root, "notes/today.md").is_ok());
        assert!(confine(root, "/workspace/a/../b").is_ok());
        assert!(confine(root, "./a/./b").is_ok());
        assert_eq!(
            confine(root, "../../etc/passwd").unwrap_err().to_string(),
            "must stay inside /workspace, but \"../../etc/passwd\" resolves to /etc/passwd"
        );
        assert!(confine(root, "/etc/passwd").is_err());
        assert!(
            confine(root, "/workspace-evil/x").is_err(),
            "a sibling with the root as prefix is outside"
        );
        assert!(confine(root, "a/../../workspace/ok").is_ok());
        assert!(confine(root, "file:///etc/shadow").is_err());
        for uri in [
            "FILE:///etc/passwd",
            "file:/etc/passwd",
            "file://localhost/etc/passwd",
            "file:///workspace/%2e%2e/etc/passwd",
            "file:///workspace/%2E%2E%2Fetc/passwd",
            "file://evil.example/workspace/a",
            "file:///workspace/..\\..\\etc",
            "File:etc/passwd",
            "file:///workspace/%zz",
            "file:///workspace/a%00b",
            // What a URL parser cleans before it parses.
            " file:///etc/passwd",
            "\tfile:///etc/passwd",
            "\u{1}file:///etc/passwd",
            "fi\tle:///etc/passwd",
            "file:///etc/passwd\u{1f} ",
            "file:///workspace/.\t./.\t./etc/passwd",
            "file:///workspace/.\n./..\r/etc/passwd",
            "file:///workspace/%2e\t%2e/%2e%2e/etc/passwd",
        ] {
            assert!(confine(root, uri).is_err(), "{uri:?}");
        }
        for uri in [
            "file:///workspace/a",
            "file://LOCALHOST/workspace/a",
            "FILE:/workspace/a%20b",
            "file:///workspace/a?x=../../etc",
        ] {
            assert!(confine(root, uri).is_ok(), "{uri}");
        }
        assert!(confine(root, "a\0b").is_err());
    }

    #[test]
    fn arrays_of_paths_are_checked_item_by_item() {
        let rules = ToolRules {
            extra: None,
            paths: vec![
                rule(&PathRule {
                    argument: "files".into(),
                    root: "/srv".into(),
                })
                .unwrap(),
            ],
        };
        let v = rules.path_violations(&serde_json::json!({"files": ["a", "../b", "c"]}));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].pointer, "/files/1");
    }
}
