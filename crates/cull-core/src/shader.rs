//! The WGSL library and its composition. Each stage's WGSL is a module of
//! `shaders/cull/` with an import path (`cull::params`, `cull::items`,
//! `cull::formats::posquat`, ...); a variant's entry module imports what it
//! uses, and shader defs pick the format, output kind and visibility test
//! (each selected by an import ladder generated from its registry,
//! `selection.rs`) and carry Rust's constants (`#{WORKGROUP_SIZE}`, `#{BINDING_PARAMS}`,
//! ...). naga_oil, the composer Bevy uses, composes them here; the Bevy
//! plugin hands the same modules and defs to Bevy's `PipelineCache`.

use crate::kernel::{
    DRAW_ARGS_WORDS, INSTANCE_COUNT_OFFSET, ITEMS_PER_THREAD, MAX_OUTPUT_WINDOWS, MAX_VIEWS, STAGED_VIEWS,
    shader_module,
};
/// What a renderer that compiles the kernels itself reads: the modules, the
/// shader defs' values, each pass's layout and the binding numbers.
pub use crate::kernel::{PassLayout, ShaderDefValue, ShaderModule, Slot, TEST_UNIFORM_BYTES, bindings};
use crate::timing::PassKind;
use crate::variants::{KernelTuning, SCAN_LIBRARY, ScanKernel};
use crate::visibility::VisibilityKernel;
use crate::{InstanceFormat, OutputKind, ScanVariant};
use naga_oil::compose::{ComposableModuleDescriptor, Composer, NagaModuleDescriptor, ShaderType};
use std::cell::RefCell;
use std::collections::HashMap;

/// `cull::encode`: a transform written in any format's bytes on the GPU
/// (`encode_instance`), for a renderer's own compute passes that write
/// instances. It has no bindings and no shader defs.
pub const ENCODE_MODULE: ShaderModule = shader_module!("encode.wgsl");

/// Every library module (those with an import path), in dependency order:
/// what a renderer registers as shader libraries before composing a
/// kernel's entry module ([`KernelRecipe::entry`]).
pub fn library() -> Vec<ShaderModule> {
    library_of(ScanVariant::compiled())
}

/// The library as a build with only `variants` compiled in has it: what a
/// kernel of one variant is composed against (see [`compose`]), so that
/// every build composes each kernel against the same modules.
fn library_of(variants: impl Iterator<Item = ScanVariant>) -> Vec<ShaderModule> {
    let mut modules = vec![
        shader_module!("params.wgsl"),
        shader_module!("math.wgsl"),
        ENCODE_MODULE,
        shader_module!("points.wgsl"),
    ];
    modules.extend(crate::visibility::LIBRARY);
    modules.extend(crate::visibility::modules());
    modules.extend(crate::formats::FORMATS.iter().map(|f| f.module));
    modules.extend(crate::outputs::OUTPUTS.iter().map(|o| o.module));
    modules.push(shader_module!("items.wgsl"));
    modules.push(crate::cells::MODULE);
    modules.extend(SCAN_LIBRARY);
    for variant in variants {
        modules.extend(variant.kernel().into_iter().flat_map(|k| k.library()));
    }
    // The stages' selection in `items.wgsl` and the outputs, from the
    // registries (crate::selection).
    modules.into_iter().map(crate::selection::expand).collect()
}

/// The entry modules of every compiled-in variant, in both forms where a
/// variant has two: what a renderer registers beside [`library`] to compile
/// any [`KernelRecipe`] (their [`ShaderModule::path`]s are the recipes'
/// [`KernelRecipe::entry`] paths).
pub fn entry_modules() -> Vec<ShaderModule> {
    let mut modules: Vec<ShaderModule> = ScanVariant::compiled()
        .filter_map(ScanVariant::kernel)
        .flat_map(|k| {
            // Both forms' entry modules, and the modules of passes that
            // have one of their own.
            let passes = k.passes(1).into_iter().filter_map(|p| p.module);
            [k.entry(false), k.entry(true)].into_iter().chain(passes)
        })
        .collect();
    modules.dedup();
    modules.push(crate::cells::PASS_MODULE);
    modules
}

