//! The flag values the bench binaries share (`--sizes`, `--fractions`,
//! `--variants`, `--formats`, `--output`), parsed alike by each of them
//! (argh's `from_str_fn`). Each binary takes the flags it needs.
#![allow(dead_code)]

use cull_core::{InstanceFormat, OutputKind, ScanVariant};

// argh reads a field of type `Vec<T>` as an option given once per item
// (`--sizes 1e6 --sizes 4e6`). These lists are one comma-separated value
// (`--sizes 1e6,4e6`), parsed by the functions below (`from_str_fn`), so the
// fields holding them are typed by these names, which argh takes for single
// values.

/// `--sizes`.
pub type Sizes = Vec<usize>;
/// `--fractions`.
pub type Fractions = Vec<f32>;
/// `--variants`.
pub type Variants = Vec<ScanVariant>;
/// `--formats`.
pub type Formats = Vec<InstanceFormat>;

/// A comma-separated list, each item parsed by `parse`.
pub fn list<T>(value: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    value.split(',').map(parse).collect()
}

/// `--sizes 1e6,4e6`: instance counts, in any floating-point notation.
pub fn sizes(value: &str) -> Result<Vec<usize>, String> {
    list(value, |s| {
        s.parse::<f64>()
            .map(|v| v as usize)
            .map_err(|e| format!("--sizes {s}: {e}"))
    })
}

/// `--fractions 0.05,0.25,1`: visible fractions.
pub fn fractions(value: &str) -> Result<Vec<f32>, String> {
    list(value, |s| s.parse().map_err(|e| format!("--fractions {s}: {e}")))
}

/// `--variants subgroup-ballot,ordered`: scan variants by name.
pub fn variants(value: &str) -> Result<Vec<ScanVariant>, String> {
    list(value, |s| {
        ScanVariant::from_name(s).ok_or(format!("unknown variant {s}"))
    })
}

/// `--formats posquat,packed16`: instance formats by name.
pub fn formats(value: &str) -> Result<Vec<InstanceFormat>, String> {
    list(value, |s| {
        InstanceFormat::from_name(s).ok_or(format!("unknown format {s}"))
    })
}

/// `--output instances|indices`.
pub fn output(value: &str) -> Result<OutputKind, String> {
    match value {
        "instances" => Ok(OutputKind::Instances),
        "indices" => Ok(OutputKind::Indices),
        o => Err(format!("--output {o}: instances or indices")),
    }
}

/// Ends the program on a command line that argh accepts but the binary
/// does not (`message`), as argh ends it on one it refuses.
pub fn usage_error(message: &str) -> ! {
    let program = std::env::args().next().unwrap_or_default();
    let name = program.rsplit(['/', '\\']).next().unwrap_or(&program);
    eprintln!("{message}\n\nRun {name} --help for more information.");
    std::process::exit(1)
}
