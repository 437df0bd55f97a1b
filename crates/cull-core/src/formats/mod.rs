//! Instance formats: how one instance's transform is laid out in GPU memory
//! (the types, `Instance` and `InstanceFormat`, are in `instance.rs`).
//!
//! Culling is memory-bound, so the format decides the speed: a 4x4 matrix
//! moves 64 B per instance, position + scale + quaternion 32 B, and the packed
//! format 16 B (position plus a "smallest three" quaternion in 32 bits).
//!
//! Each format is one module here beside its WGSL in `shaders/cull/formats/`:
//! its CPU encoding and its world-sphere mirror, line for line with the
//! shader; the tests hold the two to the same answers. [`FORMATS`] registers
//! them (see `docs/architecture.md`, "Adding a format").

mod matrix;
mod packed16;
mod posquat;

#[cfg(test)]
pub(crate) use packed16::QUAT_STEP;
pub use packed16::{PACKED_ROTATION_ERROR_BOUND, PackedInstance, pack_quat, unpack_quat};
pub use posquat::PosQuatInstance;

use crate::CullError;
use crate::instance::{Instance, InstanceFormat};
use crate::kernel::ShaderModule;
use crate::sphere::{Sphere, WorldSphere};
use glam::{Vec3, Vec4};

/// One format, described: what it stores, its shader, and its CPU mirror.
pub(crate) struct FormatKernel {
    pub format: InstanceFormat,
    /// A short lowercase name.
    pub name: &'static str,
    /// Bytes per instance.
    pub stride: u64,
    /// Whether it stores a scale ([`InstanceFormat::carries_scale`]).
    pub carries_scale: bool,
    /// Radians a stored rotation may differ from the one written
    /// ([`InstanceFormat::rotation_error_bound`]).
    pub rotation_error: f32,
    /// The shader def that selects it (the `#select formats` lines of
    /// `shaders/cull/items.wgsl` and `outputs/instances.wgsl`).
    pub shader_def: &'static str,
    /// Whether its vote rotates the mesh's local center, and so has a
    /// kernel form for meshes centred on their origin (`LOCAL_CENTER_ORIGIN`)
    /// that leaves the rotation out.
    pub centred_form: bool,
    /// Its WGSL: `InstanceData`, the `instances` binding and `world_sphere()`.
    pub module: ShaderModule,
    /// Writes instances (normalized, scale fitted) as bytes.
    pub encode: fn(&[Instance]) -> Vec<u8>,
    /// Its fields as vertex attributes of one instance: each field's
    /// format and byte offset, in order ([`InstanceFormat::vertex_attributes`]).
    pub vertex_fields: &'static [(wgpu::VertexFormat, u64)],
    /// The world sphere of one instance's bytes, as the shader computes it;
    /// `c_terms` is [`local_terms`] of the local center.
    pub world_sphere: fn(raw: &[u8], local: Sphere, c_terms: f32) -> Option<WorldSphere>,
}

/// The registry: every format, largest first. Adding one is a module pair
/// (`formats/<name>.rs` + `shaders/cull/formats/<name>.wgsl`), a line here
/// (the WGSL's `#select formats` lines import it from here: [`crate::selection`]).
pub(crate) static FORMATS: [FormatKernel; 3] = [matrix::KERNEL, posquat::KERNEL, packed16::KERNEL];

/// Every format's stride is a whole number of 16-byte parts: instance-copy
/// output (`shaders/cull/outputs/instances.wgsl`) writes an instance as
/// `stride / 16` parts of `vec4<u32>`, and a format of another size would
/// silently write the wrong bytes. Checked when the crate compiles.
const _: () = {
    let mut i = 0;
    while i < FORMATS.len() {
        assert!(
            FORMATS[i].stride.is_multiple_of(16) && FORMATS[i].stride > 0,
            "an instance format's stride must be a whole number of 16-byte parts"
        );
        i += 1;
    }
};

impl InstanceFormat {
    /// Every format, largest first.
    pub const ALL: [InstanceFormat; 3] = [Self::Matrix, Self::PosQuat, Self::Packed16];

