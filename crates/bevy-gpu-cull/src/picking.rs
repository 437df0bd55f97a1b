//! Picking the instances of a batch: a `bevy_picking` backend
//! ([`GpuCullPickingPlugin`]) so that `Pointer<Over>`, `Pointer<Click>` and
//! the rest fire on a batch entity, the hit carrying the instance
//! ([`GpuCullHit`]), and a system parameter that casts rays into batches
//! ([`GpuCullRayCast`]). Each hit is exact: the ray against the batch mesh's
//! triangles (Bevy's `ray_mesh_intersection`) under the instance's
//! transform, after a bounding-volume hierarchy over the instances' spheres
//! has found the candidates. The CPU's copy of the instances is what is
//! picked: batches written on the GPU are not pickable.

use crate::components::{GpuCullBounds, GpuCullInstance, GpuCullInstances};
use crate::gpu_instances::GpuCullComputeWrites;
use crate::lod::GpuCullLod;
use bevy::camera::visibility::RenderLayers;
use bevy::ecs::change_detection::Tick;
use bevy::ecs::system::SystemParam;
use bevy::math::{Affine3A, Ray3d};
use bevy::mesh::{Indices, VertexAttributeValues};
use bevy::picking::backend::prelude::*;
use bevy::picking::mesh_picking::ray_cast::{Backfaces, RayMeshHit, SimplifiedMesh, ray_mesh_intersection};
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

/// A mesh handle no asset is ever stored under.
const NO_MESH: Handle<Mesh> = bevy::asset::uuid_handle!("0c0bb8f1-5a7e-4d0e-9b8e-2f3c6a71d4e9");

/// Keeps Bevy's own mesh picking (`MeshPickingPlugin`) off a batch entity's
/// `Mesh3d`, which stands at the entity's transform but is not drawn
/// there: every batch gets a `SimplifiedMesh` that resolves to no mesh, so
/// Bevy's backend skips the entity and only the batch's backend
/// ([`GpuCullPickingPlugin`]) picks its instances.
pub(crate) fn hide_batch_meshes_from_mesh_picking(app: &mut App) {
    // Already registered by an earlier `GpuCullPlugin` in this app: fine.
    let _ = app.try_register_required_components_with::<GpuCullInstances, SimplifiedMesh>(|| {
        SimplifiedMesh(NO_MESH)
    });
}

/// What a batch's hit carries (`HitData::extra_as::<GpuCullHit>()` in a
/// pointer event's `hit`): the instance hit, its index in the batch's list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Reflect)]
pub struct GpuCullHit {
    /// The instance's index in [`GpuCullInstances::instances`].
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
    fn build(batch: &GpuCullInstances, bounds: GpuCullBounds, changed: Tick) -> Self {
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
            Ref<'static, GpuCullInstances>,
            &'static GpuCullBounds,
            &'static Mesh3d,
            &'static GlobalTransform,
            &'static InheritedVisibility,
            Option<&'static GpuCullLod>,
        ),
        Without<GpuCullComputeWrites>,
    >,
    meshes: Res<'w, Assets<Mesh>>,
    indices: Local<'s, HashMap<Entity, BatchIndex>>,
}

/// The camera a ray comes from ([`GpuCullRayCast::cast_view_ray`]): of a
/// batch with levels of detail ([`GpuCullLod`]) it picks what the camera
/// draws, each instance's level's mesh, and nothing of an instance too
/// small to be drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuCullRayView {
    /// The camera's projection (`Camera::clip_from_view`).
    pub clip_from_view: Mat4,
    /// The camera's transform (its `GlobalTransform`).
    pub world_from_view: Mat4,
}

impl GpuCullRayView {
    /// The view of `camera` at `transform` (its `GlobalTransform`).
    pub fn of(camera: &Camera, transform: &GlobalTransform) -> Self {
        Self {
            clip_from_view: camera.clip_from_view(),
            world_from_view: transform.to_matrix(),
        }
    }
}

impl GpuCullRayCast<'_, '_> {
    /// Every visible batch `filter` accepts that the ray hits, with its
    /// nearest instance, nearest batch first. Batches with levels of detail
    /// are tested against their entity's mesh (`Mesh3d`); a ray from a
    /// camera picks what it draws with [`Self::cast_view_ray`].
    pub fn cast_ray(&mut self, ray: Ray3d, filter: impl Fn(Entity) -> bool) -> Vec<(Entity, GpuCullRayHit)> {
        self.cast(ray, None, filter)
    }

