// Back-to-front order of a view's survivors (cull_core::DepthSorter): a
// stable least-significant-digit radix sort, 4 bits a pass, of (key, index)
// pairs, where the key is the view-space depth of the instance's
// transformed mesh center as Bevy's `ViewRangefinder3d` measures it
// (ascending: farthest first), mapped to bits that order as the floats do.
// The instance index is sorted first (its own passes), so ties come out in
// index order whatever order the cull wrote its survivors in. Each pass is
// three dispatches: per-tile digit counts, one workgroup's scan of them,
// and a scatter that ranks each tile's elements stably. CPU mirror:
// cull_core::cpu::back_to_front.

#import cull::encode::decode_instance
#import cull::math::rotate

const TILE: u32 = 256u;
const BINS: u32 = 16u;

// One sort of one view's list (DepthSorter::sort).
struct SortJob {
    // Row 2 of the view's view-from-world matrix: depth = dot(row, (p, 1)).
    view_row: vec4<f32>,
    // The mesh-space point whose transform is sorted by (Bevy sorts a mesh
    // by its transformed AABB center).
    local_center: vec4<f32>,
    // The word of `draw_args` holding the list's length.
    count_word: u32,
    // 16-byte parts per instance, and the format (InstanceFormat::encode_id).
    parts: u32,
    format: u32,
    // Workgroups along x: a dispatch of more tiles is two-dimensional.
    groups_x: u32,
}

