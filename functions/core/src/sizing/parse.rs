//! The grammar of one sizing label, and its errors: each names the label and the rule.

use super::{
    root_volume_sizes, HDD_TYPES, PROVISIONED_IOPS_TYPES, ROOT_VOLUME_SIZES, VOLUME_TYPES,
};
use super::{Amount, Arch, Disk, SizingRequest, MAX_CPU, MAX_DISK_GIB, MAX_RAM_GIB, PREFIX};
use std::fmt;

/// A sizing label that breaks the grammar, and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label {label:?}: {rule}")]
pub struct SizingError {
    /// The label as the job wrote it (trimmed).
    pub label: String,
    pub rule: SizingRule,
}

/// The rules of the grammar ([`super`]'s table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizingRule {
    /// Not `ephemera.<key>=<value>` with a value.
    NoValue,
    UnknownKey(String),
    /// A key given by two labels.
    Repeated,
    /// `cpu`, `ram`: not `N`, `N-M` or `N+` with numbers from 1 to `max`.
    Amount {
        max: u32,
    },
    /// `N-M` with `N` above `M`.
    EmptyRange,
    Family,
    Arch,
    Disk,
    /// `disk` of io1 or io2, which EC2 launches only with provisioned IOPS.
    DiskIops(String),
    /// `disk` of st1 or sc1, which cannot be a boot volume.
    DiskBoot(String),
    /// `disk` of a size EC2 does not allow its type.
    DiskSize {
        volume_type: String,
        min: u32,
        max: u32,
    },
    Spot,
    /// An AMI id where an image name belongs.
    AmiId,
    Image,
}

impl fmt::Display for SizingRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizingRule::NoValue => write!(f, "a sizing label is {PREFIX}<key>=<value>"),
            SizingRule::UnknownKey(key) => write!(
                f,
                "unknown key {key:?} (the keys are cpu, ram, family, arch, disk, spot, image \
                 and run)"
            ),
            SizingRule::Repeated => write!(f, "its key is given by another label too"),
            SizingRule::Amount { max } => write!(
                f,
                "must be a whole number N, a range N-M, or N+ (at least N), with numbers \
                 from 1 to {max}"
            ),
            SizingRule::EmptyRange => write!(f, "the range's minimum is above its maximum"),
            SizingRule::Family => write!(
                f,
                "must be instance families joined by + (such as m7i+m7i-flex): each a letter, \
                 then letters, digits and '-', with a digit, at most 24 characters"
            ),
            SizingRule::Arch => write!(f, "must be x64 or arm64"),
            SizingRule::Disk => write!(
                f,
                "must be the root volume's size in GiB, from 1 to {MAX_DISK_GIB}, optionally \
                 followed by :type, with type one of {}",
                root_types()
            ),
            SizingRule::DiskIops(kind) => write!(
                f,
                "EC2 launches a {kind} volume only with provisioned IOPS, which a label cannot \
                 give; ask {}",
                root_types()
            ),
            SizingRule::DiskBoot(kind) => write!(
                f,
                "EC2 cannot boot from a {kind} volume (an HDD type); ask {}",
                root_types()
            ),
            SizingRule::DiskSize {
                volume_type,
                min,
                max,
            } => write!(
                f,
                "EC2 allows a {volume_type} volume from {min} to {max} GiB"
            ),
            SizingRule::Spot => write!(f, "must be true or false"),
            SizingRule::AmiId => write!(
                f,
                "names an AMI id; a job may only name an image the operator configured \
                 (the pool's sizing.images)"
            ),
            SizingRule::Image => write!(
                f,
                "must be an image name: 1-64 characters of a-z, 0-9, '.', '_' and '-', \
                 starting with a letter or digit"
            ),
        }
    }
}

/// Reads one sizing `label` into `request`.
pub(super) fn apply(request: &mut SizingRequest, label: &str) -> Result<(), SizingError> {
    let fail = |rule: SizingRule| SizingError {
        label: label.to_owned(),
        rule,
    };
    let rest = &label[PREFIX.len()..];
    let (key, value) = rest
        .split_once('=')
        .filter(|(key, value)| !key.is_empty() && !value.is_empty())
        .ok_or_else(|| fail(SizingRule::NoValue))?;
    let lower = value.to_ascii_lowercase();
    let repeated = match key.to_ascii_lowercase().as_str() {
        "cpu" => set(&mut request.cpu, amount(&lower, MAX_CPU).map_err(fail)?),
        "ram" => set(
            &mut request.ram_gib,
            amount(&lower, MAX_RAM_GIB).map_err(fail)?,
        ),
        "family" => {
            let families = families(&lower).ok_or_else(|| fail(SizingRule::Family))?;
            let had = !request.families.is_empty();
            request.families = families;
            had
        }
        "arch" => set(
            &mut request.arch,
            arch(&lower).ok_or_else(|| fail(SizingRule::Arch))?,
        ),
        "disk" => set(&mut request.disk, disk(&lower).map_err(fail)?),
        "spot" => set(
            &mut request.spot,
            spot(&lower).ok_or_else(|| fail(SizingRule::Spot))?,
        ),
        "image" => set(&mut request.image, image(&lower).map_err(fail)?),
        "run" => set(&mut request.run, value.to_owned()),
        other => return Err(fail(SizingRule::UnknownKey(other.to_owned()))),
    };
    match repeated {
        true => Err(fail(SizingRule::Repeated)),
        false => Ok(()),
    }
}

