//! Occlusion culling: two-phase Hi-Z against a depth pyramid.
//!
//! Each frame, for one camera:
//!
//! 1. **Early** ([`crate::Culler::cull_views_early`]): keep what is in the
//!    frustum and was visible after the last late phase (the
//!    [`OcclusionHistory`]). Draw it.
//! 2. **Pyramid** ([`PyramidBuilder::build`]): from that depth, build the
//!    [`DepthPyramid`]: level 0 is the depth buffer, each level above half
//!    the size (a texture's mip chain), each texel the farthest depth of the pixels it
//!    covers.
//! 3. **Late** ([`crate::Culler::cull_views_late`]): test every instance in
//!    the frustum against the pyramid, remember the result for the next
//!    frame, and keep those that pass and were not drawn early. Draw them.
//!
//! What becomes visible (disocclusion, a camera cut) is drawn in the frame
//! it does, never a frame late. The test is conservative: the sphere's
//! screen rectangle bounds its projection (from the range of the sphere's
//! clip coordinates, its depth split along `w`,
//! widened by [`OCCLUSION_PIXEL_MARGIN`]), the pyramid level read is
//! the one where that rectangle spans at most 2×2 texels, which cover every
//! pixel it touches, and the sphere's nearest depth is compared with the
//! farthest there with [`OCCLUSION_DEPTH_TOLERANCE`]. [`CpuPyramid`] and
//! [`OcclusionCamera::classify`] are the CPU mirror.

use crate::CullError;
use crate::frustum::{PLANE_TOLERANCE, SphereClass, WorldSphere};
use glam::{DMat4, DVec3, DVec4, Mat4, Vec3};

/// How far, in pixels, the occlusion test widens a sphere's screen
/// rectangle on each side: it covers the rounding of the projection
/// (`PIXEL_MARGIN` in `shaders/cull/visibility/occlusion.wgsl`; a test holds
/// them equal).
pub const OCCLUSION_PIXEL_MARGIN: f32 = 1.0 / 128.0;

/// The relative slack of the occlusion test's depth comparison (2⁻¹⁶): a
/// sphere whose nearest depth is within this of the farthest occluder depth
/// is kept (`DEPTH_TOLERANCE` in the WGSL).
pub const OCCLUSION_DEPTH_TOLERANCE: f32 = 1.0 / 65536.0;

/// Which way depth grows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DepthOrder {
    /// Nearer depths are greater (Bevy's, and the precise choice for `f32`
    /// depth): the farthest depth is the smallest.
    #[default]
    ReverseZ,
    /// Nearer depths are smaller: the farthest depth is the largest.
    Standard,
}

impl DepthOrder {
    /// The farther of two depths.
    pub fn farther(self, a: f32, b: f32) -> f32 {
        match self {
            Self::ReverseZ => a.min(b),
            Self::Standard => a.max(b),
        }
    }

    fn reverse(self) -> bool {
        self == Self::ReverseZ
    }
}

/// Levels of a pyramid whose level 0 is `width × height`: a texture's mip
/// chain, sizes halving and rounding down (at least 1) until the longer side
/// is 1.
pub fn pyramid_levels(width: u32, height: u32) -> u32 {
    u32::BITS - width.max(height).max(1).leading_zeros()
}

/// The size of level `k` of a pyramid whose level 0 is `width × height`:
/// the texture's mip size.
pub fn pyramid_level_size(width: u32, height: u32, k: u32) -> (u32, u32) {
    ((width >> k).max(1), (height >> k).max(1))
}

/// The camera an occlusion test projects with: its `clip_from_world`, with
/// the translation taken about `origin` (the camera's position), so that the
/// shaders project positions relative to the camera and keep their
/// precision far from the world's origin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OcclusionCamera {
    /// Maps `(position − origin, 1)` to clip space.
    pub clip_from_relative: Mat4,
    /// The point positions are taken relative to.
    pub origin: Vec3,
    /// How far, in pixels of the depth buffer, what was drawn may lie from
    /// this projection along each axis: the jitter of temporal
    /// anti-aliasing, which offsets each frame's projection by up to half
    /// a pixel (Bevy's `TemporalJitter::offset`). The late phase widens
    /// each sphere's screen rectangle by it; 0 for an unjittered camera
    /// (the constructors' value; set it with [`Self::with_jitter`]).
    pub jitter: f32,
}

