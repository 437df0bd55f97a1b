//! The render-world side: extraction, GPU resources, the cull pass per view,
//! and the indirect draw.

mod cull;
mod draw;
mod prepare;

use crate::components::{CulledInstance, GpuCullBounds, GpuCulledInstances};
use crate::plugin::{GpuCullSettings, StatSender};
use bevy::core_pipeline::core_3d::Transparent3d;
use bevy::core_pipeline::schedule::{Core3d, Core3dSystems};
use bevy::pbr::MeshPipelineSystems;
use bevy::prelude::*;
use bevy::render::render_phase::AddRenderCommand;
use bevy::render::render_resource::SpecializedMeshPipelines;
use bevy::render::sync_world::RenderEntity;
use bevy::render::{Extract, ExtractSchedule, Render, RenderApp, RenderStartup, RenderSystems};
use bevy::shader::Shader;
use cull_core::Sphere;
use std::sync::Arc;

/// The main world's batch as the render world sees it. `new_instances` is
/// only set in frames where the list changed.
#[derive(Component)]
pub(crate) struct ExtractedBatch {
    pub new_instances: Option<Arc<Vec<CulledInstance>>>,
    pub bounds: Sphere,
}

pub(crate) fn build(app: &mut App, sender: StatSender) {
    // The draw shader, from the top-level shaders/ folder; the pipeline is
    // created in RenderStartup, which may run before `finish`.
    let shader = Shader::from_wgsl(
        include_str!("../../shaders/instanced_draw.wgsl"),
        "bevy_gpu_cull/instanced_draw.wgsl",
    );
    let Some(mut shaders) = app.world_mut().get_resource_mut::<Assets<Shader>>() else {
        return;
    };
    let handle = shaders.add(shader);
    let Some(render_app) = app.get_sub_app_mut(RenderApp) else {
        return;
    };
    render_app
        .insert_resource(sender)
        .insert_resource(draw::DrawShader(handle))
        .init_resource::<prepare::ViewTargets>()
        .init_resource::<prepare::RenderFrame>()
        .init_resource::<SpecializedMeshPipelines<draw::CulledPipeline>>()
        .add_render_command::<Transparent3d, draw::DrawCulled>()
        .add_systems(RenderStartup, draw::init_pipeline.after(MeshPipelineSystems))
        .add_systems(ExtractSchedule, (extract_batches, extract_settings))
        .add_systems(
            Render,
            (
                (
                    prepare::count_frame,
                    prepare::prepare_culler,
                    prepare::prepare_batches,
                    prepare::prepare_targets,
                )
                    .chain()
                    .in_set(RenderSystems::PrepareResources),
                draw::queue_batches.in_set(RenderSystems::QueueMeshes),
                cull::read_back_counts.in_set(RenderSystems::Cleanup),
            ),
        )
        .add_systems(Core3d, cull::cull_view.before(Core3dSystems::MainPass));
}

pub(crate) fn finish(_app: &mut App) {}

fn extract_settings(mut commands: Commands, settings: Extract<Res<GpuCullSettings>>) {
    if settings.is_changed() {
        commands.insert_resource(settings.clone());
    }
}

/// Sends a batch to the render world when it is new or changed; an unchanged
/// batch costs nothing here.
fn extract_batches(
    mut commands: Commands,
    batches: Extract<Query<(RenderEntity, Ref<GpuCulledInstances>, Ref<GpuCullBounds>)>>,
) {
    for (render_entity, batch, bounds) in &batches {
        if !(batch.is_changed() || bounds.is_changed()) {
            continue;
        }
        let bounds = Sphere::new(bounds.center, bounds.radius);
        commands.entity(render_entity).insert(ExtractedBatch {
            new_instances: Some(Arc::new(batch.instances.clone())),
            bounds,
        });
    }
}
