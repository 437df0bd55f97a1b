//! What a cull's kernels are made of, described as data: the WGSL modules
//! of the library, the bindings every pass declares, the uniform block, and
//! the constants Rust and WGSL share. The bottom layer: it imports nothing
//! above it, and every stage module (formats, outputs, visibility tests,
//! scan variants) describes itself with these types.

use crate::timing::PassKind;
use bytemuck::{Pod, Zeroable};

/// Most output bindings one batch may span (see `emit()` in
/// `shaders/cull/items.wgsl`): a batch can hold up to this many times the
/// device's largest storage binding.
pub const MAX_OUTPUT_WINDOWS: u32 = 4;
/// Instances in each of a thread's row groups in the single-pass variants
/// (`ITEMS` in the shaders).
pub(crate) const ITEMS_PER_THREAD: u32 = 4;
/// Bits of a tile's count in the ordered variant's status words (the two
/// above are its flags; `LOOKBACK_COUNT_BITS` in `ordered_chain.wgsl`): no
/// chunk may hold more instances than these bits count.
pub(crate) const LOOKBACK_COUNT_BITS: u32 = 30;
/// Most views one cull votes against in one pass ([`crate::CullRequest`],
/// `MAX_VIEWS` in the shaders): a camera and four shadow cascades, or a
/// point light's six cube faces, with room to spare.
pub const MAX_VIEWS: u32 = 8;
/// Words of one view's draw arguments (`DrawIndexedIndirectArgs`, five
/// `u32`; `DrawIndirectArgs` uses the first four): a target's views' args
/// follow each other at this stride.
pub(crate) const DRAW_ARGS_WORDS: u32 = 5;
/// The uniform block's stride: a multiple of 256 (dynamic uniform offsets
/// must be, on every device) that holds [`GpuParams`].
pub(crate) const PARAMS_STRIDE: u64 = size_of::<GpuParams>().div_ceil(256) as u64 * 256;

/// Binding numbers of group 0, shared by every pass (shader defs
/// `BINDING_*` in the WGSL: one place for both languages).
pub mod bindings {
    /// The uniform block (`CullParams` in `shaders/cull/params.wgsl`).
    pub const PARAMS: u32 = 0;
    /// The chunk's instances.
    pub const INSTANCES: u32 = 1;
    /// The draw's indirect arguments.
    pub const DRAW_ARGS: u32 = 2;
    /// The first output window; window `w` is at `OUTPUT + w`.
    pub const OUTPUT: u32 = 3;
    /// Hillis-Steele: one vote per instance.
    pub const VOTES: u32 = 7;
    /// Hillis-Steele: a scan step's input.
    pub const SCAN_IN: u32 = 8;
    /// Hillis-Steele: a scan step's output.
    pub const SCAN_OUT: u32 = 9;
    /// Ordered: the look-back's tile counter, chunk base and status words.
    pub const SCAN_STATE: u32 = 10;
    /// Occlusion: the visibility history, two halves of one `u32` per
    /// instance ([`crate::OcclusionHistory`]).
    pub const VISIBILITY_HISTORY: u32 = 11;
    /// Occlusion, late phase: the depth pyramid ([`crate::DepthPyramid`]).
    pub const DEPTH_PYRAMID: u32 = 12;
    /// Cell culling, the cull: the chunk's kept cells, their number and
    /// tiles ([`crate::cells::CellIndex`]), read-only.
    pub const KEPT_CELLS: u32 = 13;
    /// Cell culling, the cell pass: every cell's bounds ([`crate::CellBounds`]).
    pub const CELL_BOUNDS: u32 = 14;
    /// Cell culling, the cell pass: every chunk's kept cells, written.
    pub const CELL_LISTS: u32 = 15;
    /// OrderedTwoPass: a bit per instance and view, in index order.
    pub const VOTE_BITS: u32 = 16;
    /// OrderedTwoPass: each view's count before the chunk, each tile's
    /// count and each super-tile's sum.
    pub const TILE_SUMS: u32 = 17;
    /// The visibility test's own uniforms (a spot light's cone per view),
    /// written from the views by the test and bound whole.
    pub const TEST_UNIFORMS: u32 = 18;
}

/// Bytes of a target's test uniforms ([`bindings::TEST_UNIFORMS`]): 64 per
/// view, room for four vectors of a test's own per view.
pub const TEST_UNIFORM_BYTES: u64 = MAX_VIEWS as u64 * 64;