/// What one kernel is specialized for.
#[derive(Clone, Copy)]
pub(crate) struct ModuleShape {
    pub variant: ScanVariant,
    pub kernel: &'static dyn ScanKernel,
    pub format: InstanceFormat,
    pub output: OutputKind,
    pub visibility: &'static VisibilityKernel,
    /// Output bindings.
    pub windows: u32,
    /// Views the kernel votes in (`VIEWS`): its target's view count.
    pub views: u32,
    /// Threads per workgroup (`WORKGROUP_SIZE`).
    pub workgroup_size: u32,
    pub tuning: KernelTuning,
    /// The kernel's subgroup form; the device must have `Features::SUBGROUP`.
    pub subgroups: bool,
    /// Whether it culls by cells ([`crate::cells`]): a cell pass first, and
    /// the cull reads the kept cells' tiles only (`CELLS`).
    pub cells: bool,
    /// Whether it serves only meshes centred on their origin
    /// (`LOCAL_CENTER_ORIGIN`): the vote leaves out the rotation of the
    /// local center, which then moves nothing. Only for formats with a
    /// `centred_form`.
    pub centred: bool,
    /// Whether it serves only plain views (`PLAIN_VIEWS`, see
    /// [`crate::culler::KernelSpec::plain_views`]): no sixth plane, and
    /// under the frustum test no size band.
    pub plain_views: bool,
}

impl std::fmt::Debug for ModuleShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleShape")
            .field("variant", &self.variant)
            .field("format", &self.format)
            .field("output", &self.output)
            .field("visibility", &self.visibility.name)
            .field("windows", &self.windows)
            .field("views", &self.views)
            .field("subgroups", &self.subgroups)
            .field("cells", &self.cells)
            .field("centred", &self.centred)
            .field("plain_views", &self.plain_views)
            .field("tuning", &self.tuning)
            .finish()
    }
}

/// Everything a renderer needs to compile one kernel itself (the Bevy
/// plugin does it through Bevy's `PipelineCache`): the entry module, to be
/// composed against [`library`] with `shader_defs`, and one compute
/// pipeline per pass, in order, each with its group 0 layout, from the
/// entry module or the pass's own ([`PassLayout::module`], composed with
/// the same defs), and with wgpu's zeroing of workgroup memory where the
/// pass asks for it ([`PassLayout::zeroed_workgroup_memory`]: zeroing it
/// anyway is correct, only slower).
#[derive(Clone, Debug)]
pub struct KernelRecipe {
    /// The entry module (it imports the library).
    pub entry: ShaderModule,
    /// The shader defs to compose it with.
    pub shader_defs: Vec<(&'static str, ShaderDefValue)>,
    /// The passes, in the order [`crate::Culler::provide_pipelines`] takes
    /// their pipelines.
    pub passes: Vec<PassLayout>,
    /// Whether the kernel uses subgroup operations (the composer needs
    /// naga's subgroup capability, the device `Features::SUBGROUP`).
    pub subgroups: bool,
}

impl KernelRecipe {
    /// The entry module of `pass`: its own, or the kernel's.
    pub fn module_of(&self, pass: &PassLayout) -> ShaderModule {
        pass.module.unwrap_or(self.entry)
    }

    /// Every entry module its passes are compiled from, the kernel's first.
    pub fn modules(&self) -> Vec<ShaderModule> {
        let mut modules = vec![self.entry];
        for pass in &self.passes {
            let module = self.module_of(pass);
            if !modules.contains(&module) {
                modules.push(module);
            }
        }
        modules
    }
}

impl ModuleShape {
    /// Whether its index output is staged in workgroup memory
    /// (`STAGED_INDICES`, cull::scans::staged): a kernel that can, writing
    /// indices, with the tuning on.
    pub fn stages_indices(&self) -> bool {
        self.output == OutputKind::Indices && self.kernel.stages_indices() && self.tuning.staged_indices
    }

    /// Groups of `ITEMS` rows each thread takes (`ROW_GROUPS`).
    pub fn row_groups(&self) -> u32 {
        self.kernel.row_groups(self.format, self.subgroups)
    }

