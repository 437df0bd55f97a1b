//! The shared harness: two devices per process, taken in turn by test,
//! scenes with edge cases mixed in, and a runner that culls on the GPU and
//! returns survivors as indices.

use cull_core::cpu::Reference;
use cull_core::scene::{CameraKind, Scene, SceneRng};
use cull_core::{
    CullInput, CullRequest, CullTarget, Culler, CullerDesc, Frustum, GpuContext, InstanceFormat, OutputKind,
    ScanVariant, Sphere, Tuning,
};
use glam::{Mat4, Vec3, Vec4Swizzles};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The devices the tests share, taken in turn by test thread: libtest runs
/// two tests at once on two cores, and lavapipe runs one device's queue at
/// a time, so with one device the suite used one core of two.
const DEVICES: usize = 2;

/// This test's device: the adapter wgpu picks (honouring WGPU_BACKEND and
/// WGPU_ADAPTER_NAME), with subgroups and timestamps where available. Every
/// call on one thread (libtest runs each test on its own) returns the same
/// device, so a test never mixes two devices' objects.
pub fn gpu() -> &'static GpuContext {
    static GPUS: [OnceLock<GpuContext>; DEVICES] = [const { OnceLock::new() }; DEVICES];
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % DEVICES;
    }
    GPUS[MINE.with(|i| *i)].get_or_init(|| {
        let ctx = GpuContext::new(
            wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
            wgpu::Features::empty(),
        )
        .unwrap_or_else(|e| {
            panic!(
                "GPU tests need a GPU adapter: {e}\n\
                     On a machine without a GPU, install lavapipe: `sudo apt-get install mesa-vulkan-drivers`"
            )
        });
        eprintln!("GPU tests on {}", ctx.describe());
        ctx
    })
}

/// Whether the adapter is Mesa's CPU driver (lavapipe).
pub fn is_lavapipe(ctx: &GpuContext) -> bool {
    ctx.adapter.get_info().name.to_lowercase().contains("llvmpipe")
}

/// The variants this device runs.
pub fn variants(ctx: &GpuContext) -> Vec<ScanVariant> {
    ScanVariant::compiled()
        .filter(|v| v.is_available(ctx.device.features()))
        .collect()
}

/// The variants that use subgroups where the device has them and
/// workgroup memory elsewhere: both ordered variants.
pub const TWO_FORM_VARIANTS: [ScanVariant; 2] = [ScanVariant::Ordered, ScanVariant::OrderedTwoPass];

/// Each available variant with its default tuning, plus the ordered
/// variants' workgroup-memory forms where the device has subgroups (they
/// would otherwise use their subgroup forms), so both forms are tested
/// everywhere.
pub fn forms(ctx: &GpuContext) -> Vec<(ScanVariant, Tuning)> {
    let mut forms: Vec<_> = variants(ctx)
        .into_iter()
        .map(|v| (v, Tuning::default()))
        .collect();
    if ctx.device.features().contains(wgpu::Features::SUBGROUP) {
        for variant in TWO_FORM_VARIANTS {
            if variant.is_available(ctx.device.features()) {
                forms.push((variant, workgroup_scan()));
            }
        }
    }
    forms
}

/// Whether the GPU tests run every combination of scan form, instance
/// format and output kind in the tests whose subject is something else
/// (levels, several views, cones, cells, occlusion): set
/// `GPU_CULL_FULL_MATRIX=1`. By default those tests cull each form with
/// both output kinds and each output kind with every format, a third of
/// the kernels (on lavapipe each combination is a kernel to compile, a
/// second or so without Mesa's shader cache); `exact_sets` culls every
/// form × format × output kind either way.
pub fn full_matrix() -> bool {
    std::env::var_os("GPU_CULL_FULL_MATRIX").is_some_and(|v| v != "0")
}

/// The formats a subject test of `output` culls with the `i`-th of its
/// forms (or variants): all of them with [`full_matrix`], else one, turning
/// with `i` and the output kind, so that each output kind meets every
/// format and each form two of them.
pub fn formats_turning(i: usize, output: OutputKind) -> Vec<InstanceFormat> {
    if full_matrix() {
        InstanceFormat::ALL.to_vec()
    } else {
        let turn = i + usize::from(output == OutputKind::Instances);
        vec![InstanceFormat::ALL[turn % InstanceFormat::ALL.len()]]
    }
}

