//! The batch's uniforms next to its instances (group 2): its entry in
//! Bevy's `mesh` array (transforms, flags, material slot), the plugin's
//! material uniform ([`super::standard`]) and each level's `GpuCullLevel`.

use super::extract::BatchData;
use super::merge::{MAX_MEMBERS, MergedBatch, MergedInto};
use super::standard::MaterialUniform;
use bevy::math::{Affine3, Affine3A};
use bevy::pbr::{
    MaterialBindGroupSlot, MeshFlags, MeshTransforms, MeshUniform, PreparedMaterial, RenderMaterialInstances,
};
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::render_resource::encase::StorageBuffer;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::sync_world::MainEntity;
use bytemuck::{Pod, Zeroable};

/// `GpuCullLevel::flags` (`shaders/gpu_cull_instance.wgsl`): the level's
/// mesh turns with the view (`GpuCullLodLevel::facing_camera`).
pub(crate) const LEVEL_FACING_CAMERA: u32 = 1;
/// `GpuCullLevel::flags`: the level cross-fades with its neighbours
/// (`GpuCullLod::with_cross_fade`), dithered.
pub(crate) const LEVEL_CROSS_FADE: u32 = 2;

/// `GpuCullLevel::flags`: the batch's transform is the identity this frame
/// and last, so the vertex stage need not apply it.
pub(crate) const LEVEL_BATCH_IN_WORLD: u32 = 4;

/// `GpuCullLevel`, as `shaders/gpu_cull_instance.wgsl` declares it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct LevelUniform {
    flags: u32,
    /// `GpuCullLod::cross_fade`.
    fade_width: f32,
    /// The finer level's threshold, above which (times 1 + `fade_width`)
    /// this level is gone; `f32::MAX` for the finest.
    upper: f32,
    /// This level's own threshold, toward which it fades out; 0: none.
    lower: f32,
    /// The mesh-space sphere the cull sizes instances by (center, radius).
    bounds: [f32; 4],
    /// The batches drawn in the draw (1 for a batch drawn on its own).
    member_count: u32,
    _padding: [u32; 3],
    /// Each member's first instance in the combined list, ascending, four
    /// to an element (`merge::MAX_MEMBERS` in all).
    member_starts: [[u32; 4]; MAX_MEMBERS / 4],
}

/// What a batch's `GpuCullLevel` uniforms hold, to write them when it
/// changes. The thresholds and bounds only matter to a cross-fade. Built
/// for every batch every frame, so it holds its thresholds inline rather
/// than in an allocation.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LevelParams {
    facing: u32,
    cross_fade: f32,
    /// The first `fading` entries: each level's threshold.
    thresholds: [f32; crate::lod::MAX_LOD_LEVELS],
    /// The levels that cross-fade (0: none do).
    fading: usize,
    bounds: [f32; 4],
    /// [`LEVEL_BATCH_IN_WORLD`].
    in_world: bool,
    /// The first instance of each batch drawn in it (`member_count` of
    /// them; one, at 0, for a batch drawn on its own).
    member_starts: [u32; MAX_MEMBERS],
    member_count: u32,
}

