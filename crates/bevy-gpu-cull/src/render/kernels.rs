//! The culler and its kernels: cull-core's shaders as Bevy assets, the
//! culler (rebuilt when the settings change, its kernels compiled by Bevy's
//! pipeline cache). Each batch's buffers are `batches`', the cull targets
//! `targets`'.

use super::extract::BatchData;
use crate::settings::GpuCullSettings;
use crate::stats::{StatMessage, StatSender};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CachedComputePipelineId, CachedPipelineState, ComputePipelineDescriptor,
    PipelineCache,
};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::shader::ShaderCacheError;
use bevy::shader::{Shader, ShaderDefVal};
use cull_core::{Culler, CullerDesc, KernelSpec, MAX_VIEWS, OutputKind, VisibilityTest};
use std::sync::atomic::AtomicU64;

/// IDs of cullers (generations) and of batch buffers, unique across device losses.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A new ID for a culler (its generation) or a batch's buffers.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The WGSL of cull-core, as Bevy shader assets: the library modules
/// (importable as `cull::params`, `cull::items`, ...) and each variant's
/// entry module, by path. Bevy's `PipelineCache` composes and compiles the
/// cull kernels from them, as it does its own shaders.
#[derive(Resource, Clone)]
pub(crate) struct CullShaders {
    /// Held so that the library stays loaded.
    _library: Vec<Handle<Shader>>,
    entries: HashMap<&'static str, Handle<Shader>>,
    /// Pipeline ids of every kernel queued, by what it is compiled from.
    kernels: HashMap<KernelKey, Vec<CachedComputePipelineId>>,
}

/// What a kernel's pipelines are compiled from: each pass's entry module,
/// entry point, bindings and workgroup-memory zeroing, and the shader defs.
/// Two cullers share a kernel's pipelines only where these agree, so that
/// settings the kernel's shape does not name (the variant, the format, the
/// culler's `Tuning`: its workgroup size, staging, row writes) never hand
/// one culler pipelines compiled for another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KernelKey {
    passes: Vec<(
        &'static str,
        &'static str,
        Vec<(u32, cull_core::shader::Slot)>,
        bool,
    )>,
    shader_defs: Vec<(&'static str, cull_core::shader::ShaderDefValue)>,
}

impl KernelKey {
    pub(crate) fn of(recipe: &cull_core::shader::KernelRecipe) -> Self {
        Self {
            passes: recipe
                .passes
                .iter()
                .map(|pass| {
                    (
                        recipe.module_of(pass).path,
                        pass.entry_point,
                        pass.bindings.clone(),
                        pass.zeroed_workgroup_memory,
                    )
                })
                .collect(),
            shader_defs: recipe.shader_defs.clone(),
        }
    }
}

impl CullShaders {
    pub fn add_to(app: &mut App) -> Self {
        let mut shaders = app.world_mut().resource_mut::<Assets<Shader>>();
        let mut add = |m: cull_core::shader::ShaderModule| {
            shaders.add(Shader::from_wgsl(m.source, format!("cull_core/{}", m.path)))
        };
        let library = cull_core::shader::library().into_iter().map(&mut add).collect();
        let entries = cull_core::shader::entry_modules()
            .into_iter()
            .map(|m| (m.path, add(m)))
            .collect();
        Self {
            _library: library,
            entries,
            kernels: HashMap::default(),
        }
    }
}

/// A culler whose kernels Bevy's `PipelineCache` compiles: it culls only
/// into targets whose kernel (by output windows and views) is ready.
pub(crate) struct CompilingCuller {
    pub culler: Culler,
    pub settings: GpuCullSettings,
    /// Kernels queued in the pipeline cache, by spec (the occlusion
    /// phases, culls by cells and centred meshes have kernels of their own).
    queued: HashMap<KernelSpec, Vec<CachedComputePipelineId>>,
    /// Kernels that failed to compile, not asked for again (Bevy keeps a
    /// failed pipeline failed: queueing its ids again would only repeat the
    /// error every frame).
    given_up: bevy::platform::collections::HashSet<KernelSpec>,
    /// A kernel the culls need failed to compile: a pending culler is then
    /// given up. (The form for centred meshes is optional: without it the
    /// general kernel culls them.)
    failed: bool,
    /// Kernels handed to the culler since the last frame's report
    /// (`GpuCullStats::kernels`).
    ready: Vec<KernelSpec>,
}

