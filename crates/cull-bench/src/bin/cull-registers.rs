//! cull-registers: what the driver made of each pass — registers per
//! invocation, shared memory, stack — through Vulkan's
//! `VK_KHR_pipeline_executable_properties`, which wgpu does not expose.
//! Registers decide how many workgroups a multiprocessor keeps resident, and
//! with them how much memory traffic is in flight: see docs/benchmarks.md.
//!
//! ```text
//! cargo run --release -p cull-bench --bin cull-registers [-- --views 1,2,4,8]
//! ```
//!
//! `--views` lists view counts (default 1): each count above one is compiled
//! as several views' kernel and as one camera's levels of detail
//! (`VisibilityTest::DetailLevels`), which hold more in registers.
//! `--centred` compiles the forms for meshes centred on their origin, and
//! `--plain` each kernel's form for plain views too (`KernelSpec`), and
//! `--output indices` the kernels that write indices (what `cull-views`
//! times) rather than instance copies.
//!
//! Each culler's WGSL ([`Culler::shader_source`], as wgpu compiles it for the
//! device wgpu picks) is translated to SPIR-V by naga and compiled again on a
//! Vulkan device of the first physical device, with statistics capture on.
//! Prints a markdown table.

#[path = "../flags.rs"]
mod flags;
#[path = "../forms.rs"]
mod forms;

use argh::FromArgs;
use ash::vk;
use cull_core::{
    Culler, CullerDesc, GpuContext, InstanceFormat, KernelSpec, OutputKind, ScanVariant, Tuning,
    VisibilityTest,
};
use std::ffi::CStr;

/// Prints what the driver made of each pass (registers, shared memory,
/// stack), through Vulkan's VK_KHR_pipeline_executable_properties.
#[derive(FromArgs)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "{command_name} --views 1,2,4,8",
    example = "{command_name} --dump wgsl-out",
    example = "{command_name} --unchecked --wgsl wgsl-out/a.wgsl wgsl-out/b.wgsl"
)]
struct Args {
    /// view counts of the culler's kernels, comma-separated (default 1):
    /// each count above one is compiled as several views' kernel and as one
    /// camera's levels of detail
    #[argh(option, arg_name = "n,..", from_str_fn(views), default = "vec![1]")]
    views: Views,
    /// write the kernels' WGSL to this folder instead of compiling it (any
    /// Vulkan device will do, the extension is not needed)
    #[argh(option, arg_name = "dir")]
    dump: Option<std::path::PathBuf>,
    /// compile the FILE arguments (hand-edited dumps, to see what a change
    /// does to registers) instead of the culler's kernels
    #[argh(switch)]
    wgsl: bool,
    /// with --wgsl: the WGSL files to compile
    #[argh(positional, arg_name = "FILE")]
    files: Vec<std::path::PathBuf>,
    /// SPIR-V without bounds checks
    #[argh(switch)]
    unchecked: bool,
    /// the kernels' forms for meshes centred on their origin, where the
    /// format has one
    #[argh(switch)]
    centred: bool,
    /// each kernel's form for plain views as well (five planes, no size
    /// band)
    #[argh(switch)]
    plain: bool,
    /// what the kernels write: instances (copies, the default) or indices
    /// (what cull-views times)
    #[argh(
        option,
        arg_name = "instances|indices",
        from_str_fn(flags::output),
        default = "OutputKind::Instances"
    )]
    output: OutputKind,
}

/// `--views`: a comma-separated list, which argh would read as an option
/// given once per count were it typed `Vec<u32>` (see `flags::Sizes`).
type Views = Vec<u32>;

/// `--views 1,2,4`: view counts from 1 to [`cull_core::MAX_VIEWS`].
fn views(list: &str) -> Result<Vec<u32>, String> {
    list.split(',')
        .map(|v| match v.trim().parse::<u32>() {
            Ok(n) if (1..=cull_core::MAX_VIEWS).contains(&n) => Ok(n),
            _ => Err(format!(
                "--views: {v:?} is not a view count from 1 to {}",
                cull_core::MAX_VIEWS
            )),
        })
        .collect()
}

/// The command line, checked: FILE arguments come with `--wgsl` only.
fn parse_args() -> Args {
    let args: Args = argh::from_env();
    match (args.wgsl, args.files.is_empty()) {
        (true, true) => flags::usage_error("--wgsl needs the WGSL files to compile"),
        (false, false) => flags::usage_error(&format!(
            "unexpected argument {:?}: WGSL files to compile come after --wgsl",
            args.files[0]
        )),
        _ => args,
    }
}

