// The uniform block every culling pass binds, and the sizes Rust sets.
// Every `#{NAME}` is a shader def from cull_core's `shader_defs()` (Rust's
// constants, in one place); Bevy's PipelineCache and cull-core's own
// composer substitute them alike.
#define_import_path cull::params

const WORKGROUP_SIZE: u32 = #{WORKGROUP_SIZE}u;
// Instances per item row group of a thread in the single-pass variants.
const ITEMS: u32 = #{ITEMS}u;
// Groups of ITEMS rows per thread: 2 in the ordered variant's subgroup form
// for 16-byte instances, 1 everywhere else.
const ROW_GROUPS: u32 = #{ROW_GROUPS}u;
const TILE: u32 = WORKGROUP_SIZE * ITEMS * ROW_GROUPS;
// Views one dispatch can vote against (cull_core::MAX_VIEWS): the size of
// the planes array, the same for every kernel.
const MAX_VIEWS: u32 = #{MAX_VIEWS}u;
// Views of the targets this kernel culls into (a target's kernel is
// compiled for its view count). The single-pass kernels take them in one
// block per view, `#if VIEWS >= k`: not a loop, and not under a branch. A
// loop over the views with subgroup operations in its body miscounted on
// NVIDIA (driver 580) where lavapipe was exact; blocks under `if
// params.view_count >= k` ran ten times slower on lavapipe and kept memory
// on every dispatch. A block past params.view_count votes nothing
// (vote_verdicts), and a one-view kernel is the single-view code.
const VIEWS: u32 = #{VIEWS}u;

// One entry per dispatch, at a 256-byte dynamic offset (cull_core's GpuParams).
struct CullParams {
    // Per view, inward-facing normalized planes (n, d): inside when
    // dot(n, p) + d >= 0, d widened by PLANE_TOLERANCE * |d|. Unused planes
    // are (0, 0, 0, 1).
    planes: array<array<vec4<f32>, 6>, MAX_VIEWS>,
    // Per view, its level-of-detail band (cull::visibility::screen_size):
    // [0] camera position and scale, [1] min, max, perspective, has-band.
    size_bands: array<array<vec4<f32>, 2>, MAX_VIEWS>,
    // The batch's bounding sphere in mesh space: xyz center, w radius.
    local_sphere: vec4<f32>,
    // The views this dispatch votes against: the single-pass kernels take
    // views 0 .. view_count at once (first_view is 0); the multi-pass
    // baseline takes view first_view alone (view_count is 1).
    first_view: u32,
    view_count: u32,
    // Output elements between the starts of two views' survivor lists.
    view_stride: u32,
    // Index of this chunk's first instance within the batch.
    chunk_start: u32,
    // Instances in this chunk (the binding holds at least this many).
    chunk_len: u32,
    // Workgroups along x: dispatches over 65535 groups wrap into y.
    groups_x: u32,
    // Elements per output window (see emit() in items.wgsl).
    window_len: u32,
    // Hillis-Steele: the distance added in this step.
    scan_offset: u32,
    // 3 * |local_sphere.xyz|: the magnitude of the mesh-space center's terms
    // per unit of scale (cull_core::instance::local_terms).
    local_terms: f32,
    // Cell culling (cull::cells): the batch's cells, the cells of one chunk,
    // and the words between two chunks' regions of kept cells.
    cell_count: u32,
    cells_per_chunk: u32,
    cell_region_words: u32,
    // Cell culling: the views the cell pass votes, all of the cull's (an
    // ordered cull's entries each take one view in view_count).
    cell_views: u32,
    // OrderedTwoPass: tiles of the largest chunk, rounded up to the gather
    // pass's blocks (cull::variants::ordered_votes's scratch layout).
    tile_capacity: u32,
}

@group(0) @binding(#{BINDING_PARAMS}) var<uniform> params: CullParams;

// Linear workgroup index of a possibly two-dimensional dispatch.
fn workgroup_index(wid: vec3<u32>) -> u32 {
    return wid.y * params.groups_x + wid.x;
}

#ifdef CELLS
// Words of a chunk's record of kept cells before their tiles (cull::cells):
// their number, then padding.
const CELL_RECORD_WORDS: u32 = #{CELL_RECORD_WORDS}u;
// The chunk's record and kept tiles (the cell pass wrote them).
@group(0) @binding(#{BINDING_KEPT_CELLS}) var<storage, read> kept_cells: array<u32>;
// What workgroup_tile gives a workgroup past the kept cells.
const NO_TILE: u32 = 0xffffffffu;
// The bit of a kept cell's entry in the unordered variants' list that marks
// it whole: inside every view, its instances
// kept without their test (cull::cells::vote_cell). Tiles of a chunk are
// far fewer than 2^31.
const WHOLE_TILE: u32 = 0x80000000u;
#endif

#ifdef CELLS
// By cells with KEPT_CELL_FLAGS (Hillis-Steele): whether the cell pass kept
// `tile`'s cell. Uniform across the workgroup for a uniform tile
// (read-only storage).
fn tile_kept(tile: u32) -> bool {
    return kept_cells[CELL_RECORD_WORDS + tile] != 0u;
}

// How many of the chunk's cells the cell pass kept.
fn kept_tile_count() -> u32 {
    return kept_cells[0u];
}

#ifdef ORDERED_CELL_LIST
// The ordered variant by cells: the cell pass sets bit t of the chunk's
// kept set for each kept cell (tile t), and bit t of its whole set for each
// whole one; the chain finds its tiles in them
// (cull::variants::ordered_chain::kept_tile_at). A set has a bit per cell
// of a chunk, rounded up to words.
fn cell_bit_words() -> u32 {
    return (params.cells_per_chunk + 31u) / 32u;
}

// Where a chunk's region holds the kept set: after the record.
fn kept_bits_word() -> u32 {
    return CELL_RECORD_WORDS;
}

// Where it holds the whole set: after the kept one (cull_core's
// CellIndex::new sizes the region for both).
fn whole_bits_word() -> u32 {
    return CELL_RECORD_WORDS + cell_bit_words();
}
#endif
#endif

// The tile a workgroup culls: the workgroup's own, or by cells the kept
// cell it stands for, NO_TILE past them (the dispatch covers every tile of
// the chunk; such a workgroup returns at once, which is uniform: the count
// comes from read-only storage).
fn workgroup_tile(wid: vec3<u32>) -> u32 {
    let w = workgroup_index(wid);
#ifdef CELLS
    if w >= kept_cells[0u] {
        return NO_TILE;
    }
    return kept_cells[CELL_RECORD_WORDS + w] & ~WHOLE_TILE;
#else
    return w;
#endif
}

// Whether the workgroup's tile is a whole cell (WHOLE_TILE): false for a
// flat cull. Uniform across the workgroup, as workgroup_tile is.
fn workgroup_tile_whole(wid: vec3<u32>) -> bool {
#ifdef CELLS
    let w = workgroup_index(wid);
    return (w < kept_cells[0u]) && ((kept_cells[CELL_RECORD_WORDS + w] & WHOLE_TILE) != 0u);
#else
    return false;
#endif
}
