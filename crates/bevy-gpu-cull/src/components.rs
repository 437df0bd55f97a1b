//! The batch component users put on an entity next to its `Mesh3d`.

use bevy::camera::primitives::MeshAabb;
use bevy::camera::visibility::NoFrustumCulling;
use bevy::prelude::*;
use bevy::render::sync_world::SyncToRenderWorld;
use bytemuck::{Pod, Zeroable};

/// One instance: world-space position, rotation, uniform scale, base color.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct CulledInstance {
    /// World-space translation.
    pub position: Vec3,
    /// Uniform scale.
    pub scale: f32,
    /// Rotation (unit quaternion).
    pub rotation: Quat,
    /// Base color, linear.
    pub color: [f32; 4],
}

impl CulledInstance {
    /// An unrotated, unit-scale instance.
    pub fn new(position: Vec3, color: LinearRgba) -> Self {
        Self {
            position,
            scale: 1.0,
            rotation: Quat::IDENTITY,
            color: color.to_f32_array(),
        }
    }
}

/// A batch of instances of the entity's `Mesh3d`, culled per camera on the
/// GPU and drawn with one indirect instanced draw per camera. Positions are in
/// world space (the entity's own transform is not applied). Replacing or
/// editing the list re-uploads it on the next frame; an unchanged list costs
/// no CPU work per frame.
///
/// Bevy's own frustum culling of the entity is turned off
/// ([`NoFrustumCulling`]): the batch's instances are culled one by one instead.
#[derive(Component, Clone, Debug, Default)]
#[require(Transform, Visibility, NoFrustumCulling, SyncToRenderWorld)]
pub struct GpuCulledInstances {
    /// The instances.
    pub instances: Vec<CulledInstance>,
}

impl GpuCulledInstances {
    /// A batch of these instances.
    pub fn new(instances: Vec<CulledInstance>) -> Self {
        Self { instances }
    }

    /// The indices of the instances a camera with this `clip_from_world`
    /// keeps, computed on the CPU by `cull-core`'s reference: what the GPU
    /// must produce, for tests and for checking a scene.
    pub fn visible_on_cpu(
        &self,
        bounds: GpuCullBounds,
        clip_from_world: Mat4,
    ) -> Result<Vec<u32>, cull_core::CullError> {
        let instances: Vec<cull_core::Instance> = self
            .instances
            .iter()
            .map(|i| cull_core::Instance {
                position: i.position,
                rotation: i.rotation,
                scale: i.scale,
            })
            .collect();
        let format = cull_core::InstanceFormat::PosQuat;
        let frustum = cull_core::Frustum::from_clip_from_world(clip_from_world, None)?;
        let sphere = cull_core::Sphere::new(bounds.center, bounds.radius);
        Ok(cull_core::cpu::cull(
            format,
            &format.encode(&instances),
            sphere,
            &frustum,
        ))
    }
}

/// The batch mesh's bounding sphere in mesh space, which each instance's
/// transform moves into the world for culling. Computed from the mesh (the
/// sphere around its bounding box) when the entity has none; insert your own
/// to cull against a different volume.
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub struct GpuCullBounds {
    /// Center in mesh space.
    pub center: Vec3,
    /// Radius.
    pub radius: f32,
}

/// Fills in [`GpuCullBounds`] for batches whose mesh has loaded.
pub(crate) fn compute_bounds(
    mut commands: Commands,
    meshes: Res<Assets<Mesh>>,
    batches: Query<(Entity, Ref<Mesh3d>, Option<&GpuCullBounds>), With<GpuCulledInstances>>,
    mut computed: Local<bevy::platform::collections::HashSet<Entity>>,
) {
    for (entity, mesh, bounds) in &batches {
        // Recompute when the mesh handle changes, unless the user set the bounds.
        let ours = computed.contains(&entity);
        if bounds.is_some() && !(ours && mesh.is_changed()) {
            continue;
        }
        let Some(aabb) = meshes.get(&mesh.0).and_then(|m| m.compute_aabb()) else {
            continue;
        };
        let half = Vec3::from(aabb.half_extents);
        commands.entity(entity).insert(GpuCullBounds {
            center: Vec3::from(aabb.center),
            radius: half.length(),
        });
        computed.insert(entity);
    }
}

/// On a camera: cull against this `clip_from_world` instead of the camera's
/// own, e.g. to freeze culling and fly away to see what was culled.
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub struct CullingFrustumOverride {
    /// The view-projection to cull with (wgpu clip space).
    pub clip_from_world: Mat4,
}

impl bevy::render::sync_component::SyncComponent for CullingFrustumOverride {
    type Target = Self;
}

impl bevy::render::extract_component::ExtractComponent for CullingFrustumOverride {
    type QueryData = &'static Self;
    type QueryFilter = ();
    type Out = Self;

    fn extract_component(item: bevy::ecs::query::QueryItem<'_, '_, Self::QueryData>) -> Option<Self> {
        Some(*item)
    }
}