/// [`crate::ScanVariant::OrderedTwoPass`]: tiles whose counts one sum adds
/// up (`SUPER_TILES` in `shaders/cull/variants/ordered_votes.wgsl`), so that
/// a gather workgroup reads at most this many counts plus a sum per
/// super-tile before it.
pub(crate) const ORDERED_SUPER_TILES: u32 = 256;
/// [`crate::ScanVariant::OrderedTwoPass`]: tiles one gather workgroup writes
/// (`GATHER_TILES` in the WGSL; a power of two dividing
/// [`ORDERED_SUPER_TILES`]).
pub(crate) const ORDERED_GATHER_TILES: u32 = 4;

/// [`crate::ScanVariant::SubgroupBallot`] writing instance copies wider
/// than 16 bytes: a subgroup writes a row's survivors together, each store
/// covering consecutive 16-byte parts, when at least 1 / this of the row's
/// lanes keep their item (`cull::scans::ballot_rows`); sparser rows are
/// written lane by lane, where finding each part's lane costs more than the
/// split stores save.
pub(crate) const DENSE_ROW_DIVISOR: u32 = 2;

/// Views whose index output a staging kernel holds in workgroup memory at
/// once (`STAGED_VIEWS`, cull::scans::staged): a tile's indices per view,
/// so at most 8 KiB at the largest tile, within WebGPU's 16 KiB.
pub(crate) const STAGED_VIEWS: u32 = 2;

/// [`crate::ScanVariant::OrderedTwoPass`]: the tiles its scratch holds per
/// view for a chunk dispatched as `workgroups` vote workgroups, rounded up
/// to whole gather blocks (`params.tile_capacity`).
pub(crate) fn ordered_tile_capacity(workgroups: u64) -> u32 {
    (workgroups as u32).next_multiple_of(ORDERED_GATHER_TILES)
}

/// Byte offset of `instance_count` (the visible count the cull writes) in
/// [`crate::CullTarget::draw_args`], for both argument layouts.
pub const INSTANCE_COUNT_OFFSET: u64 = 4;

/// The uniform block (`CullParams` in `shaders/cull/params.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct GpuParams {
    /// Six planes per view; unused ones are (0, 0, 0, 1).
    pub planes: [[[f32; 4]; 6]; MAX_VIEWS as usize],
    /// Per view, its level-of-detail band (`SizeBand::gpu`); zero: none.
    pub size_bands: [[[f32; 4]; 2]; MAX_VIEWS as usize],
    pub local_sphere: [f32; 4],
    pub first_view: u32,
    pub view_count: u32,
    pub view_stride: u32,
    pub chunk_start: u32,
    pub chunk_len: u32,
    pub groups_x: u32,
    pub window_len: u32,
    pub scan_offset: u32,
    pub local_terms: f32,
    /// Cell culling ([`crate::cells`]): the batch's cells, the cells of a
    /// chunk, and the words between two chunks' regions of kept cells.
    pub cell_count: u32,
    pub cells_per_chunk: u32,
    pub cell_region_words: u32,
    /// Cell culling: the views the cell pass votes, every view of the cull
    /// (the ordered variant's entries each hold one in `view_count`).
    pub cell_views: u32,
    /// [`crate::ScanVariant::OrderedTwoPass`]: tiles of the largest chunk,
    /// rounded up to its gather blocks ([`ordered_tile_capacity`]).
    pub tile_capacity: u32,
    /// Up to the WGSL struct's size (a multiple of 16 bytes).
    pub _padding: [u32; 2],
}

/// One chunk of a batch: the instances one set of bindings covers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chunk {
    pub index: u32,
    pub start: u32,
    pub len: u32,
}

/// One WGSL file of the shader library (`shaders/cull/` in the crate).
/// Library modules name themselves with `#define_import_path`; entry
/// modules (a variant's passes) import them and have no import path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShaderModule {
    /// The file, relative to `shaders/cull/`.
    pub path: &'static str,
    /// The WGSL, with naga_oil directives (`#import`, `#ifdef`, `#{DEF}`).
    pub source: &'static str,
}

