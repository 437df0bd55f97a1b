//! Property tests (issue 14): random cameras anywhere in a big world, in
//! any orientation (mirrored, looking straight up or down), with every kind
//! of projection, tiny fields of view and extreme aspect ratios, with and
//! without `max_distance`; random instances with huge and tiny scales,
//! sheared matrices and non-unit quaternions. Every variant and format must
//! keep each instance whose transformed mesh sphere touches the view (exactly:
//! every fourth is placed tangent to a plane)
//! and drop each whose documented bounding sphere is clearly outside, both
//! decided in `f64` against the exact frustum of the matrices handed in, and
//! agree with the CPU reference as an exact set.
//!
//! Seeded: the same cases run every time. `PROPTEST_CASES` raises the count
//! for a longer run.

use crate::harness::*;
use cull_core::{
    CullInput, CullRequest, CullTarget, Culler, Frustum, Instance, InstanceFormat, OutputKind,
    PackedInstance, PosQuatInstance, Sphere,
};
use cull_core::{PACKED_ROTATION_ERROR_BOUND, unpack_quat};
use glam::{DMat3, DMat4, DQuat, DVec3, DVec4, Mat4, Vec3, Vec4};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const INSTANCES: usize = 192;

#[derive(Clone, Copy, Debug)]
enum Projection {
    InfiniteReverseZ,
    Perspective,
    PerspectiveReverseZ,
    InfinitePerspective,
    OrthographicReverseZ,
    Orthographic,
}

impl Projection {
    fn is_orthographic(self) -> bool {
        matches!(self, Self::Orthographic | Self::OrthographicReverseZ)
    }
}

/// A camera as the test draws it.
#[derive(Clone, Debug)]
struct Camera {
    eye: DVec3,
    /// None: looking straight up (true) or down (false).
    rotation: Result<DQuat, bool>,
    mirrored: bool,
    projection: Projection,
    /// Perspective: vertical fov; orthographic: half height.
    size: f64,
    aspect: f64,
    near: f64,
    /// Far over near (perspective) or depth range (orthographic).
    depth: f64,
    max_distance: Option<f32>,
    /// Build the frustum from the two matrices (else from their f32 product).
    from_view: bool,
}

fn log_uniform(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
    (lo.ln()..hi.ln()).prop_map(f64::exp)
}

fn camera() -> impl Strategy<Value = Camera> {
    let eye = (
        prop_oneof![Just(0.0), log_uniform(1.0, 1e7)],
        -1.0..1.0f64,
        -1.0..1.0f64,
        -1.0..1.0f64,
    )
        .prop_map(|(d, x, y, z)| DVec3::new(x, y, z).normalize_or(DVec3::X) * d);
    let rotation = prop_oneof![
        4 => (-1.0..1.0f64, -1.0..1.0f64, -1.0..1.0f64, -1.0..1.0f64)
            .prop_map(|(x, y, z, w)| Ok(DQuat::from_xyzw(x, y, z, w + 1e-3).normalize())),
        1 => any::<bool>().prop_map(Err),
    ];
    let projection = prop_oneof![
        Just(Projection::InfiniteReverseZ),
        Just(Projection::Perspective),
        Just(Projection::PerspectiveReverseZ),
        Just(Projection::InfinitePerspective),
        Just(Projection::OrthographicReverseZ),
        Just(Projection::Orthographic),
    ];
    (
        eye,
        rotation,
        any::<bool>(),
        projection,
        log_uniform(1e-3, 2.5),
        log_uniform(1e-3, 1e3),
        log_uniform(1e-3, 10.0),
        log_uniform(10.0, 1e5),
        prop_oneof![Just(None), log_uniform(0.5, 1e4).prop_map(|d| Some(d as f32))],
        any::<bool>(),
    )
        .prop_map(
            |(eye, rotation, mirrored, projection, size, aspect, near, depth, max_distance, from_view)| {
                let size = if projection.is_orthographic() {
                    size * 100.0
                } else {
                    size
                };
                Camera {
                    eye,
                    rotation,
                    mirrored,
                    projection,
                    size,
                    aspect,
                    near,
                    depth,
                    max_distance,
                    // An orthographic matrix alone cannot place max_distance.
                    from_view: from_view || (projection.is_orthographic() && max_distance.is_some()),
                }
            },
        )
}

