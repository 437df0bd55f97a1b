//! Batches drawn together. Bevy draws its meshes of one mesh and one
//! material bind group with one multi-draw, whatever their materials (a
//! bindless slab holds many); the plugin does the same for batches: those
//! of one mesh, transform and material kind whose materials share a bind
//! group (one material, or bindless materials in one slab) are culled and
//! drawn as one batch, whose instances are the members' lists
//! one after another. Each instance's material is its member's: the
//! combined batch's entries in Bevy's `mesh` array are its members', and
//! the vertex stage passes on the member an instance belongs to as the
//! `instance_index` a material's fragment shader reads its slot at (the
//! members' first instances are in `GpuCullLevel`). Each member's visible
//! counts are its own: each view's survivors are counted per member on the
//! GPU (`super::member_counts`) and read back with the counts.
//!
//! The groups are found in `PrepareResources`, after Bevy prepared the
//! frame's meshes and materials. The combined batch is a render-world
//! entity of its own, made when its
//! members are first found and made again when they change (a member that
//! joins or leaves); it takes over their draws the frame after it is made
//! and gives them back a frame before it goes, so that each frame draws
//! every batch once. A member's edits are uploaded into the combined lists
//! as a batch's own are (all of them where a member's length changed). A
//! member that leaves (hidden, despawned, given another material) is
//! still drawn by the combined batch in that frame.

use super::extract::{BatchData, CombinedBatch};
use crate::settings::GpuCullSettings;
use bevy::material::{MaterialProperties, RenderPhaseType};
use bevy::pbr::{PreparedMaterial, RenderMaterialInstances, RenderMeshInstanceFlags, RenderMeshInstances};
use bevy::platform::collections::{HashMap, HashSet};
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::sync_world::MainEntity;
use std::hash::Hash;
use std::sync::Arc;

/// At most this many batches are drawn together: `GpuCullLevel` holds
/// their first instances.
pub(crate) const MAX_MEMBERS: usize = 32;
/// A batch of more instances is drawn on its own: a batch that large gains
/// nothing from sharing a draw.
pub(crate) const MAX_MEMBER_INSTANCES: usize = 16_384;
/// Batches drawn together hold at most this many instances in all: a
/// change of one member's length uploads the whole combined list again.
pub(crate) const MAX_MERGED_INSTANCES: usize = 65_536;

/// One batch drawn in a combined batch: its main-world entity and its
/// instances' place in the combined list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MergeMember {
    /// Its render-world entity.
    pub render: Entity,
    pub main: MainEntity,
    pub start: u32,
    pub len: u32,
}

/// The batches a combined batch draws, in their lists' order (on the
/// combined batch's render-world entity).
#[derive(Component, Clone, Debug)]
pub(crate) struct MergedBatch {
    pub members: Arc<[MergeMember]>,
    /// Its members are drawn by it: from the frame after it was made, when
    /// its buffers and targets are ready (until then they draw on their
    /// own, so that no frame draws neither).
    drawn: bool,
    /// Its group is gone: it draws this frame while its members upload and
    /// cull on their own again, and goes the next.
    retiring: bool,
}

impl MergedBatch {
    /// Whether it draws for the last time, as it was (its uniforms and
    /// material slots stay as they were written).
    pub fn retiring(&self) -> bool {
        self.retiring
    }
}

/// On a batch drawn in a combined batch (its render-world entity): which.
/// It is neither culled nor drawn on its own, and its own buffers go.
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MergedInto(pub Entity);

/// What batches drawn together share, besides their material kind and
/// render layers (compared, not hashed).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct MergeKey {
    mesh: AssetId<Mesh>,
    shadow_caster: bool,
    /// The bit patterns of the transform, this frame's and last frame's.
    transforms: [u32; 24],
    /// The bit patterns of the culling sphere.
    bounds: [u32; 4],
    shadow_receiver: bool,
    motion: bool,
    /// The material's bind group (its bindless slab).
    material_group: u32,
    /// The material's type (bind group indices are per type).
    material_type: std::any::TypeId,
}

