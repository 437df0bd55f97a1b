//! Extraction: each batch's changes, transform, visibility, material and
//! levels brought from the main world into its render-world copy
//! ([`BatchData`]), which every later stage reads.

use crate::components::{
    DirtyRanges, GpuCullBounds, GpuCullCells, GpuCullInstance, GpuCullInstances, ScaleRange,
};
use crate::gpu_instances::{GpuCullComputeWrites, GpuCullMotionVectors};
use crate::lod::{GpuCullLod, GpuCullLodLevel};
use crate::settings::GpuCullSettings;
use bevy::camera::visibility::RenderLayers;
use bevy::ecs::system::SystemState;
use bevy::light::NotShadowReceiver;
use bevy::math::Affine3A;
use bevy::platform::collections::{HashMap, HashSet};
use bevy::prelude::*;
use bevy::render::MainWorld;
use bevy::render::sync_world::RenderEntity;
use cull_core::{LocalFrame, Sphere};

use super::standard::{BatchMaterial, reads_texture_coordinates};

/// A batch in the render world: a copy of the main world's list, kept up to
/// date by applying only the changed ranges, and the ranges still to upload.
#[derive(Component)]
pub(crate) struct BatchData {
    pub instances: Vec<GpuCullInstance>,
    pub bounds: Sphere,
    /// Upload the whole list (new batch, replaced list, or new GPU buffers).
    pub upload_all: bool,
    /// Ranges to upload when `upload_all` is false.
    pub uploads: DirtyRanges,
    /// The finite scales in the batch, for formats that carry no scale.
    pub scales: ScaleRange,
    /// The box of its instances' positions, for sorting a blended batch
    /// among Bevy's transparent meshes.
    pub positions: PositionBox,
    /// Some instance's color is not white. Edits only set it; a new list
    /// sets it again.
    pub colored: bool,
    /// Whether its instances receive shadows (no `NotShadowReceiver`).
    pub shadow_receiver: bool,
    /// The views that see it (its `RenderLayers`, layer 0 without one).
    pub render_layers: RenderLayers,
    /// Its `MeshMaterial3d<StandardMaterial>`, as the draw uses it.
    pub material: BatchMaterial,
    /// Levels of detail, finest first: each level's mesh and smallest
    /// screen size; empty without a (usable) `GpuCullLod`.
    pub lod: Vec<(AssetId<Mesh>, f32)>,
    /// The levels drawn facing the camera (`GpuCullLodLevel::facing_camera`), bit
    /// `k` for level `k`.
    pub lod_facing: u32,
    /// The levels drawn as pixels (`GpuCullLodLevel::as_pixels`), bit `k`
    /// for level `k`.
    pub lod_pixels: u32,
    /// The surface a pixel of its first pixel level shows.
    pub pixel_surface: PixelSurface,
    /// `GpuCullLod::cross_fade` (0 without levels).
    pub lod_cross_fade: f32,
    /// Culled by cells ([`crate::GpuCullCells`]).
    pub cells: Option<GpuCullCells>,
    /// Its `InheritedVisibility`: a hidden batch is neither culled nor
    /// drawn (its instances stay on the GPU, so showing it uploads nothing).
    /// False too for a transform that places nothing (zero scale).
    pub visible: bool,
    /// Its `GlobalTransform`: the instances are relative to it.
    pub world_from_local: Affine3A,
    /// Last frame's, for motion vectors.
    pub previous_world_from_local: Affine3A,
    /// The space the batch is culled in (views are taken into it).
    pub frame: LocalFrame,
    /// Whether its transform places anything (`frame` is its own).
    pub placed: bool,
    /// Written on the GPU too ([`GpuCullComputeWrites`]).
    pub gpu_writes: Option<GpuCullComputeWrites>,
    /// Keeps last frame's instances for motion vectors
    /// ([`crate::GpuCullMotionVectors`]).
    pub motion: bool,
}