/// Each form of [`forms`] with each of its [`formats_turning`]: the
/// kernels a subject test of `output` culls with, checked to cover every
/// form and format ([`assert_covers`]).
pub fn topic_kernels(ctx: &GpuContext, output: OutputKind) -> Vec<(ScanVariant, Tuning, InstanceFormat)> {
    let kernels: Vec<_> = forms(ctx)
        .into_iter()
        .enumerate()
        .flat_map(|(i, (variant, tuning))| {
            formats_turning(i, output)
                .into_iter()
                .map(move |format| (variant, tuning, format))
        })
        .collect();
    let variants: Vec<_> = kernels.iter().map(|k| (k.0, k.1.workgroup_scan)).collect();
    let formats: Vec<_> = kernels.iter().map(|k| k.2).collect();
    assert_covers(forms(ctx).len(), &variants, &formats);
    kernels
}

/// A subject test's kernels, as their forms and formats, cover each of the
/// `form_count` forms and every format (when there are three forms or
/// more), and with [`full_matrix`] every pair of them.
pub fn assert_covers<V: PartialEq + std::fmt::Debug>(
    form_count: usize,
    forms: &[V],
    formats: &[InstanceFormat],
) {
    let mut distinct: Vec<&V> = Vec::new();
    for form in forms {
        if !distinct.contains(&form) {
            distinct.push(form);
        }
    }
    assert_eq!(distinct.len(), form_count, "forms culled: {distinct:?}");
    if form_count >= InstanceFormat::ALL.len() {
        for format in InstanceFormat::ALL {
            assert!(formats.contains(&format), "{format:?} never culled: {formats:?}");
        }
    }
    if full_matrix() {
        assert_eq!(formats.len(), form_count * InstanceFormat::ALL.len());
    }
}

/// A format's place in [`InstanceFormat::ALL`].
pub fn format_index(format: InstanceFormat) -> usize {
    InstanceFormat::ALL
        .iter()
        .position(|&f| f == format)
        .expect("every format is in ALL")
}

/// The formats and output kinds the occlusion tests cull the `i`-th form
/// with: every pair with [`full_matrix`], else one, turning with `i`, so
/// that across eight forms every format meets both output kinds.
pub fn occlusion_kernels(i: usize) -> Vec<(InstanceFormat, OutputKind)> {
    let all = InstanceFormat::ALL
        .into_iter()
        .flat_map(|f| OutputKind::ALL.map(|o| (f, o)))
        .collect();
    if full_matrix() {
        all
    } else {
        let format = InstanceFormat::ALL[i % InstanceFormat::ALL.len()];
        vec![(format, OutputKind::ALL[i % OutputKind::ALL.len()])]
    }
}

/// The two-pass ordered variant's forms of [`forms`] (subgroup form and
/// workgroup-memory form where the device has subgroups).
#[cfg(feature = "ordered-two-pass")]
pub fn two_pass_forms(ctx: &GpuContext) -> Vec<Tuning> {
    forms(ctx)
        .into_iter()
        .filter(|(v, _)| *v == ScanVariant::OrderedTwoPass)
        .map(|(_, t)| t)
        .collect()
}

/// The ordered variant's forms of [`forms`]: its tunings (subgroup form
/// and workgroup-memory form where the device has subgroups).
#[cfg(feature = "ordered")]
pub fn ordered_forms(ctx: &GpuContext) -> Vec<Tuning> {
    forms(ctx)
        .into_iter()
        .filter(|(v, _)| *v == ScanVariant::Ordered)
        .map(|(_, t)| t)
        .collect()
}

/// `form` with tiles of 128 instances (32 threads) and the look-back's
/// fallback forced three ways: never waiting with every other tile silent,
/// a short wait with two tiles in four silent, the default wait with none.
#[cfg(feature = "ordered")]
pub fn forced_fallback_tunings(form: Tuning) -> [Tuning; 3] {
    [(0, 1), (4, 0b101), (256, 0)].map(|(spin, silent)| Tuning {
        workgroup_size: Some(32),
        lookback_spin_limit: Some(spin),
        lookback_silent_tiles: silent,
        ..form
    })
}

/// How a culler scans its tiles, for test messages.
pub fn form_name(culler: &cull_core::Culler) -> &'static str {
    if culler.uses_subgroups() {
        "subgroups"
    } else {
        "workgroup"
    }
}

/// Tuning for the ordered variant's workgroup-memory form.
pub fn workgroup_scan() -> Tuning {
    Tuning {
        workgroup_scan: true,
        ..Default::default()
    }
}

