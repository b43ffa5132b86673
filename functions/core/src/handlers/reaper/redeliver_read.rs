//! Reading the App's deliveries down, newest first, from the newest to where the last
//! sweep stopped (or the lookback), within the run's pages and time; what is left
//! unread is remembered for the next run.

use super::*;

/// Where reading down a list of deliveries stopped.
enum Stopped {
    /// At the mark, the lookback or the end of the list.
    Done,
    /// Out of pages or time: the rest starts at this cursor (`None`: nothing was read).
    At(Option<String>),
}

impl Reaper {
    /// The deliveries made since the last sweep read (newest first), then those older
    /// ones an earlier sweep had no pages left for, within [`PAGES_PER_RUN`] pages; or
    /// `None` if the newest cannot be listed. What is left unread is remembered for the
    /// next run, so that no delivery within the lookback goes unread, however many
    /// arrive between two runs (or before a fresh process's first).
    pub(super) async fn read_new_deliveries(
        &self,
        now: OffsetDateTime,
        deadline: Instant,
    ) -> Option<Vec<HookDelivery>> {
        let deliveries = self.deliveries.clone()?;
        let deliveries = deliveries.as_ref();
        let (stop_at, first_sweep) = {
            let mut memory = self.memory();
            let first_sweep = *memory.sweep.first_sweep.get_or_insert(now);
            (memory.sweep.newest_seen, first_sweep)
        };
        let oldest = (first_sweep.min(now) - DELIVERY_LOOKBACK).max(now - LONGEST_READ_BACK);
        let mut pages = PAGES_PER_RUN;
        let (mut read, stopped) = match read_down(
            deliveries, None, stop_at, oldest, &mut pages, deadline,
        )
        .await
        {
            Ok(top) => top,
            Err(err) => {
                warn!(error = %error_chain(&err), "cannot list webhook deliveries; next run retries");
                return None;
            }
        };
        let mut unread = std::mem::take(&mut self.memory().sweep.unread);
        // Older stretches first: they are the nearest to the end of the lookback.
        let mut left = Vec::new();
        for stretch in unread.drain(..) {
            if pages == 0 || Instant::now() >= deadline {
                left.push(stretch);
                continue;
            }
            let from = Some(stretch.cursor.clone());
            match read_down(
                deliveries,
                from,
                stretch.down_to,
                oldest,
                &mut pages,
                deadline,
            )
            .await
            {
                Ok((older, stopped)) => {
                    read.extend(older);
                    if let Stopped::At(cursor) = stopped {
                        left.push(Unread {
                            cursor: cursor.unwrap_or(stretch.cursor),
                            down_to: stretch.down_to,
                        });
                    }
                }
                Err(err) => {
                    warn!(error = %error_chain(&err), "cannot list older webhook deliveries; next run goes on");
                    left.push(stretch);
                }
            }
        }
        if let Stopped::At(Some(cursor)) = stopped {
            left.push(Unread {
                cursor,
                down_to: stop_at,
            });
        }
        let mut memory = self.memory();
        let kept = left.len().saturating_sub(UNREAD_KEPT);
        memory.sweep.unread = left.split_off(kept);
        // The older stretches lie below the mark: only the newest read moves it.
        if let Some(newest) = read.iter().map(|d| d.id).max() {
            memory.sweep.newest_seen = Some(newest.max(stop_at.unwrap_or(0)));
        }
        Some(read)
    }
}

/// Reads pages from `cursor` (the newest when `None`) down to delivery `down_to`
/// (excluded) or the lookback's start, spending `pages`; returns what it read, newest
/// first, and where it stopped.
async fn read_down(
    deliveries: &dyn HookDeliveries,
    mut cursor: Option<String>,
    down_to: Option<u64>,
    oldest: OffsetDateTime,
    pages: &mut usize,
    deadline: Instant,
) -> Result<(Vec<HookDelivery>, Stopped), ForgeError> {
    let mut read = Vec::new();
    while *pages > 0 && Instant::now() < deadline {
        *pages -= 1;
        let page = deliveries.list_deliveries(cursor.as_deref()).await?;
        let listed = page.deliveries.len();
        let fresh: Vec<HookDelivery> = page
            .deliveries
            .into_iter()
            .take_while(|d| down_to.is_none_or(|id| d.id > id) && d.delivered_at >= oldest)
            .collect();
        let reached_the_end = fresh.len() < listed;
        read.extend(fresh);
        match page.next_cursor {
            Some(next) if !reached_the_end => cursor = Some(next),
            _ => return Ok((read, Stopped::Done)),
        }
    }
    Ok((read, Stopped::At(cursor)))
}