/// On a batch the render world made, of batches drawn together
/// (`super::merge`): extraction leaves it alone.
#[derive(Component)]
pub(crate) struct CombinedBatch;

/// The box of a batch's finite instance positions, in its own space:
/// edits only widen it (as [`ScaleRange`]), a whole new list sets it again.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PositionBox(Option<(Vec3, Vec3)>);

impl PositionBox {
    pub fn of(instances: &[GpuCullInstance]) -> Self {
        let mut positions = Self::default();
        positions.widen(instances);
        positions
    }

    pub fn widen(&mut self, instances: &[GpuCullInstance]) {
        for p in instances.iter().map(|i| i.position).filter(|p| p.is_finite()) {
            let (lo, hi) = self.0.get_or_insert((p, p));
            *lo = lo.min(p);
            *hi = hi.max(p);
        }
    }

    /// Its center; the origin for a batch without instances.
    pub fn center(&self) -> Vec3 {
        self.0.map_or(Vec3::ZERO, |(lo, hi)| (lo + hi) * 0.5)
    }
}

/// What a batch's entity says of it besides its list and transform.
struct BatchProperties {
    bounds: Sphere,
    shadow_receiver: bool,
    render_layers: RenderLayers,
    lod: Vec<(AssetId<Mesh>, f32)>,
    lod_facing: u32,
    lod_pixels: u32,
    pixel_surface: PixelSurface,
    lod_cross_fade: f32,
    cells: Option<GpuCullCells>,
    gpu_writes: Option<GpuCullComputeWrites>,
    motion: bool,
}

impl BatchData {
    /// A new batch's copy, its whole list to upload.
    fn new(
        batch: &mut GpuCullInstances,
        properties: BatchProperties,
        world_from_local: Affine3A,
        inherited_visible: bool,
    ) -> Self {
        batch.take_changes();
        let frame = batch_frame(world_from_local);
        let BatchProperties {
            bounds,
            shadow_receiver,
            render_layers,
            lod,
            lod_facing,
            lod_pixels,
            pixel_surface,
            lod_cross_fade,
            cells,
            gpu_writes,
            motion,
        } = properties;
        BatchData {
            instances: batch.instances().to_vec(),
            bounds,
            upload_all: true,
            uploads: DirtyRanges::default(),
            scales: ScaleRange::of(batch.instances()),
            positions: PositionBox::of(batch.instances()),
            colored: any_colored(batch.instances()),
            shadow_receiver,
            render_layers,
            material: BatchMaterial::default(),
            lod,
            lod_facing,
            lod_pixels,
            pixel_surface,
            lod_cross_fade,
            cells,
            visible: inherited_visible && frame.is_some(),
            world_from_local,
            previous_world_from_local: world_from_local,
            placed: frame.is_some(),
            frame: frame.unwrap_or_default(),
            gpu_writes,
            motion,
        }
    }

    /// Takes the entity's other properties; sorting into cells, or back,
    /// uploads the whole list again.
    fn set_properties(&mut self, properties: BatchProperties) {
        if self.cells.is_some() != properties.cells.is_some() {
            self.upload_all = true;
        }
        self.bounds = properties.bounds;
        self.shadow_receiver = properties.shadow_receiver;
        self.render_layers = properties.render_layers;
        self.lod = properties.lod;
        self.lod_facing = properties.lod_facing;
        self.lod_pixels = properties.lod_pixels;
        self.pixel_surface = properties.pixel_surface;
        self.lod_cross_fade = properties.lod_cross_fade;
        self.cells = properties.cells;
        self.gpu_writes = properties.gpu_writes;
        self.motion = properties.motion;
    }

    /// Whether it is culled by cells: it asks for them, and its instances
    /// are not written on the GPU (whose writes the cells' bounds, computed
    /// on the CPU, would not cover).
    pub fn culls_by_cells(&self) -> bool {
        self.cells.is_some() && self.gpu_writes.is_none()
    }