/// Prints one table row, and the header before the first.
fn print_row(header: &mut bool, key: &[&str], stats: &[(String, String)]) {
    if !*header {
        let names: Vec<&str> = stats.iter().map(|(n, _)| n.as_str()).collect();
        println!(
            "| variant | format | views | test | entry point | {} |",
            names.join(" | ")
        );
        println!("|---|---|---:|---|---|{}", "---:|".repeat(names.len()));
        *header = true;
    }
    let values: Vec<&str> = stats.iter().map(|(_, v)| v.as_str()).collect();
    println!("| {} | {} |", key.join(" | "), values.join(" | "));
}

fn main() {
    let args = parse_args();
    let mut header = false;
    if !args.files.is_empty() {
        let vulkan = Vulkan::new().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        println!("Statistics from {}\n", vulkan.name);
        for file in &args.files {
            let source = std::fs::read_to_string(file).unwrap_or_else(|e| {
                eprintln!("{}: {e}", file.display());
                std::process::exit(1)
            });
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            for (entry, stats) in vulkan.statistics(&source, args.unchecked) {
                print_row(&mut header, &[&name, "-", "-", "-", &entry], &stats);
            }
        }
        return;
    }
    let max_views = args.views.iter().copied().max().unwrap_or(1);
    let ctx = GpuContext::new(wgpu::Backends::VULKAN, wgpu::Features::empty()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let vulkan = match &args.dump {
        Some(dir) => {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| {
                eprintln!("{}: {e}", dir.display());
                std::process::exit(1)
            });
            None
        }
        None => Some(Vulkan::new().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        })),
    };
    if let Some(vulkan) = &vulkan {
        println!("Device: {} (statistics from {})\n", ctx.describe(), vulkan.name);
    }
    let features = ctx.device.features();
    let variants: Vec<ScanVariant> = ScanVariant::compiled()
        .filter(|v| v.is_available(features))
        .collect();
    for format in InstanceFormat::ALL {
        for (variant, tuning) in forms::forms(&variants, features, Tuning::default()) {
            let desc = CullerDesc {
                variant: Some(variant),
                allow_fallback: false,
                format,
                output: args.output,
                tuning,
                max_views,
                ..Default::default()
            };
            let culler = Culler::new(&ctx.device, &ctx.queue, &desc).unwrap();
            let label = forms::label(&culler);
            for &count in &args.views {
                let tests: &[(VisibilityTest, &str)] = if count == 1 {
                    &[(VisibilityTest::Frustum, "frustum")]
                } else {
                    &[
                        (VisibilityTest::Frustum, "frustum"),
                        (VisibilityTest::DetailLevels, "levels"),
                    ]
                };
                for &(test, test_name) in tests {
                    let mut spec = KernelSpec::flat(1, count, test);
                    if args.centred {
                        spec = spec.for_centred_meshes();
                    }
                    let mut forms = vec![(spec, test_name.to_string())];
                    if args.plain {
                        forms.push((spec.for_plain_views(), format!("{test_name}, plain")));
                    }
                    for (spec, form) in forms {
                        let source = culler.shader_source(spec).unwrap();
                        let Some(vulkan) = &vulkan else {
                            let dir = args.dump.as_ref().unwrap();
                            let name = form.replace(", ", "-");
                            let path = dir.join(format!("{label}-{}-{count}-{name}.wgsl", format.name()));
                            std::fs::write(&path, source).unwrap_or_else(|e| {
                                eprintln!("{}: {e}", path.display());
                                std::process::exit(1)
                            });
                            continue;
                        };
                        for (entry, stats) in vulkan.statistics(&source, args.unchecked) {
                            let count = count.to_string();
                            print_row(
                                &mut header,
                                &[&label, format.name(), &count, &form, &entry],
                                &stats,
                            );
                        }
                    }
                }
            }
        }
    }
}

/// A Vulkan device with pipeline statistics capture.
struct Vulkan {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    executables: ash::khr::pipeline_executable_properties::Device,
    name: String,
}