/// A random scene with edge cases: every 41st instance is non-finite, every
/// 37th exactly tangent to a frustum plane from outside (as this format
/// decodes it), and one surrounds the camera. Instances are all distinct.
pub fn edge_scene(seed: u64, count: usize, camera: CameraKind, format: InstanceFormat) -> Scene {
    edge_scene_of(Scene::random(seed, count, camera, None).fit(format), seed, format)
}

/// [`edge_scene`] of a mesh centred on its origin (most meshes), which the
/// formats' votes take a shorter path for.
pub fn edge_scene_centred(seed: u64, count: usize, camera: CameraKind, format: InstanceFormat) -> Scene {
    let mut scene = Scene::random(seed, count, camera, None).fit(format);
    scene.bounds = Sphere::new(Vec3::ZERO, scene.bounds.radius);
    edge_scene_of(scene, seed, format)
}

fn edge_scene_of(mut scene: Scene, seed: u64, format: InstanceFormat) -> Scene {
    let count = scene.instances.len();
    let frustum = scene.frustum().unwrap();
    let eye = scene
        .clip_from_world
        .inverse()
        .project_point3(Vec3::new(0.0, 0.0, 0.5));
    let mut rng = SceneRng::new(seed ^ 0xABCD);
    for i in 0..count {
        let inst = &mut scene.instances[i];
        match i % 41 {
            3 => inst.position.x = f32::NAN,
            7 => inst.position.y = f32::INFINITY,
            11 => inst.scale = f32::NAN,
            13 => inst.rotation.w = f32::NAN,
            _ => {}
        }
        let plane = frustum.planes()[rng.range(0.0, frustum.len as f32) as usize % frustum.len];
        if i % 37 == 5 {
            // Move the instance so its world sphere touches a plane from outside.
            if let Some(s) = format.world_sphere(&format.encode(&[*inst]).unwrap(), 0, scene.bounds) {
                let dist = plane.xyz().dot(s.center) + plane.w;
                inst.position += plane.xyz() * (-s.radius - dist);
            }
        }
        if i == count / 2 && count > 2 {
            inst.position = eye;
            inst.scale = 1.0;
        }
        // Keep every instance distinct so output copies map back to indices.
        if !inst.position.x.is_finite() || !inst.position.y.is_finite() {
            inst.position.z = i as f32;
        }
    }
    scene
}

/// A culler for a variant, format and output kind.
pub fn culler(
    ctx: &GpuContext,
    variant: ScanVariant,
    format: InstanceFormat,
    output: OutputKind,
    tuning: Tuning,
) -> Culler {
    views_culler(ctx, variant, format, output, tuning, 1)
}

/// [`culler`] for culls of up to `max_views` views in one pass.
pub fn views_culler(
    ctx: &GpuContext,
    variant: ScanVariant,
    format: InstanceFormat,
    output: OutputKind,
    tuning: Tuning,
    max_views: u32,
) -> Culler {
    let desc = CullerDesc {
        max_views,
        ..culler_desc(variant, format, output, tuning)
    };
    Culler::new(&ctx.device, &ctx.queue, &desc).unwrap()
}

/// `form` with small bindings (128 KiB) and at most seven workgroups a
/// dimension: several chunks and two-dimensional dispatches at small sizes.
pub fn narrow_tuning(form: Tuning) -> Tuning {
    Tuning {
        max_binding_size: Some(128 << 10),
        max_workgroups_per_dimension: Some(7),
        workgroup_scan: form.workgroup_scan,
        ..Default::default()
    }
}

/// What [`culler`] builds from: the variant, exactly, with timestamps.
pub fn culler_desc(
    variant: ScanVariant,
    format: InstanceFormat,
    output: OutputKind,
    tuning: Tuning,
) -> CullerDesc {
    CullerDesc {
        variant: Some(variant),
        allow_fallback: false,
        format,
        output,
        timestamps: true,
        max_views: 1,
        tuning,
    }
}