impl OcclusionCamera {
    /// The camera of a projection and the camera's transform (Bevy's
    /// `clip_from_view` and `GlobalTransform`), combined in `f64`.
    pub fn from_view(clip_from_view: Mat4, world_from_view: Mat4) -> Result<Self, CullError> {
        if !(clip_from_view.is_finite() && world_from_view.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Self::from_view_f64(clip_from_view, world_from_view.as_dmat4())
    }

    /// [`Self::from_view`] with the camera's transform in `f64` (composed
    /// with a batch's frame by [`crate::LocalFrame`]).
    pub(crate) fn from_view_f64(clip_from_view: Mat4, world_from_view: DMat4) -> Result<Self, CullError> {
        let origin = world_from_view.w_axis.truncate();
        let mut linear = world_from_view;
        linear.w_axis = DVec4::W;
        if linear.determinant() == 0.0 {
            return Err(CullError::DegenerateFrustum("world_from_view is singular"));
        }
        let camera = Self {
            clip_from_relative: (clip_from_view.as_dmat4() * linear.inverse()).as_mat4(),
            origin: origin.as_vec3(),
            jitter: 0.0,
        };
        // The product, rounded to f32, may still overflow.
        camera.validate()?;
        Ok(camera)
    }

    /// The camera of a `clip_from_world` matrix, positions taken relative
    /// to `origin` (best the camera's position; any point works, with less
    /// precision the farther it is from the camera).
    pub fn from_clip_from_world(clip_from_world: Mat4, origin: Vec3) -> Result<Self, CullError> {
        if !(clip_from_world.is_finite() && origin.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Self::from_clip_from_world_f64(clip_from_world.as_dmat4(), origin.as_dvec3())
    }

    /// [`Self::from_clip_from_world`] in `f64` (a batch's frame composed in
    /// by [`crate::LocalFrame`]).
    pub(crate) fn from_clip_from_world_f64(clip_from_world: DMat4, origin: DVec3) -> Result<Self, CullError> {
        let relative = clip_from_world * DMat4::from_translation(origin);
        let camera = Self {
            clip_from_relative: relative.as_mat4(),
            origin: origin.as_vec3(),
            jitter: 0.0,
        };
        camera.validate()?;
        Ok(camera)
    }

    /// The camera with its projection jittered by up to `pixels` along each
    /// axis ([`Self::jitter`]); an error unless `pixels` is finite and not
    /// negative (and the camera passes [`Self::validate`]).
    pub fn with_jitter(self, pixels: f32) -> Result<Self, CullError> {
        let jitter = Self {
            jitter: pixels,
            ..self
        };
        jitter.validate()?;
        Ok(jitter)
    }

    /// An error unless [`Self::jitter`] is finite and not negative and the
    /// matrix and origin are finite (the late phase and [`Self::classify`]
    /// check it: the fields are public).
    pub fn validate(&self) -> Result<(), CullError> {
        if !(self.clip_from_relative.is_finite() && self.origin.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        if self.jitter.is_finite() && self.jitter >= 0.0 {
            Ok(())
        } else {
            Err(CullError::InvalidParameter(
                "OcclusionCamera::jitter must be finite and not negative",
            ))
        }
    }

    /// The radius slack the shader adds for the rounding of
    /// `center − origin` (`occlusion_origin.w`): that subtraction rounds by
    /// at most 2⁻²⁴ of each operand's magnitude; the center's share is in
    /// the frustum test's slack already, this is the origin's, four times
    /// over.
    pub(crate) fn origin_slack(&self) -> f32 {
        const ORIGIN_TOLERANCE: f32 = 1.0 / (1 << 22) as f32;
        ORIGIN_TOLERANCE * (self.origin.x.abs() + self.origin.y.abs() + self.origin.z.abs())
    }

    /// How an instance's world sphere fares against `pyramid` in the late
    /// phase, as the shader decides: `Inside` when it must be kept (it may
    /// be visible), `Outside` when it must be culled (hidden behind what the
    /// pyramid holds), `Borderline` when rounding may decide either way. A
    /// sphere that overflowed `f32` is kept. Frustum and level-of-detail
    /// band are [`crate::Frustum::classify`]'s. An error where the camera
    /// does not pass [`Self::validate`] (as the late phase refuses it).
    pub fn classify(&self, sphere: &WorldSphere, pyramid: &CpuPyramid) -> Result<SphereClass, CullError> {
        self.validate()?;
        Ok(self.classify_valid(sphere, pyramid))
    }

    /// [`Self::classify`] of a camera already validated.
    fn classify_valid(&self, sphere: &WorldSphere, pyramid: &CpuPyramid) -> SphereClass {
        let c = sphere.center;
        let magnitude = c.x.abs() + c.y.abs() + c.z.abs() + sphere.radius + sphere.terms;
        let wide = sphere.radius + PLANE_TOLERANCE * magnitude + self.origin_slack();
        if !wide.is_finite() {
            return SphereClass::Inside;
        }
        let relative = c.as_dvec3() - self.origin.as_dvec3();
        // The shader's sphere is within (wide - radius) of the true one: it
        // contains the true sphere and lies within the doubled slack. The
        // test is monotone in the rectangle and the tolerances.
        let tight = Test {
            radius: sphere.radius as f64,
            margin: self.jitter as f64,
            tolerance: 0.0,
        };
        if self.hiz_visible(relative, tight, pyramid) {
            return SphereClass::Inside;
        }
        let loose = Test {
            radius: 2.0 * wide as f64 - sphere.radius as f64,
            margin: 2.0 * OCCLUSION_PIXEL_MARGIN as f64 + self.jitter as f64,
            tolerance: 2.0 * OCCLUSION_DEPTH_TOLERANCE as f64,
        };
        if self.hiz_visible(relative, loose, pyramid) {
            SphereClass::Borderline
        } else {
            SphereClass::Outside
        }
    }

    /// The shader's `hiz_visible`, in `f64` with the given slack.
    fn hiz_visible(&self, relative: DVec3, test: Test, pyramid: &CpuPyramid) -> bool {
        let m = self.clip_from_relative.as_dmat4();
        let base = m * relative.extend(1.0);
        // As the shader: the sphere's clip coordinates lie within
        // base ± r·|row| (each row's xyz length), and x/w (y/w) over that
        // rectangle of (x, w) is bounded by its values at the rectangle's
        // corners.
        let reach =
            (m.x_axis * m.x_axis + m.y_axis * m.y_axis + m.z_axis * m.z_axis).map(f64::sqrt) * test.radius;
        let (near, far) = (base - reach, base + reach);
        // A sphere whose range is not finite may cover anything; as the shader's
        // `!(near.w > MIN_W)`, NaN counts as reaching the eye.
        if !(near.is_finite() && far.is_finite())
            || near.w.partial_cmp(&(MIN_W as f64)) != Some(std::cmp::Ordering::Greater)
        {
            return true;
        }
        let xy_lo = (near.truncate().truncate() / near.w).min(near.truncate().truncate() / far.w);
        let xy_hi = (far.truncate().truncate() / near.w).max(far.truncate().truncate() / far.w);
        // As the shader: z = a w + e·(p, 1), each term of z/w bounded over
        // the sphere's range of w and of e·p.
        let row = |k: usize| DVec4::new(m.x_axis[k], m.y_axis[k], m.z_axis[k], m.w_axis[k]);
        let (row_z, row_w) = (row(2), row(3));
        let ww = row_w.truncate().length_squared();
        let a = if ww > DEPTH_FIT_MIN as f64 * (ww + row_w.w * row_w.w) {
            row_z.truncate().dot(row_w.truncate()) / ww
        } else {
            0.0
        };
        let e = row_z - a * row_w;
        let e_center = e.truncate().dot(relative);
        let e_reach = test.radius * e.truncate().length();
        let over_w = |v: f64| [v / near.w, v / far.w];
        let [b_lo, b_hi] = over_w(e.w);
        let [lo_lo, lo_hi] = over_w(e_center - e_reach);
        let [hi_lo, hi_hi] = over_w(e_center + e_reach);
        let z_lo = a + b_lo.min(b_hi) + lo_lo.min(lo_hi);
        let z_hi = a + b_lo.max(b_hi) + hi_lo.max(hi_hi);
        let lo = xy_lo.extend(z_lo);
        let hi = xy_hi.extend(z_hi);
        let (w, h) = (pyramid.width as f64, pyramid.height as f64);
        let px_lo = [
            (lo.x * 0.5 + 0.5) * w - test.margin,
            (0.5 - hi.y * 0.5) * h - test.margin,
        ];
        let px_hi = [
            (hi.x * 0.5 + 0.5) * w + test.margin,
            (0.5 - lo.y * 0.5) * h + test.margin,
        ];
        let last = [w - 1.0, h - 1.0];
        let p0: Vec<u32> = (0..2)
            .map(|a| px_lo[a].floor().clamp(0.0, last[a]) as u32)
            .collect();
        let p1: Vec<u32> = (0..2)
            .map(|a| px_hi[a].floor().clamp(0.0, last[a]) as u32)
            .collect();
        let extent = (p1[0] - p0[0]).max(p1[1] - p0[1]) + 1;
        let level = if extent > 1 {
            u32::BITS - (extent - 1).leading_zeros()
        } else {
            0
        }
        .min(pyramid.levels.len() as u32 - 1);
        let order = pyramid.order;
        let (lw, lh) = pyramid.level_size(level);
        let texel = |x: u32, y: u32| pyramid.texel(level, (x >> level).min(lw - 1), (y >> level).min(lh - 1));
        let mut far = texel(p0[0], p0[1]);
        for (x, y) in [(p1[0], p0[1]), (p0[0], p1[1]), (p1[0], p1[1])] {
            far = order.farther(far, texel(x, y));
        }
        let far = far as f64;
        let slack = test.tolerance * far.abs();
        if order.reverse() {
            hi.z >= far - slack
        } else {
            lo.z <= far + slack
        }
    }
}

/// The least clip `w` of a sphere that the late phase projects (the
/// shader's `MIN_W`): a sphere nearer the eye plane is kept, as one that
/// reaches it (`1/w` would overflow below `f32`'s normal range).
pub(crate) const MIN_W: f32 = 1.0e-30;

/// The late phase splits the depth along `w`, `z = a·w + b + e·p`, with `a`
/// fitted only where `w` depends on the point by more than this share of
/// its magnitude (the shader's `FIT_MIN`): an orthographic projection with
/// rounding noise in its `w` row takes `a = 0`.
pub(crate) const DEPTH_FIT_MIN: f32 = 1.0e-6;

/// The slack of one evaluation of the test.
#[derive(Clone, Copy)]
struct Test {
    radius: f64,
    margin: f64,
    tolerance: f64,
}

/// The texels of the level below that texel `x` of a level `size` wide
/// reduces, the level below being `below` wide: `2x` and `2x + 1`, and for
/// the last texel everything to the end (a third when `below` is odd, the
/// one texel when it is 1). So with pixels mapped to texels clamped to the
/// last one, each texel covers exactly the pixels that map to it.
fn reduced_span(x: u32, size: u32, below: u32) -> std::ops::Range<u32> {
    let end = if x + 1 == size { below } else { 2 * x + 2 };
    (2 * x).min(below - 1)..end
}

/// A depth pyramid on the CPU: the mirror of [`PyramidBuilder::build`], and
/// what [`DepthPyramid::read_back`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuPyramid {
    /// Level 0's width: the depth buffer's.
    pub width: u32,
    /// Level 0's height.
    pub height: u32,
    /// Which depth is farther.
    pub order: DepthOrder,
    /// Each level's depths, rows from the top, `level_size(k)` each.
    pub levels: Vec<Vec<f32>>,
}

impl CpuPyramid {
    /// Builds the pyramid of a `width × height` depth buffer (`depth` row
    /// by row from the top), as the GPU does.
    pub fn build(width: u32, height: u32, depth: &[f32], order: DepthOrder) -> Result<Self, CullError> {
        if width == 0 || height == 0 || depth.len() != width as usize * height as usize {
            return Err(CullError::InvalidParameter(
                "a depth pyramid needs width × height depths, both at least 1",
            ));
        }
        let mut levels = vec![depth.to_vec()];
        for k in 1..pyramid_levels(width, height) {
            let below = levels.last().expect("level 0");
            let (w, h) = pyramid_level_size(width, height, k - 1);
            let (nw, nh) = pyramid_level_size(width, height, k);
            let level = (0..nh)
                .flat_map(|y| (0..nw).map(move |x| (x, y)))
                .map(|(x, y)| {
                    let xs = reduced_span(x, nw, w);
                    let ys = reduced_span(y, nh, h);
                    let mut far: Option<f32> = None;
                    for by in ys {
                        for bx in xs.clone() {
                            let d = below[(by * w + bx) as usize];
                            far = Some(far.map_or(d, |f| order.farther(f, d)));
                        }
                    }
                    far.expect("a texel reduces at least one below")
                })
                .collect();
            levels.push(level);
        }
        Ok(Self {
            width,
            height,
            order,
            levels,
        })
    }

    /// The size of level `k`.
    pub fn level_size(&self, k: u32) -> (u32, u32) {
        pyramid_level_size(self.width, self.height, k)
    }

    /// Texel `(x, y)` of level `k`.
    pub fn texel(&self, k: u32, x: u32, y: u32) -> f32 {
        let (w, _) = self.level_size(k);
        self.levels[k as usize][(y * w + x) as usize]
    }
}

/// A depth pyramid on the GPU: an `R32Float` texture with
/// [`pyramid_levels`] mips, level 0 the size of the depth buffer it is
/// built from ([`PyramidBuilder::build`]); the late phase of an occlusion
/// cull reads it.
pub struct DepthPyramid {
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    mips: Vec<wgpu::TextureView>,
    params: wgpu::Buffer,
    width: u32,
    height: u32,
    order: DepthOrder,
}

impl DepthPyramid {
    /// Allocates the pyramid of a `width × height` depth buffer whose depth
    /// grows as `order` says.
    pub fn new(device: &wgpu::Device, width: u32, height: u32, order: DepthOrder) -> Result<Self, CullError> {
        let max = device.limits().max_texture_dimension_2d;
        if width == 0 || height == 0 || width > max || height > max {
            return Err(CullError::InvalidParameter(
                "a depth pyramid's size must be from 1 to the device's largest 2D texture",
            ));
        }
        let levels = pyramid_levels(width, height);
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("depth pyramid"),
            size: wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
            mip_level_count: levels,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::R32Float,
            usage: wgpu::TextureUsages::STORAGE_BINDING
                | wgpu::TextureUsages::TEXTURE_BINDING
                | wgpu::TextureUsages::COPY_SRC
                | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        let view = texture.create_view(&Default::default());
        let mips = (0..levels)
            .map(|k| {
                texture.create_view(&wgpu::TextureViewDescriptor {
                    label: Some("depth pyramid level"),
                    base_mip_level: k,
                    mip_level_count: Some(1),
                    ..Default::default()
                })
            })
            .collect();
        let params = wgpu::util::DeviceExt::create_buffer_init(
            device,
            &wgpu::util::BufferInitDescriptor {
                label: Some("depth pyramid params"),
                contents: bytemuck::cast_slice(&[u32::from(order == DepthOrder::ReverseZ), 0, 0, 0]),
                usage: wgpu::BufferUsages::UNIFORM,
            },
        );
        Ok(Self {
            texture,
            view,
            mips,
            params,
            width,
            height,
            order,
        })
    }

    /// Level 0's width (the depth buffer's).
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Level 0's height.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Its levels ([`pyramid_levels`]).
    pub fn levels(&self) -> u32 {
        self.mips.len() as u32
    }

    /// Which depth is farther.
    pub fn order(&self) -> DepthOrder {
        self.order
    }

    /// The texture (every level).
    pub fn texture(&self) -> &wgpu::Texture {
        &self.texture
    }

    /// A view of every level, as the late phase binds it.
    pub fn view(&self) -> &wgpu::TextureView {
        &self.view
    }

    /// Writes every level from a pyramid built on the CPU
    /// ([`CpuPyramid::build`]) of the same size and order: for occluders
    /// known on the CPU, and where the GPU cannot build one.
    pub fn write_levels(&self, queue: &wgpu::Queue, pyramid: &CpuPyramid) -> Result<(), CullError> {
        if (pyramid.width, pyramid.height, pyramid.order) != (self.width, self.height, self.order)
            || pyramid.levels.len() != self.mips.len()
        {
            return Err(CullError::InvalidParameter(
                "the CPU pyramid's size, order or levels differ from the GPU pyramid's",
            ));
        }
        for (k, level) in pyramid.levels.iter().enumerate() {
            let (w, h) = pyramid_level_size(self.width, self.height, k as u32);
            queue.write_texture(
                wgpu::TexelCopyTextureInfo {
                    texture: &self.texture,
                    mip_level: k as u32,
                    origin: wgpu::Origin3d::ZERO,
                    aspect: wgpu::TextureAspect::All,
                },
                bytemuck::cast_slice(level),
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(w * 4),
                    rows_per_image: Some(h),
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: 1,
                },
            );
        }
        Ok(())
    }

    /// Copies every level back to the CPU, waiting for the GPU. For tests
    /// and tools.
    pub fn read_back(&self, device: &wgpu::Device, queue: &wgpu::Queue) -> Result<CpuPyramid, CullError> {
        let mut levels = Vec::new();
        for k in 0..self.levels() {
            let (w, h) = pyramid_level_size(self.width, self.height, k);
            let row =
                (w * 4).div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
            let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("depth pyramid read-back"),
                size: row as u64 * h as u64,
                usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let mut encoder = device.create_command_encoder(&Default::default());
            encoder.copy_texture_to_buffer(
                wgpu::TexelCopyTextureInfo {
                    texture: &self.texture,
                    mip_level: k,
                    origin: wgpu::Origin3d::ZERO,
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::TexelCopyBufferInfo {
                    buffer: &buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(row),
                        rows_per_image: Some(h),
                    },
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: 1,
                },
            );
            queue.submit([encoder.finish()]);
            let bytes = crate::readback::read_back(device, queue, &buffer, 0, buffer.size())?;
            let level = bytes
                .chunks_exact(row as usize)
                .flat_map(|r| r[..w as usize * 4].chunks_exact(4))
                .map(bytemuck::pod_read_unaligned::<f32>)
                .collect();
            levels.push(level);
        }
        Ok(CpuPyramid {
            width: self.width,
            height: self.height,
            order: self.order,
            levels,
        })
    }
}

/// Builds [`DepthPyramid`]s from depth buffers (`shaders/cull/pyramid.wgsl`).
/// Create once per device.
pub struct PyramidBuilder {
    module: wgpu::ShaderModule,
    /// Copies a single-sampled depth (a depth format or `R32Float`) to
    /// level 0.
    copy: Pass,
    /// Reduces a level to the next.
    reduce: Pass,
    /// Copies the farthest sample of a multisampled depth to level 0:
    /// compiled when first needed (GL compiles it only where it has
    /// `textureSamples`).
    copy_multisampled: std::sync::OnceLock<Pass>,
}

/// One pass of the pyramid: its pipeline and bind group layout.
struct Pass {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

/// The pyramid shader's workgroup edge (`@workgroup_size(8, 8)`).
const PYRAMID_GROUP: u32 = 8;

/// Binding of the pyramid shader's uniform (the depth order).
const PYRAMID_PARAMS: u32 = 0;
/// Binding of the level written.
const PYRAMID_OUT: u32 = 1;
/// Binding of a multisampled depth buffer.
const PYRAMID_SOURCE_MULTISAMPLED: u32 = 3;
/// Binding of a single-sampled depth buffer, or of the level below.
const PYRAMID_SOURCE: u32 = 4;

impl PyramidBuilder {
    /// Compiles the pyramid's passes. wgpu's GL backend is refused
    /// ([`CullError::UnsupportedBackend`]): its reduction passes, which read
    /// one mip of the texture and write the next, left the levels above 0
    /// unwritten (seen on llvmpipe), and a pyramid of wrong depths could
    /// cull what is visible. There, fill the levels from the CPU
    /// ([`DepthPyramid::write_levels`]).
    pub fn new(device: &wgpu::Device) -> Result<Self, CullError> {
        let backend = device.adapter_info().backend;
        if backend == wgpu::Backend::Gl {
            return Err(CullError::UnsupportedBackend {
                backend,
                what: "building a depth pyramid on the GPU",
            });
        }
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("depth pyramid"),
            source: wgpu::ShaderSource::Wgsl(PYRAMID_SHADER.source.into()),
        });
        let copy = Self::pass(device, &module, "copy_float", false, false);
        let reduce = Self::pass(device, &module, "reduce", true, false);
        Ok(Self {
            module,
            copy,
            reduce,
            copy_multisampled: std::sync::OnceLock::new(),
        })
    }

