//! Ordered: one pass with survivors in their original order, by a chained
//! scan with decoupled look-back and fallback
//! (`shaders/cull/variants/ordered_chain.wgsl`), its tiles scanned with
//! ballots where the device has subgroups (`ordered_subgroup.wgsl`), in
//! workgroup memory elsewhere (`ordered_workgroup.wgsl`).

use super::{KernelTuning, ScanKernel, fused};
use crate::InstanceFormat;
use crate::kernel::{
    LOOKBACK_COUNT_BITS, PassLayout, ScratchBuffer, ShaderDefValue, ShaderModule, shader_module,
};
use crate::passes::{CompiledPass, EncodeContext};

pub(super) struct Ordered;

pub(super) static KERNEL: Ordered = Ordered;

static LIBRARY: [ShaderModule; 1] = [shader_module!("variants/ordered_chain.wgsl")];

impl ScanKernel for Ordered {
    fn entry(&self, subgroups: bool) -> ShaderModule {
        if subgroups {
            shader_module!("variants/ordered_subgroup.wgsl")
        } else {
            shader_module!("variants/ordered_workgroup.wgsl")
        }
    }

    fn library(&self) -> &'static [ShaderModule] {
        &LIBRARY
    }

    fn subgroup_form(&self, available: bool) -> bool {
        available
    }

    /// Two for the subgroup form with 16-byte instances: its tiles then
    /// carry as many bytes as 32-byte ones, which spreads the look-back
    /// chain's fixed cost per tile over twice the instances (measured in
    /// docs/benchmarks.md). One elsewhere: wider instances already fill a
    /// tile with as many bytes.
    fn row_groups(&self, format: InstanceFormat, subgroups: bool) -> u32 {
        if subgroups && format.stride() <= 16 { 2 } else { 1 }
    }

    fn shader_defs(&self, tuning: &KernelTuning, defs: &mut Vec<(&'static str, ShaderDefValue)>) {
        defs.push(("LOOKBACK_COUNT_BITS", ShaderDefValue::UInt(LOOKBACK_COUNT_BITS)));
        defs.push(("SPIN_LIMIT", ShaderDefValue::UInt(tuning.spin_limit)));
        defs.push(("SILENT_TILES", ShaderDefValue::UInt(tuning.silent_tiles)));
        // By cells, the chain walks the kept cells' tiles in ascending
        // order: the cell pass sets a bit per kept cell, and each
        // workgroup finds its tile in them.
        defs.push(("ORDERED_CELL_LIST", ShaderDefValue::Bool(true)));
    }

    fn passes(&self, windows: u32) -> Vec<PassLayout> {
        fused::passes(windows, true)
    }

    /// One chain per view, each its own dispatch (see `ordered_chain.wgsl`).
    fn dispatches_per_view(&self) -> bool {
        true
    }

    /// Tile counter, chunk base, then a status word per tile of a chunk
    /// (plus the surplus workgroups of a two-dimensional dispatch), reset
    /// before each view's dispatch.
    fn scratch(
        &self,
        _chunk_len: u32,
        workgroups: u64,
        _per_workgroup: u32,
        _views: u32,
    ) -> Vec<ScratchBuffer> {
        vec![ScratchBuffer {
            label: "cull-lookback-state",
            size: (2 + workgroups) * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        }]
    }

    fn encode(&self, cx: EncodeContext, passes: &[CompiledPass]) {
        fused::encode(cx, passes, true)
    }
}
