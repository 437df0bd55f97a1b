//! The draw bind groups of each (view, batch): per level of detail, the
//! view's list of survivors, the batch's draw records, its material's
//! uniforms and textures. Made in Bevy's `PrepareBindGroups`, after the
//! targets, and again only when what they bind changes.

use super::batches::GpuBatch;
use super::bindings::{self, InstanceBindings};
use super::extract::BatchData;
use super::material::GpuMaterial;
use super::member_counts::{MemberCountPass, MemberCounts};
use super::standard::TEXTURES;
use super::targets::ViewTargets;
use bevy::prelude::*;
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_resource::{BindGroup, BindGroupEntries, BindGroupLayout, PipelineCache};
use bevy::render::renderer::RenderDevice;
use bevy::render::texture::{FallbackImage, GpuImage};
use cull_core::CullTarget;

/// Makes the bind groups of every (view, batch) target whose buffers,
/// material textures or levels changed since they were made. Each texture
/// is bound once it is ready, Bevy's white fallback until then.
pub(crate) fn prepare_bind_groups(
    mut targets: ResMut<ViewTargets>,
    batches: Query<(&GpuBatch, &BatchData, &GpuMaterial)>,
    images: Res<RenderAssets<GpuImage>>,
    fallback: Res<FallbackImage>,
    device: Res<RenderDevice>,
    bindings: Res<InstanceBindings>,
    pipeline_cache: Res<PipelineCache>,
    member_pass: Option<Res<MemberCountPass>>,
) {
    for (&(_, batch_entity), target) in targets.map.iter_mut() {
        let Ok((gpu, batch, material)) = batches.get(batch_entity) else {
            continue;
        };
        let ready = batch
            .material
            .textures
            .map(|id| id.and_then(|id| images.get(id).map(|image| (id, image))));
        // Levels drawn with the batch's levels' uniforms (binding 19);
        // without levels, or where they fell back, the plain one.
        let uses_levels = !target.lod.is_empty();
        let bound = (gpu.buffers_id, ready.map(|t| t.map(|(id, _)| id)), uses_levels);
        if target.bound == Some(bound) {
            continue;
        }
        let layout = pipeline_cache.get_bind_group_layout(&bindings.layout);
        let textures = ready.map(|t| t.map_or(&fallback.d2, |(_, image)| image));
        let lists_at = (target.slot, target.levels());
        let bind_groups = |lists: &CullTarget| {
            instance_bind_groups(
                &device,
                &layout,
                lists,
                lists_at,
                gpu,
                material,
                textures,
                uses_levels,
            )
        };
        target.bind_groups = bind_groups(&target.target);
        if let Some(late) = &mut target.late {
            late.bind_groups = bind_groups(&late.target);
        }
        // A combined batch's counting per member, of each list it draws.
        if let (Some(pass), Some(starts)) = (member_pass.as_deref(), material.member_starts.as_ref()) {
            let layout = pipeline_cache.get_bind_group_layout(&pass.layout);
            let counts =
                |lists: &CullTarget| MemberCounts::new(&device, &layout, (lists, target.slot), starts);
            target.member_counts = Some(counts(&target.target));
            if let Some(late) = &mut target.late {
                late.member_counts = Some(counts(&late.target));
            }
        }
        target.bound = Some(bound);
    }
}

/// The batch's bind groups for a view's lists in `lists` (its early or late
/// target; the view's first list at `slot`), one per level: the level's
/// survivors and its draw's arguments, the batch's draw records, uniforms
/// and material textures (Bevy's fallback for those not ready).
#[allow(clippy::too_many_arguments)]
fn instance_bind_groups(
    device: &RenderDevice,
    layout: &BindGroupLayout,
    lists: &CullTarget,
    (slot, levels): (u32, u32),
    gpu: &GpuBatch,
    material: &GpuMaterial,
    textures: [&GpuImage; TEXTURES],
    uses_levels: bool,
) -> Vec<BindGroup> {
    (0..levels)
        .map(|level| {
            let survivors = wgpu::BufferBinding {
                buffer: lists.output_buffer(),
                offset: lists.view_output_offset(slot + level),
                size: wgpu::BufferSize::new(lists.capacity() as u64 * lists.output_stride()),
            };
            let level_uniform = material.level_binding(uses_levels.then_some(level));
            let bound = BatchBindings {
                survivors,
                level: level_uniform,
                drawn_args: drawn_args(lists, slot + level),
            };
            batch_bind_group(device, layout, (gpu, material), textures, bound)
        })
        .collect()
}