/// Sets `slot` to `value`; whether it was already set.
fn set<T>(slot: &mut Option<T>, value: T) -> bool {
    slot.replace(value).is_some()
}

/// A whole number from 1 to `max`, digits only.
fn number(text: &str, max: u32) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u32>().ok().filter(|n| (1..=max).contains(n))
}

/// `N`, `N-M` or `N+`.
fn amount(text: &str, max: u32) -> Result<Amount, SizingRule> {
    let rule = SizingRule::Amount { max };
    if let Some(min) = text.strip_suffix('+') {
        let min = number(min, max).ok_or(rule)?;
        return Ok(Amount { min, max: None });
    }
    match text.split_once('-') {
        Some((low, high)) => {
            let (low, high) = (number(low, max).ok_or(rule.clone())?, number(high, max));
            let high = high.ok_or(rule)?;
            if low > high {
                return Err(SizingRule::EmptyRange);
            }
            Ok(Amount {
                min: low,
                max: Some(high),
            })
        }
        None => number(text, max).map(Amount::exact).ok_or(rule),
    }
}

/// Whether `name` is an instance family's name (`m7i`, `m7i-flex`, `c6gn`).
pub(crate) fn is_family(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=24).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && !name.ends_with('-')
        && bytes.iter().any(u8::is_ascii_digit)
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn families(text: &str) -> Option<Vec<String>> {
    let families: Vec<String> = text.split('+').map(str::to_owned).collect();
    families.iter().all(|f| is_family(f)).then_some(families)
}

fn arch(text: &str) -> Option<Arch> {
    match text {
        "x64" => Some(Arch::X64),
        "arm64" => Some(Arch::Arm64),
        _ => None,
    }
}

/// The types a label may give a root volume, for the rules' messages.
fn root_types() -> String {
    let kinds: Vec<&str> = ROOT_VOLUME_SIZES.iter().map(|(kind, _, _)| *kind).collect();
    kinds.join(", ")
}

/// `GIB` or `GIB:type`, a root volume EC2 can launch: a type it can boot from without
/// settings a label cannot give, and a size that type allows.
fn disk(text: &str) -> Result<Disk, SizingRule> {
    let (size, kind) = match text.split_once(':') {
        Some((size, kind)) => (size, Some(kind)),
        None => (text, None),
    };
    let gib = number(size, u32::MAX).ok_or(SizingRule::Disk)?;
    let Some(kind) = kind else {
        // The template's type: the label's bound is the largest any type allows.
        return match gib <= MAX_DISK_GIB {
            true => Ok(Disk {
                gib,
                volume_type: None,
            }),
            false => Err(SizingRule::Disk),
        };
    };
    if !VOLUME_TYPES.contains(&kind) {
        return Err(SizingRule::Disk);
    }
    if PROVISIONED_IOPS_TYPES.contains(&kind) {
        return Err(SizingRule::DiskIops(kind.to_owned()));
    }
    if HDD_TYPES.contains(&kind) {
        return Err(SizingRule::DiskBoot(kind.to_owned()));
    }
    let (min, max) = root_volume_sizes(kind).ok_or(SizingRule::Disk)?;
    if !(min..=max).contains(&gib) {
        return Err(SizingRule::DiskSize {
            volume_type: kind.to_owned(),
            min,
            max,
        });
    }
    Ok(Disk {
        gib,
        volume_type: Some(kind.to_owned()),
    })
}

fn spot(text: &str) -> Option<bool> {
    match text {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Why `name` cannot be an image's name, if it cannot (also for the policy's names).
pub(crate) fn image_name_rule(name: &str) -> Option<SizingRule> {
    let bytes = name.as_bytes();
    if name.to_ascii_lowercase().starts_with("ami-") {
        return Some(SizingRule::AmiId);
    }
    let valid = (1..=64).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        });
    (!valid).then_some(SizingRule::Image)
}

fn image(text: &str) -> Result<String, SizingRule> {
    match image_name_rule(text) {
        Some(rule) => Err(rule),
        None => Ok(text.to_owned()),
    }
}