/// `k` frusta over `scene`'s instances: the scene's own first (its edge
/// instances are tangent to it), then views from random eyes in random
/// directions through every projection kind, a mirrored one among them,
/// and (from four views on) the first again, which must give the same list.
pub fn view_frusta(scene: &Scene, seed: u64, k: usize) -> Vec<Frustum> {
    let mut rng = SceneRng::new(seed ^ 0x5EED);
    let mut frusta = vec![scene.frustum().unwrap()];
    while frusta.len() < k {
        let i = frusta.len();
        if i == 3 {
            frusta.push(frusta[0]);
            continue;
        }
        let eye = Vec3::new(rng.range(-8.0, 8.0), rng.range(-8.0, 8.0), rng.range(-8.0, 8.0));
        let look = Vec3::new(rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), rng.range(-1.0, 1.0));
        let look = if look.length() < 0.1 {
            Vec3::NEG_Z
        } else {
            look.normalize()
        };
        let up = if look.abs().y > 0.9 { Vec3::X } else { Vec3::Y };
        let mut view = Mat4::look_at_rh(eye, eye + look, up);
        if i == 2 {
            view = Mat4::from_scale(Vec3::new(-1.0, 1.0, 1.0)) * view; // mirrored
        }
        let projection = Camera::ALL[i % Camera::ALL.len()].projection();
        frusta.push(Frustum::from_clip_from_world(projection * view, None).unwrap());
    }
    frusta
}

/// Culls the first `count` instances of `scene` against every frustum in
/// one pass (a target of `capacity` instances and `views` views) and
/// returns each view's survivors as batch indices, in output order.
pub fn run_views(
    ctx: &GpuContext,
    culler: &Culler,
    scene: &Scene,
    frusta: &[Frustum],
    capacity: u32,
    views: u32,
) -> Vec<Vec<u32>> {
    let job = Job::new(ctx, culler, scene, capacity);
    let target = CullTarget::with_views(&ctx.device, culler, capacity, views).unwrap();
    let request = CullRequest::new(&job.input, &target, frusta, scene.bounds, job.count);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    culler.cull(&mut encoder, &ctx.queue, request).unwrap();
    ctx.queue.submit([encoder.finish()]);
    read_views(ctx, culler, &job.bytes, &target, frusta.len(), job.count)
}

/// The survivors of `target`'s first `views` views as batch indices, in
/// output order (`bytes`: the input, for instance output); each count at
/// most `count`.
pub fn read_views(
    ctx: &GpuContext,
    culler: &Culler,
    bytes: &[u8],
    target: &CullTarget,
    views: usize,
    count: u32,
) -> Vec<Vec<u32>> {
    (0..views as u32)
        .map(|view| {
            let visible = target.read_view_count(&ctx.device, &ctx.queue, view).unwrap();
            assert!(visible <= count, "view {view}: visible count {visible} > {count}");
            let out = target
                .read_view_output(&ctx.device, &ctx.queue, view, visible)
                .unwrap();
            survivors_as_indices(culler.format(), culler.output(), bytes, &out)
        })
        .collect()
}

/// Asserts each view's survivors equal the CPU reference for its frustum
/// as exact sets (in index order for an order-preserving variant).
pub fn assert_views_exact(
    what: &str,
    culler: &Culler,
    scene: &Scene,
    frusta: &[Frustum],
    survivors: &[Vec<u32>],
) {
    let format = culler.format();
    let bytes = format.encode(&scene.instances).unwrap();
    for (view, (frustum, got)) in frusta.iter().zip(survivors).enumerate() {
        let reference = cull_core::cpu::classify(format, &bytes, scene.bounds, frustum).unwrap();
        assert_exact(&format!("{what} view {view}"), &reference, got);
        if culler.variant().preserves_order() {
            assert!(
                got.windows(2).all(|w| w[0] < w[1]),
                "{what} view {view}: out of order"
            );
        }
    }
}

/// A culler of `variant` with the common setup: position + quaternion
/// instances, instance output, default tuning.
pub fn posquat_culler(ctx: &GpuContext, variant: ScanVariant) -> Culler {
    culler(
        ctx,
        variant,
        InstanceFormat::PosQuat,
        OutputKind::Instances,
        Tuning::default(),
    )
}

/// Culls the first `count` instances of `scene` on the GPU (with a target
/// of `capacity`) and returns the survivors as batch indices, in output order.
pub fn run(ctx: &GpuContext, culler: &Culler, scene: &Scene, capacity: u32) -> Vec<u32> {
    let job = Job::new(ctx, culler, scene, capacity);
    job.cull(ctx, culler);
    let count = job.count;
    let visible = job.target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
    assert!(visible <= count, "visible count {visible} > {count}");
    let out = job.target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
    survivors_as_indices(culler.format(), culler.output(), &job.bytes, &out)
}

