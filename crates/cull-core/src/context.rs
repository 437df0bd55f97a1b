//! Finding an adapter and creating a device with what the culler can use.

use crate::CullError;

/// A wgpu instance, adapter, device and queue, for tools, tests and apps
/// of their own (a renderer hands the culler its own device).
///
/// ```no_run
/// # fn main() -> Result<(), cull_core::CullError> {
/// let gpu = cull_core::GpuContext::new(wgpu::Backends::PRIMARY, wgpu::Features::empty())?;
/// println!("culling on {}", gpu.describe());
/// # Ok(()) }
/// ```
///
/// An app that draws into a window opens it with [`GpuContext::for_surface`]
/// instead, on an adapter that can present to the window.
pub struct GpuContext {
    /// The instance.
    pub instance: wgpu::Instance,
    /// The adapter.
    pub adapter: wgpu::Adapter,
    /// The device: the adapter's limits, with `SUBGROUP` and the timestamp
    /// features enabled where the adapter has them.
    pub device: wgpu::Device,
    /// The queue.
    pub queue: wgpu::Queue,
}

/// Optional features the culler uses when present.
pub const USEFUL_FEATURES: wgpu::Features = wgpu::Features::SUBGROUP
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);

impl GpuContext {
    /// Opens the default adapter of `backends` (overridden by the
    /// `WGPU_BACKEND` and `WGPU_ADAPTER_NAME` environment variables) with
    /// the adapter's full limits and the [`USEFUL_FEATURES`] it has, minus
    /// `disabled`.
    pub fn new(backends: wgpu::Backends, disabled: wgpu::Features) -> Result<Self, CullError> {
        Self::with_limits(backends, disabled, None)
    }

    /// Like [`Self::new`], with `limits` instead of the adapter's (e.g.
    /// `wgpu::Limits::default()`, WebGPU's defaults, to check that culling
    /// works where a browser would run it).
    pub fn with_limits(
        backends: wgpu::Backends,
        disabled: wgpu::Features,
        limits: Option<wgpu::Limits>,
    ) -> Result<Self, CullError> {
        // Flags as wgpu's defaults, or as the environment sets them
        // (WGPU_VALIDATION_INDIRECT_CALL=0 turns off the check wgpu runs
        // before each indirect dispatch).
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::from_env().unwrap_or(backends),
            flags: wgpu::InstanceFlags::from_env_or_default(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        Self::open(instance, None, disabled, limits)
    }

    /// Opens a device on an adapter of `instance` that can present to
    /// `surface` (the one `WGPU_ADAPTER_NAME` names, else the default), with
    /// the adapter's full limits and the [`USEFUL_FEATURES`] it has, minus
    /// `disabled`: for an app that draws into a window. Give `instance` the
    /// window system's display handle
    /// (`wgpu::InstanceDescriptor::new_with_display_handle`), which the GL
    /// backend needs.
    pub fn for_surface(
        instance: wgpu::Instance,
        surface: &wgpu::Surface<'_>,
        disabled: wgpu::Features,
    ) -> Result<Self, CullError> {
        Self::open(instance, Some(surface), disabled, None)
    }

    fn open(
        instance: wgpu::Instance,
        surface: Option<&wgpu::Surface<'_>>,
        disabled: wgpu::Features,
        limits: Option<wgpu::Limits>,
    ) -> Result<Self, CullError> {
        let adapter = pollster::block_on(wgpu::util::initialize_adapter_from_env_or_default(
            &instance, surface,
        ))
        .map_err(|e| {
            CullError::NoAdapter(format!(
                "{e}. On Linux without a GPU install Mesa's software Vulkan driver \
                     (Debian/Ubuntu: `apt-get install mesa-vulkan-drivers`)"
            ))
        })?;
        let features = adapter.features() & USEFUL_FEATURES & !disabled;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("cull-core"),
            required_features: features,
            required_limits: limits.unwrap_or_else(|| adapter.limits()),
            ..Default::default()
        }))?;
        Ok(Self {
            instance,
            adapter,
            device,
            queue,
        })
    }

    /// A one-line description: adapter name, backend, driver.
    pub fn describe(&self) -> String {
        let info = self.adapter.get_info();
        format!(
            "{} ({:?}, {} {}, subgroup size {}..{})",
            info.name,
            info.backend,
            info.driver,
            info.driver_info,
            info.subgroup_min_size,
            info.subgroup_max_size
        )
    }
}
