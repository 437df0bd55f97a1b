//! Composes the WGSL modules from the files in the top-level `shaders/`.
//!
//! WGSL has no imports, so each pipeline's module is the concatenation of
//! the shared code, the instance format, the output kind, a generated
//! `emit()` for the number of output bindings, and the variant's passes.

use crate::{InstanceFormat, OutputKind, ScanVariant};
use std::fmt::Write;

const COMMON: &str = include_str!("../shaders/common.wgsl");

fn format_source(format: InstanceFormat) -> &'static str {
    match format {
        InstanceFormat::Matrix => include_str!("../shaders/format_matrix.wgsl"),
        InstanceFormat::PosQuat => include_str!("../shaders/format_posquat.wgsl"),
        InstanceFormat::Packed16 => include_str!("../shaders/format_packed16.wgsl"),
    }
}

fn output_source(output: OutputKind) -> &'static str {
    match output {
        OutputKind::Instances => include_str!("../shaders/output_instances.wgsl"),
        OutputKind::Indices => include_str!("../shaders/output_indices.wgsl"),
    }
}

/// The workgroup scan of a tile, shared by the block-atomic and ordered variants.
#[cfg(any(feature = "block-atomic", feature = "ordered"))]
const TILE_SCAN: &str = include_str!("../shaders/tile_scan.wgsl");

/// Ballot helpers, shared by the passes that use subgroup operations.
#[cfg(any(feature = "subgroup-ballot", feature = "ordered"))]
const SUBGROUP: &str = include_str!("../shaders/subgroup.wgsl");

/// The ordered variant's look-back and bookkeeping, shared by its two forms.
#[cfg(feature = "ordered")]
const ORDERED: &str = include_str!("../shaders/ordered.wgsl");

/// The variant's own passes, in their subgroup form where `subgroups` and
/// the variant has one; `None` when compiled out.
#[cfg_attr(not(feature = "ordered"), allow(unused_variables))] // only Ordered has two forms
fn variant_source(variant: ScanVariant, subgroups: bool) -> Option<String> {
    let source: String = match variant {
        #[cfg(feature = "hillis-steele")]
        ScanVariant::HillisSteele => include_str!("../shaders/hillis_steele.wgsl").into(),
        #[cfg(feature = "block-atomic")]
        ScanVariant::BlockAtomic => [TILE_SCAN, include_str!("../shaders/block_atomic.wgsl")].join("\n"),
        #[cfg(feature = "ordered")]
        ScanVariant::Ordered if subgroups => [
            SUBGROUP,
            ORDERED,
            include_str!("../shaders/ordered_subgroup.wgsl"),
        ]
        .join("\n"),
        #[cfg(feature = "ordered")]
        ScanVariant::Ordered => [
            TILE_SCAN,
            ORDERED,
            include_str!("../shaders/ordered_workgroup.wgsl"),
        ]
        .join("\n"),
        #[cfg(feature = "subgroup-ballot")]
        ScanVariant::SubgroupBallot => [SUBGROUP, include_str!("../shaders/subgroup_ballot.wgsl")].join("\n"),
        #[cfg(feature = "subgroup-shuffle")]
        ScanVariant::SubgroupShuffle => include_str!("../shaders/subgroup_shuffle.wgsl").into(),
        #[allow(unreachable_patterns)]
        _ => return None,
    };
    Some(source)
}

/// First binding of the output windows; windows take the next ones.
pub(crate) const FIRST_OUTPUT_BINDING: u32 = 3;

