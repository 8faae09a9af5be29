//! API Priority and Fairness' debug dumps, kube-apiserver's
//! `/debug/api_priority_and_fairness/dump_priority_levels`, `dump_queues` and `dump_requests`
//! (`?includeRequestDetails=1` adds who asked what), as kube v1.33 prints them
//! (`util/flowcontrol/apf_controller_debug.go` over `fairqueuing/queueset`'s `Dump`).
//!
//! ## Guarantees
//! - The column headers, their order, the cells' text and the layout are kube's: cells
//!   joined by `,` and aligned as Go's `text/tabwriter` with kube's settings (minimum width
//!   8, padding 1, spaces) aligns them, the last cell of a line not padded; `text/plain`.
//!   Tools that grep the header line or split the rows on `,` read ours as kube's.
//! - `dump_priority_levels`: one row per level (`PriorityLevelName`, `ActiveQueues` (queues
//!   with a request waiting), `IsIdle`, `IsQuiescing`, `WaitingRequests`,
//!   `ExecutingRequests`, and `DispatchedRequests`, `RejectedRequests` (queue full or
//!   concurrency limit), `TimedoutRequests`, `CancelledRequests` since the level was
//!   created). `dump_queues`: one row per queue of a queuing level (`Index`,
//!   `PendingRequests`, `ExecutingRequests`, `SeatsInUse`, `NextDispatchR` and
//!   `TotalWorkSum` in kube's seat-seconds text `N.NNNNNNNNss`, `InitialSeatsSum`,
//!   `MaxSeatsSum` of the waiting). `dump_requests`: one row per waiting request (its queue
//!   and place), per executing request of a queue (place `-1`) and per executing request
//!   granted without a queue (queue and place `-1`), with its FlowSchema, flow
//!   distinguisher, arrival and start time (Go's `RFC3339Nano` in UTC, the zero time
//!   `0001-01-01T00:00:00Z` for one still waiting) and its work estimate (initial and
//!   final seats, additional latency as Go prints a `time.Duration`).
//! - Served only with API Priority and Fairness on (kube installs the paths only then;
//!   otherwise 404), through the server's authentication and authorization like any path
//!   (`nonResourcePath` `/debug/api_priority_and_fairness/dump_*`, verb `get`).
//!
//! ## Bounds
//! An answer has a row per level, per queue of a queuing level (`queues` is at most
//! 10,000,000 in kube's validation, and the level already holds a queue for each: the answer
//! is built in memory, a few hundred bytes a queue, as Go's tabwriter buffers it; the levels
//! are bounded by the store's quota), and per request waiting
//! (at most `queues × queueLengthLimit` per level) or executing (at most the level's seats,
//! every seat held by one request; an exempt level's are bounded by the in-flight requests
//! the connection limits allow). A request's row is built from what it already holds (its
//! user name, method and URI, kept once per request as kube keeps its context).
//!
//! ## Differences from kube
//! - Levels are listed by name in every dump (kube sorts `dump_priority_levels` only; the
//!   other two follow Go's map order, which varies).
//! - `IsQuiescing` is always `false`: a deleted level leaves the dumps at once here, while
//!   its remaining requests finish in it (kube lists it until they have).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use super::queues::{ESTIMATED_SERVICE, LevelDump, RequestDump, Work};
use super::rules::RequestInfo;

/// One of the three dumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `dump_priority_levels`.
    PriorityLevels,
    /// `dump_queues`.
    Queues,
    /// `dump_requests`.
    Requests,
}

impl Table {
    /// The dump served at `/debug/api_priority_and_fairness/{name}`.
    #[must_use]
    pub fn named(name: &str) -> Option<Table> {
        match name {
            "dump_priority_levels" => Some(Table::PriorityLevels),
            "dump_queues" => Some(Table::Queues),
            "dump_requests" => Some(Table::Requests),
            _ => None,
        }
    }
}

/// Whether `query` asks for request details (kube: the first `includeRequestDetails` value
/// is not empty).
#[must_use]
pub fn includes_details(query: Option<&str>) -> bool {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query.unwrap_or_default())
        .unwrap_or_default()
        .into_iter()
        .find(|(key, _)| key == "includeRequestDetails")
        .is_some_and(|(_, value)| !value.is_empty())
}