    /// Every scale its instances may have: the list's, and those GPU
    /// writes may give.
    fn all_scales(&self) -> ScaleRange {
        let mut scales = self.scales;
        if let Some(writes) = self.gpu_writes {
            scales.widen_to(writes.scales[0], writes.scales[1]);
        }
        scales
    }

    /// Applies the changes recorded in the main world's list: the changed
    /// ranges are copied and marked for upload, a replaced list whole.
    fn apply_changes(&mut self, batch: &mut GpuCullInstances) {
        let changes = batch.take_changes();
        let source = batch.instances();
        if changes.all {
            self.instances.clear();
            self.instances.extend_from_slice(source);
            self.upload_all = true;
            self.uploads.clear();
            self.scales = ScaleRange::of(source);
            self.positions = PositionBox::of(source);
            self.colored = any_colored(source);
            return;
        }
        self.instances.truncate(source.len());
        for range in changes.ranges.ranges() {
            let (start, end) = (range.start as usize, range.end as usize);
            if end > self.instances.len() {
                self.instances.resize(end, source[0]);
            }
            self.instances[start..end].copy_from_slice(&source[start..end]);
            self.scales.widen(&source[start..end]);
            self.positions.widen(&source[start..end]);
            self.colored |= any_colored(&source[start..end]);
            self.uploads.mark(range.clone());
        }
        // Ranges still pending from a frame that uploaded nothing may lie
        // past a truncation.
        self.uploads.clip(source.len() as u32);
        if self.instances.len() != source.len() {
            // Cannot happen through the component's methods; stay correct anyway.
            self.instances.clear();
            self.instances.extend_from_slice(source);
            self.upload_all = true;
            self.scales = ScaleRange::of(source);
            self.positions = PositionBox::of(source);
            self.colored = any_colored(source);
        }
    }
    /// Takes the entity's transform and inherited visibility: the frame is
    /// rebuilt only when the transform changed, and last frame's transform
    /// is kept for motion vectors, as Bevy keeps a mesh's. Writes only what
    /// changed.
    fn place(&mut self, world_from_local: Affine3A, inherited_visible: bool) {
        if self.previous_world_from_local != self.world_from_local {
            self.previous_world_from_local = self.world_from_local;
        }
        if self.world_from_local != world_from_local {
            self.world_from_local = world_from_local;
            let frame = batch_frame(world_from_local);
            self.placed = frame.is_some();
            self.frame = frame.unwrap_or_default();
        }
        let visible = inherited_visible && self.placed;
        if self.visible != visible {
            self.visible = visible;
        }
    }

    /// Whether the main pass must pass each instance's color on to the
    /// material (as the vertex color): where some instance is not white, or
    /// may not be (instances written on the GPU). (A material with its own
    /// fragment shader always gets it.) A white
    /// instance's color changes nothing, and on a GPU that draws many small
    /// triangles the extra interpolated value costs (on an H200, a sixth of
    /// the main pass of 100k small spheres).
    pub fn instance_colors(&self) -> bool {
        self.colored || self.gpu_writes.is_some()
    }

    /// Whether its levels cross-fade (`GpuCullLod::with_cross_fade`).
    pub fn cross_fades(&self) -> bool {
        self.lod_cross_fade > 0.0 && !self.lod.is_empty()
    }

    /// How the main pass draws the batch's windings: an instance whose
    /// triangles wind the other way round on screen (a mirror image in a
    /// batch that does not mirror, or the other way round) is drawn with
    /// the opposite front face, so that its back faces are culled and lit
    /// as on a mesh.
    pub fn windings(&self) -> Windings {
        let (mirror_images, upright) = self.all_scales().signs();
        let mirrors = self.frame.mirrors();
        let (clockwise, counter_clockwise) = if mirrors {
            (upright, mirror_images)
        } else {
            (mirror_images, upright)
        };
        Windings {
            first_clockwise: !counter_clockwise,
            both: clockwise && counter_clockwise,
        }
    }

