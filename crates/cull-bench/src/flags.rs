//! The flag values the bench binaries share (`--sizes`, `--fractions`,
//! `--variants`, `--formats`, `--output` and plain numbers), parsed alike
//! by each of them. Each binary takes the flags it needs.
#![allow(dead_code)]

use cull_core::{InstanceFormat, OutputKind, ScanVariant};

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

/// The number `value` of `flag` (`--runs 9`).
pub fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e| format!("{flag}: {e}"))
}