impl CompilingCuller {
    /// Queues the kernel of `shape`, once: the pipeline ids of a kernel
    /// queued before from the same recipe ([`KernelKey`]: e.g. when `V`
    /// comes back to a variant) are reused, so switching settings does not
    /// grow Bevy's pipeline cache.
    pub fn request(&mut self, shape: KernelSpec, cache: &PipelineCache, shaders: &mut CullShaders) {
        if self.culler.has_pipelines(shape)
            || self.queued.contains_key(&shape)
            || self.given_up.contains(&shape)
        {
            return;
        }
        let recipe = self.culler.recipe(shape);
        let key = KernelKey::of(&recipe);
        if let Some(ids) = shaders.kernels.get(&key) {
            self.queued.insert(shape, ids.clone());
            return;
        }
        // Each pass's entry module: the kernel's, or its own (the cell pass).
        let mut pass_shaders = Vec::with_capacity(recipe.passes.len());
        for pass in &recipe.passes {
            let path = recipe.module_of(pass).path;
            let Some(shader) = shaders.entries.get(path) else {
                error!("GPU culling: no shader {path}");
                return;
            };
            pass_shaders.push(shader.clone());
        }
        let shader_defs: Vec<ShaderDefVal> = recipe
            .shader_defs
            .iter()
            .map(|&(name, value)| match value {
                cull_core::shader::ShaderDefValue::Bool(b) => ShaderDefVal::Bool(name.into(), b),
                cull_core::shader::ShaderDefValue::UInt(u) => ShaderDefVal::UInt(name.into(), u),
            })
            .collect();
        let variant = self.culler.variant().name();
        let ids: Vec<CachedComputePipelineId> = recipe
            .passes
            .iter()
            .zip(pass_shaders)
            .map(|(pass, shader)| {
                cache.queue_compute_pipeline(ComputePipelineDescriptor {
                    label: Some(format!("gpu_cull_{variant}_{}", pass.entry_point).into()),
                    layout: vec![BindGroupLayoutDescriptor::new(
                        pass.entry_point,
                        &pass.layout_entries(),
                    )],
                    immediate_size: 0,
                    shader,
                    shader_defs: shader_defs.clone(),
                    entry_point: Some(pass.entry_point.into()),
                    zero_initialize_workgroup_memory: pass.zeroed_workgroup_memory,
                })
            })
            .collect();
        shaders.kernels.insert(key, ids.clone());
        self.queued.insert(shape, ids);
    }

    /// Hands the kernels whose passes are all compiled to the culler. A
    /// kernel that failed to compile (not one whose shaders are still
    /// loading, which Bevy retries) is dropped with an error, not asked for
    /// again, and marks the culler failed unless it was the optional form
    /// for centred meshes.
    pub fn poll(&mut self, cache: &PipelineCache) {
        let culler = &self.culler;
        let mut failed = Vec::new();
        let ready = &mut self.ready;
        self.queued.retain(|shape, ids| {
            let mut pipelines = Vec::with_capacity(ids.len());
            for &id in ids.iter() {
                match cache.get_compute_pipeline_state(id) {
                    CachedPipelineState::Err(
                        ShaderCacheError::ShaderNotLoaded(_) | ShaderCacheError::ShaderImportNotYetAvailable,
                    ) => return true,
                    CachedPipelineState::Err(e) => {
                        error!(
                            "GPU culling: a {:?} kernel ({shape:?}) failed to compile: {e}",
                            culler.variant()
                        );
                        failed.push(*shape);
                        return false;
                    }
                    _ => match cache.get_compute_pipeline(id) {
                        Some(p) => pipelines.push((**p).clone()),
                        None => return true,
                    },
                }
            }
            match culler.provide_pipelines(*shape, pipelines) {
                Ok(()) => {
                    debug!("GPU culling: {:?} kernel ready: {shape:?}", culler.variant());
                    ready.push(*shape);
                }
                Err(e) => {
                    error!("GPU culling: {e}");
                    failed.push(*shape);
                }
            }
            false
        });
        self.failed |= failed.iter().any(|spec| !spec.centred);
        self.given_up.extend(failed);
    }
}

