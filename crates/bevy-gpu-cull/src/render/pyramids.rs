//! The occlusion cull's depth pyramids: the builder (where the device can
//! build them) and each occluded camera's pyramid. The cull builds and
//! reads them; the views and targets stages ask whether there are any.

use crate::stats::{StatMessage, StatSender};
use bevy::prelude::*;
use bevy::render::renderer::RenderDevice;

/// Each occluded camera's depth pyramid, rebuilt when the depth buffer's
/// size changes (and dropped with the camera or its occlusion culling:
/// `prune_pyramids`), and the builder.
#[derive(Resource)]
pub(crate) struct Pyramids {
    pub builder: Option<cull_core::PyramidBuilder>,
    pub by_view: std::sync::Mutex<bevy::platform::collections::HashMap<Entity, cull_core::DepthPyramid>>,
}

impl Pyramids {
    /// Whether this device builds depth pyramids: without them every
    /// camera is frustum-culled only ([`super::views::occlusion_culled`]).
    pub(crate) fn available(&self) -> bool {
        self.builder.is_some()
    }
}

impl FromWorld for Pyramids {
    fn from_world(world: &mut World) -> Self {
        let device = world.resource::<RenderDevice>();
        let built = cull_core::PyramidBuilder::new(device.wgpu_device());
        let why = built.as_ref().err().map(|e| {
            warn!("bevy-gpu-cull: {e}; cameras with GpuCullOcclusion are frustum-culled only");
            e.to_string()
        });
        // Sent either way: a device made again after a loss may differ.
        if let Some(sender) = world.get_resource::<StatSender>() {
            let _ = sender
                .0
                .lock()
                .map(|s| s.send(StatMessage::OcclusionUnavailable(why)));
        }
        let builder = built.ok();
        Self {
            builder,
            by_view: Default::default(),
        }
    }
}