    fn pass(
        device: &wgpu::Device,
        module: &wgpu::ShaderModule,
        entry: &str,
        order: bool,
        multisampled: bool,
    ) -> Pass {
        let compute = wgpu::ShaderStages::COMPUTE;
        let mut entries = vec![
            wgpu::BindGroupLayoutEntry {
                binding: PYRAMID_OUT,
                visibility: compute,
                ty: wgpu::BindingType::StorageTexture {
                    access: wgpu::StorageTextureAccess::WriteOnly,
                    format: wgpu::TextureFormat::R32Float,
                    view_dimension: wgpu::TextureViewDimension::D2,
                },
                count: None,
            },
            wgpu::BindGroupLayoutEntry {
                binding: if multisampled {
                    PYRAMID_SOURCE_MULTISAMPLED
                } else {
                    PYRAMID_SOURCE
                },
                visibility: compute,
                ty: wgpu::BindingType::Texture {
                    sample_type: if multisampled {
                        wgpu::TextureSampleType::Depth
                    } else {
                        wgpu::TextureSampleType::Float { filterable: false }
                    },
                    view_dimension: wgpu::TextureViewDimension::D2,
                    multisampled,
                },
                count: None,
            },
        ];
        if order {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: PYRAMID_PARAMS,
                visibility: compute,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(entry),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(entry),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&pipeline_layout),
            module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
        Pass { layout, pipeline }
    }

