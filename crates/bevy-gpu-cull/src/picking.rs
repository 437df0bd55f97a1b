//! Picking the instances of a batch: a `bevy_picking` backend
//! ([`GpuCullPickingPlugin`]) so that `Pointer<Over>`, `Pointer<Click>` and
//! the rest fire on a batch entity, the hit carrying the instance
//! ([`GpuCullHit`]), and a system parameter that casts rays into batches
//! ([`GpuCullRayCast`]). Each hit is exact: the ray against the batch mesh's
//! triangles (Bevy's `ray_mesh_intersection`) under the instance's
//! transform, after a bounding-volume hierarchy over the instances' spheres
//! has found the candidates. The CPU's copy of the instances is what is
//! picked: batches written on the GPU are not pickable.

use crate::components::{GpuCullBounds, GpuCulledInstances};
use crate::gpu_instances::GpuCullComputeWrites;
use bevy::camera::visibility::RenderLayers;
use bevy::ecs::change_detection::Tick;
use bevy::ecs::system::SystemParam;
use bevy::math::{Affine3A, Ray3d};
use bevy::mesh::{Indices, VertexAttributeValues};
use bevy::picking::backend::prelude::*;
use bevy::picking::mesh_picking::ray_cast::{Backfaces, RayMeshHit, ray_mesh_intersection};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use std::sync::Arc;

/// Adds the batches' picking backend: with Bevy's picking plugins (in
/// `DefaultPlugins` with Bevy's `bevy_picking` feature), pointer events
/// fire on batch entities, as `MeshPickingPlugin` makes them fire on
/// meshes. A batch is picked unless its `Pickable` says it is not
/// hoverable, it is hidden, or it shares no `RenderLayers` with the camera.
#[derive(Clone, Default)]
pub struct GpuCullPickingPlugin;

impl Plugin for GpuCullPickingPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(PreUpdate, update_hits.in_set(PickingSystems::Backend));
    }
}

/// What a batch's hit carries (`HitData::extra_as::<GpuCullHit>()` in a
/// pointer event's `hit`): the instance hit, its index in the batch's list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Reflect)]
pub struct GpuCullHit {
    /// The instance's index in [`GpuCulledInstances::instances`].
    pub instance: u32,
}

/// One batch's hit by a ray ([`GpuCullRayCast::cast_ray`]).
#[derive(Clone, Debug)]
pub struct GpuCullRayHit {
    /// The instance hit.
    pub instance: u32,
    /// Where, with the normal and the distance along the ray, in world space.
    pub hit: RayMeshHit,
}

/// A bounding-volume hierarchy over a batch's instance spheres, in the
/// batch's space, rebuilt when the list or its bounds change.
struct BatchIndex {
    changed: Tick,
    bounds: GpuCullBounds,
    nodes: Vec<Node>,
    /// Instance indices, each leaf a run of them.
    order: Vec<u32>,
    spheres: Vec<Vec4>,
}

/// A node: its box, and either its children (`first` is the left one's
/// index, the right one follows) or its instances (`order[first..first + count]`).
#[derive(Clone, Copy)]
struct Node {
    min: Vec3,
    max: Vec3,
    first: u32,
    count: u32,
}

/// Instances per leaf.
const LEAF: usize = 8;

impl BatchIndex {
    fn build(batch: &GpuCulledInstances, bounds: GpuCullBounds, changed: Tick) -> Self {
        // The spheres the plugin's cull tests (position + quaternion, as
        // drawn); instances the draw hides have none.
        let spheres: Vec<Vec4> = batch
            .world_spheres(bounds, cull_core::InstanceFormat::PosQuat)
            .map(|s| {
                s.iter()
                    .map(|s| s.map_or(Vec4::NAN, |s| s.center.extend(s.radius)))
                    .collect()
            })
            .unwrap_or_default();
        let mut order: Vec<u32> = (0..spheres.len() as u32)
            .filter(|&i| spheres[i as usize].is_finite())
            .collect();
        let mut nodes = Vec::new();
        if !order.is_empty() {
            nodes.push(EMPTY);
            let len = order.len();
            build_node(&mut nodes, &mut order, &spheres, (0, len), 0);
        }
        Self {
            changed,
            bounds,
            nodes,
            order,
            spheres,
        }
    }

