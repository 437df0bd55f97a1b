//! The Hillis-Steele baseline (`shaders/cull/variants/hillis_steele.wgsl`):
//! a vote pass, log2 N scan passes over the whole chunk (ping-ponging two
//! buffers), then compaction and a one-thread pass that adds the chunk's
//! total to the running count. Order preserved. Several views run these
//! passes one view after the other. By cells ([`crate::cells`]), the cell
//! pass runs first and the vote pass reads only the kept cells' instances.

use super::{KernelTuning, ScanKernel};
use crate::kernel::{
    PassLayout, ScratchBuffer, ShaderDefValue, ShaderModule, Slot, bindings, chunk_slots, shader_module,
};
use crate::passes::{CompiledPass, EncodeContext, bind_window};
use crate::timing::PassKind;

pub(super) struct HillisSteele;

pub(super) static KERNEL: HillisSteele = HillisSteele;

/// Scan steps for a chunk of `len`.
fn scan_steps(len: u32) -> u32 {
    len.max(1).next_power_of_two().trailing_zeros()
}

impl ScanKernel for HillisSteele {
    fn entry(&self, _subgroups: bool) -> ShaderModule {
        shader_module!("variants/hillis_steele.wgsl")
    }

    fn subgroup_form(&self, _available: bool) -> bool {
        false
    }