// One radix pass: the digit is (value >> shift) & 15 of the key, or of
// the index where from_index is 1.
struct SortPass {
    shift: u32,
    from_index: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> job: SortJob;
@group(0) @binding(1) var<uniform> pass_params: SortPass;
@group(0) @binding(2) var<storage, read> instances: array<vec4<u32>>;
// The view's survivors: instance indices, rewritten in sorted order.
@group(0) @binding(3) var<storage, read_write> list: array<u32>;
@group(0) @binding(4) var<storage, read> draw_args: array<u32>;
@group(0) @binding(5) var<storage, read> pairs_in: array<vec2<u32>>;
@group(0) @binding(6) var<storage, read_write> pairs_out: array<vec2<u32>>;
// Digit counts, bin-major (bin * tiles + tile), scanned in place.
@group(0) @binding(7) var<storage, read_write> counts: array<u32>;

// Per thread, its element's digit as a 1 in a 16-bit field (two bins a
// word), then the inclusive scan of those over the tile.
var<workgroup> ranks: array<array<u32, 8>, TILE>;
var<workgroup> bin_totals: array<atomic<u32>, BINS>;
var<workgroup> sums: array<u32, TILE>;

fn list_len() -> u32 {
    return draw_args[job.count_word];
}

fn tiles_in_use() -> u32 {
    return (list_len() + TILE - 1u) / TILE;
}

fn tile_of(group: vec3<u32>) -> u32 {
    return group.x + group.y * job.groups_x;
}

// Bits that order as the floats do (negative ones reversed), for every
// value but NaN.
fn ordered_bits(x: f32) -> u32 {
    let bits = bitcast<u32>(x);
    return bits ^ select(0x80000000u, 0xffffffffu, (bits >> 31u) == 1u);
}

// The instance's transformed local center, as each format transforms a
// mesh-space point.
fn sort_point(index: u32) -> vec3<f32> {
    var parts: array<vec4<u32>, 4>;
    for (var k = 0u; k < job.parts; k++) {
        parts[k] = instances[index * job.parts + k];
    }
    let c = job.local_center.xyz;
    if job.format == 0u {
        // A matrix's columns, in full (it may shear or scale unevenly).
        let x = bitcast<vec4<f32>>(parts[0]).xyz;
        let y = bitcast<vec4<f32>>(parts[1]).xyz;
        let z = bitcast<vec4<f32>>(parts[2]).xyz;
        return x * c.x + y * c.y + z * c.z + bitcast<vec4<f32>>(parts[3]).xyz;
    }
    let d = decode_instance(job.format, parts);
    return d.position + rotate(d.rotation, c * d.scale);
}

fn digit(pair: vec2<u32>) -> u32 {
    return (select(pair.x, pair.y, pass_params.from_index == 1u) >> pass_params.shift) & (BINS - 1u);
}

// Each survivor's key and index, in list order.
@compute @workgroup_size(256)
fn make_keys(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = tile_of(group) * TILE + lid;
    if i >= list_len() {
        return;
    }
    let index = list[i];
    let p = sort_point(index);
    let depth = dot(job.view_row.xyz, p) + job.view_row.w;
    pairs_out[i] = vec2<u32>(ordered_bits(depth), index);
}

// How many of each tile's elements have each digit.
@compute @workgroup_size(256)
fn count_digits(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tile = tile_of(group);
    let tiles = tiles_in_use();
    if lid < BINS {
        atomicStore(&bin_totals[lid], 0u);
    }
    workgroupBarrier();
    let i = tile * TILE + lid;
    if i < list_len() {
        atomicAdd(&bin_totals[digit(pairs_in[i])], 1u);
    }
    workgroupBarrier();
    if lid < BINS && tile < tiles {
        counts[lid * tiles + tile] = atomicLoad(&bin_totals[lid]);
    }
}

// The inclusive scan of `sums` (one value per thread) over the workgroup.
fn scan_sums(lid: u32) {
    for (var offset = 1u; offset < TILE; offset <<= 1u) {
        var add = 0u;
        if lid >= offset {
            add = sums[lid - offset];
        }
        workgroupBarrier();
        sums[lid] += add;
        workgroupBarrier();
    }
}

// The exclusive scan of `counts` in place: where each (bin, tile) starts
// in the output. One workgroup; each thread takes a run of counts.
@compute @workgroup_size(256)
fn scan_counts(@builtin(local_invocation_index) lid: u32) {
    let total = tiles_in_use() * BINS;
    let run = (total + TILE - 1u) / TILE;
    let first = min(lid * run, total);
    let end = min(first + run, total);
    var sum = 0u;
    for (var k = first; k < end; k++) {
        sum += counts[k];
    }
    sums[lid] = sum;
    workgroupBarrier();
    scan_sums(lid);
    var at = sums[lid] - sum;
    for (var k = first; k < end; k++) {
        let c = counts[k];
        counts[k] = at;
        at += c;
    }
}

// Each element to its place: its bin's start for its tile, plus how many
// of the tile's earlier elements share its digit (a scan of 16-bit
// counters, two bins a word), so equal digits keep their order.
@compute @workgroup_size(256)
fn scatter(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tile = tile_of(group);
    let i = tile * TILE + lid;
    let valid = i < list_len();
    var pair = vec2<u32>(0u);
    var d = BINS;
    if valid {
        pair = pairs_in[i];
        d = digit(pair);
    }
    for (var w = 0u; w < 8u; w++) {
        ranks[lid][w] = select(0u, 1u << (16u * (d & 1u)), d / 2u == w);
    }
    workgroupBarrier();
    for (var offset = 1u; offset < TILE; offset <<= 1u) {
        // Assigned, not declared zero: a declaration's zero may be hoisted
        // out of the loop by a compiler.
        var add: array<u32, 8>;
        add = array<u32, 8>();
        if lid >= offset {
            add = ranks[lid - offset];
        }
        workgroupBarrier();
        for (var w = 0u; w < 8u; w++) {
            ranks[lid][w] += add[w];
        }
        workgroupBarrier();
    }
    if valid {
        let before = ((ranks[lid][d / 2u] >> (16u * (d & 1u))) & 0xffffu) - 1u;
        pairs_out[counts[d * tiles_in_use() + tile] + before] = pair;
    }
}

// The sorted indices back into the view's list.
@compute @workgroup_size(256)
fn store_list(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = tile_of(group) * TILE + lid;
    if i < list_len() {
        list[i] = pairs_in[i].y;
    }
}
