//! The CPU reference: a mirror of each GPU stage (vote, scan, compact).
//!
//! It is the oracle of the tests (the GPU must produce exactly these
//! survivors) and the fallback where there is no GPU. [`cull`] runs the
//! three stages on all cores.

use crate::InstanceFormat;
use crate::frustum::{Frustum, Sphere, SphereClass};
use rayon::prelude::*;

/// Stage 1: one vote (0 or 1) per instance, as `vote()` in `shaders/common.wgsl`.
pub fn vote(format: InstanceFormat, bytes: &[u8], local: Sphere, frustum: &Frustum) -> Vec<u32> {
    let n = bytes.len() / format.stride() as usize;
    (0..n)
        .into_par_iter()
        .map(|i| match format.world_sphere(bytes, i, local) {
            Some((c, r)) => frustum.intersects_sphere(c, r) as u32,
            None => 0,
        })
        .collect()
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
pub fn cull(format: InstanceFormat, bytes: &[u8], local: Sphere, frustum: &Frustum) -> Vec<u32> {
    let votes = vote(format, bytes, local, frustum);
    let (scan, total) = exclusive_scan(&votes);
    compact(&votes, &scan, total)
}

/// For comparing against the GPU: the clearly visible indices, and those
/// within rounding of the boundary, which either answer may keep (see
/// [`crate::frustum::PLANE_TOLERANCE`]).
pub fn classify(format: InstanceFormat, bytes: &[u8], local: Sphere, frustum: &Frustum) -> Reference {
    let n = bytes.len() / format.stride() as usize;
    let classes: Vec<SphereClass> = (0..n)
        .into_par_iter()
        .map(|i| match format.world_sphere(bytes, i, local) {
            Some((c, r)) => frustum.classify_sphere(c, r),
            None => SphereClass::Outside,
        })
        .collect();
    let mut reference = Reference::default();
    for (i, class) in classes.into_iter().enumerate() {
        match class {
            SphereClass::Inside => reference.visible.push(i as u32),
            SphereClass::Borderline => reference.borderline.push(i as u32),
            SphereClass::Outside => {}
        }
    }
    reference
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
