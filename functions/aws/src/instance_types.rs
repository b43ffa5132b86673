//! The instance types a sized launch offers: EC2's catalog (DescribeInstanceTypes) read
//! once an hour, and the types in it that match a job's [`Shape`].
//!
//! CreateFleet could be given the shape itself, as an override's `InstanceRequirements`
//! (`VCpuCount` and `MemoryMiB`, in MiB, are required; "If you specify
//! InstanceRequirements, you can't specify InstanceType",
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceRequirementsRequest.html>,
//! <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateOverridesRequest.html>).
//! The launch resolves the types itself instead and offers them as `InstanceType`
//! overrides, as for any pool: one path in every world (moto launches an override's
//! `InstanceType` and ignores `InstanceRequirements`), and the types chosen are in the
//! log. The rules follow `InstanceRequirements`' defaults: no bare metal, no burstable
//! types, and (ephemera's choice, for cost) no GPU, FPGA or other accelerator; current
//! generation only. Matches are offered smallest first, at most [`MAX_OVERRIDES`]
//! overrides in all: EC2 allows 300 overrides across a fleet's launch templates
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateConfigRequest.html>).

use crate::ec2::fleet_error;
use crate::Ec2Fleet;
use aws_sdk_ec2::types::{InstanceTypeInfo, UsageClassType};
use ephemera_core::ports::{FleetError, Market, Shape};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most overrides one CreateFleet request carries (types × subnets).
pub(crate) const MAX_OVERRIDES: usize = 300;
/// How long the catalog is reused: EC2 adds types rarely, never within a run.
const CATALOG_TTL: Duration = Duration::from_secs(3600);

/// What a match needs to know of one instance type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    pub name: String,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub architectures: Vec<String>,
    pub spot: bool,
    /// Bare metal, burstable, an accelerator or a previous generation: never offered.
    pub excluded: bool,
}

/// The catalog and when it was read.
pub(crate) type Catalog = Arc<Mutex<Option<(Instant, Arc<Vec<TypeInfo>>)>>>;

impl TypeInfo {
    fn from_sdk(info: &InstanceTypeInfo) -> Option<TypeInfo> {
        let name = info.instance_type()?.as_str().to_owned();
        let vcpus = info.v_cpu_info()?.default_v_cpus()?;
        let memory_mib = info.memory_info()?.size_in_mib()?;
        let architectures = architectures(info);
        let accelerated = info.gpu_info().is_some()
            || info.fpga_info().is_some()
            || info.inference_accelerator_info().is_some()
            || info.neuron_info().is_some();
        Some(TypeInfo {
            name,
            vcpus: u32::try_from(vcpus).ok()?,
            memory_mib: u64::try_from(memory_mib).ok()?,
            architectures,
            spot: info
                .supported_usage_classes()
                .contains(&UsageClassType::Spot),
            excluded: info.bare_metal() == Some(true)
                || info.burstable_performance_supported() == Some(true)
                || info.current_generation() == Some(false)
                || accelerated,
        })
    }
}

/// The architectures an instance type runs (`x86_64`, `arm64`), as EC2 describes it.
pub fn architectures(info: &InstanceTypeInfo) -> Vec<String> {
    info.processor_info()
        .map(|p| {
            p.supported_architectures()
                .iter()
                .map(|a| a.as_str().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The instance family of a type name (`m7i-flex` of `m7i-flex.2xlarge`).
fn family(name: &str) -> &str {
    name.split_once('.').map_or(name, |(family, _)| family)
}

/// The types of `catalog` that `shape` allows in `market`, smallest first (vCPUs, then
/// memory, then name), at most `limit`. Without an architecture in the shape, the one
/// of `pool_types`' first known type applies (the pool's image runs on it), else x86_64.
pub fn matching(
    catalog: &[TypeInfo],
    shape: &Shape,
    market: Market,
    pool_types: &[String],
    limit: usize,
) -> Vec<String> {
    let architecture = shape.architecture.clone().unwrap_or_else(|| {
        pool_types
            .iter()
            .find_map(|t| catalog.iter().find(|info| &info.name == t))
            .and_then(|info| info.architectures.first().cloned())
            .unwrap_or_else(|| "x86_64".to_owned())
    });
    let mut found: Vec<&TypeInfo> = catalog
        .iter()
        .filter(|t| !t.excluded && (market == Market::OnDemand || t.spot))
        .filter(|t| (shape.vcpus_min..=shape.vcpus_max).contains(&t.vcpus))
        .filter(|t| t.memory_mib >= shape.memory_mib_min)
        .filter(|t| shape.memory_mib_max.is_none_or(|max| t.memory_mib <= max))
        .filter(|t| t.architectures.contains(&architecture))
        .filter(|t| {
            shape.families.is_empty() || shape.families.iter().any(|f| f == family(&t.name))
        })
        .collect();
    found.sort_by(|a, b| (a.vcpus, a.memory_mib, &a.name).cmp(&(b.vcpus, b.memory_mib, &b.name)));
    found
        .into_iter()
        .take(limit)
        .map(|t| t.name.clone())
        .collect()
}

impl Ec2Fleet {
    /// EC2's instance types, read (every page) at most once per [`CATALOG_TTL`].
    pub(crate) async fn catalog(&self) -> Result<Arc<Vec<TypeInfo>>, FleetError> {
        {
            let cached = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((read, types)) = cached.as_ref() {
                if read.elapsed() < CATALOG_TTL {
                    return Ok(types.clone());
                }
            }
        }
        let mut types = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let page = self
                .client
                .describe_instance_types()
                .set_next_token(next.take())
                .send()
                .await
                .map_err(fleet_error)?;
            types.extend(page.instance_types().iter().filter_map(TypeInfo::from_sdk));
            match page.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_owned()),
                _ => break,
            }
        }
        let types = Arc::new(types);
        let mut cached = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
        *cached = Some((Instant::now(), types.clone()));
        Ok(types)
    }
}

#[cfg(test)]
#[path = "instance_types_tests.rs"]
mod tests;
