//! The kernel cache: which kernel a [`KernelSpec`] names, what to compile
//! for it, the pipelines a renderer hands over, and the fastest form of a
//! kernel at hand for a cull.

use super::setup::Culler;
use super::spec::{Kernel, KernelSpec};
use crate::CullError;
use crate::frustum::Frustum;
use crate::kernel::MAX_OUTPUT_WINDOWS;
use crate::passes::CompiledPass;
use crate::shader::{KernelRecipe, ModuleShape};
use crate::visibility::VisibilityTest;
use std::sync::Arc;

impl Culler {
    /// `key`, its centred form named as the general one where the format has
    /// none ([`KernelSpec::centred`]).
    fn normalized(&self, key: KernelSpec) -> KernelSpec {
        KernelSpec {
            centred: key.centred && self.format.has_centred_form(),
            ..key
        }
    }

    fn shape(&self, key: KernelSpec) -> ModuleShape {
        let KernelSpec {
            windows,
            views,
            test,
            cells,
            centred,
            plain_views,
        } = self.normalized(key);
        ModuleShape {
            variant: self.variant,
            kernel: self.kernel,
            format: self.format,
            output: self.output,
            visibility: test.kernel(),
            windows,
            views,
            workgroup_size: self.workgroup_size,
            tuning: self.tuning,
            subgroups: self.subgroups,
            cells,
            centred,
            plain_views,
        }
    }

    /// What to compile for the kernel `spec` names: the entry module, its
    /// shader defs and the passes' layouts (see [`crate::shader::library`]
    /// for the modules it imports).
    pub fn recipe(&self, spec: KernelSpec) -> KernelRecipe {
        self.shape(spec).recipe()
    }

    /// The kernel cache's index of `key`, checked.
    fn kernel_index(&self, key: KernelSpec) -> Result<usize, CullError> {
        let KernelSpec {
            windows,
            views,
            test,
            cells,
            centred,
            plain_views,
        } = self.normalized(key);
        if !(1..=MAX_OUTPUT_WINDOWS).contains(&windows) {
            return Err(CullError::InvalidParameter(
                "windows must be from 1 to MAX_OUTPUT_WINDOWS",
            ));
        }
        if !(1..=self.max_views).contains(&views) {
            return Err(CullError::ViewCount {
                views: views as usize,
                max: self.max_views,
            });
        }
        let per_test = (self.max_views * MAX_OUTPUT_WINDOWS) as usize;
        let forms =
            (usize::from(plain_views) * 2 + usize::from(centred)) * VisibilityTest::ALL.len() + test.index();
        Ok((forms * 2 + usize::from(cells)) * per_test
            + ((views - 1) * MAX_OUTPUT_WINDOWS + windows - 1) as usize)
    }

    /// The WGSL of the kernel `spec` names (its entry pass), as compiled
    /// (composed, then written out by naga): for inspection, disassembly,
    /// register counts. The multi-view and level-of-detail kernels hold
    /// more in registers than the one-view one.
    pub fn shader_source(&self, spec: KernelSpec) -> Result<String, CullError> {
        self.kernel_index(spec)?;
        let shape = self.shape(spec);
        Ok(crate::shader::wgsl(&shape, shape.recipe().entry)
            .unwrap_or_else(|e| panic!("the crate's WGSL composes: {e}")))
    }

    /// Hands over the pipelines of [`Self::recipe`]`(spec)`, compiled
    /// elsewhere, one per pass in order. Their group 0 layouts must be the
    /// recipe's ([`crate::kernel::PassLayout::layout_entries`]). A kernel
    /// for centred meshes ([`KernelSpec::centred`]) or for plain views
    /// ([`KernelSpec::plain_views`]) is an addition: culls it serves take
    /// it once provided, the general kernel otherwise.
    pub fn provide_pipelines(
        &self,
        key: KernelSpec,
        pipelines: Vec<wgpu::ComputePipeline>,
    ) -> Result<(), CullError> {
        let index = self.kernel_index(key)?;
        let recipe = self.shape(key).recipe();
        if pipelines.len() != recipe.passes.len() {
            return Err(CullError::PipelineCount {
                expected: recipe.passes.len(),
                got: pipelines.len(),
            });
        }
        let passes = pipelines
            .into_iter()
            .zip(&recipe.passes)
            .map(|(pipeline, pass)| CompiledPass::from_pipeline(pipeline, pass))
            .collect();
        self.kernels.lock().expect("kernel cache poisoned")[index] = Some(Arc::new(passes));
        Ok(())
    }

    /// Whether the kernel `spec` names can be culled with now.
    pub fn has_pipelines(&self, key: KernelSpec) -> bool {
        self.kernel_index(key)
            .is_ok_and(|i| self.compiles || self.kernels.lock().expect("kernel cache poisoned")[i].is_some())
    }

    /// The form of the general kernel `key` that a cull of `frusta` takes,
    /// where one is at hand (a culler that compiles its own kernels, or one
    /// whose renderer provided it), the fastest first: for a mesh centred on
    /// its origin (`centred_mesh`) the form that leaves the rotation of its
    /// center out ([`KernelSpec::for_centred_meshes`]), for plain views the
    /// form that tests no sixth plane and no band
    /// ([`KernelSpec::for_plain_views`], where [`Self::takes_plain_form`]),
    /// both together, then the general kernel. Every form keeps the same
    /// instances. `None`: none is ready.
    pub(super) fn ready_form(
        &self,
        key: KernelSpec,
        centred_mesh: bool,
        frusta: &[Frustum],
    ) -> Option<KernelSpec> {
        let plain = crate::visibility::views_are_plain(frusta, key.test) && self.takes_plain_form(key.views);
        [
            (centred_mesh && plain).then(|| key.for_centred_meshes().for_plain_views()),
            plain.then(|| key.for_plain_views()),
            centred_mesh.then(|| key.for_centred_meshes()),
            Some(key),
        ]
        .into_iter()
        .flatten()
        .find(|form| self.has_pipelines(*form))
    }

    /// The kernel `key` names, compiling it when this culler compiles its
    /// own.
    pub(super) fn kernel_for(&self, key: KernelSpec) -> Result<Kernel, CullError> {
        let index = self.kernel_index(key)?;
        let mut cache = self.kernels.lock().expect("kernel cache poisoned");
        let slot = &mut cache[index];
        if let Some(k) = slot {
            return Ok(k.clone());
        }
        if !self.compiles {
            return Err(CullError::PipelinesNotReady {
                windows: key.windows,
                views: key.views,
            });
        }
        let shape = self.shape(key);
        let recipe = shape.recipe();
        let limits = self.device.limits();
        for pass in &recipe.passes {
            crate::passes::check_storage_limit(limits.clone(), pass)?;
        }
        // One wgpu module per entry module (the kernel's, the cell pass's).
        let modules: Vec<(&'static str, wgpu::ShaderModule)> = recipe
            .modules()
            .into_iter()
            .map(|entry| {
                let source = crate::shader::wgsl(&shape, entry)
                    .unwrap_or_else(|e| panic!("the crate's WGSL composes: {e}"));
                let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(self.variant.name()),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                });
                (entry.path, module)
            })
            .collect();
        let passes = recipe
            .passes
            .iter()
            .map(|pass| {
                let path = recipe.module_of(pass).path;
                let (_, module) = modules
                    .iter()
                    .find(|(p, _)| *p == path)
                    .expect("recipe.modules() lists every pass's module");
                CompiledPass::new(&self.device, module, pass)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let k = Arc::new(passes);
        *slot = Some(k.clone());
        Ok(k)
    }
}