impl ShaderModule {
    /// The module's `#define_import_path`, `None` for an entry module.
    pub fn import_path(&self) -> Option<&'static str> {
        self.source
            .lines()
            .find_map(|line| line.trim().strip_prefix("#define_import_path").map(str::trim))
    }
}

/// A [`ShaderModule`] of `shaders/cull/`, embedded in the crate.
macro_rules! shader_module {
    ($path:literal) => {
        $crate::kernel::ShaderModule {
            path: $path,
            source: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/cull/", $path)),
        }
    };
}
pub(crate) use shader_module;

/// The value of a shader def (naga_oil's, and Bevy's `ShaderDefVal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShaderDefValue {
    /// Set: `#ifdef NAME` holds.
    Bool(bool),
    /// A number, substituted for `#{NAME}` and compared by `#if NAME >= n`.
    UInt(u32),
}

/// How a pass binds a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The uniform block, at a dynamic offset.
    Params,
    /// A read-only storage buffer.
    Read,
    /// A read-write storage buffer.
    ReadWrite,
    /// A 2D texture of unfilterable floats, read with `textureLoad` (the
    /// depth pyramid).
    FloatTexture,
    /// A uniform buffer bound whole (a visibility test's own uniforms).
    Uniform,
}

/// One compute pass of a kernel: its entry point and what it binds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassLayout {
    /// The entry module that holds the entry point when it is not the
    /// kernel's own ([`crate::shader::KernelRecipe::entry`]): the cell pass
    /// has one of its own, composed with the kernel's shader defs.
    pub module: Option<ShaderModule>,
    /// The entry point in its module.
    pub entry_point: &'static str,
    /// The stage it belongs to, for timestamps and labels.
    pub kind: PassKind,
    /// `(binding, slot)` of group 0.
    pub bindings: Vec<(u32, Slot)>,
    /// Whether the pass relies on its workgroup memory starting zeroed
    /// (wgpu's `zero_initialize_workgroup_memory`, for the pipeline).
    /// Passes that stage their output there zero what they need themselves.
    pub zeroed_workgroup_memory: bool,
}

impl PassLayout {
    /// Storage buffers the pass binds (what WebGPU limits to 8 per stage).
    pub fn storage_buffers(&self) -> u32 {
        self.bindings
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Read | Slot::ReadWrite))
            .count() as u32
    }

    /// The wgpu layout entries of group 0.
    pub fn layout_entries(&self) -> Vec<wgpu::BindGroupLayoutEntry> {
        self.bindings
            .iter()
            .map(|&(binding, slot)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: match slot {
                    Slot::Params => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: true,
                        min_binding_size: wgpu::BufferSize::new(size_of::<GpuParams>() as u64),
                    },
                    Slot::Uniform => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    Slot::FloatTexture => wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Float { filterable: false },
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                    Slot::Read | Slot::ReadWrite => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage {
                            read_only: matches!(slot, Slot::Read),
                        },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                },
                count: None,
            })
            .collect()
    }
}

/// The bindings every pass that reads instances and writes survivors
/// declares: params, instances, draw arguments, then `windows` outputs.
pub(crate) fn chunk_slots(windows: u32) -> impl Iterator<Item = (u32, Slot)> {
    [
        (bindings::PARAMS, Slot::Params),
        (bindings::INSTANCES, Slot::Read),
        (bindings::DRAW_ARGS, Slot::ReadWrite),
    ]
    .into_iter()
    .chain((0..windows).map(|w| (bindings::OUTPUT + w, Slot::ReadWrite)))
}

/// A scratch buffer a variant needs per target.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScratchBuffer {
    pub label: &'static str,
    pub size: u64,
    pub usage: wgpu::BufferUsages,
}

/// How a chunk's instances map to workgroups.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DispatchShape {
    /// Instances per workgroup.
    pub per_workgroup: u32,
    /// Largest dispatch along one dimension.
    pub max_groups: u32,
}

impl DispatchShape {
    /// Workgroups a chunk of `len` instances needs.
    pub fn groups_for(&self, len: u32) -> u32 {
        len.div_ceil(self.per_workgroup)
    }

    /// Workgroup counts for `groups` workgroups: `(x, y)` with `x <= max`.
    pub fn dims(&self, groups: u32) -> (u32, u32) {
        if groups <= self.max_groups {
            (groups.max(1), 1)
        } else {
            (self.max_groups, groups.div_ceil(self.max_groups))
        }
    }
}
