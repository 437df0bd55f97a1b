//! The CPU reference: a mirror of each GPU stage (vote, scan, compact).
//!
//! It is the oracle of the tests (the GPU must produce exactly these
//! survivors) and the fallback where there is no GPU. [`cull`] runs the
//! three stages, on all cores with the `parallel` feature.

use crate::frustum::Frustum;
use crate::sphere::{Sphere, SphereClass};
use crate::{CullError, InstanceFormat};

/// `f` over `0..n`, on all cores with the `parallel` feature, else on this thread.
fn map_indices<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        (0..n).into_par_iter().map(f).collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        (0..n).map(f).collect()
    }
}

/// Stage 1: one vote (0 or 1) per instance, as `vote()` in `shaders/cull/items.wgsl`.
/// Fails on bounds that [`Sphere::validate`] refuses, as the GPU cull does.
pub fn vote(
    format: InstanceFormat,
    bytes: &[u8],
    local: Sphere,
    frustum: &Frustum,
) -> Result<Vec<u32>, CullError> {
    local.validate()?;
    let n = bytes.len() / format.stride() as usize;
    Ok(map_indices(n, |i| match format.world_sphere(bytes, i, local) {
        Some(s) => (frustum.classify(&s) != SphereClass::Outside) as u32,
        None => 0,
    }))
}

/// Stage 2: the exclusive prefix sum of the votes, and their total.
pub fn exclusive_scan(votes: &[u32]) -> (Vec<u32>, u32) {
    let mut sum = 0u32;
    let scan = votes
        .iter()
        .map(|&v| {
            let s = sum;
            sum += v;
            s
        })
        .collect();
    (scan, sum)
}

/// Stage 3: the surviving indices in their output slots (order preserved).
pub fn compact(votes: &[u32], scan: &[u32], total: u32) -> Vec<u32> {
    let mut out = vec![0u32; total as usize];
    for (i, (&v, &slot)) in votes.iter().zip(scan).enumerate() {
        if v != 0 {
            out[slot as usize] = i as u32;
        }
    }
    out
}

/// All three stages: the indices of the visible instances, in order.
pub fn cull(
    format: InstanceFormat,
    bytes: &[u8],
    local: Sphere,
    frustum: &Frustum,
) -> Result<Vec<u32>, CullError> {
    let votes = vote(format, bytes, local, frustum)?;
    let (scan, total) = exclusive_scan(&votes);
    Ok(compact(&votes, &scan, total))
}

/// The multi-view cull ([`crate::CullRequest`]): per frustum, the
/// indices of the instances visible in it, in order. Each view's list is
/// the single-view [`cull`] against its frustum: voting several views in
/// one pass changes where survivors go, never which survive.
pub fn cull_views(
    format: InstanceFormat,
    bytes: &[u8],
    local: Sphere,
    frusta: &[Frustum],
) -> Result<Vec<Vec<u32>>, CullError> {
    frusta.iter().map(|f| cull(format, bytes, local, f)).collect()
}

/// The batch indices of output instance copies (records of `stride` bytes
/// copied from `input`), for comparing an [`crate::OutputKind::Instances`]
/// output with a reference. Byte-identical inputs cannot be told apart, so
/// the copies of one record are given that record's indices in ascending
/// order, one each: a copy beyond their number repeats the last (a duplicate
/// the check reports), and a copy matching no input is `u32::MAX` (invented).
/// Survivors in input order stay in input order.
pub fn copies_to_indices(stride: usize, input: &[u8], output: &[u8]) -> Vec<u32> {
    const END: u32 = u32::MAX;
    // Each record's next identical one, and per distinct record the index
    // its next copy takes: built backwards so the chains ascend.
    let n = input.len() / stride;
    let mut next = vec![END; n];
    let mut cursor: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::with_capacity(n);
    for (i, record) in input.chunks_exact(stride).enumerate().rev() {
        if let Some(head) = cursor.insert(record, i as u32) {
            next[i] = head;
        }
    }
    output
        .chunks_exact(stride)
        .map(|record| match cursor.get_mut(record) {
            Some(at) => {
                let index = *at;
                if next[index as usize] != END {
                    *at = next[index as usize];
                }
                index
            }
            None => END,
        })
        .collect()
}