/// The culler for the current settings.
#[derive(Resource)]
pub(crate) struct RenderCuller {
    pub inner: CompilingCuller,
    /// Unique across cullers and device losses: what was built for an older
    /// culler is never taken for current.
    pub generation: u64,
}

impl RenderCuller {
    pub fn culler(&self) -> &Culler {
        &self.inner.culler
    }
}

/// Settings whose kernels failed to compile: not retried until they change.
#[derive(Resource)]
pub(crate) struct FailedSettings(GpuCullSettings);

/// A culler for new settings while its kernels compile: the current one
/// keeps culling until then, so a switch never stalls a frame.
#[derive(Resource)]
pub(crate) struct PendingCuller(CompilingCuller);

/// Counts render-world frames, to date the counts read back.
#[derive(Resource, Default)]
pub(crate) struct RenderFrame(pub u64);

pub(crate) fn count_frame(mut frame: ResMut<RenderFrame>) {
    frame.0 += 1;
}

/// The kernels the cull targets use, as (views, visibility test): written
/// by the targets stage each frame, read by [`prepare_culler`] in the next
/// to compile a new culler's kernels before it takes over.
#[derive(Resource, Default)]
pub(crate) struct KernelDemand(pub Vec<(u32, VisibilityTest)>);

/// Instances a batch's buffers hold: room to grow without reallocating.
pub(crate) fn batch_capacity(len: usize) -> u32 {
    (len as u32).max(1).next_power_of_two()
}

/// After a device loss (and at start-up): the cullers of the old device are
/// dropped, and the pipeline ids of its cache forgotten (they mean nothing
/// to the new one).
pub(crate) fn forget_cullers(mut commands: Commands, shaders: Option<ResMut<CullShaders>>) {
    if let Some(mut shaders) = shaders {
        shaders.kernels.clear();
    }
    commands.remove_resource::<RenderCuller>();
    commands.remove_resource::<PendingCuller>();
}

/// Follows the settings: the first culler becomes current once made; new
/// settings later get a [`PendingCuller`] whose kernels
/// (one per output-window count the batches need) Bevy's `PipelineCache`
/// compiles; it replaces the current culler once they are all ready. Kernels
/// that finished compiling are handed to their cullers.
///
/// Not an exclusive system: one would hold every other system of its
/// stage back each frame. A culler is made, switched or dropped by a
/// command, queued only when the settings change or the pending culler's
/// kernels are all ready; it lands at the sync point before the batches'
/// buffers and targets are made (`super::prepare_chain`), so those are
/// the new culler's in the same frame.
pub(crate) fn prepare_culler(
    mut commands: Commands,
    settings: Option<Res<GpuCullSettings>>,
    (mut current, mut pending, failed): (
        Option<ResMut<RenderCuller>>,
        Option<ResMut<PendingCuller>>,
        Option<Res<FailedSettings>>,
    ),
    (cache, mut shaders, demand): (Res<PipelineCache>, ResMut<CullShaders>, Res<KernelDemand>),
    batches: Query<&BatchData>,
    sender: Option<Res<StatSender>>,
) {
    let Some(settings) = settings else {
        return;
    };
    let wanted = match (pending.as_deref(), current.as_deref()) {
        (Some(pending), _) => Some(&pending.0.settings),
        (None, Some(current)) => Some(&current.inner.settings),
        (None, None) => None,
    };
    let failed_before = failed.is_some_and(|f| f.0 == *settings);
    let follows = wanted != Some(&*settings) && !failed_before;
    if follows {
        let settings = settings.clone();
        commands.queue(move |world: &mut World| follow_settings(world, &settings));
    }
    if let Some(current) = current.as_deref_mut() {
        current.inner.poll(&cache);
    }
    if let Some(pending) = pending.as_deref_mut() {
        let lens = batches.iter().map(|b| b.instances.len());
        request_pending_kernels(&mut pending.0, (&cache, &mut shaders), &demand.0, lens);
    }
    report_ready_kernels(current.as_deref_mut(), pending.as_deref_mut(), sender.as_deref());
    // Not while new settings replace the pending culler: the next one has
    // asked for none of its kernels yet.
    if !follows && pending.is_some_and(|p| p.0.queued.is_empty()) {
        commands.queue(take_over_when_ready);
    }
}

