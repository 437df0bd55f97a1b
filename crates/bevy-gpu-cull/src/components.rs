//! The batch component users put on an entity next to its `Mesh3d`.

use bevy::camera::primitives::MeshAabb;
use bevy::camera::visibility::NoFrustumCulling;
use bevy::prelude::*;
use bevy::render::batching::NoAutomaticBatching;
use bevy::render::extract_component::ExtractComponent;
use bevy::render::sync_world::SyncToRenderWorld;
use bytemuck::{Pod, Zeroable};
use std::ops::Range;

/// One instance: position, rotation and uniform scale relative to its batch
/// entity (as a mesh's vertices are relative to its entity), base color,
/// and four words of user data for custom draw shaders (64 bytes, the
/// layout of `GpuCullInstance` in the `bevy_gpu_cull::instance` shader library).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable, Reflect)]
#[reflect(Debug, PartialEq, Clone)]
pub struct GpuCullInstance {
    /// Translation in the batch entity's space (the world's, for a batch
    /// entity with the identity transform).
    pub position: Vec3,
    /// Uniform scale. A negative scale draws the mirror image (through the
    /// instance's origin), lit and back-face culled as a mesh of that
    /// mirrored shape would be. With [`cull_core::InstanceFormat::Packed16`], which
    /// stores none, the cull covers the batch's range of scales instead; a
    /// non-finite scale hides the instance.
    pub scale: f32,
    /// Rotation. Normalized on upload, for the cull and the draw alike; a
    /// zero or non-finite quaternion hides the instance (it is culled).
    pub rotation: Quat,
    /// Base color, linear.
    pub color: [f32; 4],
    /// Free for the application: the default draw shader ignores it; a
    /// custom one ([`crate::GpuCullPlugin::draw_shader`]) reads it as
    /// `instance.user` (`vec4<u32>`).
    pub user: [u32; 4],
}

impl GpuCullInstance {
    /// An unrotated, unit-scale instance with zero user data, in any of
    /// Bevy's color types (`Color`, `Srgba`, `LinearRgba`, ...).
    pub fn new(position: Vec3, color: impl Into<LinearRgba>) -> Self {
        Self {
            position,
            scale: 1.0,
            rotation: Quat::IDENTITY,
            color: color.into().to_f32_array(),
            user: [0; 4],
        }
    }

    /// An instance placed by a `Transform` (translation, rotation, scale).
    /// Instances have one uniform scale: a non-uniform `scale` takes its
    /// largest magnitude, so the instance (and its culling bounds) covers
    /// the transformed mesh rather than clipping it.
    pub fn from_transform(transform: &Transform, color: impl Into<LinearRgba>) -> Self {
        let s = transform.scale.abs().max_element();
        Self {
            scale: s,
            rotation: transform.rotation,
            ..Self::new(transform.translation, color)
        }
    }

    /// This instance with a uniform scale.
    pub fn with_scale(self, scale: f32) -> Self {
        Self { scale, ..self }
    }

    /// This instance with a rotation.
    pub fn with_rotation(self, rotation: Quat) -> Self {
        Self { rotation, ..self }
    }

    /// This instance with a color, in any of Bevy's color types.
    pub fn with_color(self, color: impl Into<LinearRgba>) -> Self {
        Self {
            color: color.into().to_f32_array(),
            ..self
        }
    }

    /// The base color.
    pub fn linear_color(&self) -> LinearRgba {
        LinearRgba::from_f32_array(self.color)
    }

    /// This instance with the given user data.
    pub fn with_user(self, user: [u32; 4]) -> Self {
        Self { user, ..self }
    }

    /// The instance as a culling format takes it
    /// ([`cull_core::InstanceFormat::fit`]: a format without scale gets
    /// scale 1, the cull's bounds covering the batch's scales instead, see
    /// [`ScaleRange`]).
    pub(crate) fn cull_instance(&self, format: cull_core::InstanceFormat) -> cull_core::Instance {
        format.fit(cull_core::Instance {
            position: self.position,
            rotation: self.rotation,
            scale: self.scale,
        })
    }
}