    /// The shader defs: the stages' selectors, the sizes, and the binding
    /// numbers, all from their Rust constants.
    pub fn shader_defs(&self) -> Vec<(&'static str, ShaderDefValue)> {
        use ShaderDefValue::{Bool, UInt};
        let mut defs = vec![
            (self.format.kernel().shader_def, Bool(true)),
            (self.output.kernel().shader_def, Bool(true)),
            (self.visibility.shader_def, Bool(true)),
            ("WORKGROUP_SIZE", UInt(self.workgroup_size)),
            ("INSTANCE_PARTS", UInt((self.format.stride() / 16) as u32)),
            ("DENSE_ROW_DIVISOR", UInt(crate::kernel::DENSE_ROW_DIVISOR)),
            ("ITEMS", UInt(ITEMS_PER_THREAD)),
            ("ROW_GROUPS", UInt(self.row_groups())),
            ("OUTPUT_WINDOWS", UInt(self.windows)),
            ("MAX_VIEWS", UInt(MAX_VIEWS)),
            ("VIEWS", UInt(self.views)),
            ("INSTANCE_COUNT_WORD", UInt((INSTANCE_COUNT_OFFSET / 4) as u32)),
            ("DRAW_ARGS_WORDS", UInt(DRAW_ARGS_WORDS)),
            ("BINDING_PARAMS", UInt(bindings::PARAMS)),
            ("BINDING_INSTANCES", UInt(bindings::INSTANCES)),
            ("BINDING_DRAW_ARGS", UInt(bindings::DRAW_ARGS)),
            ("BINDING_VOTES", UInt(bindings::VOTES)),
            ("BINDING_SCAN_IN", UInt(bindings::SCAN_IN)),
            ("BINDING_SCAN_OUT", UInt(bindings::SCAN_OUT)),
            ("BINDING_SCAN_STATE", UInt(bindings::SCAN_STATE)),
            ("BINDING_VISIBILITY_HISTORY", UInt(bindings::VISIBILITY_HISTORY)),
            ("BINDING_DEPTH_PYRAMID", UInt(bindings::DEPTH_PYRAMID)),
            ("BINDING_KEPT_CELLS", UInt(bindings::KEPT_CELLS)),
            ("BINDING_CELL_BOUNDS", UInt(bindings::CELL_BOUNDS)),
            ("BINDING_CELL_LISTS", UInt(bindings::CELL_LISTS)),
            ("BINDING_VOTE_BITS", UInt(bindings::VOTE_BITS)),
            ("BINDING_TILE_SUMS", UInt(bindings::TILE_SUMS)),
            ("BINDING_TEST_UNIFORMS", UInt(bindings::TEST_UNIFORMS)),
            ("ORDERED_SUPER_TILES", UInt(crate::kernel::ORDERED_SUPER_TILES)),
            ("ORDERED_GATHER_TILES", UInt(crate::kernel::ORDERED_GATHER_TILES)),
            ("CELL_RECORD_WORDS", UInt(crate::cells::CELL_RECORD_WORDS)),
        ];
        if self.cells {
            defs.push(("CELLS", Bool(true)));
        }
        if self.centred {
            defs.push(("LOCAL_CENTER_ORIGIN", Bool(true)));
        }
        if self.plain_views {
            defs.push(("PLAIN_VIEWS", Bool(true)));
        }
        if self.tuning.row_writes {
            defs.push(("ROW_WRITES", Bool(true)));
        }
        if self.stages_indices() {
            defs.push(("STAGED_INDICES", Bool(true)));
        }
        defs.push(("STAGED_VIEWS", UInt(self.views.min(STAGED_VIEWS))));
        const OUTPUT_DEFS: [&str; MAX_OUTPUT_WINDOWS as usize] = [
            "BINDING_OUTPUT_A",
            "BINDING_OUTPUT_B",
            "BINDING_OUTPUT_C",
            "BINDING_OUTPUT_D",
        ];
        for (w, name) in OUTPUT_DEFS.into_iter().enumerate() {
            defs.push((name, UInt(bindings::OUTPUT + w as u32)));
        }
        self.kernel.shader_defs(&self.tuning, &mut defs);
        defs
    }