    /// The mesh-space sphere the cull tests the instances of `format` with:
    /// the mesh's, or for a format that carries no scale one covering every
    /// scale the draw applies, so that the cull is never less conservative
    /// than the draw. Cells are computed with it too.
    pub fn cull_bounds(&self, format: cull_core::InstanceFormat) -> Sphere {
        if format.carries_scale() {
            self.bounds
        } else {
            self.all_scales().cover(self.bounds)
        }
    }
}

/// Whether some instance's color is not white.
fn any_colored(instances: &[GpuCullInstance]) -> bool {
    instances.iter().any(|instance| instance.color != [1.0; 4])
}

/// The main pass's draws of a batch ([`BatchData::windings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windings {
    /// Its first draw's front face is clockwise (all its instances wind
    /// backwards).
    pub first_clockwise: bool,
    /// A second draw, with the clockwise front face, draws the instances
    /// that wind backwards.
    pub both: bool,
}

/// Brings changed settings to the render world.
pub(crate) fn extract_settings(
    mut commands: Commands,
    settings: bevy::render::Extract<Res<GpuCullSettings>>,
) {
    if settings.is_changed() {
        commands.insert_resource(settings.clone());
    }
}

type MainBatches<'w, 's> = Query<
    'w,
    's,
    (
        &'static RenderEntity,
        &'static mut GpuCullInstances,
        &'static GpuCullBounds,
        Has<NotShadowReceiver>,
        Option<&'static RenderLayers>,
        Option<&'static MeshMaterial3d<StandardMaterial>>,
        Option<&'static GpuCullLod>,
        Option<&'static GpuCullCells>,
        Option<&'static GpuCullComputeWrites>,
        Has<GpuCullMotionVectors>,
        &'static InheritedVisibility,
        &'static GlobalTransform,
    ),
>;

/// The surface a pixel level's pixel shows: its mesh's mean normal (in mesh
/// space, turned as the level turns) and mean texture coordinate, what a
/// mesh a pixel across shows about its middle. A closed mesh, whose normals
/// cancel out, shows the side facing the view there (`faces_view`), as
/// does a mesh without normals in the main world.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PixelSurface {
    pub normal: Vec3,
    pub uv: Vec2,
    /// The pixel faces the view (its normal +Z turned like the view).
    pub faces_view: bool,
}

impl Default for PixelSurface {
    fn default() -> Self {
        Self {
            normal: Vec3::Z,
            uv: Vec2::splat(0.5),
            faces_view: true,
        }
    }
}

/// Each pixel level mesh's [`PixelSurface`], kept until Bevy reports the
/// mesh changed: a batch's extract then walks no vertex.
#[derive(Default)]
pub(crate) struct PixelSurfaces(HashMap<AssetId<Mesh>, PixelSurface>);

impl PixelSurfaces {
    /// The surface of the first level of `lod` drawn as pixels (`pixels`,
    /// bit `k` for level `k`); the default while its mesh is not loaded.
    fn of_first(&mut self, lod: &[(AssetId<Mesh>, f32)], pixels: u32, meshes: &Assets<Mesh>) -> PixelSurface {
        let Some(&(id, _)) = lod.get(pixels.trailing_zeros() as usize) else {
            return PixelSurface::default();
        };
        if let Some(surface) = self.0.get(&id) {
            return *surface;
        }
        let Some(mesh) = meshes.get(id) else {
            return PixelSurface::default();
        };
        let surface = PixelSurface::of(mesh);
        self.0.insert(id, surface);
        surface
    }

    /// Forgets the meshes Bevy reports added, changed or gone.
    fn forget_changed(&mut self, events: &mut MessageReader<AssetEvent<Mesh>>) {
        for id in reported(events) {
            self.0.remove(&id);
        }
    }
}

/// [`reads_texture_coordinates`] of each `StandardMaterial`, kept until
/// Bevy reports the material changed: every batch's extract asks each
/// frame, and a walk of some sixty fields is not free.
#[derive(Default)]
pub(crate) struct CoordinateReaders(HashMap<AssetId<StandardMaterial>, bool>);

