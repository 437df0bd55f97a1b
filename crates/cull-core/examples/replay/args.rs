//! `replay`'s flags.

use argh::FromArgs;
use cull_core::scene::CameraKind;
use cull_core::{InstanceFormat, OutputKind, ScanVariant};
use std::path::PathBuf;

/// Replays a scene file through the chosen scan variants and formats on the
/// GPU and prints whether each one's survivors equal the CPU reference.
#[derive(FromArgs)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "{command_name} scene.json --variant subgroup-ballot --format packed16",
    example = "{command_name} --random 1000 --camera orthographic > scene.json",
    note = "The scene format: docs/scene-format.md."
)]
pub struct Args {
    /// the scene file to replay
    #[argh(positional, arg_name = "SCENE.json")]
    pub scene: Option<PathBuf>,
    /// a scan variant by name, or all (the default: every compiled-in one)
    #[argh(
        option,
        arg_name = "all|name",
        from_str_fn(variants),
        default = "ScanVariant::compiled().collect()"
    )]
    pub variant: Variants,
    /// an instance format by name (matrix, posquat, packed16), or all (the
    /// default)
    #[argh(
        option,
        arg_name = "all|name",
        from_str_fn(formats),
        default = "InstanceFormat::ALL.to_vec()"
    )]
    pub format: Formats,
    /// what the culls write: instances (copies, the default) or indices
    #[argh(
        option,
        arg_name = "instances|indices",
        from_str_fn(output),
        default = "OutputKind::Instances"
    )]
    pub output: OutputKind,
    /// print a random scene of N instances as a scene file instead
    #[argh(option, arg_name = "N")]
    pub random: Option<usize>,
    /// print the report as JSON: each cull's sorted survivors, its
    /// difference from the CPU reference, and the reference's sets
    #[argh(switch)]
    pub json: bool,
    /// the random scene's camera: infinite (reverse-Z, the default),
    /// perspective or orthographic
    #[argh(
        option,
        arg_name = "infinite|perspective|orthographic",
        from_str_fn(camera),
        default = "CameraKind::InfiniteReverseZ"
    )]
    pub camera: CameraKind,
}

// argh reads a field of type `Vec<T>` as an option given once per item; these
// are single values that stand for one item or all of them, so their fields
// are typed by these names, which argh takes for single values.
type Variants = Vec<ScanVariant>;
type Formats = Vec<InstanceFormat>;

/// `--variant`: one name, or `all` for every compiled-in one.
fn variants(value: &str) -> Result<Vec<ScanVariant>, String> {
    match value {
        "all" => Ok(ScanVariant::compiled().collect()),
        name => ScanVariant::from_name(name).map(|v| vec![v]).ok_or(format!(
            "unknown variant {name}: all or one of {}",
            ScanVariant::ALL.map(|v| v.name()).join(", ")
        )),
    }
}

/// `--format`: one name, or `all`.
fn formats(value: &str) -> Result<Vec<InstanceFormat>, String> {
    match value {
        "all" => Ok(InstanceFormat::ALL.to_vec()),
        name => InstanceFormat::from_name(name)
            .map(|f| vec![f])
            .ok_or(format!("unknown format {name}: all, matrix, posquat or packed16")),
    }
}

/// `--output instances|indices`.
fn output(value: &str) -> Result<OutputKind, String> {
    match value {
        "instances" => Ok(OutputKind::Instances),
        "indices" => Ok(OutputKind::Indices),
        _ => Err("expected instances or indices".into()),
    }
}

/// `--camera infinite|perspective|orthographic`.
fn camera(value: &str) -> Result<CameraKind, String> {
    match value {
        "infinite" => Ok(CameraKind::InfiniteReverseZ),
        "perspective" => Ok(CameraKind::Perspective),
        "orthographic" => Ok(CameraKind::Orthographic),
        _ => Err("expected infinite, perspective or orthographic".into()),
    }
}