/// What must be equal for two batches' materials to share a draw: Bevy
/// specializes the draw's pipeline from these.
#[derive(Clone, Copy)]
struct MaterialKind<'a>(&'a MaterialProperties);

impl PartialEq for MaterialKind<'_> {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.0, other.0);
        a.material_key == b.material_key
            && a.mesh_pipeline_key_bits == b.mesh_pipeline_key_bits
            && a.render_method == b.render_method
            && a.alpha_mode == b.alpha_mode
            && a.depth_bias.to_bits() == b.depth_bias.to_bits()
            && a.shadows_enabled == b.shadows_enabled
            && a.prepass_enabled == b.prepass_enabled
            && a.shaders == b.shaders
            && a.draw_functions == b.draw_functions
    }
}

/// Whether a material may share a draw with others of its bind group: it is
/// drawn in an opaque or alpha-masked phase (a blended batch is sorted on
/// its own). A bindless material shares its group (its slab) with others,
/// told apart by their slots; any other has a group of its own, shared by
/// the batches of the same material.
fn shares_draws(material: &MaterialProperties) -> bool {
    !material.reads_view_transmission_texture
        && matches!(
            material.render_phase_type,
            RenderPhaseType::Opaque | RenderPhaseType::AlphaMask
        )
}

/// Whether a batch may be drawn with others, as far as its own data says:
/// visible, without levels of detail, cells or GPU writes, and not larger
/// than [`MAX_MEMBER_INSTANCES`].
fn may_join(data: &BatchData) -> bool {
    data.visible
        && data.lod.is_empty()
        && data.cells.is_none()
        && data.gpu_writes.is_none()
        && (1..=MAX_MEMBER_INSTANCES).contains(&data.instances.len())
}

fn bits<const N: usize>(values: [f32; N]) -> [u32; N] {
    values.map(f32::to_bits)
}

/// Groups candidates `(key, compared, instances)` into the batches drawn
/// together, as indices into `candidates`, in their order: equal keys and
/// equal compared parts, at most [`MAX_MEMBERS`] and
/// [`MAX_MERGED_INSTANCES`] instances to a group. A candidate alone is in
/// no group.
fn plan_groups<K: Hash + Eq, C: PartialEq>(candidates: &[(K, C, usize)]) -> Vec<Vec<usize>> {
    let mut open: HashMap<&K, Vec<usize>> = HashMap::default();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (index, (key, compared, len)) in candidates.iter().enumerate() {
        let at = open.entry(key).or_default();
        // The open group of this key with an equal compared part.
        let found = at.iter().position(|&g| candidates[groups[g][0]].1 == *compared);
        let fits = |g: usize| {
            groups[g].len() < MAX_MEMBERS
                && groups[g].iter().map(|&i| candidates[i].2).sum::<usize>() + len <= MAX_MERGED_INSTANCES
        };
        match found {
            Some(slot) if fits(at[slot]) => groups[at[slot]].push(index),
            Some(slot) => {
                at[slot] = groups.len();
                groups.push(vec![index]);
            }
            None => {
                at.push(groups.len());
                groups.push(vec![index]);
            }
        }
    }
    groups.retain(|g| g.len() > 1);
    groups
}

/// What the merge reads of the render world besides the batches.
#[derive(bevy::ecs::system::SystemParam)]
pub(crate) struct MergeInputs<'w> {
    mesh_instances: Res<'w, RenderMeshInstances>,
    material_instances: Res<'w, RenderMaterialInstances>,
    materials: Res<'w, ErasedRenderAssets<PreparedMaterial>>,
    settings: Option<Res<'w, GpuCullSettings>>,
    draw_shader: Res<'w, super::bindings::DrawShaderRef>,
    adapter: Res<'w, bevy::render::renderer::RenderAdapterInfo>,
}