/// A batch of instances of the entity's `Mesh3d`, culled per camera on the
/// GPU and drawn with one indirect instanced draw per camera.
///
/// Instances are placed relative to the entity's `GlobalTransform`, as a
/// mesh's vertices are: a batch under a moving parent follows it with no
/// upload, and a batch entity with the identity transform takes its
/// instances in world space. The cull runs in the batch's own space (the
/// views are taken into it in `f64`, [`cull_core::LocalFrame`]), so a
/// batch far from the world's origin keeps the precision of its local
/// coordinates. A mirroring transform, or an instance's negative scale,
/// draws mirror images that are lit and back-face culled correctly (a
/// batch holding instances of both windings draws its lists twice, once
/// per front face, each draw skipping the other's instances in the vertex
/// stage). A transform that places nothing (a zero scale) draws nothing.
///
/// The list is changed through methods that record what changed, so the next
/// frame uploads only that (a change they did not record, such as an edit
/// through reflection by an inspector or a scene, uploads the whole list): [`set`](Self::set), [`edit`](Self::edit) and
/// [`push`](Self::push) upload the touched instances, [`truncate`](Self::truncate)
/// uploads nothing, and [`replace`](Self::replace) or
/// [`instances_mut`](Self::instances_mut) upload the whole list. An unchanged
/// batch costs no CPU work per frame.
///
/// Bevy's own frustum culling of the entity is turned off
/// ([`NoFrustumCulling`]): the batch's instances are culled one by one instead.
/// So is Bevy's automatic batching of its mesh ([`NoAutomaticBatching`]):
/// the batch is drawn on its own.
///
/// Its `Visibility` is honoured as for a mesh: a hidden batch (or one under
/// a hidden parent) is neither culled nor drawn, casts no shadow and has no
/// counts in [`crate::GpuCullStats`]; its instances stay on the GPU, so
/// showing it again uploads nothing.
#[derive(Component, Clone, Debug, Default, Reflect)]
#[reflect(Component, Default, Debug, Clone)]
#[require(
    Transform,
    Visibility,
    NoFrustumCulling,
    NoAutomaticBatching,
    SyncToRenderWorld
)]
pub struct GpuCullInstances {
    instances: Vec<GpuCullInstance>,
    #[reflect(ignore)]
    pub(crate) changes: PendingChanges,
}

/// What changed in a batch since the render world last took its changes.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingChanges {
    /// Something changed (contents or length).
    pub any: bool,
    /// The whole list must be uploaded.
    pub all: bool,
    /// Changed ranges, sorted and disjoint (meaningful when `all` is false).
    pub ranges: DirtyRanges,
    /// One of the component's methods ran (even one that changed nothing):
    /// a change Bevy sees without this came from elsewhere (an edit
    /// through reflection), which the render world takes as a new list.
    pub touched: bool,
}

impl GpuCullInstances {
    /// A batch of these instances.
    pub fn new(instances: Vec<GpuCullInstance>) -> Self {
        let mut batch = Self {
            instances,
            changes: PendingChanges::default(),
        };
        batch.mark_all();
        batch
    }

    /// Records that the whole list changed (the next frame uploads it).
    pub(crate) fn mark_all(&mut self) {
        self.changes.touched = true;
        self.changes.any = true;
        self.changes.all = true;
        self.changes.ranges.clear();
    }

    fn mark(&mut self, range: Range<usize>) {
        self.changes.touched = true;
        self.changes.any = true;
        if !self.changes.all {
            self.changes.ranges.mark(range.start as u32..range.end as u32);
        }
    }

    /// The instances.
    pub fn instances(&self) -> &[GpuCullInstance] {
        &self.instances
    }

    /// The number of instances.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// Whether the batch has no instances.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// Replaces instance `index`; only it is uploaded. Panics if `index` is
    /// out of bounds, like indexing a slice.
    pub fn set(&mut self, index: usize, instance: GpuCullInstance) {
        self.instances[index] = instance;
        self.mark(index..index + 1);
    }

