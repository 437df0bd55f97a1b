//! Subgroup shuffle: the votes scanned in registers by shuffle-up steps.
//! One pass (`shaders/cull/variants/subgroup_shuffle.wgsl`); order not preserved.

use super::{ScanKernel, fused};
use crate::kernel::{PassLayout, ShaderModule, shader_module};
use crate::passes::{CompiledPass, EncodeContext};

pub(super) struct SubgroupShuffle;

pub(super) static KERNEL: SubgroupShuffle = SubgroupShuffle;

impl ScanKernel for SubgroupShuffle {
    fn entry(&self, _subgroups: bool) -> ShaderModule {
        shader_module!("variants/subgroup_shuffle.wgsl")
    }

    fn subgroup_form(&self, _available: bool) -> bool {
        true
    }

    fn passes(&self, windows: u32) -> Vec<PassLayout> {
        fused::passes(windows, false)
    }

    fn encode(&self, cx: EncodeContext, passes: &[CompiledPass]) {
        fused::encode(cx, passes, false)
    }
}