impl CoordinateReaders {
    /// Whether shading `material` (the asset `id`) reads texture
    /// coordinates.
    fn of(&mut self, id: AssetId<StandardMaterial>, material: &StandardMaterial) -> bool {
        *self
            .0
            .entry(id)
            .or_insert_with(|| reads_texture_coordinates(material))
    }

    /// Forgets the materials Bevy reports added, changed or gone.
    fn forget_changed(&mut self, events: &mut MessageReader<AssetEvent<StandardMaterial>>) {
        for id in reported(events) {
            self.0.remove(&id);
        }
    }
}

/// The assets Bevy reports added, changed or gone since `events` last read.
fn reported<'a, A: Asset>(
    events: &'a mut MessageReader<AssetEvent<A>>,
) -> impl Iterator<Item = AssetId<A>> + 'a {
    events.read().map(|event| {
        let (AssetEvent::Added { id }
        | AssetEvent::Modified { id }
        | AssetEvent::Removed { id }
        | AssetEvent::Unused { id }
        | AssetEvent::LoadedWithDependencies { id }) = event;
        *id
    })
}

impl PixelSurface {
    /// The surface `mesh` shows about its middle.
    fn of(mesh: &Mesh) -> Self {
        let mean3 = |values: &[[f32; 3]]| values.iter().map(|v| Vec3::from(*v)).sum::<Vec3>();
        let mean2 =
            |values: &[[f32; 2]]| values.iter().map(|v| Vec2::from(*v)).sum::<Vec2>() / values.len() as f32;
        use bevy::mesh::VertexAttributeValues::{Float32x2, Float32x3};
        // Normals whose sum is under a quarter of their count mostly
        // cancel: a closed mesh.
        let (normal, faces_view) = match mesh.attribute(Mesh::ATTRIBUTE_NORMAL) {
            Some(Float32x3(normals)) if mean3(normals).length() >= 0.25 * normals.len() as f32 => {
                (mean3(normals).normalize(), false)
            }
            _ => (Vec3::Z, true),
        };
        let uv = match mesh.attribute(Mesh::ATTRIBUTE_UV_0) {
            Some(Float32x2(uvs)) if !uvs.is_empty() => mean2(uvs),
            _ => Vec2::splat(0.5),
        };
        Self {
            normal,
            uv,
            faces_view,
        }
    }
}

/// A batch's levels of detail as the render world keeps them; none (with an
/// error, once) when the component breaks its rules.
/// With the levels facing the camera and drawn as pixels, as
/// `BatchData::lod_facing` and `lod_pixels`, and the cross-fade's width.
fn lod_levels(lod: Option<&GpuCullLod>) -> (Vec<(AssetId<Mesh>, f32)>, [u32; 2], f32) {
    let Some(lod) = lod else {
        return (Vec::new(), [0, 0], 0.0);
    };
    if let Some(problem) = lod.problem() {
        error_once!("bevy-gpu-cull: {problem}; the batch is drawn without levels of detail");
        return (Vec::new(), [0, 0], 0.0);
    }
    let bits = |of: fn(&GpuCullLodLevel) -> bool| {
        lod.levels
            .iter()
            .enumerate()
            .filter(|(_, level)| of(level))
            .fold(0, |bits, (k, _)| bits | 1 << k)
    };
    let levels = lod
        .levels
        .iter()
        .map(|level| (level.mesh.id(), level.min_screen_size))
        .collect();
    (
        levels,
        [bits(|l| l.facing_camera), bits(|l| l.as_pixels)],
        lod.cross_fade,
    )
}

/// A batch's GPU writes as the render world takes them: none (with an
/// error, once) when the component breaks its rules; a warning, once,
/// where it asks for cells too, which it is culled without.
fn gpu_writes_of(writes: Option<&GpuCullComputeWrites>, cells: bool) -> Option<GpuCullComputeWrites> {
    let writes = writes?;
    if let Some(problem) = writes.problem() {
        error_once!("bevy-gpu-cull: {problem}; the batch's GPU writes are ignored");
        return None;
    }
    if cells {
        warn_once!("bevy-gpu-cull: a batch written on the GPU is culled without its GpuCullCells");
    }
    Some(*writes)
}

