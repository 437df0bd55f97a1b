//! What the plugin takes of a batch's `StandardMaterial`, extracted with
//! the batch: base color (times each instance's color, a tint), base color
//! texture, metallic and roughness (and their texture), emissive (and its
//! texture), occlusion texture, unlit, alpha mask and normal map, as the
//! uniform `GpuCullMaterial` of an application's draw shader and the
//! plugin's depth-only prepass; and whether it samples any texture (the
//! main pass leaves the mesh's texture coordinates out where it does not).

use bevy::asset::AssetId;
use bevy::pbr::StandardMaterial;
use bevy::prelude::*;
use bevy::reflect::structs::Struct;
use bytemuck::{Pod, Zeroable};

/// `MaterialUniform::flags`: light nothing, show the color as it is.
pub(crate) const UNLIT: u32 = 1;
/// `MaterialUniform::flags`: multiply by the base color texture.
pub(crate) const TEXTURED: u32 = 2;
/// `MaterialUniform::flags`: discard fragments whose alpha is below
/// `alpha_cutoff` (`AlphaMode::Mask`), in the main pass, shadows and prepasses.
pub(crate) const ALPHA_MASK: u32 = 4;
/// `MaterialUniform::flags`: perturb the normal by the normal map (meshes
/// with UVs and tangents).
pub(crate) const NORMAL_MAPPED: u32 = 8;
/// `MaterialUniform::flags`: the normal map's green channel points down.
pub(crate) const FLIP_NORMAL_Y: u32 = 16;
/// `MaterialUniform::flags`: metallic (blue) and roughness (green) scaled
/// by the metallic-roughness texture.
pub(crate) const METALLIC_ROUGHNESS_TEXTURED: u32 = 32;
/// `MaterialUniform::flags`: emissive scaled by the emissive texture.
pub(crate) const EMISSIVE_TEXTURED: u32 = 64;
/// `MaterialUniform::flags`: ambient occlusion from the occlusion texture.
pub(crate) const OCCLUSION_TEXTURED: u32 = 128;

/// `GpuCullMaterial` in `shaders/gpu_cull_instance.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub(crate) struct MaterialUniform {
    pub base_color: [f32; 4],
    pub emissive: [f32; 4],
    pub metallic: f32,
    pub perceptual_roughness: f32,
    pub flags: u32,
    pub alpha_cutoff: f32,
}

/// What the draw takes of a batch's material.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BatchMaterial {
    pub uniform: MaterialUniform,
    /// Base color, normal map, metallic-roughness, emissive and occlusion
    /// textures, in the draw's binding order ([`TEXTURES`]).
    pub textures: [Option<AssetId<Image>>; TEXTURES],
    /// Whether Bevy's PBR fragment shader reads the mesh's texture
    /// coordinates for the material ([`reads_texture_coordinates`]).
    pub reads_texture_coordinates: bool,
}

/// Textures of a batch's material the draw binds.
pub(crate) const TEXTURES: usize = 5;

impl Default for BatchMaterial {
    /// No material: what Bevy's `pbr_input_new()` shades with (white,
    /// dielectric, roughness 0.5), so instances show their own color.
    fn default() -> Self {
        Self {
            uniform: MaterialUniform {
                base_color: [1.0; 4],
                emissive: [0.0; 4],
                metallic: 0.0,
                perceptual_roughness: 0.5,
                flags: 0,
                alpha_cutoff: 0.5,
            },
            textures: [None; TEXTURES],
            reads_texture_coordinates: false,
        }
    }
}

impl BatchMaterial {
    /// Whether fragments may be discarded (the depth-only draw then needs
    /// the texture and a fragment stage).
    pub fn alpha_mask(&self) -> bool {
        self.uniform.flags & ALPHA_MASK != 0
    }

    /// What the draw takes of `m`, whose shading reads texture coordinates
    /// where `reads_texture_coordinates` ([`reads_texture_coordinates`]).
    pub fn from_standard(m: &StandardMaterial, reads_texture_coordinates: bool) -> Self {
        let textures = [
            &m.base_color_texture,
            &m.normal_map_texture,
            &m.metallic_roughness_texture,
            &m.emissive_texture,
            &m.occlusion_texture,
        ]
        .map(|t| t.as_ref().map(Handle::id));
        let mut flags = 0;
        if m.unlit {
            flags |= UNLIT;
        }
        for (texture, flag) in textures.iter().zip([
            TEXTURED,
            NORMAL_MAPPED,
            METALLIC_ROUGHNESS_TEXTURED,
            EMISSIVE_TEXTURED,
            OCCLUSION_TEXTURED,
        ]) {
            if texture.is_some() {
                flags |= flag;
            }
        }
        if m.flip_normal_map_y {
            flags |= FLIP_NORMAL_Y;
        }
        let alpha_cutoff = match m.alpha_mode {
            AlphaMode::Mask(cutoff) => {
                flags |= ALPHA_MASK;
                cutoff
            }
            AlphaMode::Opaque => 0.5,
            _ => {
                warn_once!(
                    "bevy-gpu-cull: blended alpha modes are not supported; a batch with a blended \
                     material is drawn opaque (docs/bevy-plugin.md)"
                );
                0.5
            }
        };
        Self {
            uniform: MaterialUniform {
                base_color: LinearRgba::from(m.base_color).to_f32_array(),
                emissive: m.emissive.to_f32_array(),
                metallic: m.metallic,
                perceptual_roughness: m.perceptual_roughness,
                flags,
                alpha_cutoff,
            },
            textures,
            reads_texture_coordinates,
        }
    }
}

/// Whether Bevy's PBR fragment shader reads a mesh's texture coordinates
/// for `material`: to sample any of its textures, and for anisotropy, whose
/// code (with Bevy's `pbr_anisotropy_texture` feature) takes them with or
/// without its texture. Every texture of a `StandardMaterial` is an
/// `Option<Handle<Image>>` field, some present only with Bevy's features
/// (transmission, clearcoat, anisotropy, specular), so the fields are
/// found by reflection rather than listed.
pub(crate) fn reads_texture_coordinates(material: &StandardMaterial) -> bool {
    material.anisotropy_strength > 0.0
        || material.iter_fields().any(|(_, field)| {
            field
                .try_downcast_ref::<Option<Handle<Image>>>()
                .is_some_and(Option::is_some)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any texture counts, whichever field holds it, and anisotropy; the
    /// default material and colors alone read none.
    #[test]
    fn a_material_reads_texture_coordinates_for_any_texture_and_anisotropy() {
        assert!(!reads_texture_coordinates(&StandardMaterial::default()));
        assert!(!reads_texture_coordinates(&StandardMaterial::from(Color::srgb(
            0.2, 0.5, 0.9
        ))));
        let image = Handle::<Image>::default();
        let with = [
            StandardMaterial {
                base_color_texture: Some(image.clone()),
                ..default()
            },
            StandardMaterial {
                occlusion_texture: Some(image.clone()),
                ..default()
            },
            StandardMaterial {
                depth_map: Some(image.clone()),
                ..default()
            },
            StandardMaterial {
                anisotropy_strength: 0.5,
                ..default()
            },
        ];
        for material in &with {
            assert!(reads_texture_coordinates(material));
        }
    }
}