/// Makes the culler for `settings` current where there is none, or starts
/// a [`PendingCuller`] for them where neither the current nor the pending
/// culler has them (unless they failed before); dropping back
/// to the current culler's settings drops the pending one.
fn follow_settings(world: &mut World, settings: &GpuCullSettings) {
    let wanted = match (
        world.get_resource::<PendingCuller>(),
        world.get_resource::<RenderCuller>(),
    ) {
        (Some(pending), _) => Some(&pending.0.settings),
        (None, Some(current)) => Some(&current.inner.settings),
        (None, None) => None,
    };
    let failed_before = world
        .get_resource::<FailedSettings>()
        .is_some_and(|f| f.0 == *settings);
    if wanted == Some(settings) || failed_before {
        return;
    }
    world.remove_resource::<FailedSettings>();
    world.remove_resource::<PendingCuller>();
    let back_to_current = world
        .get_resource::<RenderCuller>()
        .is_some_and(|c| c.inner.settings == *settings);
    if back_to_current {
        return;
    }
    let desc = CullerDesc {
        variant: settings.variant,
        allow_fallback: true,
        format: settings.format,
        output: OutputKind::Indices,
        timestamps: settings.pass_timings,
        // A camera and its cascades in one pass.
        max_views: MAX_VIEWS,
        ..Default::default()
    };
    let device = world.resource::<RenderDevice>().wgpu_device().clone();
    let culler = match Culler::deferred(&device, world.resource::<RenderQueue>(), &desc) {
        Ok(culler) => CompilingCuller {
            culler,
            settings: settings.clone(),
            queued: HashMap::default(),
            given_up: Default::default(),
            failed: false,
            ready: Vec::new(),
        },
        Err(e) => {
            error!("GPU culling disabled: {e}");
            return;
        }
    };
    if world.contains_resource::<RenderCuller>() {
        world.insert_resource(PendingCuller(culler));
    } else {
        // The first culler (at start-up, after a device loss) is current at
        // once: the targets ask for exactly the kernels the views need, all
        // in the first frame they see it, and the draw pipelines compile
        // alongside, so batches draw about when Bevy's own meshes do.
        // Nothing culls until a target's kernels are ready.
        log_culler(&culler);
        world.insert_resource(RenderCuller {
            inner: culler,
            generation: next_id(),
        });
    }
}

fn log_culler(culler: &CompilingCuller) {
    info!(
        "GPU culling with {:?}, {:?} instances",
        culler.culler.variant(),
        culler.culler.format()
    );
}