/// The frame a batch's instances are culled in, `None` (the batch shows
/// nothing, as a mesh scaled to zero) for a transform that places nothing.
fn batch_frame(world_from_local: Affine3A) -> Option<LocalFrame> {
    match LocalFrame::new(Mat4::from(world_from_local)) {
        Ok(frame) => Some(frame),
        Err(e) => {
            warn_once!("GPU culling: a batch's GlobalTransform places nothing ({e}); it is not drawn");
            None
        }
    }
}

/// What [`extract_batches`] reads of the main world: the batches, the
/// meshes and Bevy's reports of changed meshes.
type MainBatchesAndMeshes = (
    MainBatches<'static, 'static>,
    Res<'static, Assets<Mesh>>,
    MessageReader<'static, 'static, AssetEvent<Mesh>>,
    MessageReader<'static, 'static, AssetEvent<StandardMaterial>>,
);

/// Brings each batch's changes to the render world: the changed ranges only
/// (taken from the main world's component, hence `MainWorld` rather than
/// `Extract`), so an unchanged batch costs a flag check and an edited one
/// the size of its edits.
pub(crate) fn extract_batches(
    mut commands: Commands,
    mut main_world: ResMut<MainWorld>,
    mut state: Local<Option<SystemState<MainBatchesAndMeshes>>>,
    mut surfaces: Local<PixelSurfaces>,
    mut readers: Local<CoordinateReaders>,
    mut batches: Query<(Entity, &mut BatchData), Without<CombinedBatch>>,
    mut live: Local<HashSet<Entity>>,
) {
    let state = state.get_or_insert_with(|| SystemState::new(&mut main_world));
    let Ok((mut main_batches, meshes, mut mesh_events, mut material_events)) = state.get_mut(&mut main_world)
    else {
        return;
    };
    surfaces.forget_changed(&mut mesh_events);
    readers.forget_changed(&mut material_events);
    live.clear();
    let mut materials = Vec::new();
    // Inserted once their material is read, so that their first frame
    // draws with it.
    let mut new_batches = HashMap::new();
    for (
        render_entity,
        mut batch,
        bounds,
        not_receiver,
        layers,
        material,
        lod,
        cells,
        gpu_writes,
        motion,
        visibility,
        transform,
    ) in &mut main_batches
    {
        // A change Bevy saw that the component's methods did not record (an
        // edit through reflection, a scene): the whole list goes up.
        if batch.is_changed() && !batch.changes.touched {
            batch.bypass_change_detection().mark_all();
        }
        let world_from_local = transform.affine();
        let cells = cells.copied();
        let layers = layers.cloned().unwrap_or_default();
        let (lod, [lod_facing, lod_pixels], lod_cross_fade) = lod_levels(lod);
        let pixel_surface = surfaces.of_first(&lod, lod_pixels, &meshes);
        materials.push((render_entity.id(), material.map(|m| m.id())));
        let render_entity = render_entity.id();
        live.insert(render_entity);
        let properties = BatchProperties {
            bounds: Sphere::new(bounds.center, bounds.radius),
            shadow_receiver: !not_receiver,
            render_layers: layers,
            lod,
            lod_facing,
            lod_pixels,
            pixel_surface,
            lod_cross_fade,
            cells,
            gpu_writes: gpu_writes_of(gpu_writes, cells.is_some()),
            motion,
        };
        let Ok((_, mut data)) = batches.get_mut(render_entity) else {
            let batch = batch.bypass_change_detection();
            let data = BatchData::new(batch, properties, world_from_local, visibility.get());
            new_batches.insert(render_entity, data);
            continue;
        };
        data.place(world_from_local, visibility.get());
        data.set_properties(properties);
        if batch.changes.any {
            data.apply_changes(batch.bypass_change_detection());
        }
    }
    let standard = main_world.get_resource::<Assets<StandardMaterial>>();
    for (entity, m) in batch_materials(standard, materials, &mut readers) {
        if let Some(data) = new_batches.get_mut(&entity) {
            data.material = m;
        } else if let Ok((_, mut data)) = batches.get_mut(entity)
            && data.material != m
        {
            data.material = m;
        }
    }
    for (entity, data) in new_batches {
        commands.entity(entity).insert(data);
    }
    // Batches whose component was removed (despawned entities leave the
    // render world with their components).
    for (entity, _) in &batches {
        if !live.contains(&entity) {
            commands.entity(entity).remove::<BatchData>();
        }
    }
}