    /// The instances in `range`, to change in place; only they are uploaded.
    /// Panics if the range is out of bounds, like slicing.
    pub fn edit(&mut self, range: Range<usize>) -> &mut [GpuCullInstance] {
        let _in_bounds = &self.instances[range.clone()];
        self.mark(range.clone());
        &mut self.instances[range]
    }

    /// Appends an instance; only it is uploaded (unless the GPU buffers must
    /// grow, which re-uploads the batch once, doubling the capacity).
    pub fn push(&mut self, instance: GpuCullInstance) {
        self.instances.push(instance);
        let end = self.instances.len();
        self.mark(end - 1..end);
    }

    /// Appends instances; only they are uploaded (see [`push`](Self::push)).
    pub fn extend(&mut self, instances: impl IntoIterator<Item = GpuCullInstance>) {
        self.changes.touched = true;
        let start = self.instances.len();
        self.instances.extend(instances);
        let end = self.instances.len();
        if end > start {
            self.mark(start..end);
        }
    }

    /// Keeps the first `len` instances; nothing is uploaded.
    pub fn truncate(&mut self, len: usize) {
        self.changes.touched = true;
        if len < self.instances.len() {
            self.instances.truncate(len);
            self.changes.any = true;
            self.changes.ranges.clip(len as u32);
        }
    }

    /// Removes every instance; nothing is uploaded.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Replaces the whole list; all of it is uploaded.
    pub fn replace(&mut self, instances: Vec<GpuCullInstance>) {
        self.instances = instances;
        self.mark_all();
    }

    /// The list itself, for arbitrary changes: the whole list is uploaded on
    /// the next frame. Prefer [`edit`](Self::edit) or [`set`](Self::set) for
    /// small changes to a large batch.
    pub fn instances_mut(&mut self) -> &mut Vec<GpuCullInstance> {
        self.mark_all();
        &mut self.instances
    }

    /// Takes the changes recorded since the last call (the render world's
    /// extraction does this).
    pub(crate) fn take_changes(&mut self) -> PendingChanges {
        std::mem::take(&mut self.changes)
    }

    /// The indices of the instances the plugin keeps for a view with this
    /// frustum when culling in `format`, computed on the CPU by `cull-core`'s
    /// reference: what the GPU must produce, for tests and for checking a
    /// scene. The plugin builds a camera's frustum in the batch's space as
    /// `LocalFrame::new(batch_transform.to_matrix())?.frustum_from_view(camera.clip_from_view(), camera_transform.to_matrix(), None)`
    /// (`Frustum::from_view` for a batch with the identity transform).
    /// For a format without scale the bounds cover the batch's scales, as the
    /// plugin's do (after edits that narrowed that range, the plugin's may
    /// still be wider until the next whole-list change, keeping a superset).
    pub fn visible_on_cpu(
        &self,
        bounds: GpuCullBounds,
        frustum: &cull_core::Frustum,
        format: cull_core::InstanceFormat,
    ) -> Result<Vec<u32>, cull_core::CullError> {
        let (bytes, sphere) = self.cull_input(bounds, format)?;
        cull_core::cpu::cull(format, &bytes, sphere, frustum)
    }

    /// As [`Self::visible_on_cpu`], split as the GPU may answer: the indices
    /// it must keep (`visible`), and those within a few ulps of the frustum
    /// boundary as widened by `cull_core::PLANE_TOLERANCE`
    /// (`borderline`: spheres that touch the view only by less than that
    /// tolerance), which it may keep or drop. `visible_on_cpu` keeps both.
    pub fn reference_on_cpu(
        &self,
        bounds: GpuCullBounds,
        frustum: &cull_core::Frustum,
        format: cull_core::InstanceFormat,
    ) -> Result<cull_core::cpu::Reference, cull_core::CullError> {
        let (bytes, sphere) = self.cull_input(bounds, format)?;
        cull_core::cpu::classify(format, &bytes, sphere, frustum)
    }

