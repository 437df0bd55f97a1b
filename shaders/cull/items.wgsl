// What every variant does per instance: load it, vote on it, write it out.
// This module picks the stages by shader def: the instance format
// (FORMAT_*), the visibility test (VISIBILITY_*) and the output kind
// (OUTPUT_*), each by a `#select` line that cull_core expands into one
// import per stage of its Rust registry (cull_core::selection). The
// variants import only this module, `params` and their scans, so a new
// format, test or output is its module pair and a registry line, not an
// edit of any WGSL file.
#define_import_path cull::items

#import cull::params::{params, WORKGROUP_SIZE}
#import cull::math::WorldSphere

// #select formats: InstanceData, instances, world_sphere

// Every test has the same two steps (see sphere_frustum.wgsl): classify()
// once per instance, keeps() per view (keeps_rows() for four items).
// #select visibility: Verdict, classify, keeps, keeps_rows

// #select outputs: OutputElement, output_element

// The draws' indirect arguments, DRAW_ARGS_WORDS per view; word
// INSTANCE_COUNT of each is the visible count the variants add to
// (cull_core::INSTANCE_COUNT_OFFSET / 4).
@group(0) @binding(#{BINDING_DRAW_ARGS}) var<storage, read_write> draw_args: array<atomic<u32>>;
const INSTANCE_COUNT: u32 = #{INSTANCE_COUNT_WORD}u;
const DRAW_ARGS_WORDS: u32 = #{DRAW_ARGS_WORDS}u;

// The word of draw_args that counts `view`'s survivors.
fn count_word(view: u32) -> u32 {
    return view * DRAW_ARGS_WORDS + INSTANCE_COUNT;
}

// A batch bigger than one storage binding is bound as up to four output
// windows of params.window_len elements; the slot picks the window.
@group(0) @binding(#{BINDING_OUTPUT_A}) var<storage, read_write> output_a: array<OutputElement>;
#if OUTPUT_WINDOWS >= 2
@group(0) @binding(#{BINDING_OUTPUT_B}) var<storage, read_write> output_b: array<OutputElement>;
#endif
#if OUTPUT_WINDOWS >= 3
@group(0) @binding(#{BINDING_OUTPUT_C}) var<storage, read_write> output_c: array<OutputElement>;
#endif
#if OUTPUT_WINDOWS >= 4
@group(0) @binding(#{BINDING_OUTPUT_D}) var<storage, read_write> output_d: array<OutputElement>;
#endif

// Writes chunk-local instance `i` to output slot `view_slot` of `view`'s
// survivor list (which starts view * params.view_stride elements in).
fn emit(view: u32, view_slot: u32, i: u32, inst: InstanceData) {
    let slot = view * params.view_stride + view_slot;
#ifdef OUTPUT_INDICES
    let e = output_element(i);
#else
    let e = output_element(inst);
#endif
#if OUTPUT_WINDOWS == 1
    output_a[slot] = e;
#else
    let w = slot / params.window_len;
    let j = slot - w * params.window_len;
    switch w {
        case 0u: { output_a[j] = e; }
#if OUTPUT_WINDOWS == 2
        default: { output_b[j] = e; }
#else
        case 1u: { output_b[j] = e; }
#endif
#if OUTPUT_WINDOWS == 3
        default: { output_c[j] = e; }
#endif
#if OUTPUT_WINDOWS == 4
        case 2u: { output_c[j] = e; }
        default: { output_d[j] = e; }
#endif
    }
#endif
}

#ifdef OUTPUT_INSTANCES
// Writes 16-byte part `part` of the element at slot `view_slot` of `view`'s
// list (cull::scans::ballot_rows: a subgroup writing its survivors part by
// part). The windows as in emit().
fn emit_part(view: u32, view_slot: u32, part: u32, value: vec4<u32>) {
    let slot = view * params.view_stride + view_slot;
#if OUTPUT_WINDOWS == 1
    output_a[slot].parts[part] = value;
#else
    let w = slot / params.window_len;
    let j = slot - w * params.window_len;
    switch w {
        case 0u: { output_a[j].parts[part] = value; }
#if OUTPUT_WINDOWS == 2
        default: { output_b[j].parts[part] = value; }
#else
        case 1u: { output_b[j].parts[part] = value; }
#endif
#if OUTPUT_WINDOWS == 3
        default: { output_c[j].parts[part] = value; }
#endif
#if OUTPUT_WINDOWS == 4
        case 2u: { output_c[j].parts[part] = value; }
        default: { output_d[j].parts[part] = value; }
#endif
    }
#endif
}
#endif

// Whether chunk-local instance `i` is visible in `view`; false past the
// chunk's end.
fn vote(i: u32, view: u32) -> bool {
    if i >= params.chunk_len {
        return false;
    }
    return keeps(classify(world_sphere(instances[i]), i), view);
}

// Instance `i` of the chunk, or zeros past its end.
fn load_item(i: u32) -> InstanceData {
    var d: InstanceData;
    if i < params.chunk_len {
        d = instances[i];
    }
    return d;
}


// A thread's four items: rows k = 0..4 at index first + k * stride, so
// loads and stores coalesce. Fields, not an array: an array indexed in a
// loop would live in local memory on some GPUs (seen on NVIDIA: half the
// speed). (No names ending in a digit: composed modules may not use them.)
struct Items {
    index: vec4<u32>,
    dx: InstanceData,
    dy: InstanceData,
    dz: InstanceData,
    dw: InstanceData,
}

// Issues all four loads before any vote, for memory-level parallelism:
// rows at `first + k * stride`.
fn load_rows(first: u32, stride: u32) -> Items {
    let index = vec4<u32>(first) + vec4<u32>(0u, 1u, 2u, 3u) * stride;
    return Items(index, load_item(index.x), load_item(index.y), load_item(index.z), load_item(index.w));
}

// A thread's items in the workgroup-wide layout: rows of WORKGROUP_SIZE.
fn load_items(first: u32) -> Items {
    return load_rows(first, WORKGROUP_SIZE);
}

// The verdicts of a thread's four items (classify): what no view changes,
// computed once, then voted in every view (the transform and, for one
// camera's levels of detail, the frustum test are most of a vote's
// arithmetic).
// `whole`: the items are a whole cell's (cull::params::workgroup_tile_whole),
// kept in every view without their verdicts, which are left unset.
struct Verdicts {
    vx: Verdict,
    vy: Verdict,
    vz: Verdict,
    vw: Verdict,
    whole: bool,
}

// The verdicts of the items, or none for a whole cell's (a branch on a
// workgroup-uniform value: its threads skip the transform together).
fn classify_items(items: Items, whole: bool) -> Verdicts {
    var v: Verdicts;
    v.whole = whole;
    if !whole {
        v.vx = classify(world_sphere(items.dx), items.index.x);
        v.vy = classify(world_sphere(items.dy), items.index.y);
        v.vz = classify(world_sphere(items.dz), items.index.z);
        v.vw = classify(world_sphere(items.dw), items.index.w);
    }
    return v;
}

// The items' votes in `view`; false past the chunk's end, and for a view
// past this cull's (a target's kernel has a block for each of its views).
fn vote_verdicts(items: Items, verdicts: Verdicts, view: u32) -> vec4<bool> {
#if VIEWS > 1
    let inside = (items.index < vec4<u32>(params.chunk_len)) & vec4<bool>(view < params.view_count);
#else
    let inside = items.index < vec4<u32>(params.chunk_len);
#endif
    if verdicts.whole {
        return inside;
    }
    return inside & keeps_rows(verdicts.vx, verdicts.vy, verdicts.vz, verdicts.vw, view);
}

// Whether loaded item `d` (chunk-local index `i`) is visible in `view`;
// false past the chunk's end, without computing its sphere.
fn vote_item(i: u32, d: InstanceData, view: u32) -> bool {
    return i < params.chunk_len && keeps(classify(world_sphere(d), i), view);
}

// The items' votes in `view`, for kernels that vote each item once; a
// whole cell's (`whole`, uniform) are kept without their test.
fn vote_items(items: Items, view: u32, whole: bool) -> vec4<bool> {
    if whole {
        return items.index < vec4<u32>(params.chunk_len);
    }
    return vec4<bool>(vote_item(items.index.x, items.dx, view), vote_item(items.index.y, items.dy, view),
                      vote_item(items.index.z, items.dz, view), vote_item(items.index.w, items.dw, view));
}

// Writes the kept items to their slots in `view`'s list.
fn emit_items(view: u32, items: Items, keep: vec4<bool>, slots: vec4<u32>) {
    if keep.x { emit(view, slots.x, items.index.x, items.dx); }
    if keep.y { emit(view, slots.y, items.index.y, items.dy); }
    if keep.z { emit(view, slots.z, items.index.z, items.dz); }
    if keep.w { emit(view, slots.w, items.index.w, items.dw); }
}

// Writes chunk-local instance `i` to slot `view_slot` of `view`'s list,
// reading it again only where the output holds its data: an index needs
// none, and a load whose value goes unused is not reliably dropped by
// drivers.
fn emit_reading(view: u32, view_slot: u32, i: u32) {
#ifdef OUTPUT_INDICES
    var unread: InstanceData;
    emit(view, view_slot, i, unread);
#else
    emit(view, view_slot, i, instances[i]);
#endif
}

// Writes the kept ones of instances `index` to `slots` in `view`'s list,
// reading them again (emit_reading).
fn emit_again(view: u32, keep: vec4<bool>, index: vec4<u32>, slots: vec4<u32>) {
    if keep.x { emit_reading(view, slots.x, index.x); }
    if keep.y { emit_reading(view, slots.y, index.y); }
    if keep.z { emit_reading(view, slots.z, index.z); }
    if keep.w { emit_reading(view, slots.w, index.w); }
}

// The four row votes of a thread as the bytes of one u32.
fn pack_votes(v: vec4<bool>) -> u32 {
    return dot(select(vec4<u32>(0u), vec4<u32>(1u, 0x100u, 0x10000u, 0x1000000u), v), vec4<u32>(1u));
}

fn unpack_bytes(packed: u32) -> vec4<u32> {
    return (vec4<u32>(packed) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu);
}

// Where each item row starts: the exclusive prefix of four row totals.
fn row_offsets(totals: vec4<u32>) -> vec4<u32> {
    return vec4<u32>(0u, totals.x, totals.x + totals.y, totals.x + totals.y + totals.z);
}
