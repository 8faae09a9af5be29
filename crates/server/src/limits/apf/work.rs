//! Work estimation: how many seats a request takes, as kube-apiserver v1.33's work
//! estimator decides (`util/flowcontrol/request/width.go`, `list_work_estimator.go`,
//! `mutating_work_estimator.go`, `config.go`).
//!
//! ## Guarantees
//! - Every request takes at least 1 seat and at most its level's maximum: kube's
//!   `MaxSeatsTracker` value (`max(1, min(ceil(15 % of nominal), nominal / handSize))` for a
//!   queuing level) capped at 10, or 10 where the level sets none.
//! - A LIST (a collection GET, not a watch) takes one seat per 100 objects it processes
//!   (rounded up), counted as kube counts them from the resource's object count (all
//!   namespaces; the cache's count here, where kube reads its object count tracker): the
//!   count itself when kube would serve it from its watch cache, the count plus the
//!   `limit` with a label or field selector and twice the `limit` (or count) otherwise when
//!   kube would read etcd (`resourceVersionMatch=Exact`, a `continue`, a `limit` with a
//!   `resourceVersion` other than 0). One naming its object (`fieldSelector=metadata.name=`)
//!   takes 1; one whose options do not parse takes the maximum; a resource the cache does
//!   not hold takes 1 (kube's not-found count, as for aggregated APIs).
//! - A WATCH takes 1 seat while it starts (kube's `WatchList` gate is off in 1.33, so no
//!   initial-events estimate).
//! - A create, update, patch or delete with 10 or more interested watches takes 1 seat
//!   while it runs and then `ceil(watchers / 10)` (at most the maximum) for the time the
//!   fan-out costs, `ceil(watchers / 10) × 50 µs` spread over those seats (kube's
//!   `additionalLatency`), when that spread is at least 1 ms (the timer's resolution; below
//!   it the request takes 1 seat). **Calibrated to this server, not kube's**: kube charges
//!   `eventAdditionalDuration` 5 ms per 10 watchers (500 µs of a seat per watcher and event,
//!   its goroutine per watcher); delivering one event to one watcher costs 2-9 µs of CPU
//!   here (BENCHMARKS.md, the fan-out grid), so 50 µs per 10. With kube's figure a write to
//!   a resource with 10,000 watchers would hold 10 seats for 500 ms, and 100 such writes a
//!   second would need 500 seats of `global-default`'s 49: writes this server delivers
//!   without strain would be queued and refused. Here it is 10 seats for 5 ms; with 100
//!   watchers nothing is held. The watches counted are those interested in the object, as
//!   kube's `GetInterestedWatchCount` counts them: of the whole resource, of the object's
//!   namespace and of its name ([`super::watches`]). A service account's `token` is exempt,
//!   as in kube. The watchers are
//!   bounded by `--max-watches`, so the hold after a write is too: with the default 10000,
//!   10 seats for 5 ms.
//! - Anything else takes 1 seat.

use std::time::Duration;

use super::queues::Work;
use super::rules::RequestInfo;

/// kube's `minimumSeats`.
const MINIMUM_SEATS: usize = 1;
/// kube's `maximumSeatsLimit`.
pub const MAXIMUM_SEATS_LIMIT: usize = 10;
/// kube's `objectsPerSeat`.
const OBJECTS_PER_SEAT: f64 = 100.0;
/// kube's `watchesPerSeat`.
const WATCHES_PER_SEAT: f64 = 10.0;
/// The fan-out's cost per `WATCHES_PER_SEAT` watchers of a write's event: kube's
/// `eventAdditionalDuration` is 5 ms, for its cost; this server's is about a hundredth of it
/// (see the module docs).
const EVENT_ADDITIONAL_DURATION: Duration = Duration::from_micros(50);
/// The shortest hold of a write's final seats (the timer's resolution); shorter fan-outs hold
/// none.
const HOLD_MIN: Duration = Duration::from_millis(1);

/// What the server holds of a resource, for the estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceCounts {
    /// Objects stored.
    pub objects: usize,
    /// Open watches interested in the request's object (a write's; 0 for any other).
    pub watchers: usize,
}