    /// Each instance's sphere in the batch's space as the plugin's cull sees it (`None`
    /// for an instance it hides: a zero or non-finite rotation), for CPU
    /// references of other visibility tests, such as
    /// `cull_core::OcclusionCamera::classify`.
    pub fn world_spheres(
        &self,
        bounds: GpuCullBounds,
        format: cull_core::InstanceFormat,
    ) -> Result<Vec<Option<cull_core::WorldSphere>>, cull_core::CullError> {
        let (bytes, sphere) = self.cull_input(bounds, format)?;
        Ok((0..self.instances.len())
            .map(|i| format.world_sphere(&bytes, i, sphere))
            .collect())
    }

    /// The batch encoded in `format` and the bounds the plugin culls it with.
    fn cull_input(
        &self,
        bounds: GpuCullBounds,
        format: cull_core::InstanceFormat,
    ) -> Result<(Vec<u8>, cull_core::Sphere), cull_core::CullError> {
        let instances: Vec<cull_core::Instance> =
            self.instances.iter().map(|i| i.cull_instance(format)).collect();
        let mut sphere = cull_core::Sphere::new(bounds.center, bounds.radius);
        if !format.carries_scale() {
            sphere = ScaleRange::of(&self.instances).cover(sphere);
        }
        Ok((format.encode(&instances)?, sphere))
    }
}

/// The smallest and largest finite scale of a batch's instances: a format
/// without scale culls with bounds covering them all
/// ([`cull_core::Sphere::covering_scales`]). Recomputed when the whole list changes;
/// edits only widen it, which stays conservative (a shrunk range returns
/// with the next whole-list change).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ScaleRange(Option<(f32, f32)>);

impl ScaleRange {
    pub fn of(instances: &[GpuCullInstance]) -> Self {
        let mut range = Self::default();
        range.widen(instances);
        range
    }

    pub fn widen(&mut self, instances: &[GpuCullInstance]) {
        for s in instances.iter().map(|i| i.scale).filter(|s| s.is_finite()) {
            let (lo, hi) = self.0.get_or_insert((s, s));
            *lo = lo.min(s);
            *hi = hi.max(s);
        }
    }

    /// Widens it to `lo..=hi` too.
    pub fn widen_to(&mut self, lo: f32, hi: f32) {
        let (l, h) = self.0.get_or_insert((lo, hi));
        *l = l.min(lo);
        *h = h.max(hi);
    }

    /// Whether some instance may have a negative scale (a mirror image),
    /// and whether some may have a scale that is not negative.
    pub fn signs(&self) -> (bool, bool) {
        match self.0 {
            Some((lo, hi)) => (lo < 0.0, hi >= 0.0),
            None => (false, true),
        }
    }

    /// Bounds that cover `bounds` under every scale of the batch.
    pub fn cover(&self, bounds: cull_core::Sphere) -> cull_core::Sphere {
        self.0
            .and_then(|(lo, hi)| bounds.covering_scales(lo, hi))
            .unwrap_or(bounds)
    }
}

/// The batch mesh's bounding sphere in mesh space, which each instance's
/// transform moves into the world for culling. Computed from the mesh (the
/// sphere around its bounding box) when the entity has none; insert your own
/// to cull against a different volume.
#[derive(Component, Clone, Copy, Debug, PartialEq, Reflect)]
#[reflect(Component, Debug, PartialEq, Clone)]
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
    batches: Query<(Entity, Ref<Mesh3d>, Option<&GpuCullBounds>), With<GpuCullInstances>>,
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
#[derive(Component, ExtractComponent, Clone, Copy, Debug, PartialEq, Reflect)]
#[reflect(Component, Debug, PartialEq, Clone)]
pub struct GpuCullFrustumOverride {
    /// The view-projection to cull with (wgpu clip space).
    pub clip_from_world: Mat4,
}