impl Camera {
    fn world_from_view(&self) -> Mat4 {
        let rotation = match self.rotation {
            Ok(q) => DMat4::from_quat(q),
            // -Z (forward) onto +Y or -Y, exactly.
            Err(up) => {
                let s = if up { 1.0 } else { -1.0 };
                DMat4::from_cols(
                    DVec4::X,
                    DVec4::new(0.0, 0.0, -s, 0.0),
                    DVec4::new(0.0, -s, 0.0, 0.0),
                    DVec4::W,
                )
            }
        };
        let mirror = DMat4::from_scale(DVec3::new(if self.mirrored { -1.0 } else { 1.0 }, 1.0, 1.0));
        (DMat4::from_translation(self.eye) * rotation * mirror).as_mat4()
    }

    fn clip_from_view(&self) -> Mat4 {
        let (fov, aspect, near, far) = (self.size, self.aspect, self.near, self.near * self.depth);
        let (h, w) = (self.size, self.size * aspect);
        let (o_near, o_far) = (-self.near * 10.0, -self.near * 10.0 + self.depth);
        match self.projection {
            Projection::InfiniteReverseZ => DMat4::perspective_infinite_reverse_rh(fov, aspect, near),
            Projection::Perspective => DMat4::perspective_rh(fov, aspect, near, far),
            Projection::PerspectiveReverseZ => DMat4::perspective_rh(fov, aspect, far, near),
            Projection::InfinitePerspective => DMat4::perspective_infinite_rh(fov, aspect, near),
            Projection::OrthographicReverseZ => DMat4::orthographic_rh(-w, w, -h, h, o_far, o_near),
            Projection::Orthographic => DMat4::orthographic_rh(-w, w, -h, h, o_near, o_far),
        }
        .as_mat4()
    }

    /// The frustum under test, and the exact `f64` matrix it must match.
    fn frustum(&self) -> (Frustum, DMat4) {
        let (proj, view) = (self.clip_from_view(), self.world_from_view());
        if self.from_view {
            let exact = proj.as_dmat4() * view.as_dmat4().inverse();
            (Frustum::from_view(proj, view, self.max_distance).unwrap(), exact)
        } else {
            let m = proj * view.inverse();
            (
                Frustum::from_clip_from_world(m, self.max_distance).unwrap(),
                m.as_dmat4(),
            )
        }
    }

    fn forward(&self) -> DVec3 {
        self.world_from_view()
            .as_dmat4()
            .transform_vector3(DVec3::NEG_Z)
            .normalize()
    }
}

/// The view in `f64`: the exact planes of the matrix, split into those the
/// contract keeps and those it may drop (at infinity to f32 rounding), plus
/// the max_distance plane.
struct ExactView {
    kept: Vec<DVec4>,
    droppable: Vec<DVec4>,
}

fn exact_view(m: DMat4, forward: DVec3, max_distance: Option<f32>) -> ExactView {
    let r = [m.row(0), m.row(1), m.row(2), m.row(3)];
    let len3 = |v: DVec4| v.truncate().length();
    let combos = [
        (r[3] + r[0], len3(r[3]) + len3(r[0])),
        (r[3] - r[0], len3(r[3]) + len3(r[0])),
        (r[3] + r[1], len3(r[3]) + len3(r[1])),
        (r[3] - r[1], len3(r[3]) + len3(r[1])),
        (r[2], len3(r[2])),
        (r[3] - r[2], len3(r[3]) + len3(r[2])),
    ];
    let mut view = ExactView {
        kept: vec![],
        droppable: vec![],
    };
    let mut depth = vec![];
    for (k, (p, magnitude)) in combos.into_iter().enumerate() {
        let n = len3(p);
        if n == 0.0 {
            assert!(p.w >= 0.0);
            continue;
        }
        let plane = p / n;
        if n <= magnitude / (1u64 << 20) as f64 {
            view.droppable.push(plane);
        } else {
            view.kept.push(plane);
        }
        if k >= 4 {
            depth.push(plane);
        }
    }
    if let Some(d) = max_distance {
        // The near plane faces where the camera looks (known here, not
        // inferred from the matrix as the code under test must).
        let near = depth
            .iter()
            .find(|p| p.truncate().dot(forward) > 0.0)
            .expect("a near plane");
        view.kept
            .push(DVec4::new(-near.x, -near.y, -near.z, -near.w + d as f64));
    }
    view
}