    /// The variant's passes, with the visibility test's bindings added to
    /// each pass that votes (a vote pass or a fused one).
    pub fn passes(&self) -> Vec<PassLayout> {
        let mut passes = self.kernel.passes(self.windows);
        let staged = self.stages_indices();
        for pass in &mut passes {
            if staged && pass.kind == PassKind::Fused {
                // It zeroes its counts itself (cull::scans::staged).
                pass.zeroed_workgroup_memory = false;
            }
            if matches!(pass.kind, PassKind::Vote | PassKind::Fused) {
                pass.bindings.extend_from_slice(self.visibility.bindings);
            }
            if self.cells && matches!(pass.kind, PassKind::Vote | PassKind::Fused) {
                pass.bindings.push((bindings::KEPT_CELLS, Slot::Read));
            }
        }
        if self.cells {
            let mut cell_pass = crate::cells::cell_pass();
            // The late occlusion phase's cell pass tests cells against the
            // depth pyramid too, with the phase's own uniforms.
            if self
                .visibility
                .bindings
                .iter()
                .any(|(b, _)| *b == bindings::DEPTH_PYRAMID)
            {
                cell_pass.bindings.extend(
                    self.visibility
                        .bindings
                        .iter()
                        .filter(|(b, _)| [bindings::DEPTH_PYRAMID, bindings::TEST_UNIFORMS].contains(b)),
                );
            }
            passes.insert(0, cell_pass);
        }
        passes
    }

    pub fn recipe(&self) -> KernelRecipe {
        KernelRecipe {
            entry: self.kernel.entry(self.subgroups),
            shader_defs: self.shader_defs(),
            passes: self.passes(),
            subgroups: self.subgroups,
        }
    }
}

fn capabilities(subgroups: bool) -> naga::valid::Capabilities {
    if subgroups {
        naga::valid::Capabilities::SUBGROUP
    } else {
        naga::valid::Capabilities::empty()
    }
}

thread_local! {
    /// A composer per capability set and variant ([`ComposerKey`]), with
    /// its library added: naga_oil
    /// caches each module per set of defs, so composing many shapes (the
    /// tests do) parses each file once.
    static COMPOSERS: RefCell<HashMap<ComposerKey, Composer>> = RefCell::new(HashMap::new());
}

/// A composer's capabilities (subgroups or not) and the one variant whose
/// library it holds (`None`: the variants' modules left out). A kernel is
/// composed against its own variant's library alone, exactly as in a build
/// with only that variant compiled in: the tests of a build with every
/// variant then prove each variant's build composes.
type ComposerKey = (bool, Option<ScanVariant>);

fn new_composer((subgroups, variant): ComposerKey) -> Result<Composer, String> {
    let mut composer = Composer::default().with_capabilities(capabilities(subgroups));
    for module in library_of(variant.into_iter()) {
        let added = composer.add_composable_module(ComposableModuleDescriptor {
            source: module.source,
            file_path: module.path,
            ..Default::default()
        });
        if let Err(e) = added {
            return Err(e.emit_to_string(&composer));
        }
    }
    Ok(composer)
}

/// The kernel's module, composed by naga_oil and validated by naga with
/// the capabilities the device will have. An error is this crate's bug (the
/// WGSL is compiled in): the message is naga_oil's report.
pub(crate) fn compose(
    shape: &ModuleShape,
    entry: ShaderModule,
) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
    let recipe = shape.recipe();
    let defs = recipe
        .shader_defs
        .iter()
        .map(|&(name, value)| {
            let value = match value {
                ShaderDefValue::Bool(b) => naga_oil::compose::ShaderDefValue::Bool(b),
                ShaderDefValue::UInt(u) => naga_oil::compose::ShaderDefValue::UInt(u),
            };
            (name.to_owned(), value)
        })
        .collect();
    let module = COMPOSERS.with(|composers| {
        let mut composers = composers.borrow_mut();
        let key = (shape.subgroups, Some(shape.variant));
        let composer = match composers.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(new_composer(key)?),
        };
        composer
            .make_naga_module(NagaModuleDescriptor {
                source: entry.source,
                file_path: entry.path,
                shader_type: ShaderType::Wgsl,
                shader_defs: defs,
                additional_imports: &[],
            })
            .map_err(|e| e.emit_to_string(composer))
    })?;
    let info =
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities(shape.subgroups))
            .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
            .subgroup_operations(naga::valid::SubgroupOperationSet::all())
            .validate(&module)
            .map_err(|e| format!("{shape:?}: {e:?}"))?;
    Ok((module, info))
}

