//! The single-pass variants (block atomic, subgroup ballot, subgroup
//! shuffle): vote, workgroup scan and compaction in one dispatch per chunk.

use super::{Slot, chunk_entries, layout, output_slots, pipeline};
use crate::buffers::{CullInput, CullTarget};
use crate::culler::{Chunk, Culler, PARAMS_STRIDE};
use crate::timing::{PassKind, Recorder};

pub(super) struct FusedPass {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

impl FusedPass {
    pub fn new(device: &wgpu::Device, module: &wgpu::ShaderModule, windows: u32) -> Self {
        let slots: Vec<_> = [(0, Slot::Params), (1, Slot::Read), (2, Slot::ReadWrite)]
            .into_iter()
            .chain(output_slots(windows))
            .collect();
        let layout = layout(device, "cull-fused", &slots);
        let pipeline = pipeline(device, module, &layout, "cull");
        Self { layout, pipeline }
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
            let bind_group = culler.device().create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("cull-fused"),
                layout: &self.layout,
                entries: &chunk_entries(input, target, chunk, true),
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
