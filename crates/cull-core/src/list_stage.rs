//! What the stages that read a cull's lists after it share (the depth
//! sort, the pixel splat): their compute pipelines, composed from an entry
//! module of the crate's library; dispatches wrapped into two dimensions;
//! and the checks of a list they are given.

use crate::buffers::CullTarget;
use crate::kernel::ShaderModule;
use crate::{CullError, CullInput};

/// A list stage's pipelines, one per entry point, over one bind group
/// layout.
pub(crate) struct ListStage {
    pub(crate) device: wgpu::Device,
    pub(crate) layout: wgpu::BindGroupLayout,
    pub(crate) pipelines: Vec<wgpu::ComputePipeline>,
    max_groups: u32,
}

impl ListStage {
    /// Compiles `module`'s `entry_points`. `max_workgroups_per_dimension`
    /// caps dispatches below the device's limit, for tests.
    pub(crate) fn new(
        device: &wgpu::Device,
        (module, entry_points): (ShaderModule, &[&str]),
        entries: &[wgpu::BindGroupLayoutEntry],
        max_workgroups_per_dimension: Option<u32>,
    ) -> Self {
        let label = Some(module.path);
        let wgsl =
            crate::shader::compose_entry(module).unwrap_or_else(|e| panic!("the crate's WGSL composes: {e}"));
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label,
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label, entries });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipelines = entry_points
            .iter()
            .map(|entry| {
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(entry),
                    layout: Some(&pipeline_layout),
                    module: &shader,
                    entry_point: Some(entry),
                    compilation_options: Default::default(),
                    cache: None,
                })
            })
            .collect();
        let max_groups = max_workgroups_per_dimension
            .unwrap_or(u32::MAX)
            .min(device.limits().max_compute_workgroups_per_dimension)
            .max(1);
        Self {
            device: device.clone(),
            layout,
            pipelines,
            max_groups,
        }
    }

    /// Refuses list `list` of `target`, culled from `input`, where it is
    /// not a list of indices, of another format than the input's, past the
    /// target's views, or where the input (bound whole) or the list is past
    /// one storage binding.
    pub(crate) fn check(&self, input: &CullInput, target: &CullTarget, list: u32) -> Result<(), CullError> {
        if !target.holds_indices() {
            return Err(CullError::InvalidParameter(
                "a stage after the cull reads survivor indices: a cull of OutputKind::Indices",
            ));
        }
        if input.format() != target.format() {
            return Err(CullError::FormatMismatch {
                input: input.format(),
                culler: target.format(),
            });
        }
        let binding = self.device.limits().max_storage_buffer_binding_size;
        if target.capacity() as u64 * 4 > binding {
            return Err(CullError::InvalidParameter(
                "a stage after the cull binds a list whole: it must fit one storage binding",
            ));
        }
        if input.buffer().size() > binding {
            return Err(CullError::InvalidParameter(
                "a stage after the cull binds the input whole: it must fit one storage binding",
            ));
        }
        if list >= target.views() {
            return Err(CullError::InvalidParameter("the list is past the target's views"));
        }
        Ok(())
    }

    /// Workgroup counts for `groups` (at least one): `(x, y)` with `x` at
    /// most the cap; refused where `y` would pass the device's limit too.
    pub(crate) fn dims(&self, groups: u32) -> Result<(u32, u32), CullError> {
        let groups = groups.max(1);
        if groups <= self.max_groups {
            return Ok((groups, 1));
        }
        let y = groups.div_ceil(self.max_groups);
        if y > self.device.limits().max_compute_workgroups_per_dimension {
            return Err(CullError::InvalidParameter(
                "a stage's dispatch needs more workgroups than two dimensions of the device hold",
            ));
        }
        Ok((self.max_groups, y))
    }
}

/// A list stage's binding, in its bindings' order: a uniform of at least
/// the bytes given, bound at a dynamic offset, or a storage buffer.
#[derive(Clone, Copy)]
pub(crate) enum StageBinding {
    Uniform(u64),
    Storage { read_only: bool },
}

/// The layout entries of `bindings`, numbered from 0, for compute.
pub(crate) fn layout_entries(bindings: &[StageBinding]) -> Vec<wgpu::BindGroupLayoutEntry> {
    let ty = |binding: &StageBinding| match *binding {
        StageBinding::Uniform(bytes) => wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: wgpu::BufferSize::new(bytes),
        },
        StageBinding::Storage { read_only } => wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
    };
    (0..)
        .zip(bindings)
        .map(|(binding, b)| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: ty(b),
            count: None,
        })
        .collect()
}

/// The word of a target's draw arguments holding list `list`'s length.
pub(crate) fn count_word(list: u32) -> u32 {
    (crate::buffers::DRAW_ARGS_SIZE / 4) as u32 * list + crate::INSTANCE_COUNT_OFFSET as u32 / 4
}

#[cfg(test)]
mod tests {
    /// Each stage's entry module composes and validates, with its entry
    /// points.
    #[test]
    fn the_stages_compose_and_validate() {
        let stages = [
            (crate::sort::SORT_MODULE, &crate::sort::ENTRY_POINTS[..]),
            (crate::splat::SPLAT_MODULE, &crate::splat::ENTRY_POINTS[..]),
        ];
        for (module, entry_points) in stages {
            let wgsl = crate::shader::compose_entry(module).unwrap();
            for entry in entry_points {
                assert!(
                    wgsl.contains(&format!("fn {entry}(")),
                    "{}: {entry} missing",
                    module.path
                );
            }
        }
    }
}
