//! The WGSL that picks a kernel's stages, generated from the Rust
//! registries. A library module names a registry in a line
//!
//! ```text
//! // #select formats: InstanceData, instances, world_sphere
//! ```
//!
//! and [`expand`] replaces it with one `#import` of those names per
//! registered stage, each under the shader def that selects it:
//!
//! ```text
//! #ifdef FORMAT_MATRIX
//! #import cull::formats::matrix::{InstanceData, instances, world_sphere}
//! #else ifdef FORMAT_POSQUAT
//! ...
//! #endif
//! ```
//!
//! So a new format, visibility test or output kind is its module pair and
//! its registry line: no WGSL file lists them.

use crate::kernel::ShaderModule;
use std::collections::HashMap;
use std::sync::OnceLock;

/// What starts a selection line.
const DIRECTIVE: &str = "// #select ";

/// The registries a selection can name: each stage's shader def and the
/// import path of its module.
fn registry(name: &str) -> Vec<(&'static str, &'static str)> {
    let path = |module: ShaderModule| {
        module
            .import_path()
            .unwrap_or_else(|| panic!("{} has no import path", module.path))
    };
    match name {
        "formats" => crate::formats::FORMATS
            .iter()
            .map(|f| (f.shader_def, path(f.module)))
            .collect(),
        "visibility" => crate::visibility::VISIBILITY_TESTS
            .iter()
            .map(|v| (v.shader_def, path(v.module)))
            .collect(),
        "outputs" => crate::outputs::OUTPUTS
            .iter()
            .map(|o| (o.shader_def, path(o.module)))
            .collect(),
        other => panic!("no registry named {other:?} for a #select line"),
    }
}

/// The `#ifdef` ladder of one selection line's body (`registry: names`).
fn ladder(body: &str) -> String {
    let (name, names) = body
        .split_once(':')
        .unwrap_or_else(|| panic!("a #select line reads `// #select <registry>: <names>`, not {body:?}"));
    let mut out = String::new();
    for (k, (def, path)) in registry(name.trim()).into_iter().enumerate() {
        let keyword = if k == 0 { "#ifdef" } else { "#else ifdef" };
        out.push_str(&format!(
            "{keyword} {def}\n#import {path}::{{{}}}\n",
            names.trim()
        ));
    }
    out.push_str("#endif\n");
    out
}

/// `source` with every selection line replaced by its ladder.
fn expand_source(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 512);
    for line in source.lines() {
        match line.trim().strip_prefix(DIRECTIVE) {
            Some(body) => out.push_str(&ladder(body)),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// `module` as the composer takes it: its selection lines expanded (each
/// module's expansion is made once and kept for the process), or the module
/// itself where it has none.
pub(crate) fn expand(module: ShaderModule) -> ShaderModule {
    if !module.source.contains(DIRECTIVE) {
        return module;
    }
    static EXPANDED: OnceLock<std::sync::Mutex<HashMap<&'static str, &'static str>>> = OnceLock::new();
    let mut expanded = EXPANDED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // Leaked once per module path: a handful of small strings for the
    // process's life, as `include_str!` sources are.
    let source = *expanded
        .entry(module.path)
        .or_insert_with(|| Box::leak(expand_source(module.source).into_boxed_str()));
    ShaderModule {
        path: module.path,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every registered stage is imported under its own shader def, in the
    /// registry's order, and nothing of the directive is left.
    #[test]
    fn a_selection_imports_every_registered_stage_under_its_def() {
        for (name, defs) in [
            (
                "formats",
                crate::formats::FORMATS
                    .iter()
                    .map(|f| f.shader_def)
                    .collect::<Vec<_>>(),
            ),
            (
                "visibility",
                crate::visibility::VISIBILITY_TESTS
                    .iter()
                    .map(|v| v.shader_def)
                    .collect(),
            ),
            (
                "outputs",
                crate::outputs::OUTPUTS.iter().map(|o| o.shader_def).collect(),
            ),
        ] {
            let text = expand_source(&format!("a\n// #select {name}: X, y\nb\n"));
            assert!(!text.contains("#select"), "{text}");
            let selected: Vec<&str> = text
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("#ifdef ")
                        .or_else(|| l.strip_prefix("#else ifdef "))
                })
                .collect();
            assert_eq!(selected, defs, "{name}");
            assert_eq!(text.matches("::{X, y}").count(), defs.len(), "{text}");
            assert!(text.starts_with("a\n") && text.ends_with("#endif\nb\n"), "{text}");
        }
    }

    /// The library's modules that select stages are expanded, and the
    /// expansion is the same string each time (Bevy's shader cache keys on
    /// the source).
    #[test]
    fn the_library_holds_no_selection_line() {
        let library = crate::shader::library();
        assert!(library.iter().all(|m| !m.source.contains(DIRECTIVE)));
        let items = library
            .iter()
            .find(|m| m.path == "items.wgsl")
            .expect("items.wgsl");
        assert!(items.source.contains("#ifdef FORMAT_MATRIX"));
        assert!(std::ptr::eq(expand(*items).source, items.source));
    }
}