/// A scene uploaded for one culler: input, target and what to cull (the
/// scene's frustum, its mesh's local bounds, its instance count).
pub struct Job {
    pub bytes: Vec<u8>,
    pub input: CullInput,
    pub target: CullTarget,
    pub frustum: Frustum,
    pub local_bounds: Sphere,
    pub count: u32,
}

impl Job {
    /// Uploads `scene` into buffers of `capacity` instances.
    pub fn new(ctx: &GpuContext, culler: &Culler, scene: &Scene, capacity: u32) -> Self {
        let bytes = culler.format().encode(&scene.instances).unwrap();
        let input = CullInput::new(&ctx.device, culler.format(), capacity).unwrap();
        input.write(&ctx.queue, 0, &bytes).unwrap();
        let target = CullTarget::new(&ctx.device, culler, capacity).unwrap();
        Self {
            bytes,
            input,
            target,
            frustum: scene.frustum().unwrap(),
            local_bounds: scene.bounds,
            count: scene.instances.len() as u32,
        }
    }

    /// The plain cull of this job into its target.
    pub fn request(&self) -> CullRequest<'_> {
        CullRequest::new(
            &self.input,
            &self.target,
            std::slice::from_ref(&self.frustum),
            self.local_bounds,
            self.count,
        )
    }

    /// Records and submits one cull.
    pub fn cull(&self, ctx: &GpuContext, culler: &Culler) {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        culler.cull(&mut encoder, &ctx.queue, self.request()).unwrap();
        ctx.queue.submit([encoder.finish()]);
    }
}

/// Output elements as batch indices; an instance copy matching no input is
/// reported as `u32::MAX` (invented).
pub fn survivors_as_indices(
    format: InstanceFormat,
    output: OutputKind,
    input: &[u8],
    out: &[u8],
) -> Vec<u32> {
    match output {
        OutputKind::Indices => bytemuck::pod_collect_to_vec(out),
        OutputKind::Instances => cull_core::cpu::copies_to_indices(format.stride() as usize, input, out),
    }
}

/// The CPU reference for a scene.
pub fn reference(scene: &Scene, format: InstanceFormat) -> Reference {
    cull_core::cpu::classify(
        format,
        &format.encode(&scene.instances).unwrap(),
        scene.bounds,
        &scene.frustum().unwrap(),
    )
    .unwrap()
}

/// Asserts GPU survivors equal the reference as an exact set, and that
/// borderline instances (either answer right) are rare.
pub fn assert_exact(what: &str, reference: &Reference, survivors: &[u32]) {
    if let Err(e) = reference.check(survivors) {
        panic!("{what}: {e}");
    }
    let n = reference.visible.len() + reference.borderline.len();
    assert!(
        reference.borderline.len() <= 2 + n / 10_000,
        "{what}: {} borderline instances is too many",
        reference.borderline.len()
    );
}

pub use cull_core::scene::CameraKind as Camera;

/// Four levels of detail of `frustum`, sized from the world origin with
/// scale 1 (sizes radius / distance), overlapping as a cross-fade's do, the
/// last keeping every size: for checking level bands beside views, with
/// occlusion and by cells, on any device.
pub fn test_levels(frustum: &Frustum) -> Vec<Frustum> {
    let metric = cull_core::SizeMetric {
        origin: Vec3::ZERO,
        scale: 1.0,
        perspective: true,
    };
    // Overlapping as a cross-fade's levels are: a sphere within 50% above a
    // threshold is in both levels' lists.
    frustum
        .detail_levels_overlapping(metric, &[0.2, 0.05, 0.01, 0.0], 0.5)
        .unwrap()
}

/// Asserts `survivors` are exactly the CPU reference's, in input order.
#[cfg(any(feature = "ordered", feature = "ordered-two-pass"))]
pub fn assert_ordered(
    what: &str,
    scene: &cull_core::scene::Scene,
    format: InstanceFormat,
    survivors: &[u32],
) {
    let reference = reference(scene, format);
    assert_exact(what, &reference, survivors);
    assert!(
        survivors.windows(2).all(|w| w[0] < w[1]),
        "{what}: survivors out of order"
    );
}

/// A mirrored, scaled, rotated and moved frame for a batch.
pub fn mirrored_frame() -> cull_core::LocalFrame {
    cull_core::LocalFrame::new(Mat4::from_scale_rotation_translation(
        Vec3::new(-2.5, 2.5, 2.5),
        glam::Quat::from_rotation_y(0.7),
        Vec3::new(40.0, -3.0, 9.0),
    ))
    .unwrap()
}