/// The work of the request `info` with `query`, at a level whose maximum seats are
/// `level_max` (0 when unset); `counts` tells what the server holds of a resource by API
/// group and plural (`None` when it serves no such resource).
#[must_use]
pub fn estimate(
    info: &RequestInfo<'_>,
    query: Option<&str>,
    level_max: usize,
    counts: impl FnOnce(&str, &str) -> Option<ResourceCounts>,
) -> Work {
    let max = if level_max == 0 || level_max > MAXIMUM_SEATS_LIMIT {
        MAXIMUM_SEATS_LIMIT
    } else {
        level_max
    };
    if !info.resource_request {
        return Work::ONE;
    }
    match &*info.verb {
        "list" => list(info, query, max, counts),
        "create" | "update" | "patch" | "delete" => mutating(info, max, counts),
        _ => Work::ONE,
    }
}

fn seats(seats: usize) -> Work {
    Work { seats, ..Work::ONE }
}

/// The list options the estimate reads.
#[derive(Debug, Default)]
struct ListOptions {
    limit: i64,
    resource_version: Option<String>,
    resource_version_match: Option<String>,
    continued: bool,
    selector: bool,
    names_one: bool,
}

impl ListOptions {
    fn parse(query: Option<&str>) -> Option<ListOptions> {
        let mut options = ListOptions::default();
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query.unwrap_or_default()).ok()?;
        for (key, value) in pairs {
            match key.as_str() {
                "limit" => options.limit = value.parse().ok()?,
                "resourceVersion" => options.resource_version = Some(value),
                "resourceVersionMatch" => options.resource_version_match = Some(value),
                "continue" => options.continued = !value.is_empty(),
                "labelSelector" => options.selector |= !value.is_empty(),
                "fieldSelector" => {
                    options.selector |= !value.is_empty();
                    // kube's RequestInfo takes the name of `metadata.name=X` (or `==`).
                    options.names_one |= super::rules::selected_name(&value).is_some();
                }
                _ => {}
            }
        }
        Some(options)
    }

    /// Whether kube 1.33 reads this LIST from etcd rather than its watch cache
    /// (`delegator.ShouldDelegateListMeta` with consistent reads from the cache).
    fn reads_storage(&self) -> bool {
        let rv = self.resource_version.as_deref().unwrap_or_default();
        match self.resource_version_match.as_deref().unwrap_or_default() {
            "Exact" => true,
            "NotOlderThan" => false,
            "" if self.continued => true,
            "" => self.limit > 0 && !rv.is_empty() && rv != "0",
            _ => true,
        }
    }
}

fn list(
    info: &RequestInfo<'_>,
    query: Option<&str>,
    max: usize,
    counts: impl FnOnce(&str, &str) -> Option<ResourceCounts>,
) -> Work {
    let Some(options) = ListOptions::parse(query) else {
        return seats(max);
    };
    if options.names_one {
        return seats(MINIMUM_SEATS);
    }
    let Some(counts) = counts(info.group, info.resource) else {
        return seats(MINIMUM_SEATS);
    };
    let stored = counts.objects as f64;
    let limit = if options.limit > 0 && (options.limit as f64) < stored {
        options.limit as f64
    } else {
        stored
    };
    let objects = if !options.reads_storage() {
        stored
    } else if options.selector {
        stored + limit
    } else {
        2.0 * limit
    };
    let wanted = (objects / OBJECTS_PER_SEAT).ceil() as usize;
    seats(wanted.clamp(MINIMUM_SEATS, max))
}

