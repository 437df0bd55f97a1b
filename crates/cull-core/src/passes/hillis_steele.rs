//! The Hillis-Steele baseline: a vote pass, log2 N scan passes over the
//! whole chunk (ping-ponging two buffers), then compaction and a one-thread
//! pass that adds the chunk's total to the running count.

use super::{Slot, bind_window, chunk_entries, layout, output_slots, pipeline};
use crate::CullError;
use crate::buffers::{CullInput, CullTarget};
use crate::culler::{Chunk, Culler, GpuParams, PARAMS_STRIDE};
use crate::timing::{PassKind, Recorder};

const VOTES: u32 = 7;
const SCAN_IN: u32 = 8;
const SCAN_OUT: u32 = 9;

/// Each pass's entry point and bindings: vote, scan step, compaction and
/// the one-thread finalize.
pub(super) fn pass_slots(windows: u32) -> [(&'static str, Vec<(u32, Slot)>); 4] {
    let compact = [(0, Slot::Params), (1, Slot::Read), (2, Slot::ReadWrite)]
        .into_iter()
        .chain(output_slots(windows))
        .chain([(VOTES, Slot::ReadWrite), (SCAN_IN, Slot::Read)])
        .collect();
    [
        (
            "vote_pass",
            vec![
                (0, Slot::Params),
                (1, Slot::Read),
                (VOTES, Slot::ReadWrite),
                (SCAN_OUT, Slot::ReadWrite),
            ],
        ),
        (
            "scan_step",
            vec![
                (0, Slot::Params),
                (SCAN_IN, Slot::Read),
                (SCAN_OUT, Slot::ReadWrite),
            ],
        ),
        ("compact", compact),
        (
            "finalize",
            vec![(0, Slot::Params), (2, Slot::ReadWrite), (SCAN_IN, Slot::Read)],
        ),
    ]
}

pub(super) struct HillisSteelePasses {
    vote: (wgpu::BindGroupLayout, wgpu::ComputePipeline),
    scan: (wgpu::BindGroupLayout, wgpu::ComputePipeline),
    compact: (wgpu::BindGroupLayout, wgpu::ComputePipeline),
    finalize: (wgpu::BindGroupLayout, wgpu::ComputePipeline),
}

impl HillisSteelePasses {
    pub fn new(device: &wgpu::Device, module: &wgpu::ShaderModule, windows: u32) -> Result<Self, CullError> {
        let [vote, scan, compact, finalize] = pass_slots(windows).map(|(name, slots)| {
            let l = layout(device, name, &slots)?;
            let p = pipeline(device, module, &l, name);
            Ok::<_, CullError>((l, p))
        });
        Ok(Self {
            vote: vote?,
            scan: scan?,
            compact: compact?,
            finalize: finalize?,
        })
    }

    pub fn encode(
        &self,
        culler: &Culler,
        encoder: &mut wgpu::CommandEncoder,
        input: &CullInput,
        target: &CullTarget,
        chunks: &[Chunk],
        recorder: &mut Option<Recorder<'_>>,
    ) {
        let device = culler.device();
        let scratch = target
            .scan_scratch()
            .expect("Hillis-Steele targets have scratch buffers");
        let per_chunk = culler.params_per_chunk() as u64;
        for chunk in chunks {
            let words = chunk.len as u64 * 4;
            let params = wgpu::BindGroupEntry {
                binding: 0,
                resource: bind_window(target.params_buffer(), 0, size_of::<GpuParams>() as u64),
            };
            let entry = |binding, buffer| wgpu::BindGroupEntry {
                binding,
                resource: bind_window(buffer, 0, words),
            };
            let group = |layout, entries: &[wgpu::BindGroupEntry]| {
                device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("hillis-steele"),
                    layout,
                    entries,
                })
            };
            let [votes, a, b] = [&scratch[0], &scratch[1], &scratch[2]];
            let mut vote_entries = chunk_entries(input, target, chunk, false);
            vote_entries.extend([entry(VOTES, votes), entry(SCAN_OUT, a)]);
            let vote = group(&self.vote.0, &vote_entries);
            let a_to_b = group(
                &self.scan.0,
                &[params.clone(), entry(SCAN_IN, a), entry(SCAN_OUT, b)],
            );
            let b_to_a = group(
                &self.scan.0,
                &[params.clone(), entry(SCAN_IN, b), entry(SCAN_OUT, a)],
            );
            let steps = Culler::scan_steps(chunk.len);
            let result = if steps.is_multiple_of(2) { a } else { b };
            let mut compact_entries = chunk_entries(input, target, chunk, true);
            compact_entries.extend([entry(VOTES, votes), entry(SCAN_IN, result)]);
            let compact = group(&self.compact.0, &compact_entries);
            let finalize = group(
                &self.finalize.0,
                &[
                    params.clone(),
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: target.draw_args().as_entire_binding(),
                    },
                    entry(SCAN_IN, result),
                ],
            );

            let first_entry = chunk.index as u64 * per_chunk;
            let offset = |step: u64| ((first_entry + step) * PARAMS_STRIDE) as u32;
            let (x, y) = culler.dispatch_dims(culler.groups_for(chunk.len));
            {
                let mut pass = Culler::begin_pass(encoder, PassKind::Vote, recorder);
                pass.set_pipeline(&self.vote.1);
                pass.set_bind_group(0, &vote, &[offset(0)]);
                pass.dispatch_workgroups(x, y, 1);
            }
            {
                // One dispatch per step: each reads the previous step's output
                // (wgpu places a barrier between dispatches).
                let mut pass = Culler::begin_pass(encoder, PassKind::Scan, recorder);
                pass.set_pipeline(&self.scan.1);
                for step in 0..steps {
                    let bind_group = if step % 2 == 0 { &a_to_b } else { &b_to_a };
                    pass.set_bind_group(0, bind_group, &[offset(step as u64 + 1)]);
                    pass.dispatch_workgroups(x, y, 1);
                }
            }
            let mut pass = Culler::begin_pass(encoder, PassKind::Compact, recorder);
            pass.set_pipeline(&self.compact.1);
            pass.set_bind_group(0, &compact, &[offset(0)]);
            pass.dispatch_workgroups(x, y, 1);
            pass.set_pipeline(&self.finalize.1);
            pass.set_bind_group(0, &finalize, &[offset(0)]);
            pass.dispatch_workgroups(1, 1, 1);
        }
    }
}
