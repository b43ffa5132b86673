//! The stopped pool's replacements: a stopped instance of another image than its pool
//! launches, and stopped instances above the pool's target (a schedule's end).

use super::*;
use crate::handlers::reaper::decide::tests::{minutes, record};
use crate::handlers::test_support::{config_with, now};
use crate::lifecycle::RunnerStatus;
use crate::ports::InstanceState;

fn stopped(name: &str, age_minutes: u64) -> RunnerRecord {
    let mut record = record(name, InstanceStatus::Stopped, RunnerStatus::Pending);
    record.prepare = true;
    record.created_at = now() - minutes(age_minutes);
    record
}

fn of_image(record: &RunnerRecord, image: &str) -> Instance {
    Instance {
        id: record.instance_id.clone().expect("an instance"),
        state: InstanceState::Stopped,
        pool: Some(record.pool.clone()),
        launched_at: Some(record.created_at),
        image_id: Some(image.to_owned()),
    }
}

fn rules(
    extra: &str,
    live: &[RunnerRecord],
    instances: &[Instance],
    images: &[(&str, &str)],
    judged: &[&str],
) -> Vec<(String, &'static str)> {
    let config = config_with(5, extra);
    let images: HashMap<String, String> = images
        .iter()
        .map(|(pool, image)| (pool.to_string(), image.to_string()))
        .collect();
    let judged: HashSet<&str> = judged.iter().copied().collect();
    stopped_replacements(&config, live, instances, &images, &judged, now())
        .into_iter()
        .map(|(record, rule)| (record.name, rule.rule()))
        .collect()
}

#[test]
fn a_stopped_instance_of_another_image_than_the_pool_launches_is_replaced() {
    let old = stopped("eph-linux-old", 30);
    let new = stopped("eph-linux-new", 10);
    let instances = [of_image(&old, "ami-1"), of_image(&new, "ami-2")];
    let live = [old, new];
    assert_eq!(
        rules(
            "    stopped: 2\n",
            &live,
            &instances,
            &[("linux", "ami-2")],
            &[]
        ),
        vec![("eph-linux-old".to_owned(), "stopped_outdated")]
    );
    assert_eq!(
        rules(
            "    stopped: 2\n",
            &live,
            &instances,
            &[("linux", "ami-1")],
            &[]
        ),
        vec![("eph-linux-new".to_owned(), "stopped_outdated")],
        "another image, older or not: a rollback is the pool's image too"
    );
}

#[test]
fn an_image_not_read_or_not_said_replaces_nothing() {
    let old = stopped("eph-linux-old", 30);
    let mut unsaid = of_image(&old, "ami-1");
    unsaid.image_id = None;
    let live = [old.clone()];
    assert!(rules(
        "    stopped: 2\n",
        &live,
        &[of_image(&old, "ami-1")],
        &[],
        &[]
    )
    .is_empty());
    assert!(rules(
        "    stopped: 2\n",
        &live,
        &[unsaid],
        &[("linux", "ami-2")],
        &[]
    )
    .is_empty());
}

#[test]
fn stopped_instances_above_the_target_go_oldest_first() {
    let live = [
        stopped("eph-linux-a", 30),
        stopped("eph-linux-b", 50),
        stopped("eph-linux-c", 10),
    ];
    let instances: Vec<Instance> = live.iter().map(|r| of_image(r, "ami-1")).collect();
    let images = [("linux", "ami-1")];
    assert_eq!(
        rules("    stopped: 2\n", &live, &instances, &images, &[]),
        vec![("eph-linux-b".to_owned(), "stopped_surplus")]
    );
    assert!(rules("    stopped: 3\n", &live, &instances, &images, &[]).is_empty());
    assert_eq!(
        rules(
            "    stopped: 2\n",
            &live,
            &instances,
            &images,
            &["eph-linux-c"]
        ),
        Vec::new(),
        "a record judged already is neither counted nor sent twice"
    );
}

#[test]
fn outside_its_schedule_a_pool_keeps_no_stopped_instance() {
    // `now()` is a Sunday, 10:00 UTC.
    let schedule = "    stopped: 2\n    stopped_schedule: { days: [mon], from: \"09:00\", \
                    to: \"17:00\" }\n";
    let live = [stopped("eph-linux-a", 30), stopped("eph-linux-b", 50)];
    let instances: Vec<Instance> = live.iter().map(|r| of_image(r, "ami-1")).collect();
    let mut gone = rules(schedule, &live, &instances, &[("linux", "ami-1")], &[]);
    gone.sort();
    assert_eq!(
        gone,
        vec![
            ("eph-linux-a".to_owned(), "stopped_surplus"),
            ("eph-linux-b".to_owned(), "stopped_surplus")
        ]
    );
    let in_window = "    stopped: 2\n    stopped_schedule: { days: [sun], from: \"09:00\", \
                     to: \"17:00\" }\n";
    assert!(rules(in_window, &live, &instances, &[("linux", "ami-1")], &[]).is_empty());
}

#[test]
fn an_outdated_instance_counts_toward_the_excess() {
    let old = stopped("eph-linux-old", 30);
    let new = stopped("eph-linux-new", 10);
    let instances = [of_image(&old, "ami-1"), of_image(&new, "ami-2")];
    let live = [old, new];
    assert_eq!(
        rules(
            "    stopped: 1\n",
            &live,
            &instances,
            &[("linux", "ami-2")],
            &[]
        ),
        vec![("eph-linux-old".to_owned(), "stopped_outdated")]
    );
}

#[test]
fn records_on_their_way_count_but_only_stopped_ones_are_replaced() {
    let mut preparing = stopped("eph-linux-p", 5);
    preparing.status = InstanceStatus::Preparing;
    let live = [preparing, stopped("eph-linux-s", 30)];
    let instances: Vec<Instance> = live.iter().map(|r| of_image(r, "ami-1")).collect();
    assert_eq!(
        rules(
            "    stopped: 1\n",
            &live,
            &instances,
            &[("linux", "ami-1")],
            &[]
        ),
        vec![("eph-linux-s".to_owned(), "stopped_surplus")]
    );
    assert_eq!(pools_with_stopped(&live), vec!["linux"]);
}