/// One instance as the test knows it in `f64`: `point = linear * x + translation`
/// for `x` in the mesh sphere, and the documented bounding sphere's radius
/// and center.
struct Exact {
    linear: DMat3,
    translation: DVec3,
    doc_center: DVec3,
    doc_radius: f64,
}

fn gram_bound(l: DMat3) -> f64 {
    let (x, y, z) = (l.x_axis, l.y_axis, l.z_axis);
    let (xy, xz, yz) = (x.dot(y).abs(), x.dot(z).abs(), y.dot(z).abs());
    (x.dot(x) + xy + xz)
        .max(y.dot(y) + xy + yz)
        .max(z.dot(z) + xz + yz)
}

/// rotate(q, v) of the shaders, in f64, as a matrix: `|q|²R + (1 − |q|²)I`.
fn rotate_matrix(q: DVec4) -> DMat3 {
    let rotate = |v: DVec3| {
        let u = q.truncate();
        v + 2.0 * u.cross(u.cross(v) + q.w * v)
    };
    DMat3::from_cols(rotate(DVec3::X), rotate(DVec3::Y), rotate(DVec3::Z))
}

/// Random instances of `format` around the camera: raw bytes, and their
/// exact transforms. Every fourth is moved to touch one of the view's planes
/// from outside, exactly in `f64` before its position is rounded to `f32`.
fn instances(
    seed: u64,
    format: InstanceFormat,
    camera: &Camera,
    local: Sphere,
    view_planes: &ExactView,
) -> (Vec<u8>, Vec<Exact>) {
    let mut rng = cull_core::scene::SceneRng::new(seed);
    let mut unit = move || rng.range(-1.0, 1.0) as f64;
    let forward = camera.forward();
    let view = camera.world_from_view().as_dmat4();
    let (right, up) = (
        view.transform_vector3(DVec3::X).normalize(),
        view.transform_vector3(DVec3::Y).normalize(),
    );
    let reach = if camera.projection.is_orthographic() {
        camera.depth.min(2e4)
    } else {
        (camera.near * camera.depth).min(2e4)
    };
    let mut bytes = vec![];
    let mut exact = vec![];
    let c = local.center.as_dvec3();
    for k in 0..INSTANCES {
        // Depth along the view, then a lateral offset around the view's
        // extent at that depth, so that many straddle a plane.
        let depth = reach * (0.6 * unit() + 0.5) * (10f64).powf(unit() * 2.0).min(1.0);
        let extent = if camera.projection.is_orthographic() {
            camera.size
        } else {
            (camera.size * 0.5).tan() * depth.abs()
        };
        let mut position = camera.eye
            + forward * depth
            + right * extent * camera.aspect * 1.3 * unit()
            + up * extent * 1.3 * unit();
        let scale = 10f64.powf(3.0 * unit()) * if unit() < -0.8 { -1.0 } else { 1.0 };
        let q = DQuat::from_xyzw(unit(), unit(), unit(), unit() + 1e-3).normalize();
        // The linear part each format stores, rounded as it will be.
        let (linear, q32, packed) = match format {
            InstanceFormat::Matrix => {
                let shear = DMat3::from_cols(
                    DVec3::X,
                    DVec3::new(unit() * 2.0, 1.0, 0.0),
                    DVec3::new(unit(), unit(), 1.0),
                );
                let stretch = DMat3::from_diagonal(DVec3::new(
                    10f64.powf(unit()),
                    10f64.powf(unit()),
                    10f64.powf(unit()),
                ));
                let linear = (DMat3::from_quat(q) * stretch * shear * scale)
                    .as_mat3()
                    .as_dmat3();
                (linear, Vec4::ZERO, 0)
            }
            InstanceFormat::PosQuat => {
                // A quaternion of length 0.5 to 2, written raw.
                let q32 = (DVec4::from(q) * 2f64.powf(unit())).as_vec4();
                (rotate_matrix(q32.as_dvec4()) * (scale as f32) as f64, q32, 0)
            }
            InstanceFormat::Packed16 => {
                let q32 = q.as_quat();
                let packed = PackedInstance::from(
                    &Instance {
                        position: Vec3::ZERO,
                        rotation: q32,
                        scale: 1.0,
                    }
                    .normalized(),
                )
                .rotation;
                // The draw rotates by the rotation before packing.
                (
                    DMat3::from_quat(q32.as_dquat().normalize()),
                    Vec4::from(q32),
                    packed,
                )
            }
        };
        if k % 4 == 0 && !view_planes.kept.is_empty() {
            let p = view_planes.kept[(unit().abs() * 97.0) as usize % view_planes.kept.len()];
            let n = p.truncate();
            let reach = local.radius as f64 * (linear.transpose() * n).length();
            let margin = n.dot(linear * c + position) + p.w + reach;
            position -= n * margin;
        }
        let pos32 = position.as_vec3();
        let t = pos32.as_dvec3();
        let (doc_center, doc_radius) = match format {
            InstanceFormat::Matrix => {
                let m = Mat4::from_mat3_translation(linear.as_mat3(), pos32);
                bytes.extend_from_slice(bytemuck::cast_slice(&m.to_cols_array()));
                (linear * c + t, local.radius as f64 * gram_bound(linear).sqrt())
            }
            InstanceFormat::PosQuat => {
                let raw = PosQuatInstance {
                    position: pos32.to_array(),
                    scale: scale as f32,
                    rotation: q32.to_array(),
                };
                bytes.extend_from_slice(bytemuck::bytes_of(&raw));
                let qq = q32.as_dvec4().dot(q32.as_dvec4());
                (
                    linear * c + t,
                    local.radius as f64 * (scale as f32).abs() as f64 * (2.0 * qq - 1.0).max(1.0),
                )
            }
            InstanceFormat::Packed16 => {
                let raw = PackedInstance {
                    position: pos32.to_array(),
                    rotation: packed,
                };
                bytes.extend_from_slice(bytemuck::bytes_of(&raw));
                let unpacked = rotate_matrix(unpack_quat(packed).as_dvec4());
                (
                    unpacked * c + t,
                    local.radius as f64 + c.length() * PACKED_ROTATION_ERROR_BOUND as f64,
                )
            }
        };
        exact.push(Exact {
            linear,
            translation: t,
            doc_center,
            doc_radius,
        });
    }
    (bytes, exact)
}