type Singles<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        &'static MainEntity,
        &'static mut BatchData,
        Option<&'static MergedInto>,
    ),
    Without<MergedBatch>,
>;

/// Finds the batches drawn together this frame and keeps their combined
/// batches: made for new groups, updated with their members' edits (made
/// anew where a member's length changed), retired with groups that are
/// gone. A combined batch takes over its members' draws the frame after it
/// was made, and gives them back a frame before it goes, so that every
/// frame draws each batch once. Runs in `PrepareResources`, after Bevy
/// prepared this frame's meshes and materials and before the batches'
/// uploads.
pub(crate) fn merge_batches(
    mut commands: Commands,
    inputs: MergeInputs,
    mut singles: Singles,
    mut merged: Query<(Entity, &mut BatchData, &mut MergedBatch)>,
) {
    // Not on wgpu's GL backend, where the members' counts came out wrong
    // (one member's survivors counted twice on llvmpipe): its batches
    // draw one by one.
    let enabled = inputs.settings.as_ref().is_none_or(|s| s.merge_batches)
        && matches!(inputs.draw_shader.0, bevy::shader::ShaderRef::Default)
        && inputs.adapter.backend != wgpu::Backend::Gl;
    let plan = if enabled {
        plan_merges(&inputs, &singles)
    } else {
        Vec::new()
    };
    let mut wanted: HashSet<Vec<Entity>> = plan.into_iter().collect();
    // The batches drawn by a combined batch this frame.
    let mut into: HashMap<Entity, Entity> = HashMap::default();
    for (entity, mut data, mut batch) in &mut merged {
        if batch.retiring {
            commands.entity(entity).despawn();
            continue;
        }
        let renders: Vec<Entity> = batch.members.iter().map(|m| m.render).collect();
        if !wanted.remove(&renders) {
            // Never drawn: gone at once; else drawn a last time, as it was
            // (a member that left, say hidden, still shows in it then).
            if batch.drawn {
                batch.retiring = true;
            } else {
                commands.entity(entity).despawn();
            }
            continue;
        }
        let resized = batch.members.iter().any(|m| {
            singles
                .get(m.render)
                .is_ok_and(|(_, _, d, _)| d.instances.len() != m.len as usize)
        });
        if resized {
            // The same members at new places: the lists again, whole.
            let (members, parts) = members_of(&renders, &singles);
            *data = BatchData::combined(&parts);
            batch.members = members.into();
        } else {
            update_merged(&mut data, &batch, &singles);
        }
        batch.drawn = true;
        into.extend(renders.iter().map(|&r| (r, entity)));
    }
    for renders in wanted {
        spawn_merged(&mut commands, &renders, &singles);
    }
    hand_over(&mut commands, &into, &mut singles);
}

/// Marks the batches a combined batch draws this frame (their edits went
/// into it), and gives the others back their own draws (uploaded whole).
fn hand_over(commands: &mut Commands, into: &HashMap<Entity, Entity>, singles: &mut Singles) {
    for (render, _, mut data, was) in singles {
        let now = into.get(&render).copied();
        if now.is_some() && (data.upload_all || !data.uploads.ranges().is_empty()) {
            data.uploads.clear();
            data.upload_all = false;
        }
        if was.map(|w| w.0) == now {
            continue;
        }
        match now {
            Some(entity) => {
                commands.entity(render).insert(MergedInto(entity));
            }
            None => {
                commands.entity(render).remove::<MergedInto>();
                // Its own buffers went while it was drawn with others.
                data.upload_all = true;
            }
        }
    }
}