/// The text of `table` over `levels` (by name).
#[must_use]
pub fn render(table: Table, levels: &[(String, LevelDump)], details: bool) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let texts = |cells: &[&str]| cells.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
    match table {
        Table::PriorityLevels => {
            rows.push(texts(&[
                "PriorityLevelName",
                "ActiveQueues",
                "IsIdle",
                "IsQuiescing",
                "WaitingRequests",
                "ExecutingRequests",
                "DispatchedRequests",
                "RejectedRequests",
                "TimedoutRequests",
                "CancelledRequests",
            ]));
            for (name, level) in levels {
                let active = level.queues.iter().filter(|q| !q.waiting.is_empty());
                rows.push(vec![
                    name.clone(),
                    active.count().to_string(),
                    (level.waiting == 0 && level.executing == 0).to_string(),
                    false.to_string(),
                    level.waiting.to_string(),
                    level.executing.to_string(),
                    level.dispatched.to_string(),
                    level.rejected.to_string(),
                    level.timed_out.to_string(),
                    level.cancelled.to_string(),
                ]);
            }
        }
        Table::Queues => {
            rows.push(texts(&[
                "PriorityLevelName",
                "Index",
                "PendingRequests",
                "ExecutingRequests",
                "SeatsInUse",
                "NextDispatchR",
                "InitialSeatsSum",
                "MaxSeatsSum",
                "TotalWorkSum",
            ]));
            for (name, level) in levels {
                for (index, queue) in level.queues.iter().enumerate() {
                    let waiting = queue.waiting.iter().map(|r| r.work);
                    rows.push(vec![
                        name.clone(),
                        index.to_string(),
                        queue.waiting.len().to_string(),
                        queue.executing.to_string(),
                        queue.seats_in_use.to_string(),
                        seat_seconds(fixed(queue.next_dispatch)),
                        waiting.clone().map(|w| w.seats).sum::<usize>().to_string(),
                        waiting
                            .clone()
                            .map(|w| w.max_seats())
                            .sum::<usize>()
                            .to_string(),
                        seat_seconds(waiting.map(|w| work_fixed(&w)).sum()),
                    ]);
                }
            }
        }
        Table::Requests => {
            let mut header = texts(&[
                "PriorityLevelName",
                "FlowSchemaName",
                "QueueIndex",
                "RequestIndexInQueue",
                "FlowDistingsher",
                "ArriveTime",
                "InitialSeats",
                "FinalSeats",
                "AdditionalLatency",
                "StartTime",
            ]);
            if details {
                header.extend(texts(&[
                    "UserName",
                    "Verb",
                    "APIPath",
                    "Namespace",
                    "Name",
                    "APIVersion",
                    "Resource",
                    "SubResource",
                ]));
            }
            rows.push(header);
            for (name, level) in levels {
                for (index, queue) in level.queues.iter().enumerate() {
                    let index = i64::try_from(index).unwrap_or(i64::MAX);
                    for (place, request) in queue.waiting.iter().enumerate() {
                        let place = i64::try_from(place).unwrap_or(i64::MAX);
                        rows.push(request_row(name, index, place, request, details));
                    }
                    for request in &queue.executing_requests {
                        rows.push(request_row(name, index, -1, request, details));
                    }
                }
                for request in &level.queueless {
                    rows.push(request_row(name, -1, -1, request, details));
                }
            }
        }
    }
    tabwriter(&rows)
}

/// A row of `dump_requests`.
fn request_row(
    level: &str,
    queue: i64,
    place: i64,
    request: &RequestDump,
    details: bool,
) -> Vec<String> {
    let described = &request.described;
    let path = described.uri.path();
    let info = RequestInfo::of(described.method.as_str(), path, described.uri.query());
    let mut row = vec![
        level.to_owned(),
        described.flow_schema.to_string(),
        queue.to_string(),
        place.to_string(),
        described
            .flow_by
            .of(&described.user, info.namespace)
            .to_owned(),
        go_time(Some(described.arrival)),
        request.work.seats.to_string(),
        request.work.final_seats.to_string(),
        go_duration(request.work.additional_latency),
        go_time(request.started),
    ];
    if details {
        let api_version = if info.group.is_empty() {
            info.version.to_owned()
        } else {
            format!("{}/{}", info.group, info.version)
        };
        row.extend([
            described.user.clone(),
            info.verb.into_owned(),
            path.to_owned(),
            info.namespace.to_owned(),
            info.name.to_owned(),
            api_version,
            info.resource.to_owned(),
            info.subresource.to_owned(),
        ]);
    }
    row
}