fn mutating(
    info: &RequestInfo<'_>,
    max: usize,
    counts: impl FnOnce(&str, &str) -> Option<ResourceCounts>,
) -> Work {
    if info.resource == "serviceaccounts" && info.subresource == "token" {
        return Work::ONE;
    }
    let watchers = counts(info.group, info.resource).map_or(0, |c| c.watchers);
    if (watchers as f64) < WATCHES_PER_SEAT {
        return Work::ONE;
    }
    let final_seats = (watchers as f64 / WATCHES_PER_SEAT).ceil() as usize;
    let final_work =
        EVENT_ADDITIONAL_DURATION.saturating_mul(u32::try_from(final_seats).unwrap_or(u32::MAX));
    let capped = final_seats.min(max);
    let additional_latency = final_work / u32::try_from(capped).unwrap_or(u32::MAX).max(1);
    if additional_latency < HOLD_MIN {
        return Work::ONE;
    }
    Work {
        seats: 1,
        final_seats: capped,
        additional_latency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list_of(query: &str, objects: usize, max: usize) -> usize {
        let info = RequestInfo::of("GET", "/api/v1/namespaces/default/pods", Some(query));
        estimate(&info, Some(query), max, |group, resource| {
            assert_eq!((group, resource), ("", "pods"));
            Some(ResourceCounts {
                objects,
                watchers: 0,
            })
        })
        .seats
    }

    #[test]
    fn a_list_takes_a_seat_per_hundred_objects_up_to_the_maximum() {
        assert_eq!(list_of("", 0, 0), 1);
        assert_eq!(list_of("", 100, 0), 1);
        assert_eq!(list_of("", 101, 0), 2);
        assert_eq!(list_of("", 950, 0), 10);
        assert_eq!(list_of("", 5000, 0), 10);
        // The level's maximum when lower, 10 when higher.
        assert_eq!(list_of("", 5000, 3), 3);
        assert_eq!(list_of("", 5000, 40), 10);
        // Served from kube's cache: a limit does not lower the count processed.
        assert_eq!(list_of("limit=10", 950, 0), 10);
        assert_eq!(list_of("limit=10&resourceVersion=0", 950, 0), 10);
        // From etcd: twice the limit, or the count plus the limit with a selector.
        assert_eq!(list_of("limit=10&resourceVersion=5", 950, 0), 1);
        assert_eq!(list_of("limit=100&continue=abc", 950, 0), 2);
        assert_eq!(
            list_of("limit=100&continue=abc&labelSelector=a%3Db", 950, 0),
            10
        );
        assert_eq!(
            list_of("resourceVersion=5&resourceVersionMatch=Exact", 250, 0),
            5
        );
        // One object named; options that do not parse.
        assert_eq!(list_of("fieldSelector=metadata.name%3Dx", 950, 0), 1);
        assert_eq!(list_of("fieldSelector=metadata.name%21%3Dx", 950, 0), 10);
        assert_eq!(list_of("limit=many", 0, 0), 10);
    }

    #[test]
    fn unknown_resources_gets_and_watches_take_one_seat() {
        let info = RequestInfo::of("GET", "/apis/example.com/v1/things", None);
        assert_eq!(estimate(&info, None, 0, |_, _| None), Work::ONE);
        let many = |_: &str, _: &str| {
            Some(ResourceCounts {
                objects: 5000,
                watchers: 5000,
            })
        };
        let info = RequestInfo::of("GET", "/api/v1/namespaces/default/pods/x", None);
        assert_eq!(estimate(&info, None, 0, many), Work::ONE);
        let info = RequestInfo::of("GET", "/api/v1/pods", Some("watch=true"));
        assert_eq!(estimate(&info, Some("watch=true"), 0, many), Work::ONE);
        let info = RequestInfo::of("GET", "/version", None);
        assert_eq!(estimate(&info, None, 0, many), Work::ONE);
    }

    #[test]
    fn writes_with_many_watchers_hold_seats_for_the_fan_out() {
        let write = |watchers: usize, max: usize| {
            let info = RequestInfo::of("POST", "/api/v1/namespaces/default/pods", None);
            estimate(&info, None, max, |_, _| {
                Some(ResourceCounts {
                    objects: 0,
                    watchers,
                })
            })
        };
        // Fewer than 10 watchers, or a fan-out shorter than 1 ms on its seats: one seat.
        assert_eq!(write(9, 0), Work::ONE);
        assert_eq!(write(10, 0), Work::ONE);
        assert_eq!(write(1_000, 0), Work::ONE);
        // 2,000 watchers: 200 seats' work of 50 µs (10 ms) on the 10 allowed, 1 ms each.
        assert_eq!(
            write(2_000, 0),
            Work {
                seats: 1,
                final_seats: 10,
                additional_latency: Duration::from_millis(1),
            }
        );
        // 10,000 (the default --max-watches): 10 seats for 5 ms; 4 when the level allows 4.
        assert_eq!(
            write(10_000, 0),
            Work {
                seats: 1,
                final_seats: 10,
                additional_latency: Duration::from_millis(5),
            }
        );
        assert_eq!(
            write(10_000, 4),
            Work {
                seats: 1,
                final_seats: 4,
                additional_latency: Duration::from_micros(12_500),
            }
        );
        let info = RequestInfo::of(
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/x/token",
            None,
        );
        let token = estimate(&info, None, 0, |_, _| {
            Some(ResourceCounts {
                objects: 0,
                watchers: 100,
            })
        });
        assert_eq!(token, Work::ONE);
    }
}