    /// The instances whose spheres the ray (in the batch's space, its
    /// direction not normalized, so that its parameter is the world's
    /// distance) enters nearer than `limit`, nearest box first, passed to
    /// `test`, which returns the distance of a hit to shrink the limit.
    fn candidates(
        &self,
        origin: Vec3,
        direction: Vec3,
        mut limit: f32,
        mut test: impl FnMut(u32) -> Option<f32>,
    ) {
        let inverse = direction.recip();
        let mut stack = vec![0usize];
        while let Some(n) = stack.pop() {
            let Some(node) = self.nodes.get(n) else {
                continue;
            };
            if slab(node, origin, inverse).is_none_or(|t| t > limit) {
                continue;
            }
            if node.count == 0 {
                let (l, r) = (node.first as usize, node.first as usize + 1);
                let near = |k: usize| slab(&self.nodes[k], origin, inverse).unwrap_or(f32::MAX);
                // The nearer child is popped first.
                if near(l) <= near(r) {
                    stack.extend([r, l]);
                } else {
                    stack.extend([l, r]);
                }
                continue;
            }
            for &i in &self.order[node.first as usize..(node.first + node.count) as usize] {
                let s = self.spheres[i as usize];
                if sphere_entry(s, origin, direction).is_some_and(|t| t <= limit)
                    && let Some(t) = test(i)
                {
                    limit = limit.min(t);
                }
            }
        }
    }
}

/// Builds the node of `order[start..end]` into `nodes[slot]`, its
/// children (if any) into two slots appended side by side.
fn build_node(
    nodes: &mut Vec<Node>,
    order: &mut [u32],
    spheres: &[Vec4],
    (start, end): (usize, usize),
    slot: usize,
) {
    let (mut min, mut max) = (Vec3::splat(f32::MAX), Vec3::splat(f32::MIN));
    for &i in &order[start..end] {
        let s = spheres[i as usize];
        min = min.min(s.truncate() - s.w);
        max = max.max(s.truncate() + s.w);
    }
    nodes[slot] = Node {
        min,
        max,
        first: start as u32,
        count: (end - start) as u32,
    };
    if end - start <= LEAF {
        return;
    }
    // Split at the median center along the longest axis of the box.
    let axis = (max - min).max_position();
    let mid = (start + end) / 2;
    order[start..end].select_nth_unstable_by(mid - start, |&a, &b| {
        spheres[a as usize][axis].total_cmp(&spheres[b as usize][axis])
    });
    let left = nodes.len();
    nodes[slot].first = left as u32;
    nodes[slot].count = 0;
    nodes.extend([EMPTY; 2]);
    build_node(nodes, order, spheres, (start, mid), left);
    build_node(nodes, order, spheres, (mid, end), left + 1);
}

const EMPTY: Node = Node {
    min: Vec3::ZERO,
    max: Vec3::ZERO,
    first: 0,
    count: 0,
};

/// Where a ray enters a box (0 when it starts inside), if it does.
fn slab(node: &Node, origin: Vec3, inverse: Vec3) -> Option<f32> {
    let a = (node.min - origin) * inverse;
    let b = (node.max - origin) * inverse;
    let near = a.min(b).max_element().max(0.0);
    let far = a.max(b).min_element();
    (near <= far).then_some(near)
}

/// Where a ray enters a sphere (0 when it starts inside), if it does.
fn sphere_entry(s: Vec4, origin: Vec3, direction: Vec3) -> Option<f32> {
    let to = origin - s.truncate();
    let a = direction.length_squared();
    let b = to.dot(direction);
    let c = to.length_squared() - s.w * s.w;
    let disc = b * b - a * c;
    if disc < 0.0 {
        return None;
    }
    let far = (-b + disc.sqrt()) / a;
    (far >= 0.0).then(|| ((-b - disc.sqrt()) / a).max(0.0))
}