    /// Records the build of `pyramid` from `depth`: a depth texture
    /// (`Depth32Float`, `Depth24Plus`, `Depth24PlusStencil8`,
    /// `Depth16Unorm`; multisampled or not) or an `R32Float` one, bound with
    /// `TEXTURE_BINDING`, the size of the pyramid's level 0. Its depth must
    /// grow as the pyramid's [`DepthOrder`] says. A multisampled depth gives
    /// each pixel its farthest sample.
    pub fn build(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        depth: &wgpu::Texture,
        pyramid: &DepthPyramid,
    ) -> Result<(), CullError> {
        use wgpu::TextureFormat as F;
        let is_depth = matches!(
            depth.format(),
            F::Depth32Float | F::Depth24Plus | F::Depth24PlusStencil8 | F::Depth16Unorm
        );
        let multisampled = depth.sample_count() > 1;
        if !(is_depth || (depth.format() == F::R32Float && !multisampled)) {
            return Err(CullError::InvalidParameter(
                "a depth pyramid is built from a depth texture or a single-sampled R32Float one",
            ));
        }
        if (depth.width(), depth.height()) != (pyramid.width, pyramid.height) {
            return Err(CullError::InvalidParameter(
                "the depth texture and the depth pyramid's level 0 differ in size",
            ));
        }
        if !depth.usage().contains(wgpu::TextureUsages::TEXTURE_BINDING) {
            return Err(CullError::InvalidParameter(
                "the depth texture needs TextureUsages::TEXTURE_BINDING",
            ));
        }
        let source_view = depth.create_view(&wgpu::TextureViewDescriptor {
            label: Some("depth pyramid source"),
            aspect: if is_depth {
                wgpu::TextureAspect::DepthOnly
            } else {
                wgpu::TextureAspect::All
            },
            base_mip_level: 0,
            mip_level_count: Some(1),
            ..Default::default()
        });
        let (first, source_binding) = if multisampled {
            let pass = self
                .copy_multisampled
                .get_or_init(|| Self::pass(device, &self.module, "copy_multisampled", true, true));
            (pass, PYRAMID_SOURCE_MULTISAMPLED)
        } else {
            (&self.copy, PYRAMID_SOURCE)
        };
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("depth pyramid"),
            timestamp_writes: None,
        });
        for k in 0..pyramid.levels() {
            let (step, input, binding) = if k == 0 {
                (first, &source_view, source_binding)
            } else {
                (&self.reduce, &pyramid.mips[k as usize - 1], PYRAMID_SOURCE)
            };
            let mut entries = vec![
                wgpu::BindGroupEntry {
                    binding: PYRAMID_OUT,
                    resource: wgpu::BindingResource::TextureView(&pyramid.mips[k as usize]),
                },
                wgpu::BindGroupEntry {
                    binding,
                    resource: wgpu::BindingResource::TextureView(input),
                },
            ];
            // Only the passes that compare depths read the order.
            if k > 0 || multisampled {
                entries.push(wgpu::BindGroupEntry {
                    binding: PYRAMID_PARAMS,
                    resource: pyramid.params.as_entire_binding(),
                });
            }
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("depth pyramid level"),
                layout: &step.layout,
                entries: &entries,
            });
            let (w, h) = pyramid_level_size(pyramid.width, pyramid.height, k);
            pass.set_pipeline(&step.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(w.div_ceil(PYRAMID_GROUP), h.div_ceil(PYRAMID_GROUP), 1);
        }
        Ok(())
    }
}

