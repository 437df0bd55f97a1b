//! Subgroup ballot: one bit per vote, ranks by population count.
//! One pass (`shaders/cull/variants/subgroup_ballot.wgsl`); order not preserved.

use super::{ScanKernel, fused};
use crate::kernel::{PassLayout, ShaderModule, shader_module};
use crate::passes::{CompiledPass, EncodeContext};

pub(super) struct SubgroupBallot;

pub(super) static KERNEL: SubgroupBallot = SubgroupBallot;

impl ScanKernel for SubgroupBallot {
    fn entry(&self, _subgroups: bool) -> ShaderModule {
        shader_module!("variants/subgroup_ballot.wgsl")
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
