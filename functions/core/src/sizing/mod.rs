//! Sizing labels: a job says the runner it needs in its `runs-on` labels, and a pool
//! that accepts them ([`crate::config::SizingPolicy`]) takes the job if its policy allows.
//!
//! Every sizing label is `ephemera.<key>=<value>` (the prefix and the key ignore case):
//!
//! | key      | value                                   | example                    |
//! |----------|-----------------------------------------|----------------------------|
//! | `cpu`    | vCPUs: exact `4`, range `4-16`, `4+`    | `ephemera.cpu=4-16`        |
//! | `ram`    | GiB, the same forms                     | `ephemera.ram=16+`         |
//! | `family` | instance families joined by `+`         | `ephemera.family=m7i+m7a`  |
//! | `arch`   | `x64` or `arm64`                        | `ephemera.arch=arm64`      |
//! | `disk`   | root volume GiB, optional `:type`       | `ephemera.disk=80:gp3`     |
//! | `spot`   | `true` or `false`                       | `ephemera.spot=false`      |
//! | `image`  | a name the operator configured          | `ephemera.image=ubuntu-24` |
//! | `run`    | anything: keeps other jobs off the run  | `ephemera.run=1234`        |
//!
//! A job's sizing labels parse into one [`SizingRequest`]; a label that does not parse
//! is a [`SizingError`] naming the label and the rule it breaks, and the job is then
//! unrouted with that reason. The request renders back to the same labels
//! ([`SizingRequest::labels`]), which is what a runner would register with.

pub mod launch;
mod parse;
pub mod policy;

pub(crate) use parse::{image_name_rule, is_family};
pub use parse::{SizingError, SizingRule};
use std::fmt;

/// The prefix of every sizing label (compared ignoring case).
pub const PREFIX: &str = "ephemera.";

/// The largest vCPU count a label may ask (EC2's largest instances have 896).
pub const MAX_CPU: u32 = 1024;
/// The largest memory, in GiB, a label may ask.
pub const MAX_RAM_GIB: u32 = 32_768;
/// The largest root volume, in GiB, a label may ask: the most of any type a label may
/// name ([`ROOT_VOLUME_SIZES`]).
pub const MAX_DISK_GIB: u32 = 16_384;

/// Whether `label` is a sizing label (starts with [`PREFIX`], ignoring case).
pub fn is_sizing(label: &str) -> bool {
    let label = label.trim().as_bytes();
    label.len() >= PREFIX.len() && label[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes())
}

/// An amount from `min` up to `max` inclusive; no `max` means "at least `min`".
/// Written `4` (exact), `4-16` or `4+`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    pub min: u32,
    pub max: Option<u32>,
}

impl Amount {
    pub fn exact(value: u32) -> Amount {
        Amount {
            min: value,
            max: Some(value),
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.max {
            Some(max) if max == self.min => write!(f, "{}", self.min),
            Some(max) => write!(f, "{}-{max}", self.min),
            None => write!(f, "{}+", self.min),
        }
    }
}

/// The processor architecture of a runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X64,
    Arm64,
}

impl Arch {
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X64 => "x64",
            Arch::Arm64 => "arm64",
        }
    }
}

/// The EBS volume types EC2 knows; a label may name only those of [`ROOT_VOLUME_SIZES`].
pub const VOLUME_TYPES: [&str; 7] = ["gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"];

/// The volume types a label may give a root volume, with the sizes EC2 allows each, in
/// GiB (EC2 API reference, `FleetEbsBlockDeviceRequest` and `LaunchTemplateEbsBlockDeviceRequest`
/// `VolumeSize`: gp2 and gp3 1-16,384, standard 1-1,024;
/// <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateEbsBlockDeviceRequest.html>).
/// The others cannot come from a label: io1 and io2 need `Iops`, which a label does not
/// give ([`PROVISIONED_IOPS_TYPES`]), and st1 and sc1 cannot be a boot volume
/// ([`HDD_TYPES`]). A disk without a type keeps the launch template's type, and the
/// stack's template is gp3.
pub const ROOT_VOLUME_SIZES: [(&str, u32, u32); 3] = [
    ("gp3", 1, 16_384),
    ("gp2", 1, 16_384),
    ("standard", 1, 1_024),
];

/// Volume types that need provisioned IOPS: "This parameter is required for io1 and io2
/// volumes" (EC2 API reference, `EbsBlockDevice` `Iops`,
/// <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_EbsBlockDevice.html>).
pub const PROVISIONED_IOPS_TYPES: [&str; 2] = ["io1", "io2"];

/// Throughput-optimized and cold HDD volumes, which "cannot be used as a boot volume"
/// (Amazon EBS User Guide, "Amazon EBS volume types",
/// <https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html>).
pub const HDD_TYPES: [&str; 2] = ["st1", "sc1"];

/// The sizes EC2 allows a root volume of `volume_type`, when a label may name it.
pub fn root_volume_sizes(volume_type: &str) -> Option<(u32, u32)> {
    ROOT_VOLUME_SIZES
        .iter()
        .find(|(kind, _, _)| *kind == volume_type)
        .map(|(_, min, max)| (*min, *max))
}

/// A root volume: its size and, if the job says, its EBS type (one of [`ROOT_VOLUME_SIZES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub gib: u32,
    pub volume_type: Option<String>,
}

impl fmt::Display for Disk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.gib)?;
        match &self.volume_type {
            Some(kind) => write!(f, ":{kind}"),
            None => Ok(()),
        }
    }
}

/// What a job's sizing labels ask for; `None` (or empty) where the job does not say,
/// and then the pool's own choice applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SizingRequest {
    pub cpu: Option<Amount>,
    pub ram_gib: Option<Amount>,
    /// Instance families (`m7i`, `m7i-flex`), lowercase, in the job's order.
    pub families: Vec<String>,
    pub arch: Option<Arch>,
    pub disk: Option<Disk>,
    pub spot: Option<bool>,
    /// The name of an image in the pool's `sizing.images`.
    pub image: Option<String>,
    /// The per-run label's value, kept as written.
    pub run: Option<String>,
}

impl SizingRequest {
    /// The request made by the sizing labels among `labels` (others are ignored);
    /// `Ok(None)` when there is none. The first label that breaks the grammar, or
    /// repeats a key, is the error.
    pub fn from_labels(labels: &[String]) -> Result<Option<SizingRequest>, SizingError> {
        let mut request = SizingRequest::default();
        let mut any = false;
        for label in labels.iter().filter(|l| is_sizing(l)) {
            parse::apply(&mut request, label.trim())?;
            any = true;
        }
        Ok(any.then_some(request))
    }

    /// The request as labels, one per key it sets, in the table's order, each of which
    /// [`SizingRequest::from_labels`] reads back to the same request.
    pub fn labels(&self) -> Vec<String> {
        let label = |key: &str, value: String| format!("{PREFIX}{key}={value}");
        let mut labels = Vec::new();
        labels.extend(self.cpu.map(|a| label("cpu", a.to_string())));
        labels.extend(self.ram_gib.map(|a| label("ram", a.to_string())));
        if !self.families.is_empty() {
            labels.push(label("family", self.families.join("+")));
        }
        labels.extend(self.arch.map(|a| label("arch", a.as_str().to_owned())));
        labels.extend(self.disk.as_ref().map(|d| label("disk", d.to_string())));
        labels.extend(self.spot.map(|s| label("spot", s.to_string())));
        labels.extend(self.image.as_ref().map(|i| label("image", i.clone())));
        labels.extend(self.run.as_ref().map(|r| label("run", r.clone())));
        labels
    }
}

#[cfg(test)]
pub(crate) mod tests;
