// How the subgroup ballot variant writes a subgroup's survivors: each row's
// survivors go to consecutive slots (their ranks), and where an element is
// wider than 16 bytes (instance copies of 32 B and 64 B instances) the
// subgroup writes the row together, part by part: store k of the lane at
// position j among the subgroup's `width` active lanes writes 16-byte part
// k * width + j of the row's range, fetched from the lane that
// holds it (subgroupShuffle). Each store then covers consecutive bytes, as
// a copy's does. A lane writing its own element splits every store into
// half (32 B) or quarter (64 B) sectors of every element, which is what
// held fully visible batches well below a copy's speed
// (docs/benchmarks.md#fully-visible-batches-rows-written-together). Only
// rows in which at least half the lanes keep their item, and only where
// cull_core's Tuning::row_writes asks for it (ROW_WRITES: by default for
// 64-byte instances): finding each part's lane costs instructions and
// registers. Indices and 16-byte
// instances keep the lane's own store, which is already whole.
#define_import_path cull::scans::ballot_rows

#import cull::items::{Items, emit, emit_items, row_offsets}
#ifdef ROW_WRITES
#ifdef OUTPUT_INSTANCES
#if INSTANCE_PARTS > 1
#import cull::items::emit_part
#import cull::outputs::instances::{INSTANCE_PARTS, output_element}
#ifdef FORMAT_MATRIX
#import cull::formats::matrix::InstanceData
#else ifdef FORMAT_POSQUAT
#import cull::formats::posquat::InstanceData
#else ifdef FORMAT_PACKED16
#import cull::formats::packed16::InstanceData
#endif
#import cull::scans::ballot::nth_lane

// A row is written together when at least 1 / DENSE_ROW_DIVISOR of its
// lanes keep their item (cull_core's DENSE_ROW_DIVISOR).
const DENSE_ROW_DIVISOR: u32 = #{DENSE_ROW_DIVISOR}u;

// One store of the row: part `c` of the row's range (c = k * width +
// position),
// which is part c % INSTANCE_PARTS of the row's survivor of rank
// c / INSTANCE_PARTS. Every lane takes part in the shuffles; only lanes
// inside the range store.
fn store_part(view: u32, first: u32, ballot: vec4<u32>, parts_in_row: u32, c: u32, parts: array<vec4<u32>, INSTANCE_PARTS>) {
    let rank = c / INSTANCE_PARTS;
    let part = c % INSTANCE_PARTS;
    let source = nth_lane(ballot, rank);
    var value = subgroupShuffle(parts[0], source);
    value = select(value, subgroupShuffle(parts[1], source), part == 1u);
#if INSTANCE_PARTS >= 3
    value = select(value, subgroupShuffle(parts[2], source), part == 2u);
#endif
#if INSTANCE_PARTS >= 4
    value = select(value, subgroupShuffle(parts[3], source), part == 3u);
#endif
    if c < parts_in_row {
        emit_part(view, first + rank, part, value);
    }
}

// Writes one row's `count` survivors (the lanes set in `ballot`, holding
// `parts`) from slot `first` of `view`'s list: as many stores as the row
// needs, each of `width` consecutive parts (a branch on counts the whole
// subgroup shares).
fn emit_row(view: u32, first: u32, ballot: vec4<u32>, count: u32, position: u32, width: u32, parts: array<vec4<u32>, INSTANCE_PARTS>) {
    let parts_in_row = count * INSTANCE_PARTS;
    if parts_in_row > 0u {
        store_part(view, first, ballot, parts_in_row, position, parts);
    }
    if parts_in_row > width {
        store_part(view, first, ballot, parts_in_row, width + position, parts);
    }
#if INSTANCE_PARTS >= 3
    if parts_in_row > 2u * width {
        store_part(view, first, ballot, parts_in_row, 2u * width + position, parts);
    }
#endif
#if INSTANCE_PARTS >= 4
    if parts_in_row > 3u * width {
        store_part(view, first, ballot, parts_in_row, 3u * width + position, parts);
    }
#endif
}

// One row of a thread's items: a dense row (at least 1 / DENSE_ROW_DIVISOR
// of its lanes keep their item; `total`, shared by the subgroup) written
// together from slot `first`, a sparse one lane by lane (this lane's item
// at `slot`, if kept), where finding each part's lane costs more than the
// split stores. A dense row's ballot is taken again inside its branch,
// which the whole subgroup takes: fewer registers than holding it from the
// ranking.
fn emit_item_row(view: u32, keep: bool, total: u32, first: u32, slot: u32, index: u32, d: InstanceData, position: u32, width: u32) {
    if total * DENSE_ROW_DIVISOR >= width {
        emit_row(view, first, subgroupBallot(keep), total, position, width, output_element(d).parts);
    } else if keep {
        emit(view, slot, index, d);
    }
}
#endif
#endif
#endif

// Writes the items `keep` keeps in `view`, the subgroup's range starting at
// slot `base`, rows one after another (`ranks`: each item's slot in the
// range, and `totals`: each row's count, as subgroup_ballot's rank_view
// gives them). `width`: the subgroup's active lanes, `position`: this
// lane's place among them (a subgroup may be partly filled).
fn emit_rows(view: u32, items: Items, keep: vec4<bool>, base: u32, ranks: vec4<u32>, totals: vec4<u32>, position: u32, width: u32) {
#ifdef ROW_WRITES
#ifdef OUTPUT_INSTANCES
#if INSTANCE_PARTS > 1
    let first = vec4<u32>(base) + row_offsets(totals);
    let slots = vec4<u32>(base) + ranks;
    emit_item_row(view, keep.x, totals.x, first.x, slots.x, items.index.x, items.dx, position, width);
    emit_item_row(view, keep.y, totals.y, first.y, slots.y, items.index.y, items.dy, position, width);
    emit_item_row(view, keep.z, totals.z, first.z, slots.z, items.index.z, items.dz, position, width);
    emit_item_row(view, keep.w, totals.w, first.w, slots.w, items.index.w, items.dw, position, width);
#else
    emit_items(view, items, keep, vec4<u32>(base) + ranks);
#endif
#else
    emit_items(view, items, keep, vec4<u32>(base) + ranks);
#endif
#else
    emit_items(view, items, keep, vec4<u32>(base) + ranks);
#endif
}