/// Casts rays into batches: the nearest instance each batch's mesh shows
/// along the ray, exactly (its triangles), found among the instances
/// whose spheres the ray crosses.
#[derive(SystemParam)]
pub struct GpuCullRayCast<'w, 's> {
    batches: Query<
        'w,
        's,
        (
            Entity,
            Ref<'static, GpuCulledInstances>,
            &'static GpuCullBounds,
            &'static Mesh3d,
            &'static GlobalTransform,
            &'static InheritedVisibility,
        ),
        Without<GpuCullComputeWrites>,
    >,
    meshes: Res<'w, Assets<Mesh>>,
    indices: Local<'s, HashMap<Entity, BatchIndex>>,
}

impl GpuCullRayCast<'_, '_> {
    /// Every visible batch `filter` accepts that the ray hits, with its
    /// nearest instance, nearest batch first.
    pub fn cast_ray(&mut self, ray: Ray3d, filter: impl Fn(Entity) -> bool) -> Vec<(Entity, GpuCullRayHit)> {
        let mut hits = Vec::new();
        for (entity, batch, bounds, mesh, transform, visibility) in &self.batches {
            if !visibility.get() || !filter(entity) {
                continue;
            }
            let Some(mesh) = self.meshes.get(&mesh.0) else {
                continue;
            };
            let changed = batch.last_changed();
            let index = self
                .indices
                .entry(entity)
                .and_modify(|index| {
                    if index.changed != changed || index.bounds != *bounds {
                        *index = BatchIndex::build(&batch, *bounds, changed);
                    }
                })
                .or_insert_with(|| BatchIndex::build(&batch, *bounds, changed));
            let batch_affine = transform.affine();
            if let Some(hit) = nearest_instance(index, &batch, batch_affine, mesh, ray) {
                hits.push((entity, hit));
            }
        }
        let batches = &self.batches;
        self.indices.retain(|e, _| batches.contains(*e));
        hits.sort_by(|a, b| a.1.hit.distance.total_cmp(&b.1.hit.distance));
        hits
    }
}

/// The nearest instance of a batch the ray hits, exactly.
fn nearest_instance(
    index: &BatchIndex,
    batch: &GpuCulledInstances,
    batch_affine: Affine3A,
    mesh: &Mesh,
    ray: Ray3d,
) -> Option<GpuCullRayHit> {
    let local = batch_affine.inverse();
    let origin = local.transform_point3(ray.origin);
    let direction = local.transform_vector3(*ray.direction);
    let mut best: Option<GpuCullRayHit> = None;
    index.candidates(origin, direction, f32::MAX, |i| {
        let instance = &batch.instances()[i as usize];
        let rotation = instance.rotation.normalize();
        let transform = batch_affine
            * Affine3A::from_scale_rotation_translation(
                Vec3::splat(instance.scale),
                rotation,
                instance.position,
            );
        let hit = mesh_hit(mesh, &transform, ray)?;
        let distance = hit.distance;
        if best.as_ref().is_none_or(|b| distance < b.hit.distance) {
            best = Some(GpuCullRayHit { instance: i, hit });
        }
        Some(distance)
    });
    best
}

/// The ray against a mesh's triangles under `transform` (Bevy's mesh
/// picking intersection), back faces culled as the draw culls them. The
/// ray is tested in the mesh's space, where a mirror image's triangles face
/// as the mesh's do (the draw turns its front face around to match).
fn mesh_hit(mesh: &Mesh, transform: &Affine3A, ray: Ray3d) -> Option<RayMeshHit> {
    if mesh.primitive_topology() != bevy::mesh::PrimitiveTopology::TriangleList {
        return None;
    }
    let positions = mesh.attribute(Mesh::ATTRIBUTE_POSITION)?.as_float3()?;
    let normals = mesh.attribute(Mesh::ATTRIBUTE_NORMAL).and_then(|n| n.as_float3());
    let uvs = match mesh.attribute(Mesh::ATTRIBUTE_UV_0) {
        Some(VertexAttributeValues::Float32x2(uvs)) => Some(uvs.as_slice()),
        _ => None,
    };
    let backfaces = Backfaces::Cull;
    match mesh.indices() {
        Some(Indices::U16(i)) => {
            ray_mesh_intersection(ray, transform, positions, normals, Some(i), uvs, backfaces)
        }
        Some(Indices::U32(i)) => {
            ray_mesh_intersection(ray, transform, positions, normals, Some(i), uvs, backfaces)
        }
        None => ray_mesh_intersection::<u32>(ray, transform, positions, normals, None, uvs, backfaces),
    }
}