/// kube's `SeatSeconds` scale: units per seat-second.
const SEAT_SECONDS_SCALE: f64 = 1e8;

/// Seat-seconds in kube's fixed point.
fn fixed(seat_seconds: f64) -> u64 {
    // Saturating: the virtual clock is never negative, nor past u64's range in practice.
    (seat_seconds * SEAT_SECONDS_SCALE).round() as u64
}

/// kube's `SeatsTimesDuration` (fixed point) of `seats` for `duration`.
fn seats_times(seats: usize, duration: Duration) -> u64 {
    fixed(seats as f64 * duration.as_secs_f64())
}

/// A request's total work in kube's fixed point (initial plus final work, each rounded).
fn work_fixed(work: &Work) -> u64 {
    seats_times(work.seats, ESTIMATED_SERVICE)
        + seats_times(work.final_seats, work.additional_latency)
}

/// kube's `SeatSeconds.String`: `N.NNNNNNNNss`.
fn seat_seconds(units: u64) -> String {
    let scale = SEAT_SECONDS_SCALE as u64;
    format!("{}.{:08}ss", units / scale, units % scale)
}

/// Go's `time.Time.UTC().Format(time.RFC3339Nano)`; `None` is Go's zero time.
fn go_time(time: Option<SystemTime>) -> String {
    let Some(since) = time.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()) else {
        return "0001-01-01T00:00:00Z".to_owned();
    };
    let seconds = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    watchkeeper_api::time::rfc3339_nano_from_unix(seconds, since.subsec_nanos())
}

/// Go's `time.Duration.String`.
fn go_duration(duration: Duration) -> String {
    watchkeeper_api::time::go_duration(i128::try_from(duration.as_nanos()).unwrap_or(i128::MAX))
}

/// kube's `text/tabwriter` settings: minimum cell width, padding.
const MIN_WIDTH: usize = 8;
const PADDING: usize = 1;

/// `rows` as kube prints them: each cell but a line's last followed by `,` and padded with
/// spaces to its column's width (the widest such cell of the column plus 1, at least 8:
/// Go's `tabwriter.NewWriter(w, 8, 0, 1, ' ', 0)`, every line having as many cells).
fn tabwriter(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![MIN_WIDTH; columns.saturating_sub(1)];
    for row in rows {
        for (column, cell) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
            widths[column] = widths[column].max(cell.chars().count() + 1 + PADDING);
        }
    }
    let mut text = String::new();
    for row in rows {
        let last = row.len().saturating_sub(1);
        for (column, cell) in row.iter().enumerate() {
            if column == last {
                text.push_str(cell);
            } else {
                let _ = write!(
                    text,
                    "{:<width$}",
                    format!("{cell},"),
                    width = widths[column]
                );
            }
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_aligned_as_gos_tabwriter_aligns_them() {
        // Go: tabwriter.NewWriter(w, 8, 0, 1, ' ', 0) over "PriorityLevelName,\tIndex\n" and
        // "a,\t0\n" prints the first column 19 wide (18 + padding 1), "a," padded to it.
        let rows = vec![
            vec!["PriorityLevelName".to_owned(), "Index".to_owned()],
            vec!["a".to_owned(), "0".to_owned()],
        ];
        assert_eq!(
            tabwriter(&rows),
            "PriorityLevelName, Index\na,                 0\n"
        );
        // Narrow cells take the minimum width, 8.
        let rows = vec![vec!["ab".to_owned(), "c".to_owned(), "d".to_owned()]];
        assert_eq!(tabwriter(&rows), "ab,     c,      d\n");
    }

    #[test]
    fn seat_seconds_print_as_kubes() {
        assert_eq!(seat_seconds(0), "0.00000000ss");
        assert_eq!(seat_seconds(fixed(1.5)), "1.50000000ss");
        // One seat for kube's estimated 3 ms of service.
        assert_eq!(seat_seconds(work_fixed(&Work::ONE)), "0.00300000ss");
    }

    #[test]
    fn times_and_durations_print_as_gos() {
        assert_eq!(go_time(None), "0001-01-01T00:00:00Z");
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_micros(1500)), "1.5ms");
    }

    #[test]
    fn details_are_asked_by_a_non_empty_value() {
        assert!(includes_details(Some("includeRequestDetails=1")));
        assert!(!includes_details(Some("includeRequestDetails=")));
        assert!(!includes_details(None));
    }
}