impl LevelParams {
    /// The levels of `data` as culled in `format`. The draw dithers a
    /// cross-fade only where it can size each instance as the cull does:
    /// in the formats that carry the instance's scale and store it in
    /// `f32`. The packed format culls with spheres widened for its
    /// quantization, which the draw cannot know per instance (a dither
    /// from the draw's sizes would leave pixels to neither level), so
    /// there both levels are drawn in full across a fade.
    fn of(data: &BatchData, format: cull_core::InstanceFormat, merged: Option<&MergedBatch>) -> Self {
        let fades = data.cross_fades() && format.carries_scale();
        let bounds = data.bounds;
        let fading = if fades {
            data.lod.len().min(crate::lod::MAX_LOD_LEVELS)
        } else {
            0
        };
        let mut member_starts = [0; MAX_MEMBERS];
        let members = merged.map_or(&[][..], |m| &m.members[..]);
        for (slot, member) in member_starts.iter_mut().zip(members) {
            *slot = member.start;
        }
        let member_count = members.len().clamp(1, MAX_MEMBERS) as u32;
        let mut thresholds = [0.0; crate::lod::MAX_LOD_LEVELS];
        for (slot, (_, t)) in thresholds.iter_mut().zip(&data.lod[..fading]) {
            *slot = *t;
        }
        Self {
            facing: data.lod_facing,
            cross_fade: if fades { data.lod_cross_fade } else { 0.0 },
            thresholds,
            fading,
            bounds: if fades {
                bounds.center.extend(bounds.radius).to_array()
            } else {
                [0.0; 4]
            },
            in_world: data.world_from_local == Affine3A::IDENTITY
                && data.previous_world_from_local == Affine3A::IDENTITY,
            member_starts,
            member_count,
        }
    }

    /// The bytes of every level's `GpuCullLevel`, `stride` apart, and the
    /// draw without levels' last (no level flags).
    fn uniform_bytes(&self, stride: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; (crate::lod::MAX_LOD_LEVELS + 1) * stride as usize];
        let batch_flags = if self.in_world { LEVEL_BATCH_IN_WORLD } else { 0 };
        let mut member_starts = [[0; 4]; MAX_MEMBERS / 4];
        for (k, start) in self.member_starts.iter().enumerate() {
            member_starts[k / 4][k % 4] = *start;
        }
        let batch = LevelUniform {
            flags: batch_flags,
            member_count: self.member_count,
            member_starts,
            ..LevelUniform::zeroed()
        };
        let without_levels = batch;
        let at = crate::lod::MAX_LOD_LEVELS * stride as usize;
        bytes[at..at + size_of::<LevelUniform>()].copy_from_slice(bytemuck::bytes_of(&without_levels));
        for level in 0..crate::lod::MAX_LOD_LEVELS {
            let mut uniform = batch;
            if self.facing & (1 << level) != 0 {
                uniform.flags |= LEVEL_FACING_CAMERA;
            }
            if let Some(&lower) = self.thresholds[..self.fading].get(level) {
                uniform.flags |= LEVEL_CROSS_FADE;
                uniform.fade_width = self.cross_fade;
                uniform.upper = level
                    .checked_sub(1)
                    .map_or(f32::MAX, |finer| self.thresholds[finer]);
                uniform.lower = lower;
                uniform.bounds = self.bounds;
            }
            let at = level * stride as usize;
            bytes[at..at + size_of::<LevelUniform>()].copy_from_slice(bytemuck::bytes_of(&uniform));
        }
        bytes
    }
}

/// A batch's material uniform, and its entry in Bevy's `mesh` array, on the
/// GPU, each written when it changes.
#[derive(Component)]
pub(crate) struct GpuMaterial {
    pub buffer: wgpu::Buffer,
    written: MaterialUniform,
    /// One `GpuCullLevel` uniform per level of detail, `level_stride`
    /// apart (the device's uniform offset alignment), then one for a draw
    /// without levels ([`Self::level_binding`]).
    levels: wgpu::Buffer,
    level_stride: u64,
    /// What the level uniforms hold.
    levels_written: LevelParams,
    /// One `MeshUniform` per batch drawn (group 2, binding 0; a combined
    /// batch's members', in order): what a `Material`'s fragment shader
    /// reads of "its mesh" at `mesh[in.instance_index]`.
    pub mesh: wgpu::Buffer,
    mesh_written: Vec<BatchMesh>,
    /// A combined batch's members' first instances (one `u32` each), for
    /// counting its survivors per member (`super::member_counts`), and
    /// what it holds.
    pub member_starts: Option<wgpu::Buffer>,
    starts_written: Vec<u32>,
}

