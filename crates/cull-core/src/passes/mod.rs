//! The GPU passes of each variant: pipelines, bind group layouts and the
//! encoding of one cull. The single-pass variants share [`fused`]; the
//! baseline has its own passes in [`hillis_steele`].

mod fused;
mod hillis_steele;

use crate::buffers::{CullInput, CullTarget};
use crate::culler::{Chunk, Culler, GpuParams};
use crate::shader::{self, FIRST_OUTPUT_BINDING, ModuleShape};
use crate::timing::Recorder;
use crate::{CullError, ScanVariant};

/// The compiled passes for one variant, format, output kind and window count.
pub(crate) struct Pipelines {
    windows: u32,
    passes: Passes,
}

enum Passes {
    Fused(fused::FusedPass),
    HillisSteele(hillis_steele::HillisSteelePasses),
}

impl Pipelines {
    pub fn new(device: &wgpu::Device, shape: ModuleShape) -> Result<Self, CullError> {
        let ModuleShape { variant, windows, .. } = shape;
        let source = shader::compose(shape).ok_or(CullError::VariantNotCompiled {
            variant,
            feature: variant.feature(),
        })?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(variant.name()),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let passes = match variant {
            ScanVariant::HillisSteele => {
                Passes::HillisSteele(hillis_steele::HillisSteelePasses::new(device, &module, windows)?)
            }
            ScanVariant::Ordered => Passes::Fused(fused::FusedPass::new(device, &module, windows, true)?),
            _ => Passes::Fused(fused::FusedPass::new(device, &module, windows, false)?),
        };
        Ok(Self { windows, passes })
    }

    pub fn windows(&self) -> u32 {
        self.windows
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
        match &self.passes {
            Passes::Fused(p) => p.encode(culler, encoder, input, target, chunks, recorder),
            Passes::HillisSteele(p) => p.encode(culler, encoder, input, target, chunks, recorder),
        }
    }
}

/// Binding kinds of the passes' bind group layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Params,
    Read,
    ReadWrite,
}

/// A pass's bind group layout; a typed error, before wgpu sees it, when the
/// pass needs more storage buffers than the device binds per stage (WebGPU's
/// default is 8; a batch past one binding needs more output windows).
fn layout(
    device: &wgpu::Device,
    label: &str,
    slots: &[(u32, Slot)],
) -> Result<wgpu::BindGroupLayout, CullError> {
    let storage = slots.iter().filter(|(_, s)| !matches!(s, Slot::Params)).count() as u32;
    let limit = device.limits().max_storage_buffers_per_shader_stage;
    if storage > limit {
        return Err(CullError::TooManyStorageBuffers {
            pass: label.to_owned(),
            needed: storage,
            limit,
        });
    }
    let entries: Vec<_> = slots
        .iter()
        .map(|&(binding, slot)| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: match slot {
                Slot::Params => wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: wgpu::BufferSize::new(size_of::<GpuParams>() as u64),
                },
                Slot::Read | Slot::ReadWrite => wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage {
                        read_only: matches!(slot, Slot::Read),
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
            },
            count: None,
        })
        .collect();
    Ok(device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(label),
        entries: &entries,
    }))
}

fn pipeline(
    device: &wgpu::Device,
    module: &wgpu::ShaderModule,
    layout: &wgpu::BindGroupLayout,
    entry_point: &str,
) -> wgpu::ComputePipeline {
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(entry_point),
        bind_group_layouts: &[Some(layout)],
        immediate_size: 0,
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(entry_point),
        layout: Some(&pipeline_layout),
        module,
        entry_point: Some(entry_point),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// Layout slots of the output windows (bindings 3, 4, ...).
fn output_slots(windows: u32) -> impl Iterator<Item = (u32, Slot)> {
    (0..windows).map(|w| (FIRST_OUTPUT_BINDING + w, Slot::ReadWrite))
}

/// The binding of a byte range of a buffer.
pub(crate) fn bind_window(buffer: &wgpu::Buffer, offset: u64, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer,
        offset,
        size: wgpu::BufferSize::new(size),
    })
}