/// The batches' materials (render entity and `StandardMaterial`, if any),
/// read from the main world's assets: cheap, a few fields per batch; the
/// draw's uniform is written only on change.
fn batch_materials<'a>(
    standard: Option<&'a Assets<StandardMaterial>>,
    materials: Vec<(Entity, Option<AssetId<StandardMaterial>>)>,
    readers: &'a mut CoordinateReaders,
) -> impl Iterator<Item = (Entity, BatchMaterial)> + 'a {
    materials.into_iter().map(move |(entity, id)| {
        let m = id
            .and_then(|id| Some((id, standard?.get(id)?)))
            .map_or_else(BatchMaterial::default, |(id, m)| {
                BatchMaterial::from_standard(m, readers.of(id, m))
            });
        (entity, m)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::ecs::message::Messages;

    /// A pixel level mesh's surface is kept until Bevy reports the mesh
    /// changed, then taken again.
    #[test]
    fn pixel_surfaces_follow_their_meshes_changes() {
        let mut world = World::new();
        world.init_resource::<Messages<AssetEvent<Mesh>>>();
        let mut meshes = Assets::<Mesh>::default();
        let facing = |z: f32| {
            Mesh::from(Rectangle::new(1.0, 1.0))
                .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, vec![[0.0, 0.0, z]; 4])
        };
        let id = meshes.add(facing(1.0)).id();
        world.insert_resource(meshes);
        let mut state = SystemState::<(Res<Assets<Mesh>>, MessageReader<AssetEvent<Mesh>>)>::new(&mut world);
        let mut surfaces = PixelSurfaces::default();
        let lod = [(id, 0.0)];
        let mut normal = |world: &mut World| {
            let (meshes, mut events) = state.get_mut(world).expect("valid params");
            surfaces.forget_changed(&mut events);
            surfaces.of_first(&lod, 1, &meshes).normal
        };
        assert_eq!(normal(&mut world), Vec3::Z);
        world
            .resource_mut::<Assets<Mesh>>()
            .insert(id, facing(-1.0))
            .unwrap();
        assert_eq!(normal(&mut world), Vec3::Z, "kept until the change is reported");
        world.write_message(AssetEvent::Modified { id });
        assert_eq!(normal(&mut world), -Vec3::Z);
    }

    /// The answer is kept until Bevy reports the material changed.
    #[test]
    fn coordinate_readers_follow_the_materials_changes() {
        let mut world = World::new();
        world.init_resource::<Messages<AssetEvent<StandardMaterial>>>();
        let id = AssetId::<StandardMaterial>::default();
        let mut state = SystemState::<MessageReader<AssetEvent<StandardMaterial>>>::new(&mut world);
        let mut readers = CoordinateReaders::default();
        let textured = StandardMaterial {
            base_color_texture: Some(Handle::default()),
            ..default()
        };
        assert!(!readers.of(id, &StandardMaterial::default()));
        assert!(!readers.of(id, &textured), "kept until the change is reported");
        world.write_message(AssetEvent::Modified { id });
        readers.forget_changed(&mut state.get_mut(&mut world).expect("valid params"));
        assert!(readers.of(id, &textured));
    }
}