impl GpuMaterial {
    /// A batch's uniforms and mesh entries on the GPU, written: its
    /// material uniform and levels, its members' `mesh` entries and, for a
    /// combined batch (`starts` not empty), its members' first instances.
    fn new(
        device: &RenderDevice,
        queue: &RenderQueue,
        (uniform, level_params): (MaterialUniform, LevelParams),
        meshes: impl Iterator<Item = BatchMesh> + Clone,
        starts: impl Iterator<Item = u32>,
    ) -> Self {
        let create = |label, bytes: &[u8], usage| {
            let buffer = device.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes.len() as u64,
                usage: usage | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            queue.write_buffer(&buffer, 0, bytes);
            buffer
        };
        let level_stride = LEVEL_UNIFORM_SIZE
            .next_multiple_of(u64::from(device.limits().min_uniform_buffer_offset_alignment));
        let starts_written: Vec<u32> = starts.collect();
        let member_starts = (!starts_written.is_empty()).then(|| {
            create(
                "gpu_cull_member_starts",
                bytemuck::cast_slice(&starts_written),
                wgpu::BufferUsages::STORAGE,
            )
        });
        GpuMaterial {
            buffer: create(
                "gpu_cull_material",
                bytemuck::bytes_of(&uniform),
                wgpu::BufferUsages::UNIFORM,
            ),
            written: uniform,
            mesh: create(
                "gpu_cull_batch_mesh",
                &mesh_array_bytes(meshes.clone()),
                wgpu::BufferUsages::STORAGE,
            ),
            mesh_written: meshes.collect(),
            member_starts,
            starts_written,
            levels: create(
                "gpu_cull_levels",
                &level_params.uniform_bytes(level_stride),
                wgpu::BufferUsages::UNIFORM,
            ),
            level_stride,
            levels_written: level_params,
        }
    }

    /// The `GpuCullLevel` (group 2, binding 19) of a draw's level `level`, or
    /// of a draw without levels of detail (`None`: the batch's `Mesh3d`,
    /// turned by each instance).
    pub fn level_binding(&self, level: Option<u32>) -> wgpu::BufferBinding<'_> {
        let slot = level.map_or(crate::lod::MAX_LOD_LEVELS as u64, u64::from);
        wgpu::BufferBinding {
            buffer: &self.levels,
            offset: slot * self.level_stride,
            size: wgpu::BufferSize::new(LEVEL_UNIFORM_SIZE),
        }
    }
}

/// `GpuCullLevel`'s size.
const LEVEL_UNIFORM_SIZE: u64 = size_of::<LevelUniform>() as u64;

/// What the batch's `MeshUniform` holds: the batch entity's transforms
/// (this frame's and last frame's), which the instance fetch applies after
/// each instance's own, and what a fragment shader may read: the flags
/// (shadow receiver, the transform's handedness) and the material's slot
/// in its bind group.
#[derive(Clone, Copy, Debug, PartialEq)]
struct BatchMesh {
    world_from_local: Affine3A,
    previous_world_from_local: Affine3A,
    /// The transform mirrors (`LocalFrame::mirrors`, in `f64`: the shader's
    /// winding agrees with the draws the main pass queues).
    mirrors: bool,
    shadow_receiver: bool,
    material_slot: u32,
}

impl BatchMesh {
    /// The batch as one of Bevy's meshes, at its entity's transform, with
    /// no LOD, lightmap, skin or morph targets.
    fn uniform(self) -> MeshUniform {
        let mut flags = MeshFlags::LOD_INDEX_MASK;
        if !self.mirrors {
            flags |= MeshFlags::SIGN_DETERMINANT_MODEL_3X3;
        }
        if self.shadow_receiver {
            flags |= MeshFlags::SHADOW_RECEIVER;
        }
        let transforms = MeshTransforms {
            world_from_local: Affine3::from(self.world_from_local),
            previous_world_from_local: Affine3::from(self.previous_world_from_local),
            flags: flags.bits(),
        };
        MeshUniform::new(
            &transforms,
            0,
            MaterialBindGroupSlot(self.material_slot),
            None,
            None,
            None,
            None,
        )
    }
}