/// The backend: each pointer's ray from each camera against the batches
/// the camera sees, as Bevy's mesh backend casts it against meshes.
fn update_hits(
    ray_map: Res<RayMap>,
    cameras: Query<(&Camera, Option<&RenderLayers>)>,
    pickables: Query<&Pickable>,
    layers: Query<&RenderLayers>,
    mut ray_cast: GpuCullRayCast,
    mut hits: MessageWriter<PointerHits>,
) {
    for (&ray_id, &ray) in ray_map.iter() {
        let Ok((camera, camera_layers)) = cameras.get(ray_id.camera) else {
            continue;
        };
        let camera_layers = camera_layers.cloned().unwrap_or_default();
        let filter = |entity| {
            let entity_layers = layers.get(entity).cloned().unwrap_or_default();
            camera_layers.intersects(&entity_layers)
                && pickables.get(entity).ok().is_none_or(|p| p.is_hoverable)
        };
        let picks: Vec<(Entity, HitData)> = ray_cast
            .cast_ray(ray, filter)
            .into_iter()
            .map(|(entity, hit)| {
                let mut data = HitData::new(
                    ray_id.camera,
                    hit.hit.distance,
                    Some(hit.hit.point),
                    Some(hit.hit.normal),
                );
                data.extra = Some(Arc::new(GpuCullHit {
                    instance: hit.instance,
                }));
                (entity, data)
            })
            .collect();
        if !picks.is_empty() {
            hits.write(PointerHits::new(ray_id.pointer, picks, camera.order as f32));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::CulledInstance;
    use bevy::ecs::system::RunSystemOnce;

    /// A world with Bevy's mesh assets and one batch of an icosphere of
    /// radius 0.5 (bounds 0.5 too).
    fn world_with(instances: Vec<CulledInstance>, transform: Transform, visible: bool) -> (World, Entity) {
        let mut world = World::new();
        let mut meshes = Assets::<Mesh>::default();
        let mesh = meshes.add(Sphere::new(0.5).mesh().ico(3).unwrap());
        world.insert_resource(meshes);
        let visibility = if visible {
            InheritedVisibility::VISIBLE
        } else {
            InheritedVisibility::HIDDEN
        };
        let batch = world
            .spawn((
                GpuCulledInstances::new(instances),
                GpuCullBounds {
                    center: Vec3::ZERO,
                    radius: 0.5,
                },
                Mesh3d(mesh),
                GlobalTransform::from(transform),
                visibility,
            ))
            .id();
        (world, batch)
    }

    fn cast(world: &mut World, ray: Ray3d) -> Vec<(Entity, GpuCullRayHit)> {
        world
            .run_system_once(move |mut cast: GpuCullRayCast| cast.cast_ray(ray, |_| true))
            .unwrap()
    }

    fn ray(origin: Vec3, toward: Vec3) -> Ray3d {
        Ray3d::new(origin, Dir3::new(toward - origin).unwrap())
    }

    /// The nearest hit, not the first sphere: a ray between two instances,
    /// inside both bounding spheres' shadows were they larger, hits the one
    /// behind; a mirrored, rotated, scaled batch is hit where it is drawn.
    #[test]
    fn a_ray_hits_the_nearest_instance_exactly() {
        let instances = vec![
            CulledInstance::new(Vec3::new(0.0, 0.0, -5.0), LinearRgba::WHITE),
            CulledInstance::new(Vec3::new(1.3, 0.0, -5.0), LinearRgba::WHITE),
            CulledInstance::new(Vec3::new(0.65, 0.0, -10.0), LinearRgba::WHITE),
            CulledInstance::new(Vec3::new(-3.0, 0.0, -8.0), LinearRgba::WHITE).with_scale(-2.0),
        ];
        let (mut world, batch) = world_with(instances.clone(), Transform::IDENTITY, true);
        let hits = cast(&mut world, ray(Vec3::ZERO, Vec3::new(0.0, 0.0, -1.0)));
        assert_eq!(hits.len(), 1);
        assert_eq!((hits[0].0, hits[0].1.instance), (batch, 0));
        assert!((hits[0].1.hit.distance - 4.5).abs() < 0.01, "{:?}", hits[0].1.hit);
        // Between instances 0 and 1 (0.15 from each's surface): the one behind.
        let between = cast(
            &mut world,
            ray(Vec3::new(0.65, 0.0, 0.0), Vec3::new(0.65, 0.0, -1.0)),
        );
        assert_eq!(between[0].1.instance, 2);
        // The mirrored instance of scale -2 (radius 1), 0.4 off its center.
        let mirrored = cast(
            &mut world,
            ray(Vec3::new(-3.4, 0.0, 0.0), Vec3::new(-3.4, 0.0, -1.0)),
        );
        assert_eq!(mirrored[0].1.instance, 3);
        assert!((mirrored[0].1.hit.distance - (8.0 - (1.0f32 - 0.16).sqrt())).abs() < 0.02);
        // A miss.
        assert!(cast(&mut world, ray(Vec3::ZERO, Vec3::new(0.0, 5.0, -1.0))).is_empty());
        // Under a batch transform: moved, turned and scaled as drawn.
        let transform = Transform::from_xyz(10.0, 0.0, 0.0)
            .with_rotation(Quat::from_rotation_y(std::f32::consts::FRAC_PI_2))
            .with_scale(Vec3::splat(2.0));
        let (mut world, _) = world_with(instances.clone(), transform, true);
        // Instance 0 at local (0, 0, -5) is at world (10 - 10, 0, 0).
        let hits = cast(&mut world, ray(Vec3::new(0.0, 0.0, 5.0), Vec3::ZERO));
        assert_eq!(hits[0].1.instance, 0);
        assert!((hits[0].1.hit.distance - 4.0).abs() < 0.02, "{:?}", hits[0].1.hit);
        // A hidden batch is not hit.
        let (mut world, _) = world_with(instances, Transform::IDENTITY, false);
        assert!(cast(&mut world, ray(Vec3::ZERO, Vec3::new(0.0, 0.0, -1.0))).is_empty());
    }

    /// The hierarchy finds what testing every instance finds, over ten
    /// thousand random instances and many rays.
    #[test]
    fn the_hierarchy_finds_what_a_search_of_every_instance_finds() {
        let mut seed = 0x2545_f491_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as f32 / u32::MAX as f32
        };
        let instances: Vec<CulledInstance> = (0..10_000)
            .map(|_| {
                let p = Vec3::new(next(), next(), next()) * 60.0 - 30.0;
                CulledInstance::new(p, LinearRgba::WHITE)
                    .with_scale(0.3 + next())
                    .with_rotation(Quat::from_rotation_x(next() * 6.0))
            })
            .collect();
        let (mut world, _) = world_with(instances.clone(), Transform::IDENTITY, true);
        let mesh = Sphere::new(0.5).mesh().ico(3).unwrap();
        for k in 0..40 {
            let from = Vec3::new(next(), next(), next()) * 80.0 - 40.0;
            let toward = Vec3::new(next(), next(), next()) * 20.0 - 10.0;
            let r = ray(from, toward);
            let found = cast(&mut world, r).first().map(|h| h.1.instance);
            let brute = instances
                .iter()
                .enumerate()
                .filter_map(|(i, inst)| {
                    let t = Affine3A::from_scale_rotation_translation(
                        Vec3::splat(inst.scale),
                        inst.rotation,
                        inst.position,
                    );
                    mesh_hit(&mesh, &t, r).map(|h| (i as u32, h.distance))
                })
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|h| h.0);
            assert_eq!(found, brute, "ray {k}");
        }
    }
}