    /// [`Self::cast_ray`] for a ray from `view`: each instance of a batch
    /// with levels of detail is tested against the level the camera draws
    /// it at (as a level facing the camera is turned toward it), and an
    /// instance below the coarsest level's size, which the camera does not
    /// draw, is not hit.
    pub fn cast_view_ray(
        &mut self,
        ray: Ray3d,
        view: GpuCullRayView,
        filter: impl Fn(Entity) -> bool,
    ) -> Vec<(Entity, GpuCullRayHit)> {
        self.cast(ray, Some(view), filter)
    }

    fn cast(
        &mut self,
        ray: Ray3d,
        view: Option<GpuCullRayView>,
        filter: impl Fn(Entity) -> bool,
    ) -> Vec<(Entity, GpuCullRayHit)> {
        let mut hits = Vec::new();
        for (entity, batch, bounds, mesh, transform, visibility, lod) in &self.batches {
            if !visibility.get() || !filter(entity) {
                continue;
            }
            // Levels the draw refuses (`GpuCullLod::problem`) draw the
            // batch's mesh: so are they picked.
            let lod = lod.filter(|lod| lod.problem().is_none());
            let levels = lod.zip(view).and_then(|(lod, view)| {
                PickLevels::new(lod, view, transform.affine(), *bounds, &self.meshes)
            });
            let mesh = match (levels, self.meshes.get(&mesh.0)) {
                (Some(levels), _) => PickMesh::Levels(levels),
                (None, Some(mesh)) => PickMesh::Single(mesh),
                (None, None) => continue,
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
            if let Some(hit) = nearest_instance(index, &batch, batch_affine, &mesh, ray) {
                hits.push((entity, hit));
            }
        }
        let batches = &self.batches;
        self.indices.retain(|e, _| batches.contains(*e));
        hits.sort_by(|a, b| a.1.hit.distance.total_cmp(&b.1.hit.distance));
        hits
    }
}

/// What an instance of a batch is picked against: the batch's mesh, or the
/// level of detail a camera draws it at.
enum PickMesh<'a> {
    Single(&'a Mesh),
    Levels(PickLevels<'a>),
}

/// A batch's levels of detail as a camera draws them.
struct PickLevels<'a> {
    /// Finest first: each level's mesh, smallest size and whether it faces
    /// the camera.
    levels: Vec<(&'a Mesh, f32, bool)>,
    /// Sizes as the camera sees them, in the batch's space.
    metric: cull_core::SizeMetric,
    bounds: GpuCullBounds,
    /// The camera's orientation (how a level facing it is turned).
    view_turn: Mat3,
}

impl<'a> PickLevels<'a> {
    /// `None` where a level's mesh is not loaded or the batch's transform
    /// places nothing.
    fn new(
        lod: &GpuCullLod,
        view: GpuCullRayView,
        batch_affine: Affine3A,
        bounds: GpuCullBounds,
        meshes: &'a Assets<Mesh>,
    ) -> Option<Self> {
        let levels = lod
            .levels
            .iter()
            .map(|level| {
                Some((
                    meshes.get(&level.mesh)?,
                    level.min_screen_size,
                    level.facing_camera,
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        let frame = cull_core::LocalFrame::new(Mat4::from(batch_affine)).ok()?;
        let w = view.world_from_view;
        Some(Self {
            levels,
            metric: frame.size_metric(view.clip_from_view, w),
            bounds,
            view_turn: Mat3::from_cols(
                w.x_axis.truncate().normalize(),
                w.y_axis.truncate().normalize(),
                w.z_axis.truncate().normalize(),
            ),
        })
    }

    /// The level `instance` is drawn at: the finest whose smallest size its
    /// sphere reaches; `None` below the coarsest (not drawn).
    fn level_of(&self, instance: &GpuCullInstance) -> Option<(&'a Mesh, bool)> {
        let c = self.bounds.center;
        let center = instance.position + instance.rotation.normalize() * (c * instance.scale);
        let size = self
            .metric
            .size(center, self.bounds.radius * instance.scale.abs());
        self.levels
            .iter()
            .find(|(_, min, _)| size >= f64::from(*min))
            .map(|&(mesh, _, facing)| (mesh, facing))
    }
}

/// An instance's mesh-to-world transform as the draw places it: its own
/// transform under the batch's, or, for a level facing the camera, turned
/// like the camera about its transformed position, sized by its scale and
/// the batch's shortest axis, mirrored across the camera's vertical axis
/// where it winds backwards.
fn instance_transform(instance: &GpuCullInstance, batch_affine: Affine3A, facing: Option<Mat3>) -> Affine3A {
    let Some(view_turn) = facing else {
        return batch_affine
            * Affine3A::from_scale_rotation_translation(
                Vec3::splat(instance.scale),
                instance.rotation.normalize(),
                instance.position,
            );
    };
    let m = batch_affine.matrix3;
    let shortest = m.x_axis.length().min(m.y_axis.length()).min(m.z_axis.length());
    let backwards = (instance.scale < 0.0) != (m.determinant() < 0.0);
    let size = instance.scale.abs() * shortest;
    let mirror = Vec3::new(if backwards { -size } else { size }, size, size);
    Affine3A::from_mat3_translation(
        view_turn * Mat3::from_diagonal(mirror),
        batch_affine.transform_point3(instance.position),
    )
}

/// The nearest instance of a batch the ray hits, exactly.
fn nearest_instance(
    index: &BatchIndex,
    batch: &GpuCullInstances,
    batch_affine: Affine3A,
    mesh: &PickMesh,
    ray: Ray3d,
) -> Option<GpuCullRayHit> {
    let local = batch_affine.inverse();
    let origin = local.transform_point3(ray.origin);
    let direction = local.transform_vector3(*ray.direction);
    let mut best: Option<GpuCullRayHit> = None;
    index.candidates(origin, direction, f32::MAX, |i| {
        let instance = &batch.instances()[i as usize];
        let (mesh, facing) = match mesh {
            PickMesh::Single(mesh) => (*mesh, None),
            PickMesh::Levels(levels) => {
                let (mesh, facing) = levels.level_of(instance)?;
                (mesh, facing.then_some(levels.view_turn))
            }
        };
        let transform = instance_transform(instance, batch_affine, facing);
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
    cameras: Query<(&Camera, &GlobalTransform, Option<&RenderLayers>)>,
    pickables: Query<&Pickable>,
    layers: Query<&RenderLayers>,
    mut ray_cast: GpuCullRayCast,
    mut hits: MessageWriter<PointerHits>,
) {
    for (&ray_id, &ray) in ray_map.iter() {
        let Ok((camera, camera_transform, camera_layers)) = cameras.get(ray_id.camera) else {
            continue;
        };
        let view = GpuCullRayView::of(camera, camera_transform);
        let camera_layers = camera_layers.cloned().unwrap_or_default();
        let filter = |entity| {
            let entity_layers = layers.get(entity).cloned().unwrap_or_default();
            camera_layers.intersects(&entity_layers)
                && pickables.get(entity).ok().is_none_or(|p| p.is_hoverable)
        };
        let picks: Vec<(Entity, HitData)> = ray_cast
            .cast_view_ray(ray, view, filter)
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
    use crate::components::GpuCullInstance;
    use bevy::ecs::system::RunSystemOnce;

    /// A world with Bevy's mesh assets and one batch of an icosphere of
    /// radius 0.5 (bounds 0.5 too).
    fn world_with(instances: Vec<GpuCullInstance>, transform: Transform, visible: bool) -> (World, Entity) {
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
                GpuCullInstances::new(instances),
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
            GpuCullInstance::new(Vec3::new(0.0, 0.0, -5.0), LinearRgba::WHITE),
            GpuCullInstance::new(Vec3::new(1.3, 0.0, -5.0), LinearRgba::WHITE),
            GpuCullInstance::new(Vec3::new(0.65, 0.0, -10.0), LinearRgba::WHITE),
            GpuCullInstance::new(Vec3::new(-3.0, 0.0, -8.0), LinearRgba::WHITE).with_scale(-2.0),
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

    fn cast_view(world: &mut World, ray: Ray3d) -> Vec<(Entity, GpuCullRayHit)> {
        // A camera at the origin looking down -Z, 1 radian high.
        let view = GpuCullRayView {
            clip_from_view: Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1),
            world_from_view: Mat4::IDENTITY,
        };
        world
            .run_system_once(move |mut cast: GpuCullRayCast| cast.cast_view_ray(ray, view, |_| true))
            .unwrap()
    }

    /// A batch with levels of detail (a sphere of radius 0.5 down to size
    /// 0.2, then a cube of half-size 0.1 down to 0.05) is picked as the
    /// camera draws it: the sphere near, the small cube farther, nothing
    /// past the coarsest level; turned toward the camera where the level
    /// faces it.
    fn levels_of_detail(facing: bool) -> (World, Entity) {
        let instances = vec![
            // Size 0.5 / 2 / tan(0.5) = 0.46: the sphere.
            GpuCullInstance::new(Vec3::new(0.0, 0.0, -2.0), LinearRgba::WHITE),
            // Size about 0.11: the cube, turned 45 degrees about Y.
            GpuCullInstance::new(Vec3::new(3.0, 0.0, -8.0), LinearRgba::WHITE)
                .with_rotation(Quat::from_rotation_y(std::f32::consts::FRAC_PI_4)),
            // Size about 0.018: not drawn.
            GpuCullInstance::new(Vec3::new(-20.0, 0.0, -50.0), LinearRgba::WHITE),
        ];
        let (mut world, batch) = world_with(instances, Transform::IDENTITY, true);
        let mut meshes = world.resource_mut::<Assets<Mesh>>();
        let sphere = meshes.add(Sphere::new(0.5).mesh().ico(3).unwrap());
        let cube = meshes.add(Cuboid::from_length(0.2).mesh().build());
        let mut coarse = crate::lod::GpuCullLodLevel::new(cube, 0.05);
        if facing {
            coarse = coarse.facing_camera();
        }
        world.entity_mut(batch).insert(GpuCullLod::new(vec![
            crate::lod::GpuCullLodLevel::new(sphere, 0.2),
            coarse,
        ]));
        (world, batch)
    }

    #[test]
    fn a_ray_from_a_camera_picks_the_level_it_draws() {
        let (mut world, _) = levels_of_detail(false);
        let toward = |p: Vec3| ray(Vec3::ZERO, p);
        // The near instance, by its sphere.
        let near = cast_view(&mut world, toward(Vec3::new(0.0, 0.0, -2.0)));
        assert_eq!(near[0].1.instance, 0);
        assert!((near[0].1.hit.distance - 1.5).abs() < 0.01);
        // The cube, 0.1 across its nearest edge (turned 45 degrees: the
        // edge at 0.1 * sqrt(2) from its center).
        let cube = cast_view(&mut world, toward(Vec3::new(3.0, 0.0, -8.0)));
        assert_eq!(cube[0].1.instance, 1);
        let to_center = Vec3::new(3.0, 0.0, -8.0).length();
        assert!(cube[0].1.hit.distance > to_center - 0.15 && cube[0].1.hit.distance < to_center - 0.09);
        // Where the sphere level would be hit but the cube is not.
        let beside = toward(Vec3::new(3.0, 0.3, -8.0));
        assert!(cast_view(&mut world, beside).is_empty());
        assert_eq!(
            cast(&mut world, beside)[0].1.instance,
            1,
            "the batch's own mesh is hit without a view"
        );
        // Too small to be drawn: not picked from the camera.
        let far = toward(Vec3::new(-20.0, 0.0, -50.0));
        assert!(cast_view(&mut world, far).is_empty());
        assert_eq!(cast(&mut world, far)[0].1.instance, 2);
        // 0.12 beside the cube's center along X, parallel to the view's
        // axis: within the turned cube (0.14 wide there), outside the cube
        // facing the camera (0.1).
        let side = ray(Vec3::new(3.12, 0.0, 0.0), Vec3::new(3.12, 0.0, -8.0));
        assert_eq!(cast_view(&mut world, side)[0].1.instance, 1);
        // Levels the draw refuses (sizes not descending) are not picked
        // either: the batch's own mesh is, as it is drawn.
        let (mut refused, batch) = levels_of_detail(false);
        let mut lod = refused.get::<GpuCullLod>(batch).unwrap().clone();
        lod.levels.reverse();
        refused.entity_mut(batch).insert(lod);
        assert_eq!(cast_view(&mut refused, beside)[0].1.instance, 1);
        let (mut facing, _) = levels_of_detail(true);
        assert!(cast_view(&mut facing, side).is_empty());
        assert_eq!(
            cast_view(&mut facing, toward(Vec3::new(3.0, 0.0, -8.0)))[0]
                .1
                .instance,
            1
        );
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
        let instances: Vec<GpuCullInstance> = (0..10_000)
            .map(|_| {
                let p = Vec3::new(next(), next(), next()) * 60.0 - 30.0;
                GpuCullInstance::new(p, LinearRgba::WHITE)
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
            // Every instance, its mesh tested only where the ray meets its
            // bounding sphere (radius 0.5 · scale, widened a little), as
            // any ray that hits the mesh must.
            let meets_sphere = |inst: &GpuCullInstance| {
                let to_center = inst.position - r.origin;
                let along = to_center.dot(*r.direction);
                let radius = 0.5 * inst.scale * 1.01;
                along >= -radius && (to_center - *r.direction * along).length() <= radius
            };
            let brute = instances
                .iter()
                .enumerate()
                .filter(|(_, inst)| meets_sphere(inst))
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