/// The `mesh` array of the batches drawn in one draw, as bytes.
fn mesh_array_bytes(meshes: impl Iterator<Item = BatchMesh>) -> Vec<u8> {
    let uniforms: Vec<MeshUniform> = meshes.map(BatchMesh::uniform).collect();
    let mut bytes = StorageBuffer::new(Vec::new());
    bytes.write(&uniforms).expect("MeshUniforms encode into a Vec");
    bytes.into_inner()
}

/// Creates each batch's material uniform and mesh entry, and writes them
/// when they change. The material Bevy prepared for the batch gives its
/// bind group slot (bindless materials share a bind group; the fragment
/// shader finds its own by the slot).
pub(crate) fn prepare_materials(
    mut commands: Commands,
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    material_instances: Res<RenderMaterialInstances>,
    materials: Res<ErasedRenderAssets<PreparedMaterial>>,
    // Not the batches drawn in a combined batch, whose own are unused.
    mut batches: Query<
        (
            Entity,
            &MainEntity,
            &BatchData,
            Option<&MergedBatch>,
            Option<&mut GpuMaterial>,
        ),
        Without<MergedInto>,
    >,
    settings: Option<Res<crate::settings::GpuCullSettings>>,
) {
    // The culler's format (it is built from the settings).
    let format = settings.map_or(cull_core::InstanceFormat::PosQuat, |s| s.format);
    for (entity, main_entity, data, merged, gpu) in &mut batches {
        // A combined batch's last frame draws it as it was: a member that
        // left may have a material of another bind group by now.
        if merged.is_some_and(MergedBatch::retiring) {
            continue;
        }
        let level_params = LevelParams::of(data, format, merged);
        let uniform = data.material.uniform;
        // Each member's entry: the batch's transform and flags, the
        // member's material.
        let members = merged
            .into_iter()
            .flat_map(|m| m.members.iter().map(|member| member.main));
        let mains = members.chain(merged.is_none().then_some(*main_entity));
        let meshes = mains.map(|main| BatchMesh {
            world_from_local: data.world_from_local,
            previous_world_from_local: data.previous_world_from_local,
            mirrors: data.frame.mirrors(),
            shadow_receiver: data.shadow_receiver,
            material_slot: materials
                .get(super::custom_material::batch_material(&material_instances, &main))
                .map_or(0, |material| material.binding.slot.into()),
        });
        // A combined batch's members' first instances.
        let starts = merged
            .into_iter()
            .flat_map(|m| m.members.iter().map(|member| member.start));
        let Some(mut gpu) = gpu else {
            let new = GpuMaterial::new(&device, &queue, (uniform, level_params), meshes, starts);
            commands.entity(entity).insert(new);
            continue;
        };
        if gpu.written != uniform {
            queue.write_buffer(&gpu.buffer, 0, bytemuck::bytes_of(&uniform));
            gpu.written = uniform;
        }
        if !gpu.mesh_written.iter().copied().eq(meshes.clone()) {
            queue.write_buffer(&gpu.mesh, 0, &mesh_array_bytes(meshes.clone()));
            gpu.mesh_written = meshes.collect();
        }
        if gpu.levels_written != level_params {
            queue.write_buffer(&gpu.levels, 0, &level_params.uniform_bytes(gpu.level_stride));
            gpu.levels_written = level_params;
        }
        // They move where a member's length changed.
        if gpu.member_starts.is_some() && !gpu.starts_written.iter().copied().eq(starts.clone()) {
            gpu.starts_written = starts.collect();
            if let Some(buffer) = &gpu.member_starts {
                queue.write_buffer(buffer, 0, bytemuck::cast_slice(&gpu.starts_written));
            }
        }
    }
}