/// This frame's groups of batches drawn together, as their render-world
/// entities, each in its main-world entities' order.
fn plan_merges(inputs: &MergeInputs, singles: &Singles) -> Vec<Vec<Entity>> {
    let mut candidates = Vec::new();
    for (render, main, data, _) in singles {
        if !may_join(data) {
            continue;
        }
        let Some(mesh) = inputs.mesh_instances.render_mesh_queue_data(*main) else {
            continue;
        };
        let Some(instance) = inputs.material_instances.instances.get(main) else {
            continue;
        };
        let Some(material) = inputs.materials.get(instance.asset_id) else {
            continue;
        };
        if !shares_draws(&material.properties) {
            continue;
        }
        let w = data.world_from_local.to_cols_array();
        let p = data.previous_world_from_local.to_cols_array();
        let mut transforms = [0u32; 24];
        transforms[..12].copy_from_slice(&bits(w));
        transforms[12..].copy_from_slice(&bits(p));
        let key = MergeKey {
            mesh: mesh.mesh_asset_id(),
            shadow_caster: mesh.flags().contains(RenderMeshInstanceFlags::SHADOW_CASTER),
            transforms,
            bounds: bits([
                data.bounds.center.x,
                data.bounds.center.y,
                data.bounds.center.z,
                data.bounds.radius,
            ]),
            shadow_receiver: data.shadow_receiver,
            motion: data.motion,
            material_group: material.binding.group.0,
            material_type: instance.asset_id.type_id(),
        };
        let compared = (data.render_layers.clone(), MaterialKind(&material.properties));
        candidates.push((*main, render, (key, compared, data.instances.len())));
    }
    // The main world's order: stable from frame to frame.
    candidates.sort_by_key(|(main, _, _)| *main);
    let (renders, keyed): (Vec<Entity>, Vec<_>) = candidates.into_iter().map(|(_, r, k)| (r, k)).unzip();
    plan_groups(&keyed)
        .into_iter()
        .map(|group| group.into_iter().map(|i| renders[i]).collect())
        .collect()
}

/// The members `renders` at their places in a combined list, and their
/// render-world copies.
fn members_of<'a>(renders: &[Entity], singles: &'a Singles) -> (Vec<MergeMember>, Vec<&'a BatchData>) {
    let mut members = Vec::with_capacity(renders.len());
    let mut parts = Vec::with_capacity(renders.len());
    let mut start = 0u32;
    for &render in renders {
        let Ok((_, main, data, _)) = singles.get(render) else {
            continue;
        };
        let len = data.instances.len() as u32;
        members.push(MergeMember {
            render,
            main: *main,
            start,
            len,
        });
        parts.push(data);
        start += len;
    }
    (members, parts)
}

/// Spawns the combined batch of `renders`: their lists one after another,
/// the first member's properties. Its members still draw on their own this
/// frame.
fn spawn_merged(commands: &mut Commands, renders: &[Entity], singles: &Singles) {
    let (members, parts) = members_of(renders, singles);
    let data = BatchData::combined(&parts);
    let main = members[0].main;
    commands.spawn((
        data,
        MergedBatch {
            members: members.into(),
            drawn: false,
            retiring: false,
        },
        CombinedBatch,
        main,
    ));
}

/// Brings a combined batch up to date with its members: their transform,
/// visibility and properties (the first member's, which all share) and
/// the edits of those of the same length as when combined.
fn update_merged(data: &mut BatchData, batch: &MergedBatch, singles: &Singles) {
    for (k, member) in batch.members.iter().enumerate() {
        let Ok((_, _, part, _)) = singles.get(member.render) else {
            continue;
        };
        if k == 0 {
            data.take_properties_of(part);
        }
        if part.instances.len() == member.len as usize {
            data.take_edits_of(part, member.start);
        }
    }
}