/// For comparing against the GPU: the clearly visible indices, and those
/// within rounding of the boundary, which either answer may keep (see
/// [`crate::sphere::PLANE_TOLERANCE`]).
pub fn classify(
    format: InstanceFormat,
    bytes: &[u8],
    local: Sphere,
    frustum: &Frustum,
) -> Result<Reference, CullError> {
    local.validate()?;
    let n = bytes.len() / format.stride() as usize;
    let classes: Vec<SphereClass> = map_indices(n, |i| match format.world_sphere(bytes, i, local) {
        Some(s) => frustum.classify(&s),
        None => SphereClass::Outside,
    });
    let mut reference = Reference::default();
    for (i, class) in classes.into_iter().enumerate() {
        match class {
            SphereClass::Inside => reference.visible.push(i as u32),
            SphereClass::Borderline => reference.borderline.push(i as u32),
            SphereClass::Outside => {}
        }
    }
    Ok(reference)
}

/// The CPU's answer for one scene, as [`classify`] gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reference {
    /// Indices that must survive, ascending.
    pub visible: Vec<u32>,
    /// Indices that may survive or not, ascending.
    pub borderline: Vec<u32>,
}

impl Reference {
    /// Checks a GPU's survivors (any order) as an exact set: every visible
    /// index present once, nothing else but borderline indices, nothing
    /// twice. Returns a description of the first differences otherwise.
    pub fn check(&self, survivors: &[u32]) -> Result<(), String> {
        let mut sorted = survivors.to_vec();
        sorted.sort_unstable();
        let duplicates: Vec<u32> = sorted
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .take(8)
            .collect();
        let mut lost = Vec::new();
        let mut invented = Vec::new();
        let (mut a, mut b) = (0, 0);
        let mut borderline = self.borderline.iter().peekable();
        while a < self.visible.len() || b < sorted.len() {
            match (self.visible.get(a), sorted.get(b)) {
                (Some(&v), Some(&s)) if v == s => {
                    a += 1;
                    b += 1;
                }
                (Some(&v), Some(&s)) if v < s => {
                    lost.push(v);
                    a += 1;
                }
                (_, Some(&s)) => {
                    while borderline.next_if(|&&x| x < s).is_some() {}
                    if borderline.peek() != Some(&&s) {
                        invented.push(s);
                    }
                    b += 1;
                }
                (Some(&v), None) => {
                    lost.push(v);
                    a += 1;
                }
                (None, None) => unreachable!(),
            }
        }
        if lost.is_empty() && invented.is_empty() && duplicates.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} lost (e.g. {:?}), {} invented (e.g. {:?}), duplicated e.g. {:?}; expected {} (+{} borderline), got {}",
            lost.len(),
            &lost[..lost.len().min(8)],
            invented.len(),
            &invented[..invented.len().min(8)],
            duplicates,
            self.visible.len(),
            self.borderline.len(),
            survivors.len()
        ))
    }
}

/// The point a depth sort orders instance `index` of `bytes` by, and a
/// pixel splat projects: the instance's transform of `local_center`, as
/// `transformed_point()` in `shaders/cull/points.wgsl` computes it (a matrix's columns in full; a
/// position, scale and rotation otherwise).
pub fn sort_point(
    format: InstanceFormat,
    bytes: &[u8],
    index: usize,
    local_center: glam::Vec3,
) -> glam::Vec3 {
    use glam::{Quat, Vec3};
    let s = format.stride() as usize;
    let words: &[u32] = bytemuck::cast_slice(&bytes[index * s..(index + 1) * s]);
    let f = |i: usize| f32::from_bits(words[i]);
    let v = |i: usize| Vec3::new(f(i), f(i + 1), f(i + 2));
    let c = local_center;
    let rotate = |q: Quat, p: Vec3| {
        let u = Vec3::new(q.x, q.y, q.z);
        p + 2.0 * u.cross(u.cross(p) + q.w * p)
    };
    match format {
        InstanceFormat::Matrix => v(0) * c.x + v(4) * c.y + v(8) * c.z + v(12),
        InstanceFormat::PosQuat => {
            let q = Quat::from_xyzw(f(4), f(5), f(6), f(7));
            v(0) + rotate(q, c * f(3))
        }
        InstanceFormat::Packed16 => v(0) + rotate(Quat::from_vec4(crate::unpack_quat(words[3])), c),
    }
}