/// A list's arguments, from the buffer's start up to its instance count,
/// which the binding's last word is.
fn drawn_args(lists: &CullTarget, list: u32) -> wgpu::BufferBinding<'_> {
    wgpu::BufferBinding {
        buffer: lists.draw_args(),
        offset: 0,
        size: wgpu::BufferSize::new(lists.draw_args_offset(list) + cull_core::INSTANCE_COUNT_OFFSET + 4),
    }
}

/// What a batch's group binds for one draw: the survivors it reads, its
/// level's uniform and its list's arguments.
struct BatchBindings<'a> {
    survivors: wgpu::BufferBinding<'a>,
    level: wgpu::BufferBinding<'a>,
    drawn_args: wgpu::BufferBinding<'a>,
}

/// The batch's group 2 for one draw.
fn batch_bind_group(
    device: &RenderDevice,
    layout: &BindGroupLayout,
    (gpu, material): (&GpuBatch, &GpuMaterial),
    textures: [&GpuImage; TEXTURES],
    bound: BatchBindings,
) -> BindGroup {
    let [image, normals, metallic_roughness, emissive, occlusion] = textures;
    device.create_bind_group(
        "gpu_cull_instances",
        layout,
        &BindGroupEntries::with_indices((
            (bindings::MESH, material.mesh.as_entire_binding()),
            (bindings::INSTANCES, gpu.draw_data.as_entire_binding()),
            (
                bindings::SURVIVORS,
                wgpu::BindingResource::Buffer(bound.survivors),
            ),
            (bindings::MATERIAL, material.buffer.as_entire_binding()),
            (bindings::BASE_COLOR_TEXTURE, &image.texture_view),
            (bindings::BASE_COLOR_SAMPLER, &image.sampler),
            (bindings::NORMAL_MAP_TEXTURE, &normals.texture_view),
            (
                bindings::METALLIC_ROUGHNESS_TEXTURE,
                &metallic_roughness.texture_view,
            ),
            (bindings::EMISSIVE_TEXTURE, &emissive.texture_view),
            (bindings::OCCLUSION_TEXTURE, &occlusion.texture_view),
            (bindings::LEVEL, wgpu::BindingResource::Buffer(bound.level)),
            (
                bindings::PREVIOUS_INSTANCES,
                gpu.previous_records().as_entire_binding(),
            ),
            (
                bindings::DRAWN_ARGS,
                wgpu::BindingResource::Buffer(bound.drawn_args),
            ),
        )),
    )
}

/// The batch's group 2 for its pixel levels' resolve in a view
/// (`super::pixels`): the view's pixel ids in the survivors' place, the
/// resolve's uniform in the level's, the tiles holding the batch's pixels
/// in its list's arguments' (`super::pixel_tiles`); the textures are the
/// material's own (group 3), so Bevy's fallback is bound here.
pub(crate) fn resolve_bind_group(
    device: &RenderDevice,
    layout: &BindGroupLayout,
    tiles: wgpu::BufferBinding<'_>,
    (gpu, material): (&GpuBatch, &GpuMaterial),
    (ids, uniform): (&wgpu::Buffer, &wgpu::Buffer),
    fallback: &GpuImage,
) -> BindGroup {
    let bound = BatchBindings {
        survivors: ids.as_entire_buffer_binding(),
        level: uniform.as_entire_buffer_binding(),
        drawn_args: tiles,
    };
    batch_bind_group(device, layout, (gpu, material), [fallback; TEXTURES], bound)
}
