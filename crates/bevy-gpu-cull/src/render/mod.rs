//! The render-world side, by stage (no import circles between them):
//! extraction (`extract`), what each view is and which are culled
//! together (`groups`, `views`), the culler and its kernels (`kernels`),
//! the batches drawn together (`merge`), the batches' buffers (`batches`)
//! and uniforms (`material`), the cull targets (`targets`) and their bind
//! groups (`bind_groups`), the cull per view (`cull`, `pyramids`) and the
//! counts' readback (`count_readback`, `count_stats`), the
//! back-to-front order of blended batches (`blend`), levels drawn as pixels
//! (`pixels`, `pixel_tiles`), queueing and drawing (`draw`, `opaque_first`,
//! `custom_material`, `queue_prepass`, `material_prepass`, `shadow`). This
//! module only wires them into Bevy's schedules.

mod batches;
mod bind_groups;
mod bindings;
mod blend;
mod count_readback;
mod count_stats;
mod cull;
mod custom_material;
mod draw;
mod extract;
pub(crate) mod gpu_writes;
mod groups;
mod kernels;
mod material;
mod material_prepass;
mod member_counts;
mod merge;
pub(crate) mod opaque_first;
mod pixel_tiles;
mod pixels;
mod pyramids;
mod queue;
mod queue_prepass;
mod shadow;
mod standard;
mod targets;
mod views;

use crate::settings::GpuCullSystems;
use crate::stats::StatSender;
use bevy::app::SubApp;
use bevy::asset::embedded_asset;
use bevy::core_pipeline::core_3d::{Opaque3d, Transparent3d, main_opaque_pass_3d};
use bevy::core_pipeline::deferred::AlphaMask3dDeferred;
use bevy::core_pipeline::mip_generation::experimental::depth::early_downsample_depth;
use bevy::core_pipeline::prepass::Opaque3dPrepass;
use bevy::core_pipeline::prepass::node::{early_prepass, late_prepass};
use bevy::core_pipeline::schedule::{Core3d, Core3dSystems};
use bevy::ecs::schedule::ScheduleConfigs;
use bevy::ecs::system::ScheduleSystem;
use bevy::pbr::deferred::deferred_lighting;
use bevy::pbr::{
    EARLY_SHADOW_PASS, LATE_SHADOW_PASS, MeshPipelineSystems, Shadow, init_prepass_pipeline,
    per_view_shadow_pass, queue_material_meshes, queue_prepass_material_meshes, queue_shadows,
    screen_space_reflections, shared_shadow_pass,
};
use bevy::prelude::*;
use bevy::render::render_phase::AddRenderCommand;
use bevy::render::render_resource::SpecializedMeshPipelines;
use bevy::render::renderer::{RenderGraph, RenderGraphSystems};
use bevy::render::{ExtractSchedule, GpuResourceAppExt, Render, RenderApp, RenderStartup, RenderSystems};
use bevy::shader::load_shader_library;

pub(crate) fn build(app: &mut App, sender: StatSender, draw_shader: bevy::shader::ShaderRef) {
    // The draw shader and the instance-fetch library it imports (which custom
    // shaders can import too), embedded in the binary.
    load_shader_library!(app, "shaders/gpu_cull_types.wgsl");
    load_shader_library!(app, "shaders/gpu_cull_draw_order.wgsl");
    load_shader_library!(app, "shaders/gpu_cull_instance.wgsl");
    load_shader_library!(app, "shaders/gpu_cull_gpu_writes.wgsl");
    embedded_asset!(app, "shaders/gpu_cull_count.wgsl");
    embedded_asset!(app, "shaders/gpu_cull_member_counts.wgsl");
    load_shader_library!(app, "shaders/gpu_cull_forward_io.wgsl");
    embedded_asset!(app, "shaders/instanced_prepass.wgsl");
    embedded_asset!(app, "shaders/instanced_material.wgsl");
    embedded_asset!(app, "shaders/instanced_material_prepass.wgsl");
    embedded_asset!(app, "shaders/gpu_cull_pixel_depth.wgsl");
    embedded_asset!(app, "shaders/gpu_cull_pixel_tiles.wgsl");
    embedded_asset!(app, "shaders/gpu_cull_pixel_tile_quad.wgsl");
    pixels::add_resolve_shader(app);
    // cull-core's kernels, compiled by Bevy's PipelineCache.
    let cull_shaders = kernels::CullShaders::add_to(app);
    let Some(render_app) = app.get_sub_app_mut(RenderApp) else {
        return;
    };
    render_app
        .insert_resource(sender)
        .insert_resource(cull_shaders)
        .insert_resource(bindings::DrawShaderRef(draw_shader));
    init_render_resources(render_app);
    add_startup_and_prepare_systems(render_app);
    add_cull_systems(render_app);
    add_draw_phase_systems(render_app);
    add_gpu_write_systems(render_app);
}