/// On a camera: occlusion-cull its batches on the GPU, two-phase Hi-Z
/// (`cull_core::occlusion`), as part of Bevy's own two-phase occlusion
/// culling. It brings Bevy's `DepthPrepass` and `OcclusionCulling` with it
/// (required components: they give the camera an early and a late
/// prepass); a camera that loses either is frustum-culled only, with a
/// warning.
///
/// Each frame, the instances visible last frame are drawn in the early
/// prepass; the depth they leave is reduced to a depth pyramid; every other
/// instance in the frustum is tested against it, and those that may be
/// visible are drawn in the late prepass. The main pass draws both. An
/// instance that comes into view is drawn in the frame it does.
/// Under MSAA the depth pyramid takes each pixel's farthest sample, so an
/// instance is hidden only where every sample of its pixels is nearer.
/// Under temporal anti-aliasing (`TemporalJitter`) each sphere's screen
/// rectangle is widened by the jitter's offset. A camera with a custom
/// viewport or resolution override, or with temporal jitter on another
/// projection than a perspective one, is frustum-culled only, with a
/// warning.
#[derive(Component, ExtractComponent, Clone, Copy, Debug, Default, PartialEq, Eq, Reflect)]
#[reflect(Component, Default, Debug, PartialEq, Clone)]
#[require(
    bevy::core_pipeline::prepass::DepthPrepass,
    bevy::render::occlusion_culling::OcclusionCulling
)]
pub struct GpuCullOcclusion;

/// Sorted, disjoint, non-adjacent ranges of changed instances. Kept short:
/// past [`DirtyRanges::MAX`] ranges, the two closest merge (uploading the gap
/// between them), so tracking costs O(1) memory whatever the edits.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DirtyRanges(Vec<Range<u32>>);

impl DirtyRanges {
    pub const MAX: usize = 32;

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn ranges(&self) -> &[Range<u32>] {
        &self.0
    }

    /// Adds `range`, merging it with the ranges it overlaps or touches.
    pub fn mark(&mut self, range: Range<u32>) {
        if range.is_empty() {
            return;
        }
        // First range that ends at or after the new start (touching counts).
        let first = self.0.partition_point(|r| r.end < range.start);
        // One past the last range that starts at or before the new end.
        let last = self.0.partition_point(|r| r.start <= range.end);
        let merged = if first < last {
            self.0[first].start.min(range.start)..self.0[last - 1].end.max(range.end)
        } else {
            range
        };
        self.0.splice(first..last, std::iter::once(merged));
        if self.0.len() > Self::MAX {
            let closest = (0..self.0.len() - 1)
                .min_by_key(|&i| self.0[i + 1].start - self.0[i].end)
                .expect("more than one range");
            let next = self.0.remove(closest + 1);
            self.0[closest].end = next.end;
        }
    }