/// Asks Bevy to compile the pending culler's kernels, and polls them:
/// those the current targets use (`demand`: views and visibility test),
/// for every batch's length in `lens`, before it takes over.
fn request_pending_kernels(
    pending: &mut CompilingCuller,
    (cache, shaders): (&PipelineCache, &mut CullShaders),
    demand: &[(u32, VisibilityTest)],
    lens: impl Iterator<Item = usize>,
) {
    let mut view_counts: Vec<(u32, VisibilityTest)> = demand.to_vec();
    view_counts.push((1, VisibilityTest::Frustum));
    view_counts.sort_unstable_by_key(|&(views, test)| (views, test as u8));
    view_counts.dedup();
    pending.request(KernelSpec::flat(1, 1, VisibilityTest::Frustum), cache, shaders);
    for len in lens {
        for &(views, test) in &view_counts {
            if let Ok(windows) = pending.culler.windows_for(batch_capacity(len), views) {
                pending.request(KernelSpec::flat(windows, views, test), cache, shaders);
            }
        }
    }
    pending.poll(cache);
}

/// Reports the kernels that became ready, for `GpuCullStats::kernels`.
fn report_ready_kernels(
    current: Option<&mut RenderCuller>,
    pending: Option<&mut PendingCuller>,
    sender: Option<&StatSender>,
) {
    let mut ready = Vec::new();
    if let Some(current) = current {
        let variant = current.inner.culler.variant();
        ready.extend(current.inner.ready.drain(..).map(|spec| (variant, spec)));
    }
    if let Some(pending) = pending {
        let variant = pending.0.culler.variant();
        ready.extend(pending.0.ready.drain(..).map(|spec| (variant, spec)));
    }
    if let Some(sender) = sender
        && let Ok(sender) = sender.0.lock()
    {
        for (variant, spec) in ready {
            let _ = sender.send(StatMessage::KernelReady(variant, spec));
        }
    }
}

/// The pending culler replaces the current one once all its kernels are
/// ready.
fn take_over_when_ready(world: &mut World) {
    if !world
        .get_resource::<PendingCuller>()
        .is_some_and(|p| p.0.queued.is_empty())
    {
        return;
    }
    let PendingCuller(inner) = world.remove_resource().expect("checked above");
    // A kernel its culls need failed to compile: given up, and not made
    // again until the settings change; the current culler goes on.
    if inner.failed {
        error!("GPU culling: the new settings' kernels failed to compile; culling goes on as before");
        world.insert_resource(FailedSettings(inner.settings));
        return;
    }
    log_culler(&inner);
    world.insert_resource(RenderCuller {
        inner,
        generation: next_id(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cullers that differ in nothing but their tuning compile different
    /// kernels for one shape: the key under which Bevy's pipeline cache
    /// keeps a kernel's pipelines tells them apart, and two cullers of the
    /// same settings share them.
    #[test]
    fn kernel_keys_follow_the_tuning() {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter =
            bevy::tasks::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
                .expect("no Vulkan adapter: install Mesa's lavapipe (scripts/install-deps.sh)");
        assert!(
            adapter.features().contains(wgpu::Features::SUBGROUP),
            "the adapter has no subgroups: run on Mesa's lavapipe (scripts/install-deps.sh)"
        );
        let (device, queue) = bevy::tasks::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_features: wgpu::Features::SUBGROUP,
            ..Default::default()
        }))
        .expect("a device on the adapter");
        // The plugin's default variant, whose staging is a tuning of its own.
        let key = |tuning: cull_core::Tuning| {
            let desc = cull_core::CullerDesc {
                variant: Some(cull_core::ScanVariant::SubgroupBallot),
                allow_fallback: false,
                output: OutputKind::Indices,
                tuning,
                ..Default::default()
            };
            let culler = Culler::deferred(&device, &queue, &desc).expect("a SubgroupBallot culler");
            KernelKey::of(&culler.recipe(KernelSpec::flat(1, 1, VisibilityTest::Frustum)))
        };
        let default = key(cull_core::Tuning::default());
        assert_eq!(key(cull_core::Tuning::default()), default);
        let narrow = cull_core::Tuning {
            workgroup_size: Some(64),
            ..Default::default()
        };
        assert_ne!(key(narrow), default, "the workgroup size is compiled in");
        let unstaged = cull_core::Tuning {
            staged_indices: Some(false),
            ..Default::default()
        };
        assert_ne!(key(unstaged), default, "staging is compiled in");
    }
}