/// The draw-arguments binding and `emit(slot, i)`, which writes chunk-local
/// instance `i` to output slot `slot`. A batch bigger than one storage
/// binding is bound as several windows of `window_len` elements; the slot
/// picks the window.
fn emit_source(windows: u32) -> String {
    let mut s =
        String::from("@group(0) @binding(2) var<storage, read_write> draw_args: array<atomic<u32>>;\n");
    for w in 0..windows {
        writeln!(
            s,
            "@group(0) @binding({}) var<storage, read_write> out{w}: array<OutputElement>;",
            FIRST_OUTPUT_BINDING + w
        )
        .unwrap();
    }
    s.push_str("\nfn emit(slot: u32, i: u32, inst: InstanceData) {\n    let e = output_element(i, inst);\n");
    if windows == 1 {
        s.push_str("    out0[slot] = e;\n}\n");
    } else {
        s.push_str(
            "    let w = slot / params.window_len;\n    let j = slot - w * params.window_len;\n    switch w {\n",
        );
        for w in 0..windows {
            if w + 1 == windows {
                writeln!(s, "        default: {{ out{w}[j] = e; }}").unwrap();
            } else {
                writeln!(s, "        case {w}u: {{ out{w}[j] = e; }}").unwrap();
            }
        }
        s.push_str("    }\n}\n");
    }
    s
}

/// Groups of `ITEMS` rows each thread of a single-pass variant takes
/// (`ROW_GROUPS` in the shaders). Two for the ordered variant's subgroup form
/// with 16-byte instances: its tiles then carry as many bytes as 32-byte
/// ones, which spreads the look-back chain's fixed cost per tile over twice
/// the instances (on an H100 at 5-25% visible, 0.70-0.74 of the best
/// unordered variant instead of 0.60-0.68; see docs/benchmarks.md). One
/// elsewhere: wider instances already fill a tile with as many bytes.
pub(crate) fn row_groups(variant: ScanVariant, format: InstanceFormat, subgroups: bool) -> u32 {
    if variant == ScanVariant::Ordered && subgroups && format.stride() <= 16 {
        2
    } else {
        1
    }
}

/// What one shader module is specialized for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModuleShape {
    pub variant: ScanVariant,
    pub format: InstanceFormat,
    pub output: OutputKind,
    /// Output bindings.
    pub windows: u32,
    /// Threads per workgroup (`WORKGROUP_SIZE`).
    pub workgroup_size: u32,
    /// The ordered variant's polls before falling back (`SPIN_LIMIT`).
    pub spin_limit: u32,
    /// Tiles that publish nothing (`SILENT_TILES`, for tests).
    pub silent_tiles: u32,
    /// The subgroup form of a variant that has one (ordered); the device
    /// must have `Features::SUBGROUP`.
    pub subgroups: bool,
}

/// Replaces the value of `const NAME: u32 = ...;` in WGSL source. The
/// sources are compiled into the crate, so a missing constant is this
/// crate's bug, not the caller's: it panics with the name rather than
/// composing a module that silently keeps the default (`every_module_validates`
/// composes every shape on each `cargo test`).
fn set_const(src: &str, name: &str, value: u32) -> String {
    let key = format!("const {name}: u32 = ");
    let start = src
        .find(&key)
        .unwrap_or_else(|| panic!("the composed WGSL declares no `const {name}: u32`"));
    let from = start + key.len();
    let end = from + src[from..].find(';').expect("a const ends with ;");
    format!("{}{value}u{}", &src[..from], &src[end..])
}

/// The full module for one shape.
pub(crate) fn compose(shape: ModuleShape) -> Option<String> {
    let variant = variant_source(shape.variant, shape.subgroups)?;
    let source = [
        COMMON,
        format_source(shape.format),
        output_source(shape.output),
        &emit_source(shape.windows),
        &variant,
    ]
    .join("\n");
    let source = set_const(&source, "WORKGROUP_SIZE", shape.workgroup_size);
    let mut source = set_const(
        &source,
        "ROW_GROUPS",
        row_groups(shape.variant, shape.format, shape.subgroups),
    );
    // The look-back's knobs exist only in the ordered variant's module.
    if shape.variant == ScanVariant::Ordered {
        source = set_const(&source, "SPIN_LIMIT", shape.spin_limit);
        source = set_const(&source, "SILENT_TILES", shape.silent_tiles);
    }
    Some(source)
}