/// (must keep, must drop) by the f64 check: the mesh sphere's image clearly
/// touches every plane, or the documented sphere is clearly outside one.
fn decide(view: &ExactView, e: &Exact, local: Sphere) -> (bool, bool) {
    let c = local.center.as_dvec3();
    let r = local.radius as f64;
    let center = e.linear * c + e.translation;
    let abs1 = |v: DVec3| v.x.abs() + v.y.abs() + v.z.abs();
    let terms = abs1(e.translation) + 3.0 * c.length() * gram_bound(e.linear).sqrt() * 2.0;
    let band = |p: &DVec4, radius: f64| {
        (abs1(e.doc_center) + abs1(center) + radius + terms + p.w.abs()) / (1u64 << 15) as f64
    };
    // The ellipsoid's reach along n is r·|Lᵀn|; touching, exactly, is enough
    // to be kept (the contract's slack covers every rounding after this).
    let keep = view.kept.iter().chain(&view.droppable).all(|p| {
        let reach = r * (e.linear.transpose() * p.truncate()).length();
        p.truncate().dot(center) + p.w + reach >= 0.0
    });
    let drop = view
        .kept
        .iter()
        .any(|p| p.truncate().dot(e.doc_center) + p.w + e.doc_radius < -band(p, e.doc_radius));
    (keep, drop)
}

