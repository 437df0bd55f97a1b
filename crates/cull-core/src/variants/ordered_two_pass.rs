//! OrderedTwoPass: survivors in their original order in two passes, with
//! no workgroup waiting on another (`shaders/cull/variants/ordered_votes.wgsl`
//! says how). A vote pass reads every instance once and writes a bit per
//! instance and view plus per-tile counts (its subgroup form,
//! `ordered_votes_subgroup.wgsl`, sets a row's bits from its ballot; the
//! workgroup form, `ordered_votes_workgroup.wgsl`, one bit per survivor);
//! a gather pass (`ordered_gather.wgsl`) writes each view's survivors in
//! order. Every view is voted in the one vote pass, so several views read
//! the instances once, unlike [`super::ordered`]'s chain.

use super::ScanKernel;
use crate::kernel::{
    MAX_VIEWS, ORDERED_SUPER_TILES, PassLayout, ScratchBuffer, ShaderModule, Slot, bindings, chunk_slots,
    ordered_tile_capacity, shader_module,
};
use crate::passes::{CompiledPass, EncodeContext, bind_window};
use crate::timing::PassKind;

pub(super) struct OrderedTwoPass;

pub(super) static KERNEL: OrderedTwoPass = OrderedTwoPass;

static LIBRARY: [ShaderModule; 1] = [shader_module!("variants/ordered_votes.wgsl")];

/// The gather pass's module (an entry module of its own, composed with the
/// kernel's shader defs).
const GATHER: ShaderModule = shader_module!("variants/ordered_gather.wgsl");

impl ScanKernel for OrderedTwoPass {
    fn entry(&self, subgroups: bool) -> ShaderModule {
        if subgroups {
            shader_module!("variants/ordered_votes_subgroup.wgsl")
        } else {
            shader_module!("variants/ordered_votes_workgroup.wgsl")
        }
    }

    fn library(&self) -> &'static [ShaderModule] {
        &LIBRARY
    }

    fn subgroup_form(&self, available: bool) -> bool {
        available
    }

    /// One row group in every form: the gather's blocks
    /// (`ORDERED_GATHER_TILES`) assume tiles of four rows.
    fn row_groups(&self, _format: crate::InstanceFormat, _subgroups: bool) -> u32 {
        1
    }

    /// The vote pass (the visibility test's bindings are added to it), then
    /// the gather pass.
    fn passes(&self, windows: u32) -> Vec<PassLayout> {
        let scratch = [
            (bindings::VOTE_BITS, Slot::ReadWrite),
            (bindings::TILE_SUMS, Slot::ReadWrite),
        ];
        vec![
            PassLayout {
                module: None,
                entry_point: "vote_bits",
                kind: PassKind::Vote,
                zeroed_workgroup_memory: true,
                bindings: [
                    (bindings::PARAMS, Slot::Params),
                    (bindings::INSTANCES, Slot::Read),
                ]
                .into_iter()
                .chain(scratch)
                .collect(),
            },
            PassLayout {
                module: Some(GATHER),
                entry_point: "gather",
                kind: PassKind::Compact,
                zeroed_workgroup_memory: true,
                bindings: chunk_slots(windows).chain(scratch).collect(),
            },
        ]
    }

    /// The vote bits (a word per 32 instances, view and tile) and the tile
    /// sums (each view's base, a count per tile and view, a sum per
    /// super-tile and view).
    fn scratch(
        &self,
        _chunk_len: u32,
        workgroups: u64,
        per_workgroup: u32,
        views: u32,
    ) -> Vec<ScratchBuffer> {
        let tiles = ordered_tile_capacity(workgroups) as u64;
        let views = views as u64;
        let supers = tiles.div_ceil(ORDERED_SUPER_TILES as u64);
        vec![
            ScratchBuffer {
                label: "cull-vote-bits",
                size: tiles * views * (per_workgroup as u64 / 32) * 4,
                usage: wgpu::BufferUsages::STORAGE,
            },
            ScratchBuffer {
                label: "cull-tile-sums",
                size: (MAX_VIEWS as u64 + (tiles + supers) * views) * 4,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            },
        ]
    }

    fn encode(&self, mut cx: EncodeContext, passes: &[CompiledPass]) {
        let (vote, gather) = match (cx.cells, passes) {
            (None, [vote, gather]) => (vote, gather),
            (Some(cells), [cell_pass, vote, gather]) => {
                crate::passes::encode_cell_pass(&mut cx, cell_pass, cells);
                (vote, gather)
            }
            _ => unreachable!("vote and gather, after the cell pass by cells, as passes() declares"),
        };
        let target = cx.target;
        let [bits, sums] = target.scratch() else {
            unreachable!("two scratch buffers, as scratch() declares")
        };
        let scratch_entries = [
            wgpu::BindGroupEntry {
                binding: bindings::VOTE_BITS,
                resource: bits.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: bindings::TILE_SUMS,
                resource: sums.as_entire_binding(),
            },
        ];
        let bases = MAX_VIEWS as u64 * 4;
        for chunk in cx.chunks {
            let mut vote_entries = cx.chunk_entries(chunk, false);
            vote_entries.extend(scratch_entries.iter().cloned());
            if let Some(cells) = cx.cells {
                let region = chunk.index as u64 * cells.region_bytes;
                vote_entries.push(wgpu::BindGroupEntry {
                    binding: bindings::KEPT_CELLS,
                    resource: bind_window(cx.kept_cells(cells), region, cells.region_bytes),
                });
            }
            let vote_group = cx.bind_group(vote, &vote_entries);
            let mut gather_entries = cx.chunk_entries(chunk, true);
            gather_entries.extend(scratch_entries.iter().cloned());
            let gather_group = cx.bind_group(gather, &gather_entries);
            drop((vote_entries, gather_entries));

            // Counts and sums start at zero (by cells, unvisited tiles must
            // read zero); each view's base is its count so far.
            cx.encoder.clear_buffer(sums, bases, None);
            for view in 0..cx.views {
                let count = target.draw_args_offset(view) + crate::kernel::INSTANCE_COUNT_OFFSET;
                cx.encoder
                    .copy_buffer_to_buffer(target.draw_args(), count, sums, view as u64 * 4, 4);
            }
            let offset = cx.params_offset(chunk, 0, 0);
            let (x, y) = cx.dims(chunk);
            let tiles = cx.dispatch.groups_for(chunk.len);
            let (bx, by) = cx
                .dispatch
                .dims(tiles.div_ceil(crate::kernel::ORDERED_GATHER_TILES));
            let views = cx.views;
            // Both dispatches in one compute pass (wgpu places a barrier
            // between them): a second pass's start cost more than its work
            // at 1M instances.
            let mut pass = cx.begin_pass(PassKind::Fused);
            pass.set_pipeline(&vote.pipeline);
            pass.set_bind_group(0, &vote_group, &[offset]);
            pass.dispatch_workgroups(x, y, 1);
            pass.set_pipeline(&gather.pipeline);
            pass.set_bind_group(0, &gather_group, &[offset]);
            pass.dispatch_workgroups(bx, by, views);
        }
    }
}