/// Every shape a module can be composed for (both forms of the ordered
/// variant), with test values for the tunable constants.
#[cfg(test)]
pub(crate) fn every_shape() -> Vec<ModuleShape> {
    let mut shapes = Vec::new();
    for variant in ScanVariant::compiled() {
        let forms: &[bool] = match variant {
            ScanVariant::Ordered => &[false, true],
            v => &[v.required_features().contains(wgpu::Features::SUBGROUP)],
        };
        for &subgroups in forms {
            for format in InstanceFormat::ALL {
                for output in [OutputKind::Instances, OutputKind::Indices] {
                    for windows in 1..=crate::culler::MAX_OUTPUT_WINDOWS {
                        shapes.push(ModuleShape {
                            variant,
                            format,
                            output,
                            windows,
                            workgroup_size: 64,
                            spin_limit: 3,
                            silent_tiles: 1,
                            subgroups,
                        });
                    }
                }
            }
        }
    }
    shapes
}

/// The shape's module composed, parsed and validated by naga with the
/// capabilities the device will have; panics with naga's report otherwise.
#[cfg(test)]
pub(crate) fn validated(shape: ModuleShape) -> (String, naga::Module, naga::valid::ModuleInfo) {
    use naga::valid::{Capabilities, ValidationFlags, Validator};
    let src = compose(shape).expect("compiled in");
    let what = format!("{shape:?}");
    let module =
        naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(&src)));
    let info = Validator::new(ValidationFlags::all(), Capabilities::SUBGROUP)
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(&src)));
    (src, module, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every composition parses and validates with naga, with the
    /// capabilities the device will have: the shaders are checked here, on
    /// every `cargo test`, not first at pipeline creation on a GPU.
    #[test]
    fn every_module_validates() {
        let shapes = every_shape();
        let expected: usize = ScanVariant::compiled()
            .map(|v| if v == ScanVariant::Ordered { 2 } else { 1 })
            .sum::<usize>()
            * 3
            * 2
            * crate::culler::MAX_OUTPUT_WINDOWS as usize;
        assert_eq!(shapes.len(), expected);
        for shape in shapes {
            let (src, _, _) = validated(shape);
            assert!(src.contains("const WORKGROUP_SIZE: u32 = 64u;"));
        }
    }

    /// The value of `const NAME: f32 = value;` in a WGSL source.
    fn wgsl_const(src: &str, name: &str) -> f32 {
        let start = src.find(&format!("const {name}: f32 = ")).expect(name) + name.len() + 14;
        src[start..start + src[start..].find(';').unwrap()]
            .parse()
            .unwrap()
    }

    #[test]
    #[should_panic(expected = "declares no `const NOT_THERE: u32`")]
    fn a_missing_constant_is_not_silently_skipped() {
        set_const(COMMON, "NOT_THERE", 1);
    }

    #[test]
    fn packed_quantization_step_matches_rust() {
        // The WGSL spells QUAT_STEP as the same f32 expression as Rust.
        let src = format_source(InstanceFormat::Packed16);
        assert!(src.contains("const QUAT_STEP: f32 = 2.0 * QUAT_RANGE / 1023.0;"));
        assert_eq!(wgsl_const(src, "QUAT_RANGE"), std::f32::consts::FRAC_1_SQRT_2);
        assert_eq!(
            crate::instance::QUAT_STEP,
            2.0 * std::f32::consts::FRAC_1_SQRT_2 / 1023.0
        );
    }

    #[test]
    fn wgsl_constants_match_rust() {
        assert_eq!(
            wgsl_const(COMMON, "PLANE_TOLERANCE"),
            crate::frustum::PLANE_TOLERANCE
        );
        assert_eq!(
            wgsl_const(
                format_source(InstanceFormat::Packed16),
                "PACKED_ROTATION_ERROR_BOUND"
            ),
            crate::instance::PACKED_ROTATION_ERROR_BOUND
        );
    }
}
