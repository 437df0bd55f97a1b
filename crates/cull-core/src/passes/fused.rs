//! The single-pass variants (block atomic, subgroup ballot, subgroup
//! shuffle, ordered): vote, workgroup scan and compaction in one dispatch
//! per chunk. The ordered variant also binds its look-back state, reset
//! before each chunk.

use super::{Slot, chunk_entries, layout, output_slots, pipeline};
use crate::CullError;
use crate::buffers::{CullInput, CullTarget};
use crate::culler::{Chunk, Culler, PARAMS_STRIDE};
use crate::timing::{PassKind, Recorder};

pub(super) struct FusedPass {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
    ordered: bool,
}

/// Binding of the ordered variant's look-back state (`scan_state` in `shaders/ordered.wgsl`).
const SCAN_STATE: u32 = 10;

/// The entry point of the single pass.
pub(super) const ENTRY_POINT: &str = "cull";

/// The pass's bindings: uniforms, instances, draw arguments, the output
/// windows, and the ordered variant's look-back state.
pub(super) fn slots(windows: u32, ordered: bool) -> Vec<(u32, Slot)> {
    [(0, Slot::Params), (1, Slot::Read), (2, Slot::ReadWrite)]
        .into_iter()
        .chain(output_slots(windows))
        .chain(ordered.then_some((SCAN_STATE, Slot::ReadWrite)))
        .collect()
}

impl FusedPass {
    pub fn new(
        device: &wgpu::Device,
        module: &wgpu::ShaderModule,
        windows: u32,
        ordered: bool,
    ) -> Result<Self, CullError> {
        let slots = slots(windows, ordered);
        let layout = layout(device, "cull-fused", &slots)?;
        let pipeline = pipeline(device, module, &layout, ENTRY_POINT);
        Ok(Self {
            layout,
            pipeline,
            ordered,
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
        for chunk in chunks {
            let mut entries = chunk_entries(input, target, chunk, true);
            if self.ordered {
                let state = target.scan_state().expect("ordered targets have look-back state");
                entries.push(wgpu::BindGroupEntry {
                    binding: SCAN_STATE,
                    resource: state.as_entire_binding(),
                });
                // Word 0 hands out tile IDs, word 1 holds the count before this
                // chunk (its base), then one status word per tile, all unset.
                encoder.clear_buffer(state, 0, None);
                encoder.copy_buffer_to_buffer(target.draw_args(), 4, state, 4, 4);
            }
            let bind_group = culler.device().create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("cull-fused"),
                layout: &self.layout,
                entries: &entries,
            });
            let (x, y) = culler.dispatch_dims(culler.groups_for(chunk.len));
            let mut pass = Culler::begin_pass(encoder, PassKind::Fused, recorder);
            pass.set_pipeline(&self.pipeline);
            let offset = (chunk.index as u64 * culler.params_per_chunk() as u64 * PARAMS_STRIDE) as u32;
            pass.set_bind_group(0, &bind_group, &[offset]);
            pass.dispatch_workgroups(x, y, 1);
        }
    }
}