/// The render world's resources and draw commands.
fn init_render_resources(render_app: &mut SubApp) {
    render_app
        .init_resource::<bindings::InstanceBindings>()
        .init_resource::<kernels::RenderFrame>()
        .init_resource::<draw::DrawnThisFrame>()
        .init_resource::<cull::CulledThisFrame>()
        .init_resource::<count_readback::CountReadback>()
        .init_resource::<cull::LightGroupsCulled>()
        .init_resource::<draw::CurrentDrawPhase>()
        .init_resource::<opaque_first::GpuCullOpaqueBatches>()
        .init_resource::<gpu_writes::GpuCullInstanceBuffers>()
        // Resources holding GPU objects are (re)created in RenderStartup, which
        // runs again with a new device after a device loss.
        .init_gpu_resource::<targets::ViewTargets>()
        .init_resource::<groups::ViewGroups>()
        .init_resource::<kernels::KernelDemand>()
        .init_gpu_resource::<pyramids::Pyramids>()
        .init_gpu_resource::<SpecializedMeshPipelines<draw::CulledPipeline>>()
        .init_gpu_resource::<SpecializedMeshPipelines<shadow::CulledPrepassPipeline>>()
        .init_resource::<blend::BlendedDraws>()
        .init_resource::<queue::TwinPipelines<Transparent3d>>()
        .init_gpu_resource::<pixels::PixelViews>()
        .add_render_command::<Opaque3d, draw::DrawCulled>()
        .add_render_command::<Opaque3d, draw::DrawCulledMaterial>()
        .add_render_command::<Opaque3d, draw::DrawCulledPixels>()
        .add_render_command::<Transparent3d, draw::DrawCulledBlended>();
    queue::init_resources::<Opaque3d>(render_app);
    queue::init_resources::<Shadow>(render_app);
    queue::init_resources::<Opaque3dPrepass>(render_app);
    queue::init_resources::<AlphaMask3dDeferred>(render_app);
    queue_prepass::add_render_commands::<Shadow>(render_app);
    queue_prepass::add_render_commands::<Opaque3dPrepass>(render_app);
    queue_prepass::add_render_commands::<AlphaMask3dDeferred>(render_app);
}

/// Start-up (again after a device loss), extraction, preparation, queueing
/// and readback, each in its public set.
fn add_startup_and_prepare_systems(render_app: &mut SubApp) {
    render_app
        .add_systems(
            RenderStartup,
            (
                (
                    draw::init_pipeline.after(MeshPipelineSystems),
                    (
                        shadow::init_prepass_pipeline.after(init_prepass_pipeline),
                        material_prepass::init_pipeline.after(init_prepass_pipeline),
                        custom_material::init_pipeline,
                        pixels::init_pipelines,
                    ),
                )
                    .chain(),
                kernels::forget_cullers,
                batches::forget_gpu_batches,
                gpu_writes::init_count_pass,
                member_counts::init_member_count_pass,
                pixel_tiles::init_tile_pipeline,
            ),
        )
        .add_systems(
            ExtractSchedule,
            (extract::extract_batches, extract::extract_settings).in_set(GpuCullSystems::Extract),
        )
        .add_systems(
            Render,
            (
                prepare_chain(),
                // Its own stage, after every PrepareResources system: not in
                // GpuCullSystems::Prepare, so ordering against that set in
                // PrepareResources stays possible.
                (bind_groups::prepare_bind_groups, pixels::prepare_pixel_views)
                    .chain()
                    .in_set(RenderSystems::PrepareBindGroups),
                // Bevy's material queue removes entities it re-specializes
                // from the bins by main entity; ours re-adds after it.
                (
                    (draw::queue_batches, blend::prepare_sorter)
                        .chain()
                        .after(queue_material_meshes),
                    queue_prepass::queue_prepass_batches
                        .after(queue_shadows)
                        .after(queue_prepass_material_meshes),
                )
                    .in_set(GpuCullSystems::Queue)
                    .in_set(RenderSystems::QueueMeshes),
                (
                    cull::report_culled_frame,
                    count_stats::read_back_counts,
                    cull::prune_pyramids,
                    draw::report_drawn,
                    targets::report_gpu_bytes,
                )
                    .in_set(GpuCullSystems::Readback)
                    .in_set(RenderSystems::Cleanup),
            ),
        );
}