    /// Drops what lies at or past `len`.
    pub fn clip(&mut self, len: u32) {
        self.0.retain_mut(|r| {
            r.end = r.end.min(len);
            r.start < r.end
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_build_from_transforms_and_bevy_colors() {
        let t = Transform::from_xyz(1.0, 2.0, 3.0)
            .with_rotation(Quat::from_rotation_y(0.5))
            .with_scale(Vec3::new(2.0, -3.0, 1.0));
        let i = GpuCullInstance::from_transform(&t, Color::srgb(1.0, 0.0, 0.0));
        assert_eq!(i.position, t.translation);
        assert_eq!(i.rotation, t.rotation);
        // Non-uniform: the largest magnitude, so the instance covers the mesh.
        assert_eq!(i.scale, 3.0);
        assert_eq!(i.linear_color(), LinearRgba::from(Color::srgb(1.0, 0.0, 0.0)));
        let j = GpuCullInstance::new(Vec3::ZERO, Srgba::BLUE)
            .with_scale(0.5)
            .with_rotation(Quat::from_rotation_x(1.0))
            .with_color(LinearRgba::GREEN)
            .with_user([1, 2, 3, 4]);
        assert_eq!(
            (j.scale, j.rotation, j.color, j.user),
            (
                0.5,
                Quat::from_rotation_x(1.0),
                [0.0, 1.0, 0.0, 1.0],
                [1, 2, 3, 4]
            )
        );
    }

    /// The ranges as a set of indices, for comparison with a plain model.
    fn indices(d: &DirtyRanges) -> Vec<u32> {
        d.ranges().iter().flat_map(|r| r.clone()).collect()
    }

    #[test]
    fn ranges_merge_and_stay_sorted() {
        let mut d = DirtyRanges::default();
        d.mark(10..12);
        d.mark(2..3);
        d.mark(12..14); // touches 10..12
        d.mark(5..5); // empty: ignored
        assert_eq!(d.ranges(), &[2..3, 10..14]);
        d.mark(0..11);
        assert_eq!(d.ranges(), std::slice::from_ref(&(0..14)));
        d.clip(5);
        assert_eq!(d.ranges(), std::slice::from_ref(&(0..5)));
        d.clip(0);
        assert!(d.ranges().is_empty());
    }

    #[test]
    fn ranges_cover_every_marked_index_whatever_the_order() {
        // A small deterministic generator: the marked set is always covered,
        // the ranges stay sorted, disjoint and at most MAX long.
        let mut state = 0x9e37_79b9_u32;
        let mut next = |m: u32| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state % m
        };
        for _ in 0..50 {
            let mut d = DirtyRanges::default();
            let mut marked = std::collections::BTreeSet::new();
            for _ in 0..200 {
                let start = next(1000);
                let len = next(5);
                d.mark(start..start + len);
                marked.extend(start..start + len);
            }
            let covered: std::collections::BTreeSet<u32> = indices(&d).into_iter().collect();
            assert!(marked.is_subset(&covered));
            assert!(d.ranges().len() <= DirtyRanges::MAX);
            assert!(d.ranges().windows(2).all(|w| w[0].end < w[1].start));
            let total: u32 = d.ranges().iter().map(|r| r.end - r.start).sum();
            assert_eq!(total as usize, covered.len());
        }
    }

    #[test]
    fn batch_records_what_changed() {
        let i = GpuCullInstance::new(Vec3::ZERO, LinearRgba::WHITE);
        let mut b = GpuCullInstances::new(vec![i; 100]);
        let c = b.take_changes();
        assert!(c.any && c.all);
        assert!(!b.take_changes().any, "taking clears");
        b.set(7, i);
        b.edit(20..25)[0].scale = 2.0;
        b.push(i);
        let c = b.take_changes();
        assert!(c.any && !c.all);
        assert_eq!(c.ranges.ranges(), &[7..8, 20..25, 100..101]);
        b.truncate(50);
        let c = b.take_changes();
        assert!(c.any && !c.all && c.ranges.ranges().is_empty());
        b.instances_mut().push(i);
        assert!(b.take_changes().all);
    }
}

/// Culls a batch by cells (cull-core's `cells` module): the
/// render world sorts the batch's instances into cells of spatially close
/// instances, each with a bounding sphere, and each frame a cell pass
/// finds the cells some view may see, so that the cull reads only their
/// instances. It does so only where that should be faster
/// (`CullRequest::by_cells_if_faster`: enough instances left unread);
/// otherwise the batch is culled as any other. The survivors are the same
/// either way; [`crate::GpuCullStats::cells`] shows the cells kept.
///
/// For large, mostly static batches that a view sees only part of
/// (foliage, cities, asteroid fields). Replacing or resizing the list sorts
/// it again (on the CPU, in the render world); edits grow their cells'
/// bounds to cover them, and grown cells are recomputed later. Every
/// variant culls by cells, the order-preserving ones in the sorted order
/// (which nothing outside the plugin sees); occlusion-culled cameras cull
/// by cells in both phases.
#[derive(Component, Clone, Copy, Debug, Default, PartialEq, Eq, Reflect)]
#[reflect(Component, Default, Debug, PartialEq, Clone)]
pub struct GpuCullCells {
    /// Cull by cells only when the cells no view keeps hold at least this
    /// many bytes of instances (in the culling format): below it, culling
    /// by cells saves little. `Some(0)` always culls by cells. `None` (the
    /// default) takes cull-core's threshold for each way of culling by
    /// cells: `cull_core::LISTED_CELLS_MIN_SKIPPED_BYTES` (4 MiB) where the
    /// kept cells are listed on the CPU and culled in one dispatch,
    /// `cull_core::CELLS_MIN_SKIPPED_BYTES` (64 MiB) where a cell pass on
    /// the GPU finds them.
    pub min_skipped_bytes: Option<u64>,
}
