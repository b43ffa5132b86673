//! The tags ephemera puts on what it creates, and the filters that find them again.
//!
//! The deployment tag is what the orphan sweep trusts: it lists only instances carrying
//! this deployment's tag, so it can never terminate another deployment's runners.

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};

pub const DEPLOYMENT: &str = "ephemera:deployment";
pub const POOL: &str = "ephemera:pool";
pub const RUNNER: &str = "ephemera:runner";
/// The console's display name: the runner name, as GitHub shows it.
pub const NAME: &str = "Name";

fn tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build()
}

/// The tags of a pool's instances: the deployment (what the orphan sweep trusts), the
/// pool, and a display name. Which runner owns an instance is in the runner record.
pub(crate) fn pool_tags(deployment: &str, pool: &str) -> Vec<Tag> {
    vec![
        tag(DEPLOYMENT, deployment),
        tag(POOL, pool),
        tag(NAME, &format!("{deployment}-{pool}")),
    ]
}

/// The instance tags of a CreateFleet request.
pub(crate) fn pool_tag_specification(deployment: &str, pool: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .set_tags(Some(pool_tags(deployment, pool)))
        .build()
}

/// Matches every instance of `deployment`.
pub(crate) fn deployment_filter(deployment: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{DEPLOYMENT}"))
        .values(deployment)
        .build()
}

/// The value of tag `key`, if present.
pub fn value<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter()
        .find(|tag| tag.key() == Some(key))
        .and_then(Tag::value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_tags_name_deployment_and_pool() {
        let tags = pool_tags("eph", "linux");
        assert_eq!(value(&tags, DEPLOYMENT), Some("eph"));
        assert_eq!(value(&tags, POOL), Some("linux"));
        assert_eq!(value(&tags, NAME), Some("eph-linux"));
        assert_eq!(value(&tags, "other"), None);
        let spec = pool_tag_specification("eph", "linux");
        assert_eq!(spec.resource_type(), Some(&ResourceType::Instance));
        assert_eq!(spec.tags().len(), 3);
    }
}