    /// This format's registration.
    pub(crate) const fn kernel(self) -> &'static FormatKernel {
        let mut i = 0;
        while i < FORMATS.len() {
            if FORMATS[i].format as u8 == self as u8 {
                return &FORMATS[i];
            }
            i += 1;
        }
        panic!("every format is registered in FORMATS")
    }

    /// Bytes per instance.
    pub const fn stride(self) -> u64 {
        self.kernel().stride
    }

    /// Whether its vote rotates the mesh's local center, and so has a
    /// kernel form for meshes centred on their origin that leaves the
    /// rotation out ([`crate::culler::KernelSpec::centred`]): the 32 B and
    /// 16 B formats. The matrix format's vote transforms the center with
    /// the matrix either way.
    pub const fn has_centred_form(self) -> bool {
        self.kernel().centred_form
    }

    /// The format's number in `cull::encode` ([`crate::shader::ENCODE_MODULE`]):
    /// the `format` argument of its `encode_instance`, which a compute pass
    /// takes at run time (a uniform branch) so that one pipeline writes
    /// every format.
    pub const fn encode_id(self) -> u32 {
        self as u32
    }

    /// The format's fields as per-instance vertex attributes, at shader
    /// locations from `first_location` on: for drawing the survivors of a
    /// cull with instance output ([`crate::OutputKind::Instances`]) as a
    /// vertex buffer ([`crate::CullTarget::bind_view_instances`]). A matrix
    /// is its four columns (`Float32x4` each); position + quaternion is
    /// `position.xyz, scale` then the rotation (`Float32x4` each); the
    /// packed format is the position (`Float32x3`) and the packed rotation
    /// (`Uint32`, unpacked by the shader as `cull_core::unpack_quat` does).
    ///
    /// ```
    /// let format = cull_core::InstanceFormat::PosQuat;
    /// let attributes = format.vertex_attributes(3);
    /// let layout = format.vertex_layout(&attributes);
    /// assert_eq!(layout.array_stride, 32);
    /// assert_eq!(layout.step_mode, wgpu::VertexStepMode::Instance);
    /// assert_eq!(attributes[1].shader_location, 4);
    /// ```
    pub fn vertex_attributes(self, first_location: u32) -> Vec<wgpu::VertexAttribute> {
        self.kernel()
            .vertex_fields
            .iter()
            .zip(first_location..)
            .map(|(&(format, offset), shader_location)| wgpu::VertexAttribute {
                format,
                offset,
                shader_location,
            })
            .collect()
    }

    /// The per-instance vertex buffer layout of this format's instances,
    /// with `attributes` from [`Self::vertex_attributes`].
    pub fn vertex_layout(self, attributes: &[wgpu::VertexAttribute]) -> wgpu::VertexBufferLayout<'_> {
        wgpu::VertexBufferLayout {
            array_stride: self.stride(),
            step_mode: wgpu::VertexStepMode::Instance,
            attributes,
        }
    }

    /// A short lowercase name (`matrix`, `posquat`, `packed16`).
    pub const fn name(self) -> &'static str {
        self.kernel().name
    }

    /// Parses [`Self::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the format stores a scale. One that does not
    /// ([`Self::Packed16`]) culls and draws every instance at scale 1:
    /// [`Self::encode`] refuses other scales, and a renderer that scales such
    /// instances in its draw must cull with bounds that cover the scales
    /// ([`Sphere::covering_scales`], as the Bevy plugin does).
    pub const fn carries_scale(self) -> bool {
        self.kernel().carries_scale
    }

    /// An upper bound, in radians, on how far a stored rotation may be from
    /// the one written: 0 for the formats that store `f32` rotations,
    /// [`PACKED_ROTATION_ERROR_BOUND`] for [`Self::Packed16`]. Culling covers
    /// it (the packed format widens its spheres by it); a renderer that
    /// draws from the packed bytes shows the stored rotation.
    pub const fn rotation_error_bound(self) -> f32 {
        self.kernel().rotation_error
    }

    /// `instance` as this format can hold it: a format that carries no
    /// scale gets a finite scale replaced by 1 (the caller covers the scale
    /// in the bounds instead, see [`Sphere::covering_scales`]); a non-finite
    /// scale stays, so the instance is culled as in every format.
    pub fn fit(self, instance: Instance) -> Instance {
        if self.carries_scale() || !instance.scale.is_finite() {
            instance
        } else {
            Instance {
                scale: 1.0,
                ..instance
            }
        }
    }

    /// Encodes instances into this format's bytes.
    ///
    /// The contract every format shares (`docs/architecture.md`,
    /// "Contracts"): rotations are normalized on write, so the three formats
    /// cull the same rotation; an instance with a non-finite position, scale
    /// or rotation, or a zero rotation, is written so that it is culled.
    /// Fails with [`CullError::ScaleNotCarried`] for a finite scale other
    /// than 1 in a format that carries no scale.
    pub fn encode(self, instances: &[Instance]) -> Result<Vec<u8>, CullError> {
        if !self.carries_scale()
            && let Some((index, i)) = instances
                .iter()
                .enumerate()
                .find(|(_, i)| i.scale.is_finite() && i.scale != 1.0)
        {
            return Err(CullError::ScaleNotCarried {
                format: self,
                index,
                scale: i.scale,
            });
        }
        let unit: Vec<Instance> = instances.iter().map(Instance::normalized).collect();
        Ok((self.kernel().encode)(&unit))
    }

    /// The world-space bounding sphere of instance `index` in `bytes`, exactly
    /// as the shaders compute it (`world_sphere()` in `shaders/cull/formats/`).
    /// `None` when the instance is not finite (it is culled).
    ///
    /// Each sphere bounds the transform the format's bytes define, whatever
    /// they hold: any 3x3 matrix (sheared, mirrored, non-uniformly scaled),
    /// and a quaternion of any length in [`PosQuatInstance`] (the draw's
    /// `rotate()` stretches by up to `2|q|² − 1` when `|q| > 1`).
    pub fn world_sphere(self, bytes: &[u8], index: usize, local: Sphere) -> Option<WorldSphere> {
        let s = self.stride() as usize;
        let raw = &bytes[index * s..(index + 1) * s];
        (self.kernel().world_sphere)(raw, local, local_terms(local.center))
    }
}