/// Bind group entries shared by the passes that read instances and write
/// survivors: params (0), the chunk's instances (1), draw args (2), outputs (3..).
fn chunk_entries<'a>(
    input: &'a CullInput,
    target: &'a CullTarget,
    chunk: &Chunk,
    with_outputs: bool,
) -> Vec<wgpu::BindGroupEntry<'a>> {
    let stride = input.format().stride();
    let mut entries = vec![
        wgpu::BindGroupEntry {
            binding: 0,
            resource: bind_window(target.params_buffer(), 0, size_of::<GpuParams>() as u64),
        },
        wgpu::BindGroupEntry {
            binding: 1,
            resource: bind_window(
                input.buffer(),
                chunk.start as u64 * stride,
                chunk.len as u64 * stride,
            ),
        },
    ];
    if with_outputs {
        entries.push(wgpu::BindGroupEntry {
            binding: 2,
            resource: target.draw_args().as_entire_binding(),
        });
        entries.extend(
            target
                .output_windows()
                .map(|(w, offset, size)| wgpu::BindGroupEntry {
                    binding: FIRST_OUTPUT_BINDING + w,
                    resource: bind_window(target.output_buffer(), offset, size),
                }),
        );
    }
    entries
}

/// Each pass of a variant: its entry point and the bindings its layout
/// declares (what the bind groups provide).
#[cfg(test)]
fn passes_of(variant: ScanVariant, windows: u32) -> Vec<(&'static str, Vec<(u32, Slot)>)> {
    match variant {
        ScanVariant::HillisSteele => hillis_steele::pass_slots(windows).into(),
        v => vec![(
            fused::ENTRY_POINT,
            fused::slots(windows, v == ScanVariant::Ordered),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shader::ModuleShape;
    use std::collections::BTreeMap;

    /// The bindings each pipeline declares in Rust match what naga reflects
    /// from its WGSL: every global an entry point uses is in its layout,
    /// with the same kind (uniform, read-only or read-write storage), and no
    /// layout entry names a binding the module declares differently. A
    /// mismatch would otherwise surface as a wgpu validation error on a GPU.
    #[test]
    fn rust_layouts_match_the_wgsl_bindings() {
        let mut checked = 0;
        for shape in crate::shader::every_shape() {
            let ModuleShape { variant, windows, .. } = shape;
            let (_, module, info) = crate::shader::validated(shape);
            // Every declared binding of the module, by kind.
            let declared: BTreeMap<u32, Slot> = module
                .global_variables
                .iter()
                .filter_map(|(_, g)| {
                    let binding = g.binding.as_ref()?;
                    assert_eq!(binding.group, 0, "{variant:?}: one bind group");
                    let slot = match g.space {
                        naga::AddressSpace::Uniform => Slot::Params,
                        naga::AddressSpace::Storage { access }
                            if access.contains(naga::StorageAccess::STORE) =>
                        {
                            Slot::ReadWrite
                        }
                        naga::AddressSpace::Storage { .. } => Slot::Read,
                        other => panic!("{variant:?}: binding in {other:?}"),
                    };
                    Some((binding.binding, slot))
                })
                .collect();
            for (entry, slots) in passes_of(variant, windows) {
                let what = format!("{shape:?} {entry}");
                let index = module
                    .entry_points
                    .iter()
                    .position(|e| e.name == entry)
                    .unwrap_or_else(|| panic!("{what}: no such entry point"));
                let ep = info.get_entry_point(index);
                let layout: BTreeMap<u32, Slot> = slots.iter().copied().collect();
                for (handle, g) in module.global_variables.iter() {
                    let Some(binding) = &g.binding else { continue };
                    if ep[handle].is_empty() {
                        continue;
                    }
                    assert_eq!(
                        layout.get(&binding.binding),
                        declared.get(&binding.binding),
                        "{what}: binding {} ({:?}) used by the shader",
                        binding.binding,
                        g.name
                    );
                }
                for (binding, slot) in &layout {
                    if let Some(wgsl) = declared.get(binding) {
                        assert_eq!(wgsl, slot, "{what}: binding {binding}");
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 0);
    }
}
