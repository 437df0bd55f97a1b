//! The counts read back, sent to the main world's statistics: each view's
//! visible count per batch (per level of detail, per member of a combined
//! batch), and the culls' GPU times.

use super::count_readback::{CountReadback, CountRegion, ReadCounts};
use super::targets::{ViewTarget, ViewTargets};
use crate::stats::{StatMessage, StatSender};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use cull_core::DRAW_ARGS_SIZE;

/// Starts mapping the counts copied this frame and forwards the ones that
/// arrived, never waiting for the GPU. The mappings complete in the device
/// maintenance every `Queue::submit` runs (the next frame's, at the
/// latest), so this polls nothing itself.
pub(crate) fn read_back_counts(
    targets: Res<ViewTargets>,
    counts: Res<CountReadback>,
    sender: Res<StatSender>,
) {
    let Ok(sender) = sender.0.lock() else {
        return;
    };
    if let Some(read) = counts.poll() {
        forward_counts(&targets, &read, &sender);
    }
    // A group's GPU time (all its views in one pass) goes to its first view.
    for group in targets.groups.values() {
        if let Some(timings) = group.target.poll_timings() {
            let _ = sender.send(StatMessage::Timing {
                view: group.main_view,
                shadow: group.shadow,
                batch: group.main_batch,
                timings: Box::new(timings),
            });
        }
    }
}

/// Sends the counts of one readback: each view's count per level, with an
/// occluded camera's late counts of the same frame added (the view drew
/// both); a combined batch's per member, as counted on the GPU. A region whose
/// length no longer matches its target's (the target was made again since,
/// with other levels) is skipped.
fn forward_counts(targets: &ViewTargets, read: &ReadCounts, sender: &std::sync::mpsc::Sender<StatMessage>) {
    // One count per level of detail, a draw's arguments apart.
    let levels_of = |bytes: &[u8]| -> Vec<u32> {
        bytes
            .chunks(DRAW_ARGS_SIZE as usize)
            .map(|c| u32::from_le_bytes(c[..4].try_into().expect("four bytes")))
            .collect()
    };
    let current = |region: &CountRegion| {
        let target = targets.map.get(&region.key)?;
        let bytes = read.of(region).filter(|_| region.len == target.counts_len())?;
        Some((target, levels_of(bytes)))
    };
    let counts = |late: bool| {
        (read.regions.iter())
            .filter(move |r| r.late == late && !r.members)
            .filter_map(move |r| Some((r.key, current(r)?)))
    };
    let late: HashMap<(Entity, Entity), Vec<u32>> =
        counts(true).map(|(key, (_, levels))| (key, levels)).collect();
    // The combined batches' counts per member, by view target and phase
    // (looked up once each, not searched for).
    let member_regions: HashMap<((Entity, Entity), bool), &CountRegion> = (read.regions.iter())
        .filter(|r| r.members)
        .map(|r| ((r.key, r.late), r))
        .collect();
    for (key, (target, mut levels)) in counts(false) {
        // No late counts copied this frame: none added (not an earlier
        // frame's).
        for (count, late) in levels.iter_mut().zip(late.get(&key).into_iter().flatten()) {
            *count += late;
        }
        let count = levels.iter().sum();
        target
            .last_count
            .store(count, std::sync::atomic::Ordering::Relaxed);
        if let Some(members) = &target.members {
            // The early counts per member, and the late ones where copied;
            // none sent until the counting pass has compiled.
            let Some(mut per_member) =
                member_counts(read, target, member_regions.get(&(key, false)).copied())
            else {
                continue;
            };
            // The late counts too where the view's count has them.
            if late.contains_key(&key) {
                let Some(late) = member_counts(read, target, member_regions.get(&(key, true)).copied())
                else {
                    continue;
                };
                per_member
                    .iter_mut()
                    .zip(late)
                    .for_each(|(count, late)| *count += late);
            }
            for (member, count) in members.iter().zip(per_member) {
                send_count(sender, target, (member.main.id(), Vec::new(), count), read.frame);
            }
        } else {
            // Per-level counts for a batch with levels; none (which clears
            // earlier ones) without.
            let levels = if target.lod.is_empty() { Vec::new() } else { levels };
            send_count(sender, target, (target.main_batch, levels, count), read.frame);
        }
    }
}

/// A combined batch's counts per member in one view's early or late lists,
/// as counted on the GPU, read from `region`; `None` where they were not
/// copied.
fn member_counts(read: &ReadCounts, target: &ViewTarget, region: Option<&CountRegion>) -> Option<Vec<u32>> {
    let region = region?;
    let bytes = read
        .of(region)
        .filter(|_| region.len == target.member_counts_len())?;
    let words = bytes.chunks(4);
    Some(
        words
            .map(|w| u32::from_le_bytes(w.try_into().expect("four bytes")))
            .collect(),
    )
}

/// Sends a view's count of `batch` (the main world's), with its counts per
/// level (empty without levels).
fn send_count(
    sender: &std::sync::mpsc::Sender<StatMessage>,
    target: &ViewTarget,
    (batch, levels, count): (Entity, Vec<u32>, u32),
    frame: u64,
) {
    let _ = sender.send(StatMessage::LevelsVisible {
        view: target.main_view,
        shadow: target.shadow,
        batch,
        levels,
    });
    let _ = sender.send(match target.shadow {
        Some(view) => StatMessage::ShadowVisible { view, batch, count },
        None => StatMessage::Visible {
            view: target.main_view,
            batch,
            count,
            frame,
        },
    });
}