/// `|x| + |y| + |z|`, in the shaders' order.
fn abs_sum(v: Vec3) -> f32 {
    v.x.abs() + v.y.abs() + v.z.abs()
}

/// The magnitude of a transformed mesh-space center's terms per unit of
/// scale: `3·|c|` bounds `Σᵢ|cᵢ|·|mᵢ|₁` for any 3x3 of unit spectral norm,
/// and the intermediates of `rotate()` for a unit quaternion. Uploaded once
/// per cull (`local_terms` in `shaders/cull/params.wgsl`).
pub(crate) fn local_terms(c: Vec3) -> f32 {
    3.0 * c.length()
}

/// `rotate(q, v)` as the shaders write it: `v + 2 * cross(q.xyz, cross(q.xyz, v) + q.w * v)`.
fn rotate(q: Vec4, v: Vec3) -> Vec3 {
    let u = q.truncate();
    v + 2.0 * u.cross(u.cross(v) + q.w * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each format's vertex attributes cover its instance exactly, field
    /// after field, at consecutive locations.
    #[test]
    fn vertex_attributes_tile_each_instance() {
        for format in InstanceFormat::ALL {
            let attributes = format.vertex_attributes(5);
            let mut end = 0;
            for (k, a) in attributes.iter().enumerate() {
                assert_eq!(a.offset, end, "{format:?} attribute {k}");
                assert_eq!(a.shader_location, 5 + k as u32);
                end += a.format.size();
            }
            assert_eq!(end, format.stride(), "{format:?}");
            assert_eq!(format.vertex_layout(&attributes).array_stride, format.stride());
        }
    }
    use glam::{Mat4, Quat};

    fn random_quat(state: &mut u64) -> Quat {
        let mut next = || {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            (*state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        Quat::from_xyzw(next(), next(), next(), next()).normalize()
    }

    #[test]
    fn packed_quat_precision() {
        let mut state = 0x9E3779B97F4A7C15;
        let (mut sum, mut worst) = (0.0f64, 0.0f32);
        let n = 1_000_000;
        for _ in 0..n {
            let q = random_quat(&mut state);
            let u = Quat::from_vec4(unpack_quat(pack_quat(q)));
            let angle = q.angle_between(u.normalize());
            sum += angle as f64;
            worst = worst.max(angle);
            // The decoded quaternion is close to unit length already.
            assert!((u.length() - 1.0).abs() < 2e-3);
        }
        let mean = (sum / n as f64) as f32;
        eprintln!(
            "packed quaternion error: mean {:.4} deg, worst {:.4} deg",
            mean.to_degrees(),
            worst.to_degrees()
        );
        assert!(worst < PACKED_ROTATION_ERROR_BOUND, "worst {worst} rad");
        assert!(mean < 0.1f32.to_radians());
    }

    fn sphere_of(f: InstanceFormat, inst: Instance, local: Sphere) -> Option<WorldSphere> {
        f.world_sphere(&f.encode(&[inst]).unwrap(), 0, local)
    }

    #[test]
    fn formats_agree_on_world_sphere() {
        let inst = Instance {
            position: Vec3::new(1.0, -2.0, 3.0),
            rotation: Quat::from_rotation_y(0.7) * Quat::from_rotation_x(0.3),
            scale: 2.5,
        };
        let local = Sphere::new(Vec3::new(0.5, 0.25, -1.0), 1.5);
        let m = sphere_of(InstanceFormat::Matrix, inst, local).unwrap();
        let p = sphere_of(InstanceFormat::PosQuat, inst, local).unwrap();
        assert!((m.center - p.center).length() < 1e-4, "{m:?} vs {p:?}");
        // An orthogonal matrix's Gershgorin bound is its scale, up to rounding.
        assert!((m.radius - p.radius).abs() < 1e-4, "{m:?} vs {p:?}");
        let unit = Instance { scale: 1.0, ..inst };
        let k = sphere_of(InstanceFormat::Packed16, unit, local).unwrap();
        let u = sphere_of(InstanceFormat::PosQuat, unit, local).unwrap();
        // The widened radius covers the quantized center.
        assert!((k.center - u.center).length() <= k.radius - local.radius + 1e-6);
    }

    /// The sphere must bound the mesh under any 3x3,
    /// sheared ones too (`r * max column length` does not).
    #[test]
    fn matrix_radius_bounds_sheared_transforms() {
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let local = Sphere::new(Vec3::new(0.3, -0.2, 0.1), 1.0);
        for _ in 0..20_000 {
            let cols: [Vec3; 3] = std::array::from_fn(|_| Vec3::new(next(), next(), next()) * 3.0);
            let t = Vec3::new(next(), next(), next()) * 100.0;
            let m = Mat4::from_cols(
                cols[0].extend(0.0),
                cols[1].extend(0.0),
                cols[2].extend(0.0),
                t.extend(1.0),
            );
            let bytes = bytemuck::cast_slice(&m.to_cols_array()).to_vec();
            let s = InstanceFormat::Matrix.world_sphere(&bytes, 0, local).unwrap();
            // Points of the local sphere's surface, mapped by m, stay inside
            // (up to rounding, which the plane tolerance covers).
            for _ in 0..8 {
                let dir = Vec3::new(next(), next(), next()).normalize_or(Vec3::X);
                let p = m.transform_point3(local.center + dir * local.radius);
                let slack = 1e-5 * (s.radius + s.terms);
                assert!(
                    (p - s.center).length() <= s.radius + slack,
                    "{m:?}: {p} outside {s:?}"
                );
            }
        }
        // The old bound (largest column) misses this shear.
        let shear = Mat4::from_cols(Vec4::X, Vec4::new(1.0, 1.0, 0.0, 0.0), Vec4::Z, Vec4::W);
        let s = InstanceFormat::Matrix
            .world_sphere(
                bytemuck::cast_slice(&shear.to_cols_array()),
                0,
                Sphere::new(Vec3::ZERO, 1.0),
            )
            .unwrap();
        let stretched = shear
            .transform_vector3(Vec3::new(1.0, 1.0, 0.0).normalize())
            .length();
        assert!(
            stretched > 2f32.sqrt(),
            "the shear stretches past the longest column"
        );
        assert!(s.radius >= stretched, "{s:?} vs {stretched}");
    }

    /// One contract for non-unit quaternions: every
    /// format normalizes on write, so all three cull the same rotation; raw
    /// PosQuat bytes with a non-unit quaternion are bounded as rotate()
    /// stretches them.
    #[test]
    fn non_unit_quaternions_normalize_on_write() {
        let local = Sphere::new(Vec3::new(2.0, 0.0, 0.0), 1.0);
        let q = Quat::from_rotation_z(0.9);
        for len in [1e-20f32, 0.1, 0.5, 2.0, 10.0, 1e15] {
            let inst = Instance {
                position: Vec3::ZERO,
                rotation: Quat::from_vec4(Vec4::from(q) * len),
                scale: 1.0,
            };
            let unit = Instance { rotation: q, ..inst };
            for f in InstanceFormat::ALL {
                let a = sphere_of(f, inst, local).unwrap();
                let b = sphere_of(f, unit, local).unwrap();
                assert!(
                    (a.center - b.center).length() < 1e-5,
                    "{f:?} |q| = {len}: {a:?} vs {b:?}"
                );
                assert!((a.radius - b.radius).abs() < 1e-5, "{f:?} |q| = {len}");
            }
        }
        // Raw bytes: q of length 2 stretches rotate() by up to 2|q|^2 - 1 = 7.
        let raw = PosQuatInstance {
            position: [0.0; 3],
            scale: 1.0,
            rotation: [0.0, 0.0, 0.0, 2.0],
        };
        let s = InstanceFormat::PosQuat
            .world_sphere(bytemuck::bytes_of(&raw), 0, Sphere::new(Vec3::ZERO, 1.0))
            .unwrap();
        assert!(s.radius >= 7.0, "{s:?}");
        let v = rotate(Vec4::new(0.0, 0.0, 0.0, 2.0), Vec3::X);
        assert!(v.length() <= s.radius, "{v}");
        // A zero quaternion is no rotation: culled in every format.
        let zero = Instance {
            rotation: Quat::from_xyzw(0.0, 0.0, 0.0, 0.0),
            ..Default::default()
        };
        for f in InstanceFormat::ALL {
            assert!(sphere_of(f, zero, local).is_none(), "{f:?}");
        }
    }

    /// A non-finite rotation culls in every format,
    /// the packed one included (its bits could not hold a NaN).
    #[test]
    fn non_finite_rotation_culls_in_every_format() {
        for rotation in [
            Quat::from_xyzw(f32::NAN, 0.0, 0.0, 1.0),
            Quat::from_xyzw(0.0, f32::INFINITY, 0.0, 1.0),
        ] {
            let inst = Instance {
                rotation,
                ..Default::default()
            };
            for f in InstanceFormat::ALL {
                assert!(sphere_of(f, inst, Sphere::new(Vec3::ONE, 1.0)).is_none(), "{f:?}");
            }
        }
    }

    /// In the core, a format without scale refuses a
    /// scaled instance instead of culling it unscaled.
    #[test]
    fn packed16_refuses_scale() {
        let scaled = Instance {
            scale: 3.0,
            ..Default::default()
        };
        let err = InstanceFormat::Packed16
            .encode(&[Instance::default(), scaled])
            .unwrap_err();
        assert!(
            matches!(
                err,
                CullError::ScaleNotCarried {
                    index: 1,
                    scale: 3.0,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(InstanceFormat::Packed16.fit(scaled).scale, 1.0);
        assert_eq!(InstanceFormat::PosQuat.fit(scaled).scale, 3.0);
        // A non-finite scale culls, as in the other formats.
        let nan = Instance {
            scale: f32::NAN,
            ..Default::default()
        };
        let bytes = InstanceFormat::Packed16.encode(&[nan]).unwrap();
        assert!(
            InstanceFormat::Packed16
                .world_sphere(&bytes, 0, Sphere::new(Vec3::ZERO, 1.0))
                .is_none()
        );
    }

    #[test]
    fn covering_scales_bounds_every_scale() {
        let local = Sphere::new(Vec3::new(1.0, 2.0, -0.5), 0.75);
        for (lo, hi) in [(1.0, 1.0), (0.5, 4.0), (-2.0, 3.0), (2.0, 2.0), (-3.0, -1.0)] {
            let cover = local.covering_scales(lo, hi).unwrap();
            for k in 0..=20 {
                let s = lo + (hi - lo) * k as f32 / 20.0;
                // The scaled sphere lies inside the cover.
                let reach = (local.center * s - cover.center).length() + s.abs() * local.radius;
                assert!(
                    reach <= cover.radius * (1.0 + 1e-6),
                    "{lo}..{hi} at {s}: {reach} > {cover:?}"
                );
            }
        }
        let exact = local.covering_scales(2.0, 2.0).unwrap();
        assert!((exact.radius - 1.5).abs() < 1e-5 && exact.center == local.center * 2.0);
        assert!(local.covering_scales(f32::NAN, 1.0).is_none());
        assert!(local.covering_scales(2.0, 1.0).is_none());
    }

    #[test]
    fn non_finite_instances_have_no_sphere() {
        let bad = Instance {
            position: Vec3::new(f32::NAN, 0.0, 0.0),
            ..Default::default()
        };
        let inf = Instance {
            scale: f32::INFINITY,
            ..Default::default()
        };
        for f in InstanceFormat::ALL {
            assert!(sphere_of(f, bad, Sphere::new(Vec3::ZERO, 1.0)).is_none());
            assert!(sphere_of(f, inf, Sphere::new(Vec3::ZERO, 1.0)).is_none());
        }
    }
}