/// The survivors of one cull of `count` instances of a mesh bounded by
/// `local_bounds` against `frustum`. A culler of two views culls it as view
/// 1 beside a view that keeps everything, so the property holds through the
/// multi-view path's per-view planes too.
fn survivors(
    ctx: &cull_core::GpuContext,
    culler: &Culler,
    bytes: &[u8],
    frustum: Frustum,
    local_bounds: Sphere,
    count: u32,
) -> Vec<u32> {
    let n = (bytes.len() as u64 / culler.format().stride()) as u32;
    let input = CullInput::new(&ctx.device, culler.format(), n).unwrap();
    input.write(&ctx.queue, 0, bytes).unwrap();
    let views = culler.max_views();
    let target = CullTarget::with_views(&ctx.device, culler, n, views).unwrap();
    let frusta = [Frustum::everything(), frustum];
    let frusta = &frusta[frusta.len() - views as usize..];
    let request = CullRequest::new(&input, &target, frusta, local_bounds, count);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    culler.cull(&mut encoder, &ctx.queue, request).unwrap();
    ctx.queue.submit([encoder.finish()]);
    let view = views - 1;
    let visible = target.read_view_count(&ctx.device, &ctx.queue, view).unwrap();
    bytemuck::pod_collect_to_vec(
        &target
            .read_view_output(&ctx.device, &ctx.queue, view, visible)
            .unwrap(),
    )
}

#[test]
fn random_views_keep_what_touches_them_in_every_variant_and_format() {
    let ctx = gpu();
    // A culler per form and format, of one view or two in turn (each form
    // has both; with GPU_CULL_FULL_MATRIX=1 every form and format has both,
    // the cases taking them in turn).
    let cullers: Vec<Vec<Culler>> = forms(ctx)
        .into_iter()
        .enumerate()
        .flat_map(|(i, (variant, tuning))| {
            InstanceFormat::ALL
                .into_iter()
                .enumerate()
                .map(move |(f, format)| {
                    let views = if full_matrix() {
                        vec![1, 2]
                    } else {
                        vec![1 + ((i + f) % 2) as u32]
                    };
                    (views.into_iter())
                        .map(|k| views_culler(ctx, variant, format, OutputKind::Indices, tuning, k))
                        .collect()
                })
        })
        .collect();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let local_strategy = (
        -2.0..2.0f32,
        -2.0..2.0f32,
        -2.0..2.0f32,
        prop_oneof![Just(0.0f32), 0.01..3.0f32],
    )
        .prop_map(|(x, y, z, r)| Sphere::new(Vec3::new(x, y, z), r));
    let totals = std::cell::Cell::new((0usize, 0usize));
    runner
        .run(
            &(camera(), local_strategy, any::<u64>()),
            |(camera, local, seed)| {
                let (frustum, exact_matrix) = camera.frustum();
                let view = exact_view(exact_matrix, camera.forward(), camera.max_distance);
                for format in InstanceFormat::ALL {
                    let (bytes, exact) = instances(seed, format, &camera, local, &view);
                    let decided: Vec<(bool, bool)> = exact.iter().map(|e| decide(&view, e, local)).collect();
                    let (kept, dropped) = totals.get();
                    totals.set((
                        kept + decided.iter().filter(|d| d.0).count(),
                        dropped + decided.iter().filter(|d| d.1).count(),
                    ));
                    let reference = cull_core::cpu::classify(format, &bytes, local, &frustum).unwrap();
                    for pair in cullers.iter().filter(|c| c[0].format() == format) {
                        let culler = &pair[seed as usize % pair.len()];
                        let what = format!(
                            "{:?} ({}) {format:?}, {} view(s)",
                            culler.variant(),
                            form_name(culler),
                            culler.max_views()
                        );
                        let got = survivors(ctx, culler, &bytes, frustum, local, INSTANCES as u32);
                        reference
                            .check(&got)
                            .map_err(|e| TestCaseError::fail(format!("{what}: vs the CPU reference: {e}")))?;
                        let mut present = [false; INSTANCES];
                        for &i in &got {
                            present[i as usize] = true;
                        }
                        for (i, &(keep, drop)) in decided.iter().enumerate() {
                            prop_assert!(!(keep && drop), "instance {} both must be kept and dropped", i);
                            prop_assert!(
                                !keep || present[i],
                                "{}: instance {} touches the view but was culled",
                                what,
                                i
                            );
                            prop_assert!(
                                !drop || !present[i],
                                "{}: instance {} is clearly outside but kept",
                                what,
                                i
                            );
                        }
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    let (kept_total, dropped_total) = totals.get();
    eprintln!("{cases} views: {kept_total} instances clearly visible, {dropped_total} clearly outside");
    // The scenes must exercise both sides, or the test proves nothing.
    assert!(kept_total > cases as usize * 3 * 10 && dropped_total > cases as usize * 3 * 10);
}
