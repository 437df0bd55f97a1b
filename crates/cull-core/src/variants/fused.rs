//! What the single-pass variants (block atomic, subgroup ballot, subgroup
//! shuffle, ordered) share: vote, scan and compaction in one dispatch per
//! chunk, entry point `cull`; the unordered ones vote against every view of
//! the cull in that one dispatch. The ordered variant also binds its
//! look-back state and dispatches once per view, resetting the state before
//! each. All of them cull by cells ([`crate::cells`]) after a cell pass.

use crate::kernel::{INSTANCE_COUNT_OFFSET, PassLayout, Slot, bindings, chunk_slots};
use crate::passes::{CompiledPass, EncodeContext, bind_window};
use crate::timing::PassKind;

/// An unordered single-pass variant: all it has of its own is its WGSL
/// entry module and whether that module uses subgroup operations. (A build
/// with `ordered` as its only variant has none.)
#[cfg(any(
    feature = "block-atomic",
    feature = "subgroup-ballot",
    feature = "subgroup-shuffle"
))]
pub(super) struct FusedKernel {
    pub entry: crate::kernel::ShaderModule,
    pub subgroups: bool,
    /// Whether its index output can be staged in workgroup memory
    /// (`STAGED_INDICES`, [`crate::Tuning::staged_indices`]).
    pub stages_indices: bool,
}

#[cfg(any(
    feature = "block-atomic",
    feature = "subgroup-ballot",
    feature = "subgroup-shuffle"
))]
impl super::ScanKernel for FusedKernel {
    fn entry(&self, _subgroups: bool) -> crate::kernel::ShaderModule {
        self.entry
    }

    fn subgroup_form(&self, _available: bool) -> bool {
        self.subgroups
    }

    fn stages_indices(&self) -> bool {
        self.stages_indices
    }

    fn takes_listed_cells(&self) -> bool {
        true
    }

    fn passes(&self, windows: u32) -> Vec<PassLayout> {
        passes(windows, false)
    }

    fn encode(&self, cx: EncodeContext, passes: &[CompiledPass]) {
        encode(cx, passes, false)
    }

    fn shared_dispatches(
        &self,
        cx: &EncodeContext,
        passes: &[CompiledPass],
    ) -> Option<Vec<crate::passes::SharedDispatch>> {
        shared_dispatches(cx, passes)
    }
}

/// A flat cull's dispatches, one per chunk, for a pass shared with other
/// targets' culls; `None` by cells (the cell pass comes first).
#[cfg(any(
    feature = "block-atomic",
    feature = "subgroup-ballot",
    feature = "subgroup-shuffle"
))]
fn shared_dispatches(
    cx: &EncodeContext,
    passes: &[CompiledPass],
) -> Option<Vec<crate::passes::SharedDispatch>> {
    let ([pass], None) = (passes, cx.cells) else {
        return None;
    };
    let dispatches = cx.chunks.iter().map(|chunk| crate::passes::SharedDispatch {
        pipeline: pass.pipeline.clone(),
        bind_group: cx.bind_group(pass, &cx.chunk_entries(chunk, true)),
        offset: cx.params_offset(chunk, 0, 0),
        dims: cx.dims(chunk),
    });
    Some(dispatches.collect())
}

/// The entry point of the single pass.
pub(super) const ENTRY_POINT: &str = "cull";

/// The pass: uniforms, instances, draw arguments, the output windows, and
/// (`lookback`) the ordered variant's look-back state.
pub(super) fn passes(windows: u32, lookback: bool) -> Vec<PassLayout> {
    vec![PassLayout {
        module: None,
        entry_point: ENTRY_POINT,
        kind: PassKind::Fused,
        zeroed_workgroup_memory: true,
        bindings: chunk_slots(windows)
            .chain(lookback.then_some((bindings::SCAN_STATE, Slot::ReadWrite)))
            .collect(),
    }]
}

/// One dispatch per chunk (by cells, after the cell pass); with
/// `lookback`, the target's first scratch buffer is the look-back state.
pub(super) fn encode(mut cx: EncodeContext, passes: &[CompiledPass], lookback: bool) {
    let pass = match (cx.cells, passes) {
        (None, [pass]) => pass,
        // Kept cells the CPU listed need no cell pass.
        (Some(_), [_, pass]) if cx.listed.is_some() => pass,
        (Some(cells), [cell_pass, pass]) => {
            crate::passes::encode_cell_pass(&mut cx, cell_pass, cells);
            pass
        }
        _ => unreachable!("the cull, after the cell pass by cells, as ModuleShape::passes declares"),
    };
    for chunk in cx.chunks {
        let mut entries = cx.chunk_entries(chunk, true);
        if lookback {
            let state = &cx.target.scratch()[0];
            entries.push(wgpu::BindGroupEntry {
                binding: bindings::SCAN_STATE,
                resource: state.as_entire_binding(),
            });
        }
        if let Some(cells) = cx.cells {
            // The chunk's kept cells: by cells, its workgroups past them
            // return at once (or, ordered, chain their tiles empty).
            let region = chunk.index as u64 * cells.region_bytes;
            entries.push(wgpu::BindGroupEntry {
                binding: bindings::KEPT_CELLS,
                resource: bind_window(cx.kept_cells(cells), region, cells.region_bytes),
            });
        }
        let bind_group = cx.bind_group(pass, &entries);
        drop(entries);
        // Every view in one dispatch, or (the look-back) one chain per view.
        let dispatches = if lookback { cx.views } else { 1 };
        for view in 0..dispatches {
            if lookback {
                // Word 0 hands out tile IDs, word 1 holds the view's count
                // before this chunk (its base), then one status word per
                // tile, all unset.
                let state = &cx.target.scratch()[0];
                let count = cx.target.draw_args_offset(view) + INSTANCE_COUNT_OFFSET;
                cx.encoder.clear_buffer(state, 0, None);
                cx.encoder
                    .copy_buffer_to_buffer(cx.target.draw_args(), count, state, 4, 4);
            }
            let (x, y) = cx.dims(chunk);
            let offset = cx.params_offset(chunk, view, 0);
            let mut compute = cx.begin_pass(PassKind::Fused);
            compute.set_pipeline(&pass.pipeline);
            compute.set_bind_group(0, &bind_group, &[offset]);
            compute.dispatch_workgroups(x, y, 1);
        }
    }
}
