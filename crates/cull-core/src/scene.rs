//! Scenes to cull: a camera, a mesh's bounding sphere and its instances.
//! Random ones serve the tests and the benchmark; the replay example loads
//! them from files (`docs/scene-format.md`).

use crate::frustum::Frustum;
use crate::sphere::Sphere;
use crate::{CullError, Instance, InstanceFormat};
use glam::{Mat4, Quat, Vec3, Vec4};

/// The projections the tests and benchmark cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CameraKind {
    /// Bevy's default: reverse-Z, infinite far plane.
    InfiniteReverseZ,
    /// Standard-depth perspective with a far plane at 120.
    Perspective,
    /// Reverse-Z orthographic, as Bevy builds it.
    Orthographic,
}

impl CameraKind {
    /// Every kind.
    pub const ALL: [CameraKind; 3] = [Self::InfiniteReverseZ, Self::Perspective, Self::Orthographic];

    /// The projection for aspect ratio 16:9.
    pub fn projection(self) -> Mat4 {
        let aspect = 16.0 / 9.0;
        match self {
            Self::InfiniteReverseZ => Mat4::perspective_infinite_reverse_rh(1.0, aspect, 0.1),
            Self::Perspective => Mat4::perspective_rh(1.0, aspect, 0.1, 120.0),
            Self::Orthographic => Mat4::orthographic_rh(-40.0, 40.0, -22.5, 22.5, 120.0, 0.1),
        }
    }
}

/// A camera, a mesh's local bounding sphere and instances of that mesh.
#[derive(Clone, Debug, PartialEq)]
pub struct Scene {
    /// The view-projection matrix (wgpu clip space).
    pub clip_from_world: Mat4,
    /// The mesh's bounding sphere in its local space.
    pub bounds: Sphere,
    /// The instances.
    pub instances: Vec<Instance>,
}

/// A small deterministic generator (xorshift64*), so scenes are
/// reproducible from a seed without extra dependencies.
#[derive(Clone, Debug)]
pub struct SceneRng(u64);

impl SceneRng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }

    /// A uniformly random unit quaternion.
    pub fn rotation(&mut self) -> Quat {
        loop {
            let v = Vec4::new(
                self.range(-1.0, 1.0),
                self.range(-1.0, 1.0),
                self.range(-1.0, 1.0),
                self.range(-1.0, 1.0),
            );
            let l = v.length_squared();
            if l > 1e-3 && l <= 1.0 {
                return Quat::from_vec4(v / l.sqrt());
            }
        }
    }
}

impl Scene {
    /// The scene as `format` can hold it: a format that carries no scale
    /// ([`InstanceFormat::carries_scale`]) gets every finite scale set to 1
    /// (random scenes vary the scale only to vary what is visible).
    pub fn fit(mut self, format: InstanceFormat) -> Self {
        for i in &mut self.instances {
            *i = format.fit(*i);
        }
        self
    }

    /// The scene's frustum.
    pub fn frustum(&self) -> Result<Frustum, CullError> {
        Frustum::from_clip_from_world(self.clip_from_world, None)
    }

    /// A random camera and `count` random instances.
    ///
    /// With `visible_fraction`, that fraction of the instances is placed well
    /// inside the view and the rest behind the camera, so the visible share
    /// is known in advance (for benchmarks). Without it, instances fill a
    /// box around the camera, many straddling the planes (for tests).
    /// Generated in blocks with their own streams (on all cores with the
    /// `parallel` feature), so the result depends only on the arguments.
    pub fn random(seed: u64, count: usize, camera: CameraKind, visible_fraction: Option<f32>) -> Scene {
        const BLOCK: usize = 1 << 16;
        let mut rng = SceneRng::new(seed);
        let eye = Vec3::new(rng.range(-5.0, 5.0), rng.range(-5.0, 5.0), rng.range(-5.0, 5.0));
        let look = Vec3::new(rng.range(-1.0, 1.0), rng.range(-0.5, 0.5), -1.0).normalize();
        let view = Mat4::look_at_rh(eye, eye + look, Vec3::Y);
        let clip_from_world = camera.projection() * view;
        let world_from_view = view.inverse();
        let bounds = Sphere::new(Vec3::new(0.3, -0.2, 0.1), 0.8);
        let mut instances = vec![Instance::default(); count];
        let fill = |(block, chunk): (usize, &mut [Instance])| {
            let mut rng = SceneRng::new(seed ^ ((block as u64 + 1) << 32));
            for inst in chunk {
                let position = match visible_fraction {
                    Some(fraction) => {
                        let depth = rng.range(5.0, 100.0);
                        // Within 80% of the half extent at that depth, less a
                        // margin for the radius (the ortho view is 40 x 22.5
                        // at every depth).
                        let (hx, hy) = match camera {
                            CameraKind::Orthographic => (40.0, 22.5),
                            _ => (depth * 0.5463 * 16.0 / 9.0, depth * 0.5463),
                        };
                        let x = rng.range(-0.8, 0.8) * (hx - 4.0f32).max(0.0);
                        let y = rng.range(-0.8, 0.8) * (hy - 4.0f32).max(0.0);
                        let behind = rng.unit() >= fraction;
                        let z = if behind { depth } else { -depth };
                        world_from_view.transform_point3(Vec3::new(x, y, z))
                    }
                    None => {
                        eye + Vec3::new(
                            rng.range(-90.0, 90.0),
                            rng.range(-60.0, 60.0),
                            rng.range(-130.0, 40.0),
                        )
                    }
                };
                *inst = Instance {
                    position,
                    rotation: rng.rotation(),
                    scale: rng.range(0.25, 2.5),
                };
            }
        };
        #[cfg(feature = "parallel")]
        {
            use rayon::prelude::*;
            instances.par_chunks_mut(BLOCK).enumerate().for_each(fill);
        }
        #[cfg(not(feature = "parallel"))]
        instances.chunks_mut(BLOCK).enumerate().for_each(fill);
        Scene {
            clip_from_world,
            bounds,
            instances,
        }
    }
}