impl Vulkan {
    fn new() -> Result<Self, String> {
        // SAFETY: plain Vulkan object creation; every handle is destroyed in Drop.
        unsafe {
            let entry = ash::Entry::load().map_err(|e| format!("no Vulkan loader: {e}"))?;
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
            let instance = entry
                .create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None)
                .map_err(|e| format!("vkCreateInstance: {e}"))?;
            let physical = *instance
                .enumerate_physical_devices()
                .map_err(|e| e.to_string())?
                .first()
                .ok_or("no Vulkan device")?;
            let props = instance.get_physical_device_properties(physical);
            let name = CStr::from_ptr(props.device_name.as_ptr())
                .to_string_lossy()
                .into_owned();
            let extensions = [ash::khr::pipeline_executable_properties::NAME.as_ptr()];
            let mut capture = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
                .pipeline_executable_info(true);
            let priorities = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(0)
                .queue_priorities(&priorities)];
            let device = instance
                .create_device(
                    physical,
                    &vk::DeviceCreateInfo::default()
                        .queue_create_infos(&queues)
                        .enabled_extension_names(&extensions)
                        .push_next(&mut capture),
                    None,
                )
                .map_err(|e| format!("{name} has no VK_KHR_pipeline_executable_properties ({e})"))?;
            let executables = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
            Ok(Self {
                _entry: entry,
                instance,
                device,
                executables,
                name,
            })
        }
    }

    /// Each entry point of `wgsl` with the driver's statistics, in its order.
    /// `unchecked`: without the bounds checks wgpu adds by default.
    fn statistics(&self, wgsl: &str, unchecked: bool) -> Vec<(String, Vec<(String, String)>)> {
        use naga::valid::{Capabilities, ShaderStages, SubgroupOperationSet, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(wgsl).expect("the culler's WGSL parses");
        let info = Validator::new(ValidationFlags::all(), Capabilities::all())
            .subgroup_stages(ShaderStages::COMPUTE)
            .subgroup_operations(SubgroupOperationSet::all())
            .validate(&module)
            .expect("the culler's WGSL validates");
        // As wgpu compiles for Vulkan: SPIR-V 1.3 (subgroup operations), indices clamped.
        let policy = if unchecked {
            naga::proc::BoundsCheckPolicy::Unchecked
        } else {
            naga::proc::BoundsCheckPolicy::Restrict
        };
        let options = naga::back::spv::Options {
            lang_version: (1, 3),
            // No zeroing of workgroup memory: wgpu has the driver zero it
            // where the Vulkan device can (code these statistics leave out)
            // and does not zero it at all for a pass that asks it not to (a
            // staging kernel). naga's polyfill, one invocation storing every
            // word, is what runs on neither; statistics before 2026-11-25
            // included it.
            zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::None,
            bounds_check_policies: naga::proc::BoundsCheckPolicies {
                index: policy,
                buffer: policy,
                image_load: policy,
                binding_array: policy,
            },
            ..Default::default()
        };
        let bindings: Vec<_> = module
            .global_variables
            .iter()
            .filter_map(|(_, var)| {
                let ty = match var.space {
                    naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER_DYNAMIC,
                    naga::AddressSpace::Storage { .. } => vk::DescriptorType::STORAGE_BUFFER,
                    _ => return None,
                };
                let binding = var.binding.as_ref()?;
                Some(
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(binding.binding)
                        .descriptor_type(ty)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE),
                )
            })
            .collect();
        module
            .entry_points
            .iter()
            .map(|ep| {
                let pipeline_options = naga::back::spv::PipelineOptions {
                    shader_stage: naga::ShaderStage::Compute,
                    entry_point: ep.name.clone(),
                };
                let words = naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline_options))
                    .expect("SPIR-V");
                (ep.name.clone(), self.compile(&words, &ep.name, &bindings))
            })
            .collect()
    }

    fn compile(
        &self,
        words: &[u32],
        entry: &str,
        bindings: &[vk::DescriptorSetLayoutBinding<'_>],
    ) -> Vec<(String, String)> {
        let d = &self.device;
        let entry = std::ffi::CString::new(entry).unwrap();
        // SAFETY: the objects are created, queried and destroyed here, on one thread.
        unsafe {
            let module = d
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(words), None)
                .unwrap();
            let set = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(bindings),
                    None,
                )
                .unwrap();
            let sets = [set];
            let layout = d
                .create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&sets), None)
                .unwrap();
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(&entry);
            let create = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout)
                .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)];
            let pipeline = d
                .create_compute_pipelines(vk::PipelineCache::null(), &create, None)
                .map_err(|(_, e)| e)
                .unwrap()[0];
            let mut out = Vec::new();
            let executables = self
                .executables
                .get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline))
                .unwrap();
            for index in 0..executables.len() as u32 {
                let info = vk::PipelineExecutableInfoKHR::default()
                    .pipeline(pipeline)
                    .executable_index(index);
                for s in self
                    .executables
                    .get_pipeline_executable_statistics(&info)
                    .unwrap()
                {
                    let name = CStr::from_ptr(s.name.as_ptr()).to_string_lossy().into_owned();
                    let value = match s.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                        _ => format!("{:.2}", s.value.f64),
                    };
                    out.push((name, value));
                }
            }
            d.destroy_pipeline(pipeline, None);
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set, None);
            d.destroy_shader_module(module, None);
            out
        }
    }
}

impl Drop for Vulkan {
    fn drop(&mut self) {
        // SAFETY: nothing created from them outlives this.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