impl BatchData {
    /// The combined batch of `parts`: their lists one after another, the
    /// first part's properties, everything to upload.
    fn combined(parts: &[&BatchData]) -> BatchData {
        let first = parts[0];
        let mut instances = Vec::with_capacity(parts.iter().map(|p| p.instances.len()).sum());
        let mut scales = first.scales;
        let mut positions = first.positions;
        let mut colored = false;
        for part in parts {
            instances.extend_from_slice(&part.instances);
            scales.widen(&part.instances);
            positions.widen(&part.instances);
            colored |= part.colored;
        }
        let mut data = BatchData {
            instances,
            bounds: first.bounds,
            upload_all: true,
            uploads: Default::default(),
            scales,
            positions,
            colored,
            shadow_receiver: first.shadow_receiver,
            render_layers: first.render_layers.clone(),
            material: first.material,
            lod: Vec::new(),
            lod_facing: 0,
            lod_pixels: 0,
            pixel_surface: first.pixel_surface,
            lod_cross_fade: 0.0,
            cells: None,
            visible: first.visible,
            world_from_local: first.world_from_local,
            previous_world_from_local: first.previous_world_from_local,
            frame: first.frame,
            placed: first.placed,
            gpu_writes: None,
            motion: first.motion,
        };
        data.material.reads_texture_coordinates = parts.iter().any(|p| p.material.reads_texture_coordinates);
        data
    }

    /// Takes a member's transform, visibility and properties (the first
    /// member's: all share them but the material, whose texture
    /// coordinates stay read once any member read them).
    fn take_properties_of(&mut self, first: &BatchData) {
        if self.world_from_local != first.world_from_local
            || self.previous_world_from_local != first.previous_world_from_local
        {
            self.world_from_local = first.world_from_local;
            self.previous_world_from_local = first.previous_world_from_local;
            self.frame = first.frame;
            self.placed = first.placed;
        }
        if self.visible != first.visible {
            self.visible = first.visible;
        }
        if self.render_layers != first.render_layers {
            self.render_layers = first.render_layers.clone();
        }
        if self.bounds != first.bounds
            || self.shadow_receiver != first.shadow_receiver
            || self.motion != first.motion
        {
            self.bounds = first.bounds;
            self.shadow_receiver = first.shadow_receiver;
            self.motion = first.motion;
        }
        let reads = self.material.reads_texture_coordinates | first.material.reads_texture_coordinates;
        if self.material.uniform != first.material.uniform
            || self.material.textures != first.material.textures
            || self.material.reads_texture_coordinates != reads
        {
            self.material = first.material;
            self.material.reads_texture_coordinates = reads;
        }
    }

    /// Copies a member's edits (its ranges to upload, of a list of the
    /// length it had when combined) into the combined list at `start`, to
    /// upload there.
    fn take_edits_of(&mut self, member: &BatchData, start: u32) {
        let whole = 0..member.instances.len() as u32;
        let ranges = if member.upload_all {
            std::slice::from_ref(&whole)
        } else {
            member.uploads.ranges()
        };
        for range in ranges {
            let edited = &member.instances[range.start as usize..range.end as usize];
            let at = (start + range.start) as usize;
            self.instances[at..at + edited.len()].copy_from_slice(edited);
            self.scales.widen(edited);
            self.positions.widen(edited);
            self.colored |= member.colored;
            self.uploads.mark(start + range.start..start + range.end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_and_kinds_are_grouped_in_order_and_lone_ones_are_not() {
        let candidates = [
            ("a", 1, 10),
            ("b", 1, 10),
            ("a", 2, 10),
            ("a", 1, 10),
            ("c", 1, 10),
            ("a", 2, 10),
            ("a", 1, 10),
        ];
        assert_eq!(plan_groups(&candidates), vec![vec![0, 3, 6], vec![2, 5]]);
    }

    #[test]
    fn groups_stop_at_the_members_and_instances_they_may_hold() {
        let many: Vec<_> = (0..MAX_MEMBERS + 3).map(|_| ("a", 0, 1)).collect();
        let groups = plan_groups(&many);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].len(), MAX_MEMBERS);
        assert_eq!(groups[1], vec![MAX_MEMBERS, MAX_MEMBERS + 1, MAX_MEMBERS + 2]);
        let large = MAX_MERGED_INSTANCES / 2;
        let big = [("a", 0, large), ("a", 0, large), ("a", 0, 1), ("a", 0, 1)];
        assert_eq!(plan_groups(&big), vec![vec![0, 1], vec![2, 3]]);
    }
}