    /// By cells, each vote asks whether its cell was kept: a flag per cell.
    fn shader_defs(&self, _tuning: &KernelTuning, defs: &mut Vec<(&'static str, ShaderDefValue)>) {
        defs.push(("KEPT_CELL_FLAGS", ShaderDefValue::Bool(true)));
    }

    /// Vote, scan step, compaction and the one-thread finalize.
    fn passes(&self, windows: u32) -> Vec<PassLayout> {
        use bindings::{DRAW_ARGS, INSTANCES, PARAMS, SCAN_IN, SCAN_OUT, VOTES};
        let pass = |entry_point, kind, bindings: Vec<(u32, Slot)>| PassLayout {
            module: None,
            entry_point,
            kind,
            zeroed_workgroup_memory: true,
            bindings,
        };
        vec![
            pass(
                "vote_pass",
                PassKind::Vote,
                vec![
                    (PARAMS, Slot::Params),
                    (INSTANCES, Slot::Read),
                    (VOTES, Slot::ReadWrite),
                    (SCAN_OUT, Slot::ReadWrite),
                ],
            ),
            pass(
                "scan_step",
                PassKind::Scan,
                vec![
                    (PARAMS, Slot::Params),
                    (SCAN_IN, Slot::Read),
                    (SCAN_OUT, Slot::ReadWrite),
                ],
            ),
            pass(
                "compact",
                PassKind::Compact,
                chunk_slots(windows)
                    .chain([(VOTES, Slot::ReadWrite), (SCAN_IN, Slot::Read)])
                    .collect(),
            ),
            pass(
                "finalize",
                PassKind::Compact,
                vec![
                    (PARAMS, Slot::Params),
                    (DRAW_ARGS, Slot::ReadWrite),
                    (SCAN_IN, Slot::Read),
                ],
            ),
        ]
    }

    /// A thread per instance.
    fn per_workgroup(&self, workgroup_size: u32, _tile_len: u32) -> u32 {
        workgroup_size
    }

    /// One entry for the chunk's passes, then one per scan step.
    fn params_per_chunk(&self, window_len: u32) -> u32 {
        1 + scan_steps(window_len)
    }

    /// The baseline re-reads the instances per view, as separate culls would.
    fn dispatches_per_view(&self) -> bool {
        true
    }

    fn scratch(
        &self,
        chunk_len: u32,
        _workgroups: u64,
        _per_workgroup: u32,
        _views: u32,
    ) -> Vec<ScratchBuffer> {
        ["cull-votes", "cull-scan-a", "cull-scan-b"]
            .map(|label| ScratchBuffer {
                label,
                size: chunk_len as u64 * 4,
                usage: wgpu::BufferUsages::STORAGE,
            })
            .into()
    }

    fn encode(&self, mut cx: EncodeContext, passes: &[CompiledPass]) {
        let [vote, scan, compact, finalize] = match (cx.cells, passes) {
            (None, [vote, scan, compact, finalize]) => [vote, scan, compact, finalize],
            (Some(cells), [cell_pass, vote, scan, compact, finalize]) => {
                crate::passes::encode_cell_pass(&mut cx, cell_pass, cells);
                [vote, scan, compact, finalize]
            }
            _ => unreachable!("four passes, after the cell pass by cells, as passes() declares"),
        };
        let target = cx.target;
        let [votes, a, b] = target.scratch() else {
            unreachable!("three scratch buffers, as scratch() declares")
        };
        for chunk in cx.chunks {
            let words = chunk.len as u64 * 4;
            let entry = |binding, buffer| wgpu::BindGroupEntry {
                binding,
                resource: bind_window(buffer, 0, words),
            };
            let steps = scan_steps(chunk.len);
            let result = if steps.is_multiple_of(2) { a } else { b };
            let mut vote_entries = cx.chunk_entries(chunk, false);
            vote_entries.extend([entry(bindings::VOTES, votes), entry(bindings::SCAN_OUT, a)]);
            if let Some(cells) = cx.cells {
                let region = chunk.index as u64 * cells.region_bytes;
                vote_entries.push(wgpu::BindGroupEntry {
                    binding: bindings::KEPT_CELLS,
                    resource: bind_window(cx.kept_cells(cells), region, cells.region_bytes),
                });
            }
            let vote_group = cx.bind_group(vote, &vote_entries);
            let a_to_b = cx.bind_group(
                scan,
                &[
                    cx.params_entry(),
                    entry(bindings::SCAN_IN, a),
                    entry(bindings::SCAN_OUT, b),
                ],
            );
            let b_to_a = cx.bind_group(
                scan,
                &[
                    cx.params_entry(),
                    entry(bindings::SCAN_IN, b),
                    entry(bindings::SCAN_OUT, a),
                ],
            );
            let mut compact_entries = cx.chunk_entries(chunk, true);
            compact_entries.extend([entry(bindings::VOTES, votes), entry(bindings::SCAN_IN, result)]);
            let compact_group = cx.bind_group(compact, &compact_entries);
            let finalize_group = cx.bind_group(
                finalize,
                &[
                    cx.params_entry(),
                    wgpu::BindGroupEntry {
                        binding: bindings::DRAW_ARGS,
                        resource: target.draw_args().as_entire_binding(),
                    },
                    entry(bindings::SCAN_IN, result),
                ],
            );
            drop((vote_entries, compact_entries));

            let (x, y) = cx.dims(chunk);
            for view in 0..cx.views {
                let offsets: Vec<u32> = (0..=steps)
                    .map(|step| cx.params_offset(chunk, view, step))
                    .collect();
                {
                    let mut pass = cx.begin_pass(PassKind::Vote);
                    pass.set_pipeline(&vote.pipeline);
                    pass.set_bind_group(0, &vote_group, &[offsets[0]]);
                    pass.dispatch_workgroups(x, y, 1);
                }
                {
                    // One dispatch per step: each reads the previous step's output
                    // (wgpu places a barrier between dispatches).
                    let mut pass = cx.begin_pass(PassKind::Scan);
                    pass.set_pipeline(&scan.pipeline);
                    for step in 0..steps {
                        let group = if step % 2 == 0 { &a_to_b } else { &b_to_a };
                        pass.set_bind_group(0, group, &[offsets[step as usize + 1]]);
                        pass.dispatch_workgroups(x, y, 1);
                    }
                }
                let mut pass = cx.begin_pass(PassKind::Compact);
                pass.set_pipeline(&compact.pipeline);
                pass.set_bind_group(0, &compact_group, &[offsets[0]]);
                pass.dispatch_workgroups(x, y, 1);
                pass.set_pipeline(&finalize.pipeline);
                pass.set_bind_group(0, &finalize_group, &[offsets[0]]);
                pass.dispatch_workgroups(1, 1, 1);
            }
        }
    }
}
