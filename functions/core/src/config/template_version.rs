//! Which version of its launch template a pool launches.
//!
//! The deployment's own template (`<deployment>-runner`, named by the pool or implied by
//! its `ami`) launches the version its stack last wrote: CloudFormation adds a version on
//! every update and never moves the default one
//! (<https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-ec2-launchtemplate.html>).
//! A template of the pool's own is the user's to version: `$Default` unless the pool sets
//! `launch_template_version` to `$Latest` or a number, the values CreateFleet accepts
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateSpecificationRequest.html>).
//!
//! A pool with `ssm_access` launches the deployment's second template
//! (`<deployment>-runner-ssm`), the same but for its instance profile, whose role adds
//! what the SSM agent needs: CreateFleet's overrides cannot change the instance profile
//! (<https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateOverridesRequest.html>
//! has no such member), so the profile has to come with the template. That template is
//! the stack's too, and launches the version its stack last wrote.

use super::PoolConfig;
use crate::model::TemplateVersion;
use crate::names;

/// What a user-owned template launches unless the pool says otherwise.
pub const DEFAULT_VERSION: &str = "$Default";

impl PoolConfig {
    /// The launch template the pool's launches use in `deployment`: the deployment's
    /// Session Manager template with `ssm_access`, else the pool's own or, for a pool
    /// that names only an image, the deployment's.
    pub fn launch_template_name(&self, deployment: &str) -> String {
        if self.ssm_access {
            return names::ssm_launch_template_name(deployment);
        }
        self.launch_template
            .clone()
            .unwrap_or_else(|| names::launch_template_name(deployment))
    }

    /// The version of the pool's launch template its launches use, in `deployment`.
    pub fn template_version(&self, deployment: &str) -> TemplateVersion {
        if self.ssm_access {
            return TemplateVersion::Stack;
        }
        if let Some(version) = &self.launch_template_version {
            return TemplateVersion::Named(version.clone());
        }
        let own = names::launch_template_name(deployment);
        match &self.launch_template {
            Some(template) if *template != own => TemplateVersion::Named(DEFAULT_VERSION.into()),
            _ => TemplateVersion::Stack,
        }
    }
}

impl PoolConfig {
    /// Why `ssm_access` cannot be set on this pool of `deployment`: the Session Manager
    /// template replaces the deployment's own, never a template of the user's, whose
    /// instance profile is the user's to choose.
    pub(super) fn ssm_problems(&self, deployment: &str) -> Vec<(&'static str, String)> {
        if !self.ssm_access {
            return Vec::new();
        }
        let own = names::launch_template_name(deployment);
        let mut problems = Vec::new();
        if let Some(template) = self.launch_template.as_ref().filter(|t| **t != own) {
            problems.push((
                "ssm_access",
                format!(
                    "a pool with ssm_access launches the deployment's {} template; {template:?} \
                     is a template of your own, so give its instance profile the \
                     AmazonSSMManagedInstanceCore policy there and drop ssm_access, or \
                     launch with ami (or launch_template: {own})",
                    names::ssm_launch_template_name(deployment)
                ),
            ));
        } else if self.launch_template_version.is_some() {
            problems.push((
                "launch_template_version",
                "a pool with ssm_access launches the deployment's template at the version its \
                 stack last wrote; set launch_template_version only with a template of your own"
                    .into(),
            ));
        }
        problems
    }
}

/// Why `version` is not a `launch_template_version`; `with_ami` says the pool launches
/// through the deployment's template, whose version the stack decides.
pub(super) fn template_version_problem(version: &str, with_ami: bool) -> Option<String> {
    if with_ami {
        return Some(
            "a pool with `ami` launches the deployment's template at the version its stack \
             last wrote; set launch_template_version only with launch_template"
                .into(),
        );
    }
    let number = version.parse::<u64>().is_ok_and(|n| n > 0) && !version.starts_with('0');
    if number || version == "$Default" || version == "$Latest" {
        return None;
    }
    Some(format!(
        "{version:?} is not a launch template version: use $Default, $Latest or a version \
         number (1, 2, ...)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn pool(extra: &str) -> Result<PoolConfig, crate::config::ConfigError> {
        let text = format!(
            "deployment: eph\ngithub:\n  app_id: 1\npools:\n  - name: linux\n    labels: [linux]\n    \
             max_runners: 2\n    instance_types: [m7i.large]\n{extra}"
        );
        Config::parse("pools.yaml", &text).map(|config| config.pools[0].clone())
    }

    #[test]
    fn the_deployments_own_template_launches_what_its_stack_last_wrote() {
        let named = pool("    launch_template: eph-runner\n").expect("valid");
        assert_eq!(named.template_version("eph"), TemplateVersion::Stack);
        let by_image = pool("    ami: ami-1\n").expect("valid");
        assert_eq!(by_image.template_version("eph"), TemplateVersion::Stack);
    }

    #[test]
    fn a_users_template_launches_its_default_version_unless_the_pool_names_one() {
        let own = pool("    launch_template: team-runner\n").expect("valid");
        assert_eq!(
            own.template_version("eph"),
            TemplateVersion::Named("$Default".into())
        );
        for version in ["$Latest", "7", "$Default"] {
            let set = pool(&format!(
                "    launch_template: team-runner\n    launch_template_version: \"{version}\"\n"
            ))
            .expect("valid");
            assert_eq!(
                set.template_version("eph"),
                TemplateVersion::Named(version.into())
            );
        }
    }

    #[test]
    fn ssm_access_launches_the_deployments_session_manager_template_at_its_stack_version() {
        for how in ["    ami: ami-1\n", "    launch_template: eph-runner\n"] {
            let pool = pool(&format!("{how}    ssm_access: true\n")).expect("valid");
            assert_eq!(pool.launch_template_name("eph"), "eph-runner-ssm", "{how}");
            assert_eq!(
                pool.template_version("eph"),
                TemplateVersion::Stack,
                "{how}"
            );
        }
    }

    #[test]
    fn without_ssm_access_a_pool_launches_its_template_or_the_deployments() {
        let by_image = pool("    ami: ami-1\n").expect("valid");
        assert!(!by_image.ssm_access, "off unless set");
        assert_eq!(by_image.launch_template_name("eph"), "eph-runner");
        let own = pool("    launch_template: team-runner\n").expect("valid");
        assert_eq!(own.launch_template_name("eph"), "team-runner");
    }

    #[test]
    fn ssm_access_on_a_template_of_the_users_is_refused_with_its_field() {
        let err = pool("    launch_template: team-runner\n    ssm_access: true\n")
            .expect_err("the user's template has its own instance profile");
        assert_eq!(err.field, "pools[0].ssm_access");
        assert!(
            err.message.contains("AmazonSSMManagedInstanceCore"),
            "{err}"
        );
        let err = pool(
            "    launch_template: eph-runner\n    launch_template_version: \"3\"\n    \
             ssm_access: true\n",
        )
        .expect_err("the stack decides the version");
        assert_eq!(err.field, "pools[0].launch_template_version");
    }

    #[test]
    fn a_version_ec2_would_refuse_is_named_with_its_field() {
        for bad in ["latest", "0", "07", "-1", "1.0", ""] {
            let err = pool(&format!(
                "    launch_template: team-runner\n    launch_template_version: \"{bad}\"\n"
            ))
            .expect_err(bad);
            assert_eq!(err.field, "pools[0].launch_template_version", "{bad}");
        }
        let err = pool("    ami: ami-1\n    launch_template_version: \"$Latest\"\n")
            .expect_err("the stack decides the deployment template's version");
        assert_eq!(err.field, "pools[0].launch_template_version");
    }
}