/// The culler, the groups of batches drawn together (after Bevy's meshes
/// and materials are prepared: the groups are this frame's), each batch's
/// buffers and material, the view groups and each (view, batch) target.
/// A new culler's command adds no sync point of its own: it lands at the
/// one the groups' commands need before the batches' buffers, so those and
/// the targets are the new culler's in the same frame (no frame goes
/// unculled at a switch: `switching_settings_keeps_culling_while_kernels_compile`).
fn prepare_chain() -> ScheduleConfigs<ScheduleSystem> {
    (
        (kernels::count_frame, kernels::prepare_culler).chain(),
        (
            merge::merge_batches,
            batches::prepare_batches,
            gpu_writes::publish_instance_buffers,
            material::prepare_materials,
            groups::prepare_view_groups,
            targets::prepare_targets,
        )
            .chain(),
    )
        .chain_ignore_deferred()
        .in_set(GpuCullSystems::Prepare)
        .in_set(RenderSystems::PrepareResources)
}

/// The culls, in Bevy's `Core3d` schedule: each view's before the passes
/// that draw its lists. A system with nothing to do in any view is skipped
/// by its run condition, which costs the executor less than running it
/// (each is a step of the render thread's serial chain).
fn add_cull_systems(render_app: &mut SubApp) {
    render_app.add_systems(
        Core3d,
        (
            // A camera with its directional cascades (drawn in its run),
            // before its shadow pass, prepass and main pass.
            cull::cull_view
                .before(Core3dSystems::Prepass)
                .before(per_view_shadow_pass::<EARLY_SHADOW_PASS>),
            // A camera's pixel levels, after its culls, before its main
            // pass draws them.
            pixels::splat_view
                .run_if(pixels::any_pixel_views)
                .after(cull::cull_view)
                .before(Core3dSystems::MainPass),
            // Point and spot lights' views run before the cameras.
            cull::cull_light_view.before(shared_shadow_pass::<EARLY_SHADOW_PASS>),
            // Occlusion culling's late phase, where Bevy runs its own:
            // after the early prepass and its depth pyramid, before the
            // late prepass; then the main pass draws every list.
            cull::cull_view_late
                .run_if(targets::any_late_lists)
                .after(early_prepass)
                .after(early_downsample_depth)
                .before(late_prepass)
                .before(per_view_shadow_pass::<LATE_SHADOW_PASS>)
                .before(shared_shadow_pass::<LATE_SHADOW_PASS>),
        )
            .in_set(GpuCullSystems::Cull),
    );
}

/// Which lists the draws take ([`draw::CurrentDrawPhase`]), set at the
/// boundaries of a view's passes in `Core3d`: the early lists from the
/// start of its run, the late ones for the late prepass, all of them for
/// the main pass.
fn add_draw_phase_systems(render_app: &mut SubApp) {
    render_app.add_systems(
        Core3d,
        (
            draw::enter_early_phase
                .before(cull::cull_view)
                .before(cull::cull_light_view)
                .before(Core3dSystems::Prepass)
                .before(per_view_shadow_pass::<EARLY_SHADOW_PASS>)
                .before(shared_shadow_pass::<EARLY_SHADOW_PASS>),
            draw::enter_late_phase
                .after(early_prepass)
                .after(early_downsample_depth)
                .before(cull::cull_view_late)
                .before(late_prepass)
                .before(per_view_shadow_pass::<LATE_SHADOW_PASS>)
                .before(shared_shadow_pass::<LATE_SHADOW_PASS>),
            draw::enter_main_phase
                .after(Core3dSystems::Prepass)
                .after(per_view_shadow_pass::<LATE_SHADOW_PASS>)
                .after(shared_shadow_pass::<LATE_SHADOW_PASS>)
                .before(Core3dSystems::MainPass),
            // The opaque batches before Bevy's opaque meshes, in the main
            // pass's attachments (after what writes a deferred camera's
            // color first).
            opaque_first::draw_opaque_batches_first
                .run_if(opaque_first::any_drawn_first)
                .after(deferred_lighting)
                .after(screen_space_reflections)
                .before(main_opaque_pass_3d)
                .in_set(Core3dSystems::MainPass),
        ),
    );
}

/// Instances on the GPU, in the `RenderGraph` schedule: the application's
/// writes and the plugin's pass after them before any view's run (so
/// before every cull), last frame's records kept after the frame's
/// submission.
fn add_gpu_write_systems(render_app: &mut SubApp) {
    render_app
        .configure_sets(
            RenderGraph,
            GpuCullSystems::WriteInstances.in_set(RenderGraphSystems::Begin),
        )
        .add_systems(
            RenderGraph,
            (
                gpu_writes::mark_past_count
                    .after(GpuCullSystems::WriteInstances)
                    .in_set(RenderGraphSystems::Begin),
                gpu_writes::keep_previous_instances.in_set(RenderGraphSystems::Finish),
            ),
        );
}

pub(crate) fn finish(app: &mut App) {
    custom_material::add_default_material(app);
}