/// The composed kernel as plain WGSL (naga's writer), as handed to wgpu.
pub(crate) fn wgsl(shape: &ModuleShape, entry: ShaderModule) -> Result<String, String> {
    let (module, info) = compose(shape, entry)?;
    write_wgsl(shape, &module, &info)
}

/// A composed module of `shape` written out as plain WGSL by naga.
fn write_wgsl(
    shape: &ModuleShape,
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
) -> Result<String, String> {
    naga::back::wgsl::write_string(module, info, naga::back::wgsl::WriterFlags::empty())
        .map_err(|e| format!("{shape:?}: {e}"))
}

/// An entry module of no shader defs that imports only from [`library`]
/// (the depth sort's), composed and written out as plain WGSL.
pub(crate) fn compose_entry(entry: ShaderModule) -> Result<String, String> {
    let module = COMPOSERS.with(|composers| {
        let mut composers = composers.borrow_mut();
        let key = (false, None);
        let composer = match composers.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(new_composer(key)?),
        };
        composer
            .make_naga_module(NagaModuleDescriptor {
                source: entry.source,
                file_path: entry.path,
                ..Default::default()
            })
            .map_err(|e| e.emit_to_string(composer))
    })?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities(false))
        .validate(&module)
        .map_err(|e| format!("{}: {e:?}", entry.path))?;
    naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty())
        .map_err(|e| format!("{}: {e}", entry.path))
}

/// Every shape a module can be composed for (both forms of the ordered
/// variant; one view at every window count, and several views at the
/// fewest and most windows), with test values for the tunable constants.
#[cfg(test)]
const VIEW_SHAPES: [(u32, u32); 2] = [(1, MAX_VIEWS), (MAX_OUTPUT_WINDOWS, 3)];

/// The (windows, views) shapes composed for a visibility test: every one
/// for the frustum test; for the occlusion phases, which add bindings and
/// no per-shape code, the fewest and the most bindings.
#[cfg(test)]
fn test_shapes(visibility: crate::visibility::VisibilityTest) -> Vec<(u32, u32)> {
    if visibility == crate::visibility::VisibilityTest::Frustum {
        (1..=MAX_OUTPUT_WINDOWS)
            .map(|w| (w, 1))
            .chain(VIEW_SHAPES)
            .collect()
    } else {
        vec![(1, 1), (MAX_OUTPUT_WINDOWS, 3)]
    }
}

