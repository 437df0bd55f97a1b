// Cell culling (cull_core::cells): the batch's instances are sorted so that
// each tile of the cull (TILE consecutive instances) is a cell, spatially
// compact, with a bounding sphere that covers its instances' widened world
// spheres. The cell pass votes every cell against the cull's views and
// lists, per chunk, the tiles of the cells some view keeps; the cull then
// reads only those tiles (cull::params::workgroup_tile): its workgroups
// past the kept cells return at once. A cell no view keeps holds no
// instance any view keeps, so the survivors are those of the flat cull.
#define_import_path cull::cells

#import cull::params::{params, CELL_RECORD_WORDS}

// Must equal cull_core::cells::CELL_TOLERANCE (a test holds them equal).
const CELL_TOLERANCE: f32 = 1.52587890625e-5;

// xyz center, w radius (+inf: a cell holding an overflowed instance, kept
// in every view; -inf: a cell of instances that are all culled).
@group(0) @binding(#{BINDING_CELL_SPHERES}) var<storage, read> cell_spheres: array<vec4<f32>>;
// Every chunk's region of kept cells (the cull binds its chunk's,
// read-only, as cull::params::kept_cells).
@group(0) @binding(#{BINDING_CELL_LISTS}) var<storage, read_write> cell_lists: array<atomic<u32>>;

// Whether the cell's sphere touches `view`'s frustum, widened per plane by
// CELL_TOLERANCE of the magnitudes summed (the plane's offset included):
// more than the instances' test widens, so that its rounding and this
// one's cannot keep an instance in a culled cell. An infinite radius is
// kept, a negative infinite one culled.
fn cell_in_view(view: u32, s: vec4<f32>) -> bool {
    let magnitude = abs(s.x) + abs(s.y) + abs(s.z) + s.w;
    var inside = true;
    for (var k = 0u; k < 6u; k++) {
        let p = params.planes[view][k];
        let slack = CELL_TOLERANCE * (magnitude + abs(p.w));
        inside = inside & (p.x * s.x + p.y * s.y + p.z * s.z + p.w + s.w + slack >= 0.0);
    }
    return inside;
}

// Votes cell `cell`; a kept cell is appended to its chunk's tiles.
fn vote_cell(cell: u32) {
    if cell >= params.cell_count {
        return;
    }
    let s = cell_spheres[cell];
    var keep = false;
    for (var view = 0u; view < params.view_count; view++) {
        keep = keep | cell_in_view(view, s);
    }
    if !keep {
        return;
    }
    let chunk = cell / params.cells_per_chunk;
    let base = chunk * params.cell_region_words;
    let slot = atomicAdd(&cell_lists[base], 1u);
    atomicStore(&cell_lists[base + CELL_RECORD_WORDS + slot], cell - chunk * params.cells_per_chunk);
}