/// The pyramid's WGSL (an entry module of its own).
pub const PYRAMID_SHADER: crate::kernel::ShaderModule = crate::kernel::shader_module!("pyramid.wgsl");

/// Which instances were visible after the last late phase, for one camera
/// and batch: two halves of a bit per instance (32 consecutive instances to
/// a `u32` word), swapped by each late phase (it reads one and writes the
/// other, so a variant that votes in several dispatches reads the last
/// frame's answer in every one). The culler clears the half a late phase
/// writes before it, and the late phase sets the bits of the instances that
/// pass. Starts empty: the first early phase keeps nothing, and the first
/// late phase draws all that passes the pyramid.
pub struct OcclusionHistory {
    buffer: wgpu::Buffer,
    capacity: u32,
    current: u32,
}

impl OcclusionHistory {
    /// Allocates the history of up to `capacity` instances: two bits each
    /// (rounded up to words), bound whole, so at most the device's largest
    /// storage binding (`CullError::BatchTooLarge` beyond, which no `u32`
    /// count reaches at WebGPU's default 128 MiB).
    pub fn new(device: &wgpu::Device, capacity: u32) -> Result<Self, CullError> {
        let size = crate::buffers::checked_size(device, history_words(capacity) * 2, 4)?;
        // The passes bind it whole.
        let limit = device.limits().max_storage_buffer_binding_size;
        if size > limit {
            return Err(CullError::BatchTooLarge {
                capacity: capacity as u64,
                windows: 1,
                window_len: limit.saturating_mul(4).min(u32::MAX as u64),
                max: 1,
            });
        }
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("occlusion history"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        Ok(Self {
            buffer,
            capacity,
            current: 0,
        })
    }

    /// Instances it can hold.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Its buffer (both halves).
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Forgets every instance (the next early phase keeps none).
    pub fn clear(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.clear_buffer(&self.buffer, 0, None);
    }

    /// Where the half the next early and late phases read starts, and where
    /// the half the next late phase writes starts (words).
    pub(crate) fn halves(&self) -> (u32, u32) {
        let words = history_words(self.capacity);
        let read = self.current * words;
        (read, words - read)
    }

    /// Swaps the halves: the late phase just recorded wrote the other one.
    pub(crate) fn advance(&mut self) {
        self.current = 1 - self.current;
    }

    /// Whether each of the first `count` instances was visible after the
    /// last late phase recorded (0 or 1 each), waiting for the GPU. For
    /// tests and tools.
    pub fn read_back(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        count: u32,
    ) -> Result<Vec<u32>, CullError> {
        if count > self.capacity {
            return Err(CullError::CountExceedsCapacity {
                count: count as u64,
                capacity: self.capacity as u64,
            });
        }
        let (read, _) = self.halves();
        let words = count.div_ceil(32) as u64;
        let bytes = crate::readback::read_back(device, queue, &self.buffer, read as u64 * 4, words * 4)?;
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        Ok((0..count as usize)
            .map(|i| (words[i / 32] >> (i % 32)) & 1)
            .collect())
    }
}

/// Words of one half of a history of `capacity` instances: a bit each.
pub(crate) fn history_words(capacity: u32) -> u32 {
    capacity.max(1).div_ceil(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_the_mip_chain() {
        assert_eq!(pyramid_levels(1, 1), 1);
        assert_eq!(pyramid_levels(2, 1), 2);
        assert_eq!(pyramid_levels(3, 3), 2);
        assert_eq!(pyramid_levels(61, 37), 6);
        assert_eq!(pyramid_levels(1280, 720), 11);
        assert_eq!(pyramid_levels(1024, 1024), 11);
        assert_eq!(pyramid_level_size(1280, 720, 10), (1, 1));
    }

    /// Each texel of level k holds the farthest depth of exactly the pixels
    /// that map to it: `x >> k`, clamped to the level's last texel, odd
    /// sizes included.
    #[test]
    fn texels_cover_their_pixels() {
        for (w, h) in [(13u32, 7u32), (61, 37), (1, 9), (16, 3)] {
            let depth: Vec<f32> = (0..w * h).map(|i| ((i * 7919) % 101) as f32 / 101.0).collect();
            for order in [DepthOrder::ReverseZ, DepthOrder::Standard] {
                let p = CpuPyramid::build(w, h, &depth, order).unwrap();
                assert_eq!(p.levels.len() as u32, pyramid_levels(w, h));
                for k in 0..p.levels.len() as u32 {
                    let (lw, lh) = p.level_size(k);
                    let mut far: Vec<Option<f32>> = vec![None; (lw * lh) as usize];
                    for y in 0..h {
                        for x in 0..w {
                            let t = (((y >> k).min(lh - 1)) * lw + (x >> k).min(lw - 1)) as usize;
                            let d = depth[(y * w + x) as usize];
                            far[t] = Some(far[t].map_or(d, |f| order.farther(f, d)));
                        }
                    }
                    let far: Vec<f32> = far
                        .into_iter()
                        .map(|f| f.expect("every texel covers a pixel"))
                        .collect();
                    assert_eq!(p.levels[k as usize], far, "{w}x{h} level {k}");
                }
                let (tw, th) = p.level_size(p.levels.len() as u32 - 1);
                assert_eq!(tw.max(th), 1, "{w}x{h}: the top level is one texel");
            }
        }
    }

    fn camera() -> OcclusionCamera {
        let proj = Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1);
        OcclusionCamera::from_view(proj, Mat4::IDENTITY).unwrap()
    }

    fn sphere(center: Vec3, radius: f32) -> WorldSphere {
        WorldSphere {
            center,
            radius,
            terms: 0.0,
        }
    }

    #[test]
    fn a_wall_hides_what_is_behind_it() {
        // A wall at distance 5 covering the whole screen (reverse-Z: depth
        // near/distance).
        let (w, h) = (64, 64);
        let wall = 0.1 / 5.0;
        let p = CpuPyramid::build(w, h, &vec![wall; (w * h) as usize], DepthOrder::ReverseZ).unwrap();
        let cam = camera();
        assert_eq!(
            cam.classify(&sphere(Vec3::new(0.0, 0.0, -10.0), 1.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
        assert_eq!(
            cam.classify(&sphere(Vec3::new(0.0, 0.0, -3.0), 1.0), &p).unwrap(),
            SphereClass::Inside
        );
        // Reaching through the wall: kept.
        assert_eq!(
            cam.classify(&sphere(Vec3::new(0.0, 0.0, -6.0), 1.5), &p).unwrap(),
            SphereClass::Inside
        );
        // Around the camera: kept.
        assert_eq!(
            cam.classify(&sphere(Vec3::ZERO, 0.5), &p).unwrap(),
            SphereClass::Inside
        );
        // Overflowed: kept.
        assert_eq!(
            cam.classify(&sphere(Vec3::new(0.0, 0.0, -10.0), f32::INFINITY), &p)
                .unwrap(),
            SphereClass::Inside
        );
    }

    #[test]
    fn a_camera_with_bad_fields_is_refused_not_classified() {
        let p = CpuPyramid::build(4, 4, &[0.5; 16], DepthOrder::ReverseZ).unwrap();
        let s = sphere(Vec3::new(0.0, 0.0, -10.0), 1.0);
        for jitter in [f32::NAN, -1.0, f32::INFINITY] {
            let cam = OcclusionCamera { jitter, ..camera() };
            assert!(
                matches!(cam.classify(&s, &p), Err(CullError::InvalidParameter(_))),
                "jitter {jitter}"
            );
        }
        let mut cam = camera();
        cam.clip_from_relative.x_axis.x = f32::NAN;
        assert!(matches!(
            cam.classify(&s, &p),
            Err(CullError::DegenerateFrustum(_))
        ));
        let cam = OcclusionCamera {
            origin: Vec3::new(f32::INFINITY, 0.0, 0.0),
            ..camera()
        };
        assert!(matches!(
            cam.classify(&s, &p),
            Err(CullError::DegenerateFrustum(_))
        ));
        // An origin so far that the matrix overflows is refused too.
        let far = OcclusionCamera::from_clip_from_world(camera().clip_from_relative, Vec3::splat(3.0e38));
        assert!(matches!(far, Err(CullError::DegenerateFrustum(_))), "{far:?}");
    }

    #[test]
    fn a_hole_in_the_wall_shows_what_is_behind_it() {
        let (w, h) = (64u32, 64u32);
        let wall = 0.1 / 5.0;
        let mut depth = vec![wall; (w * h) as usize];
        // One far pixel near the center (sky: depth 0).
        depth[(32 * w + 32) as usize] = 0.0;
        let p = CpuPyramid::build(w, h, &depth, DepthOrder::ReverseZ).unwrap();
        let cam = camera();
        // Far behind, but its rectangle covers the hole's pixel.
        assert_ne!(
            cam.classify(&sphere(Vec3::new(0.0, 0.0, -50.0), 2.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
        // Off to the side, behind solid wall.
        assert_eq!(
            cam.classify(&sphere(Vec3::new(-20.0, -20.0, -50.0), 1.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
    }

    #[test]
    fn camera_far_from_the_origin_and_standard_depth() {
        let origin = Vec3::new(1.0e7, -3.0e6, 2.0e6);
        let proj = Mat4::perspective_rh(1.0, 1.0, 0.1, 1000.0);
        let cam = OcclusionCamera::from_view(proj, Mat4::from_translation(origin)).unwrap();
        // A wall 5 units away in standard depth.
        let ndc_wall = {
            let c = proj * glam::Vec4::new(0.0, 0.0, -5.0, 1.0);
            c.z / c.w
        };
        let (w, h) = (32, 32);
        let p = CpuPyramid::build(w, h, &vec![ndc_wall; (w * h) as usize], DepthOrder::Standard).unwrap();
        // At 10^7 from the origin, f32 positions are a unit apart: the
        // slack makes the sphere about 60 units wide, still behind the wall.
        assert_eq!(
            cam.classify(&sphere(origin + Vec3::new(0.0, 0.0, -500.0), 1.0), &p)
                .unwrap(),
            SphereClass::Outside
        );
        assert_eq!(
            cam.classify(&sphere(origin + Vec3::new(0.0, 0.0, -3.0), 1.0), &p)
                .unwrap(),
            SphereClass::Inside
        );
    }
}
