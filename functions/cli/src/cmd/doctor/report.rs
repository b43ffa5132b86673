//! The outcome of `ephemera doctor`: one [`Check`] per line (✔ passed, ✖ failed, ! a
//! warning, - not run because what it needs failed first), every ✖ with what to do, the
//! same content as JSON for `--json`.

use serde::Serialize;
use std::fmt::Write as _;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Warn,
    Skip,
}

impl Status {
    pub fn symbol(self) -> &'static str {
        match self {
            Status::Pass => "✔",
            Status::Fail => "✖",
            Status::Warn => "!",
            Status::Skip => "-",
        }
    }
}

/// One check: what was checked (a stable id and the thing it was checked on), how it
/// came out, what was found, and for a failure or a warning what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable name, e.g. `github.webhook_url`; scripts select checks by it.
    pub check: &'static str,
    /// What it was checked on (a pool, an organization), when not the deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub status: Status,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub fn pass(check: &'static str, message: impl Into<String>) -> Check {
        Check {
            check,
            subject: None,
            status: Status::Pass,
            message: message.into(),
            fix: None,
        }
    }

    pub fn fail(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check,
            subject: None,
            status: Status::Fail,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn warn(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            check,
            subject: None,
            status: Status::Warn,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    /// Not run: `because` names the failed check it depends on.
    pub fn skip(check: &'static str, because: impl Into<String>) -> Check {
        Check {
            check,
            subject: None,
            status: Status::Skip,
            message: format!("not checked: {}", because.into()),
            fix: None,
        }
    }

    pub fn on(mut self, subject: impl Into<String>) -> Check {
        self.subject = Some(subject.into());
        self
    }
}

/// Every check of one run, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub stack: String,
    pub checks: Vec<Check>,
}

/// The `--json` shape: the checks and their counts.
#[derive(Serialize)]
struct ReportJson<'a> {
    stack: &'a str,
    ok: bool,
    passed: usize,
    failed: usize,
    warnings: usize,
    skipped: usize,
    checks: &'a [Check],
}

impl Report {
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// No check failed (warnings and skips do not fail a run: a skip always follows a
    /// failure).
    pub fn ok(&self) -> bool {
        self.count(Status::Fail) == 0
    }

    /// The checks named `check`.
    pub fn named(&self, check: &str) -> Vec<&Check> {
        self.checks.iter().filter(|c| c.check == check).collect()
    }

    /// One line per check, `fix:` under each failure and warning, then the counts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let width = self.checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
        for check in &self.checks {
            let subject = check
                .subject
                .as_deref()
                .map(|s| format!("[{s}] "))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{} {:width$}  {subject}{}",
                check.status.symbol(),
                check.check,
                check.message
            );
            if let Some(fix) = &check.fix {
                let _ = writeln!(out, "  {:width$}  fix: {fix}", "");
            }
        }
        let _ = writeln!(
            out,
            "\n{}: {} passed, {} failed, {} warnings, {} not checked",
            self.stack,
            self.count(Status::Pass),
            self.count(Status::Fail),
            self.count(Status::Warn),
            self.count(Status::Skip)
        );
        out
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(ReportJson {
            stack: &self.stack,
            ok: self.ok(),
            passed: self.count(Status::Pass),
            failed: self.count(Status::Fail),
            warnings: self.count(Status::Warn),
            skipped: self.count(Status::Skip),
            checks: &self.checks,
        })
        .unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            stack: "eph".into(),
            checks: vec![
                Check::pass("stack.status", "CREATE_COMPLETE"),
                Check::fail("github.app_key", "placeholder", "put the key").on("arn:x"),
                Check::skip("github.app", "github.app_key failed"),
            ],
        }
    }

    #[test]
    fn every_check_is_one_line_and_every_failure_says_what_to_do() {
        let text = report().text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("✔ stack.status"), "{text}");
        assert!(lines[1].starts_with("✖ github.app_key"), "{text}");
        assert!(lines[1].contains("[arn:x] placeholder"), "{text}");
        assert!(
            lines[2].trim_start().starts_with("fix: put the key"),
            "{text}"
        );
        assert!(lines[3].starts_with("- github.app"), "{text}");
        assert!(text.contains("eph: 1 passed, 1 failed, 0 warnings, 1 not checked"));
    }

    #[test]
    fn json_has_the_same_checks_and_says_whether_all_passed() {
        let report = report();
        let json = report.json();
        assert_eq!(json["ok"], false);
        assert_eq!(json["failed"], 1);
        assert_eq!(json["checks"][1]["check"], "github.app_key");
        assert_eq!(json["checks"][1]["status"], "fail");
        assert_eq!(json["checks"][1]["fix"], "put the key");
        assert_eq!(json["checks"][1]["subject"], "arn:x");
        assert!(json["checks"][0].get("fix").is_none());
        assert!(!report.ok());
        let passing = Report {
            stack: "eph".into(),
            checks: vec![Check::warn("github.deliveries", "1 failed", "look")],
        };
        assert!(passing.ok());
    }
}
