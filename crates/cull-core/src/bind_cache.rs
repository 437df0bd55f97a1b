//! A target's bind groups, kept from one cull to the next. A target is
//! culled every frame from the same buffers, and making a bind group costs
//! the CPU several times what finding it does (a few microseconds each, per
//! chunk and pass, on a desktop driver); many small batches make that a
//! share of the frame. Only what the latest cull and the one before it
//! bound is kept, so a replaced buffer is let go after one cull.

use std::sync::Mutex;

/// One binding's resource, as a cull's bind group names it.
#[derive(Clone, PartialEq, Eq)]
enum Bound {
    Buffer(wgpu::Buffer, u64, Option<wgpu::BufferSize>),
    View(wgpu::TextureView),
}

/// A bind group's layout and what it binds where.
#[derive(Clone, PartialEq, Eq)]
struct Key {
    layout: wgpu::BindGroupLayout,
    bound: Vec<(u32, Bound)>,
}

impl Key {
    /// The key of `entries` under `layout`; `None` where an entry binds
    /// another kind of resource (a cull binds buffers and a view).
    fn of(layout: &wgpu::BindGroupLayout, entries: &[wgpu::BindGroupEntry]) -> Option<Self> {
        let bound = entries.iter().map(|entry| {
            let resource = match &entry.resource {
                wgpu::BindingResource::Buffer(b) => Bound::Buffer(b.buffer.clone(), b.offset, b.size),
                wgpu::BindingResource::TextureView(view) => Bound::View((*view).clone()),
                _ => return None,
            };
            Some((entry.binding, resource))
        });
        Some(Self {
            layout: layout.clone(),
            bound: bound.collect::<Option<_>>()?,
        })
    }

    /// Whether this is the key of `entries` under `layout`: compared in
    /// place, as most lookups find their group and a key made for each
    /// (clones and an allocation) cost more than the comparison.
    fn matches(&self, layout: &wgpu::BindGroupLayout, entries: &[wgpu::BindGroupEntry]) -> bool {
        self.layout == *layout
            && self.bound.len() == entries.len()
            && (self.bound.iter().zip(entries)).all(|((binding, bound), entry)| {
                *binding == entry.binding
                    && match (bound, &entry.resource) {
                        (Bound::Buffer(buffer, offset, size), wgpu::BindingResource::Buffer(b)) => {
                            *b.buffer == *buffer && b.offset == *offset && b.size == *size
                        }
                        (Bound::View(view), wgpu::BindingResource::TextureView(v)) => **v == *view,
                        _ => false,
                    }
            })
    }
}

/// The bind groups the latest cull used, and those of the cull before.
#[derive(Default)]
struct Kept {
    current: Vec<(Key, wgpu::BindGroup)>,
    previous: Vec<(Key, wgpu::BindGroup)>,
}

/// A target's bind groups ([`crate::CullTarget`]), kept across culls.
#[derive(Default)]
pub(crate) struct BindGroupCache(Mutex<Kept>);

impl BindGroupCache {
    /// A new cull of the target begins: what the cull before the last one
    /// bound and the last did not is let go.
    pub fn next_cull(&self) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.previous = std::mem::take(&mut kept.current);
    }

    /// The bind group of `entries` under `layout`: one kept, or a new one.
    pub fn get(
        &self,
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        entries: &[wgpu::BindGroupEntry],
    ) -> wgpu::BindGroup {
        let create = || {
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("cull"),
                layout,
                entries,
            })
        };
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, group)) = kept.current.iter().find(|(k, _)| k.matches(layout, entries)) {
            return group.clone();
        }
        if let Some(i) = kept.previous.iter().position(|(k, _)| k.matches(layout, entries)) {
            let (key, group) = kept.previous.swap_remove(i);
            kept.current.push((key, group.clone()));
            return group;
        }
        let group = create();
        let Some(key) = Key::of(layout, entries) else {
            return group;
        };
        kept.current.push((key, group.clone()));
        group
    }
}

#[cfg(all(test, feature = "blocking"))]
mod tests {
    use super::*;

    /// The same bindings give the same bind group across culls; other
    /// buffers, or a cull that did not use it, a new one.
    #[test]
    fn bind_groups_are_kept_for_the_same_bindings_only() {
        let ctx = crate::GpuContext::new(wgpu::Backends::all(), wgpu::Features::empty()).expect("a GPU");
        let device = &ctx.device;
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: None,
            entries: &[wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: true },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            }],
        });
        let buffer = |size| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        };
        let (a, b) = (buffer(256), buffer(256));
        fn entries(buffer: &wgpu::Buffer, offset: u64) -> [wgpu::BindGroupEntry<'_>; 1] {
            [wgpu::BindGroupEntry {
                binding: 0,
                resource: crate::passes::bind_window(buffer, offset, 64),
            }]
        }
        let cache = BindGroupCache::default();
        let first = cache.get(device, &layout, &entries(&a, 0));
        cache.next_cull();
        assert_eq!(
            cache.get(device, &layout, &entries(&a, 0)),
            first,
            "kept for the next cull"
        );
        assert_eq!(
            cache.get(device, &layout, &entries(&a, 0)),
            first,
            "found again in a cull"
        );
        assert_ne!(
            cache.get(device, &layout, &entries(&a, 64)),
            first,
            "another range"
        );
        assert_ne!(
            cache.get(device, &layout, &entries(&b, 0)),
            first,
            "another buffer"
        );
        cache.next_cull();
        cache.next_cull();
        assert_ne!(
            cache.get(device, &layout, &entries(&a, 0)),
            first,
            "let go after an unused cull"
        );
    }
}
