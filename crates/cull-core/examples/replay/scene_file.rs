//! The scene file `replay` reads and writes (`docs/scene-format.md`): a
//! camera's matrix, the mesh's bounds and the instances, with non-finite
//! numbers written as strings.

use cull_core::scene::Scene;
use cull_core::{CullError, Frustum, Instance, Sphere};
use glam::{Mat4, Quat, Vec3};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub struct SceneFile {
    clip_from_world: [f32; 16],
    bounds: BoundsFile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_distance: Option<f32>,
    instances: Vec<InstanceFile>,
}

#[derive(Serialize, Deserialize)]
struct BoundsFile {
    center: [f32; 3],
    radius: f32,
}

#[derive(Serialize, Deserialize)]
struct InstanceFile {
    position: [Num; 3],
    rotation: [Num; 4],
    scale: Num,
}

/// A number, or the strings "NaN", "inf", "-inf", which JSON cannot write as numbers.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(untagged)]
enum Num {
    Float(f32),
    #[serde(with = "non_finite")]
    NonFinite(f32),
}

impl Num {
    fn new(v: f32) -> Self {
        if v.is_finite() {
            Num::Float(v)
        } else {
            Num::NonFinite(v)
        }
    }
    fn get(self) -> f32 {
        match self {
            Num::Float(v) | Num::NonFinite(v) => v,
        }
    }
}

mod non_finite {
    pub fn serialize<S: serde::Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if v.is_nan() {
            "NaN"
        } else if *v > 0.0 {
            "inf"
        } else {
            "-inf"
        })
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        match text.to_ascii_lowercase().as_str() {
            "nan" => Ok(f32::NAN),
            "inf" | "+inf" | "infinity" => Ok(f32::INFINITY),
            "-inf" | "-infinity" => Ok(f32::NEG_INFINITY),
            _ => Err(serde::de::Error::custom(format!(
                "{text:?} is not a number, NaN, inf or -inf"
            ))),
        }
    }
}

fn nums<const N: usize>(v: [f32; N]) -> [Num; N] {
    v.map(Num::new)
}

fn floats<const N: usize>(v: [Num; N]) -> [f32; N] {
    v.map(Num::get)
}

impl SceneFile {
    /// The file of a generated scene.
    pub fn from_scene(scene: &Scene) -> Self {
        Self {
            clip_from_world: scene.clip_from_world.to_cols_array(),
            bounds: BoundsFile {
                center: scene.bounds.center.to_array(),
                radius: scene.bounds.radius,
            },
            max_distance: None,
            instances: (scene.instances.iter())
                .map(|i| InstanceFile {
                    position: nums(i.position.to_array()),
                    rotation: nums(i.rotation.to_array()),
                    scale: Num::new(i.scale),
                })
                .collect(),
        }
    }

    /// The instances, as written (non-finite numbers included).
    pub fn instances(&self) -> Vec<Instance> {
        (self.instances.iter())
            .map(|i| Instance {
                position: Vec3::from_array(floats(i.position)),
                rotation: Quat::from_array(floats(i.rotation)),
                scale: i.scale.get(),
            })
            .collect()
    }

    /// The mesh's bounding sphere.
    pub fn bounds(&self) -> Sphere {
        Sphere::new(Vec3::from_array(self.bounds.center), self.bounds.radius)
    }

    /// The camera's frustum; an error for a matrix no frustum comes from.
    pub fn frustum(&self) -> Result<Frustum, CullError> {
        Frustum::from_clip_from_world(Mat4::from_cols_array(&self.clip_from_world), self.max_distance)
    }
}