/// The CPU mirror of [`crate::DepthSorter`]: `survivors` (instance indices
/// of `bytes`) back to front by `order`, ties in index order.
pub fn back_to_front(
    format: InstanceFormat,
    bytes: &[u8],
    survivors: &[u32],
    order: &crate::DepthSortView,
) -> Vec<u32> {
    let mut keyed: Vec<(u32, u32)> = survivors
        .iter()
        .map(|&i| {
            let p = sort_point(format, bytes, i as usize, order.local_center);
            (crate::depth_sort_key(order.depth(p)), i)
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// One list of [`splat`]: `survivors` (instance indices of `bytes`, in
/// `format`) projected by `local_center`, their ids from `id_base + 1`.
#[derive(Clone, Copy, Debug)]
pub struct SplatList<'a> {
    /// The instances' format.
    pub format: InstanceFormat,
    /// The instances, encoded.
    pub bytes: &'a [u8],
    /// The list's instance indices.
    pub survivors: &'a [u32],
    /// The mesh-space point projected.
    pub local_center: glam::Vec3,
    /// What places the instances in the world.
    pub world_from_local: glam::Mat4,
    /// Instance `i` claims a pixel with id `id_base + i + 1`.
    pub id_base: u32,
}

/// The CPU mirror of [`crate::PixelSplatter`]: per pixel of a `size`
/// target (row by row from the top), the nearest depth key and the greatest
/// id among the survivors at that key, 0 and 0 where none landed; indices
/// past `bytes` land nowhere.
pub fn splat(
    view: &crate::PixelSplatView,
    size: (u32, u32),
    lists: &[SplatList<'_>],
) -> (Vec<u32>, Vec<u32>) {
    let pixels = size.0 as usize * size.1 as usize;
    let (mut keys, mut ids) = (vec![0u32; pixels], vec![0u32; pixels]);
    for list in lists {
        let instances = list.bytes.len() / list.format.stride() as usize;
        for &i in list.survivors.iter().filter(|&&i| (i as usize) < instances) {
            let p = sort_point(list.format, list.bytes, i as usize, list.local_center);
            let Some((pixel, key)) = view.pixel(list.world_from_local, p, size) else {
                continue;
            };
            let (pixel, id) = (pixel as usize, list.id_base + i + 1);
            if (key, id) > (keys[pixel], ids[pixel]) {
                (keys[pixel], ids[pixel]) = (key, id);
            }
        }
    }
    (keys, ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_compose() {
        let votes = [1, 0, 0, 1, 1, 0, 1];
        let (scan, total) = exclusive_scan(&votes);
        assert_eq!(scan, [0, 1, 1, 1, 2, 3, 3]);
        assert_eq!(total, 4);
        assert_eq!(compact(&votes, &scan, total), [0, 3, 4, 6]);
    }

    #[test]
    fn identical_copies_map_to_distinct_indices() {
        // Records 0, 2 and 3 are identical; 1 differs.
        let input = [7u8, 9, 7, 7];
        assert_eq!(copies_to_indices(1, &input, &[7, 7, 9, 7]), [0, 2, 1, 3]);
        // More copies than inputs: the last index repeats (a duplicate).
        assert_eq!(copies_to_indices(1, &input, &[9, 9]), [1, 1]);
        assert_eq!(copies_to_indices(1, &input, &[5]), [u32::MAX]);
        let r = Reference {
            visible: vec![0, 1, 2, 3],
            borderline: vec![],
        };
        assert!(r.check(&copies_to_indices(1, &input, &[7, 9, 7, 7])).is_ok());
        assert!(
            r.check(&copies_to_indices(1, &input, &[7, 9, 7])).is_err(),
            "one lost"
        );
    }

    #[test]
    fn check_finds_every_kind_of_error() {
        let r = Reference {
            visible: vec![1, 2, 5],
            borderline: vec![3],
        };
        assert!(r.check(&[5, 1, 2]).is_ok());
        assert!(r.check(&[5, 3, 1, 2]).is_ok());
        assert!(r.check(&[5, 1]).unwrap_err().contains("1 lost"));
        assert!(r.check(&[5, 1, 2, 4]).unwrap_err().contains("1 invented"));
        assert!(
            r.check(&[5, 1, 2, 2])
                .unwrap_err()
                .contains("duplicated e.g. [2]")
        );
    }
}