#[cfg(test)]
pub(crate) fn every_shape() -> Vec<ModuleShape> {
    let mut shapes = Vec::new();
    for variant in ScanVariant::compiled() {
        let kernel = variant.kernel().expect("compiled in");
        let mut forms = vec![kernel.subgroup_form(true), kernel.subgroup_form(false)];
        forms.dedup();
        for subgroups in forms {
            for format in InstanceFormat::ALL {
                for output in OutputKind::ALL {
                    for visibility in crate::visibility::VisibilityTest::ALL {
                        for (windows, views) in test_shapes(visibility) {
                            let shape = ModuleShape {
                                variant,
                                kernel,
                                format,
                                output,
                                visibility: visibility.kernel(),
                                windows,
                                views,
                                workgroup_size: 64,
                                tuning: KernelTuning {
                                    spin_limit: 3,
                                    silent_tiles: 1,
                                    row_writes: true,
                                    staged_indices: true,
                                },
                                subgroups,
                                cells: false,
                                centred: false,
                                plain_views: false,
                            };
                            // General and for plain views.
                            for shape in [
                                shape,
                                ModuleShape {
                                    plain_views: true,
                                    ..shape
                                },
                            ] {
                                shapes.push(shape);
                                // Index output the lanes store themselves.
                                if shape.stages_indices() {
                                    shapes.push(ModuleShape {
                                        tuning: KernelTuning {
                                            staged_indices: false,
                                            ..shape.tuning
                                        },
                                        ..shape
                                    });
                                }
                                // By cells.
                                shapes.push(ModuleShape { cells: true, ..shape });
                                // For meshes centred on their origin.
                                if format.kernel().centred_form {
                                    shapes.push(ModuleShape {
                                        centred: true,
                                        ..shape
                                    });
                                    shapes.push(ModuleShape {
                                        centred: true,
                                        cells: true,
                                        ..shape
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    shapes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cull::encode` composes and validates in a compute pass of a
    /// renderer's own, and its format numbers are `encode_id`'s.
    #[test]
    fn the_encode_module_validates_and_numbers_formats_as_rust_does() {
        let mut composer = Composer::default();
        for module in [shader_module!("math.wgsl"), ENCODE_MODULE] {
            let added = composer.add_composable_module(ComposableModuleDescriptor {
                source: module.source,
                file_path: module.path,
                ..Default::default()
            });
            if let Err(e) = added {
                panic!("{}", e.emit_to_string(&composer));
            }
        }
        let entry = "#import cull::encode::{encode_instance, culled_part}
@group(0) @binding(0) var<storage, read_write> out: array<vec4<u32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let e = encode_instance(id.x % 3u, vec3<f32>(1.0), 2.0, vec4<f32>(0.0, 0.0, 0.0, 1.0));
    for (var k = 0u; k < e.count; k++) { out[id.x * 4u + k] = e.parts[k]; }
    out[0] = culled_part();
}";
        let made = composer.make_naga_module(NagaModuleDescriptor {
            source: entry,
            file_path: "encode_test.wgsl",
            ..Default::default()
        });
        let module = made.unwrap_or_else(|e| panic!("{}", e.emit_to_string(&composer)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap();
        for format in InstanceFormat::ALL {
            let name = format!(
                "const FORMAT_{}: u32 = {}u;",
                format.name().to_uppercase(),
                format.encode_id()
            );
            assert!(ENCODE_MODULE.source.contains(&name), "encode.wgsl lacks `{name}`");
        }
    }

    /// Every composition composes and validates, with the capabilities the
    /// device will have: the shaders are checked here, on every `cargo
    /// test`, not first at pipeline creation on a GPU.
    #[test]
    fn every_module_validates() {
        let shapes = every_shape();
        let expected: usize = ScanVariant::compiled()
            .map(|v| {
                if matches!(v, ScanVariant::Ordered | ScanVariant::OrderedTwoPass) {
                    2
                } else {
                    1
                }
            })
            .sum::<usize>()
            // The formats, those with a form for centred meshes twice.
            * InstanceFormat::ALL
                .iter()
                .map(|f| 1 + usize::from(f.kernel().centred_form))
                .sum::<usize>()
            * OutputKind::ALL.len()
            * crate::visibility::VisibilityTest::ALL
                .iter()
                .map(|&v| test_shapes(v).len())
                .sum::<usize>();
        // Each shape again by cells, and both for plain views; staging
        // kernels once more without staging.
        let unstaged = shapes
            .iter()
            .filter(|s| {
                s.output == OutputKind::Indices && s.kernel.stages_indices() && !s.tuning.staged_indices
            })
            .count();
        assert_eq!(
            unstaged > 0,
            ScanVariant::compiled().any(|v| v.kernel().unwrap().stages_indices())
        );
        assert_eq!(shapes.len(), 2 * 2 * expected + unstaged);
        let composed = every_composed();
        let modules: usize = shapes.iter().map(|s| s.recipe().modules().len()).sum();
        assert_eq!(composed.len(), modules);
        for Composed {
            shape, module, info, ..
        } in composed
        {
            let src = write_wgsl(shape, module, info).unwrap_or_else(|e| panic!("{e}"));
            assert!(src.contains("@workgroup_size(64"), "{shape:?}");
            // naga's writer must not emit what naga's reader rejects.
            assert!(!src.contains("enable subgroups"), "{shape:?}");
        }
    }

    /// One module of a shape, composed and validated.
    struct Composed {
        shape: ModuleShape,
        entry: ShaderModule,
        module: naga::Module,
        info: naga::valid::ModuleInfo,
    }

    /// Every shape's modules composed once, for the tests that read them,
    /// on a thread per core (composers are per thread): composing them is
    /// most of cull-core's unit tests' time.
    fn every_composed() -> &'static [Composed] {
        static COMPOSED: std::sync::OnceLock<Vec<Composed>> = std::sync::OnceLock::new();
        COMPOSED.get_or_init(|| {
            let work: Vec<(ModuleShape, ShaderModule)> = every_shape()
                .into_iter()
                .flat_map(|shape| shape.recipe().modules().into_iter().map(move |e| (shape, e)))
                .collect();
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            std::thread::scope(|scope| {
                let parts: Vec<_> = (0..threads)
                    .map(|t| {
                        let work = &work;
                        scope.spawn(move || {
                            work.iter()
                                .skip(t)
                                .step_by(threads)
                                .map(|&(shape, entry)| {
                                    let (module, info) =
                                        compose(&shape, entry).unwrap_or_else(|e| panic!("{e}"));
                                    Composed {
                                        shape,
                                        entry,
                                        module,
                                        info,
                                    }
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                parts
                    .into_iter()
                    .flat_map(|p| p.join().expect("a composing thread panicked"))
                    .collect()
            })
        })
    }

    /// A kernel that stages its index output clears its counts itself and
    /// asks wgpu not to zero its workgroup memory; every other pass keeps
    /// wgpu's zeroing. And at the largest workgroup, with the most views,
    /// the staging rows fit WebGPU's 16 KiB of workgroup memory.
    #[test]
    fn staged_kernels_zero_their_own_counts_within_webgpu_limits() {
        let mut staged = 0;
        for shape in every_shape() {
            for pass in shape.passes() {
                let expected = !(shape.stages_indices() && pass.kind == PassKind::Fused);
                assert_eq!(
                    pass.zeroed_workgroup_memory, expected,
                    "{shape:?} {}",
                    pass.entry_point
                );
            }
            if !shape.stages_indices() || shape.cells {
                continue;
            }
            staged += 1;
            let widest = ModuleShape {
                workgroup_size: crate::culler::DEFAULT_WORKGROUP_SIZE,
                views: MAX_VIEWS,
                ..shape
            };
            let entry = widest.recipe().modules()[0];
            let src = wgsl(&widest, entry).unwrap_or_else(|e| panic!("{e}"));
            assert!(src.contains("clear_counts"), "{widest:?}");
            let (module, _) = compose(&widest, entry).unwrap_or_else(|e| panic!("{e}"));
            let mut layouter = naga::proc::Layouter::default();
            layouter.update(module.to_ctx()).unwrap();
            let bytes: u32 = module
                .global_variables
                .iter()
                .filter(|(_, g)| g.space == naga::AddressSpace::WorkGroup)
                .map(|(_, g)| layouter[g.ty].size)
                .sum();
            assert!(
                bytes <= 16 * 1024,
                "{widest:?}: {bytes} bytes of workgroup memory"
            );
        }
        assert_eq!(
            staged > 0,
            ScanVariant::compiled().any(|v| v.kernel().unwrap().stages_indices())
        );
    }

    /// Every library module names itself, and imports only modules listed
    /// before it (so a renderer can register them in order).
    #[test]
    fn library_is_in_dependency_order() {
        let mut seen: Vec<&str> = Vec::new();
        for module in library() {
            for line in module.source.lines() {
                if let Some(import) = line.trim().strip_prefix("#import ") {
                    let path = import.split("::{").next().unwrap();
                    let known = seen
                        .iter()
                        .any(|s| path == *s || path.starts_with(&format!("{s}::")));
                    assert!(known, "{}: imports {path} before it is registered", module.path);
                }
            }
            seen.push(
                module
                    .import_path()
                    .unwrap_or_else(|| panic!("{} has no import path", module.path)),
            );
        }
    }

    /// The bindings each pass declares in Rust match what naga reflects from
    /// its composed WGSL: every global an entry point uses is in its layout,
    /// with the same kind (uniform, read-only or read-write storage), and no
    /// layout entry names a binding the module declares differently. A
    /// mismatch would otherwise surface as a wgpu validation error on a GPU.
    #[test]
    fn rust_layouts_match_the_wgsl_bindings() {
        use crate::kernel::Slot;
        use std::collections::BTreeMap;
        let mut checked = 0;
        for Composed {
            shape,
            entry,
            module,
            info,
        } in every_composed()
        {
            let (shape, entry) = (*shape, *entry);
            let recipe = shape.recipe();
            // Every declared binding of the module, by kind.
            let declared: BTreeMap<u32, Slot> = module
                .global_variables
                .iter()
                .filter_map(|(_, g)| {
                    let binding = g.binding.as_ref()?;
                    assert_eq!(binding.group, 0, "{shape:?}: one bind group");
                    let slot = match g.space {
                        naga::AddressSpace::Uniform if binding.binding == bindings::PARAMS => Slot::Params,
                        naga::AddressSpace::Uniform => Slot::Uniform,
                        naga::AddressSpace::Storage { access }
                            if access.contains(naga::StorageAccess::STORE) =>
                        {
                            Slot::ReadWrite
                        }
                        naga::AddressSpace::Storage { .. } => Slot::Read,
                        naga::AddressSpace::Handle => Slot::FloatTexture,
                        other => panic!("{shape:?}: binding in {other:?}"),
                    };
                    Some((binding.binding, slot))
                })
                .collect();
            for pass in recipe.passes.iter().filter(|p| recipe.module_of(p) == entry) {
                let what = format!("{shape:?} {}", pass.entry_point);
                let index = module
                    .entry_points
                    .iter()
                    .position(|e| e.name == pass.entry_point)
                    .unwrap_or_else(|| panic!("{what}: no such entry point"));
                let ep = info.get_entry_point(index);
                let layout: BTreeMap<u32, Slot> = pass.bindings.iter().copied().collect();
                for (handle, g) in module.global_variables.iter() {
                    let Some(binding) = &g.binding else { continue };
                    if ep[handle].is_empty() {
                        continue;
                    }
                    assert_eq!(
                        layout.get(&binding.binding),
                        declared.get(&binding.binding),
                        "{what}: binding {} ({:?}) used by the shader",
                        binding.binding,
                        g.name
                    );
                }
                for (binding, slot) in &layout {
                    if let Some(wgsl) = declared.get(binding) {
                        assert_eq!(wgsl, slot, "{what}: binding {binding}");
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 0);
    }

    /// The value of `const NAME: f32 = value;` in a WGSL source.
    fn wgsl_const(src: &str, name: &str) -> f32 {
        let start = src.find(&format!("const {name}: f32 = ")).expect(name) + name.len() + 14;
        src[start..start + src[start..].find(';').unwrap()]
            .parse()
            .unwrap()
    }

    #[test]
    fn packed_quantization_step_matches_rust() {
        // The WGSL spells QUAT_STEP as the same f32 expression as Rust.
        let src = InstanceFormat::Packed16.kernel().module.source;
        assert!(src.contains("const QUAT_STEP: f32 = 2.0 * QUAT_RANGE / 1023.0;"));
        assert_eq!(wgsl_const(src, "QUAT_RANGE"), std::f32::consts::FRAC_1_SQRT_2);
        assert_eq!(
            crate::formats::QUAT_STEP,
            2.0 * std::f32::consts::FRAC_1_SQRT_2 / 1023.0
        );
    }

    #[test]
    fn wgsl_constants_match_rust() {
        assert_eq!(
            wgsl_const(
                crate::visibility::VisibilityTest::Frustum.kernel().module.source,
                "PLANE_TOLERANCE"
            ),
            crate::sphere::PLANE_TOLERANCE
        );
        let occlusion = crate::visibility::VisibilityTest::OcclusionLate
            .kernel()
            .module
            .source;
        assert_eq!(
            wgsl_const(occlusion, "PIXEL_MARGIN"),
            crate::occlusion::OCCLUSION_PIXEL_MARGIN
        );
        assert_eq!(
            wgsl_const(occlusion, "DEPTH_TOLERANCE"),
            crate::occlusion::OCCLUSION_DEPTH_TOLERANCE
        );
        assert_eq!(wgsl_const(occlusion, "MIN_W"), crate::occlusion::MIN_W);
        assert_eq!(wgsl_const(occlusion, "FIT_MIN"), crate::occlusion::DEPTH_FIT_MIN);
        assert_eq!(
            wgsl_const(
                InstanceFormat::Packed16.kernel().module.source,
                "PACKED_ROTATION_ERROR_BOUND"
            ),
            crate::instance::PACKED_ROTATION_ERROR_BOUND
        );
    }
}
