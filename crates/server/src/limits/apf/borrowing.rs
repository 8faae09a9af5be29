//! Borrowing between priority levels: every adjustment period (kube's 10 s,
//! `--apf-borrowing-period-ms` here) each level's current limit is recomputed from its seat
//! demand, as kube-apiserver's `apf_controller.go` (`updateBorrowingLocked`,
//! `seatDemandStats.update`) and `conc_alloc.go` (`computeConcurrencyAllocation`) do.
//!
//! ## Guarantees
//! - Pure: [`SeatDemandStats::update`] takes a period's demand sample, [`current_limits`]
//!   the levels' limits and statistics, and they return the new statistics and limits; the
//!   server calls them on a timer ([`super::Apf::adjust`]), the unit tests with numbers
//!   worked from kube's algorithm.
//! - A limited level's current limit stays within its lower limit (nominal less
//!   `lendablePercent`) and its upper limit (nominal plus `borrowingLimitPercent`, the
//!   server's limit when unset); an exempt level's is its lower limit or its demand's high
//!   watermark, whichever is larger, and only counts. The limited levels share the sum of
//!   the nominal limits less the exempt ones', each in proportion to its smoothed demand
//!   (at least its guaranteed seats) as far as its bounds allow (kube's fair proportion).
//! - The same floating-point steps as kube's, rounded as Go's `math.Round` (half away from
//!   zero), so the limits are kube's for the same demand.
//!
//! ## Bounds
//! Memory and time linear (the allocation quadratic) in the number of levels.

/// kube's `seatDemandSmoothingCoefficient`.
const SMOOTHING: f64 = 0.977;
/// kube's `MinTarget`: a target below it counts as it (no division by zero).
const MIN_TARGET: f64 = 0.001;
/// kube's `epsilon` of the allocation.
const EPSILON: f64 = 0.000_000_1;

/// A level's seat demand statistics (kube's `seatDemandStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SeatDemandStats {
    /// The last period's time-weighted average.
    pub average: f64,
    /// The last period's standard deviation.
    pub deviation: f64,
    /// The last period's largest demand, rounded.
    pub high_watermark: usize,
    /// The smoothed envelope of average plus deviation.
    pub smoothed: f64,
}

impl SeatDemandStats {
    /// Takes in one period's demand (kube's `seatDemandStats.update`).
    pub fn update(&mut self, sample: super::queues::DemandSample) {
        self.high_watermark = round(sample.max);
        if sample.duration <= 0.0 {
            return;
        }
        let deviation = if sample.deviation.is_nan() {
            0.0
        } else {
            sample.deviation
        };
        self.average = sample.average;
        self.deviation = deviation;
        let envelope = sample.average + deviation;
        self.smoothed = envelope.max(SMOOTHING * self.smoothed + (1.0 - SMOOTHING) * envelope);
    }
}

/// Go's `int(math.Round(x))` for the non-negative values here.
fn round(x: f64) -> usize {
    if x.is_finite() && x > 0.0 {
        x.round() as usize
    } else {
        0
    }
}

/// One level's input to [`current_limits`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LevelDemand {
    /// `type: Exempt`.
    pub exempt: bool,
    /// Its nominal limit.
    pub nominal: usize,
    /// Its lower limit (kube's `minCL`).
    pub lower: usize,
    /// Its upper limit (kube's `maxCL`).
    pub upper: usize,
    /// Its current limit until now (kept when the allocation fails).
    pub current: usize,
    /// Its demand statistics, updated for the period.
    pub stats: SeatDemandStats,
}

/// The outcome of [`current_limits`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    /// The new current limit of each level, in the input's order.
    pub current: Vec<usize>,
    /// Each level's target (0 for an exempt level).
    pub targets: Vec<f64>,
    /// kube's fair fraction (`apiserver_flowcontrol_seat_fair_frac`).
    pub fair_frac: f64,
}

/// The current limits of `levels` sharing `nominal_sum` seats (the sum of the nominal
/// limits), as kube's `updateBorrowingLocked`.
#[must_use]
pub fn current_limits(nominal_sum: usize, levels: &[LevelDemand]) -> Limits {
    let mut items = Vec::new();
    let mut targets = vec![0.0; levels.len()];
    let (mut min_sum, mut min_current_sum) = (0usize, 0usize);
    let mut remaining = i64::try_from(nominal_sum).unwrap_or(i64::MAX);
    let min_current = |level: &LevelDemand| {
        if level.exempt {
            level.lower.max(level.stats.high_watermark)
        } else {
            level
                .lower
                .max(level.nominal.min(level.stats.high_watermark))
        }
    };
    for (index, level) in levels.iter().enumerate() {
        let least = min_current(level);
        if level.exempt {
            remaining -= i64::try_from(least).unwrap_or(i64::MAX);
        } else {
            let target = (least as f64).max(level.stats.smoothed);
            targets[index] = target;
            items.push(Item {
                lower: least as f64,
                upper: level.upper as f64,
                target,
            });
            min_sum += level.lower;
            min_current_sum += least;
        }
    }
    let min_sum_signed = i64::try_from(min_sum).unwrap_or(i64::MAX);
    let min_current_signed = i64::try_from(min_current_sum).unwrap_or(i64::MAX);
    let mut fair_frac = 0.0;
    let mut share_frac = 0.0;
    let mut allocs = None;
    if remaining > min_current_signed {
        match allocate(nominal_sum as f64, &items) {
            Ok((found, frac)) => {
                allocs = Some(found);
                fair_frac = frac;
            }
            // kube keeps the current limits when the problem has no solution.
            Err(_) => {
                allocs = Some(
                    levels
                        .iter()
                        .filter(|l| !l.exempt)
                        .map(|l| l.current as f64)
                        .collect(),
                );
            }
        }
    } else if remaining > min_sum_signed {
        share_frac = (remaining - min_sum_signed) as f64 / (min_current_sum - min_sum) as f64;
    }
    let mut next = 0;
    let current = levels
        .iter()
        .map(|level| {
            if level.exempt {
                return min_current(level);
            }
            let index = next;
            next += 1;
            if remaining <= min_sum_signed {
                level.lower
            } else if remaining <= min_current_signed {
                level.lower + round((min_current(level) - level.lower) as f64 * share_frac)
            } else {
                allocs
                    .as_ref()
                    .and_then(|a| a.get(index))
                    .map_or(level.current, |&alloc| round(alloc))
            }
        })
        .collect();
    Limits {
        current,
        targets,
        fair_frac,
    }
}

/// One class of the allocation problem (kube's `allocProblemItem`).
#[derive(Clone, Copy, Debug)]
struct Item {
    target: f64,
    lower: f64,
    upper: f64,
}

/// The allocation of `required` among `items` (kube's `computeConcurrencyAllocation`): each
/// gets `fair × target` within its bounds, the allocations summing to `required`; and `fair`.
fn allocate(required: f64, items: &[Item]) -> Result<(Vec<f64>, f64), &'static str> {
    let (mut low_sum, mut high_sum, mut target_sum) = (0.0, 0.0, 0.0);
    let (mut lb_min, mut lb_max) = (f64::from(f32::MAX), 0.0_f64);
    let (mut ub_min, mut ub_max) = (f64::from(f32::MAX), 0.0_f64);
    let mut relative = Vec::with_capacity(items.len());
    for item in items {
        if item.lower < 0.0 || item.target < item.lower || item.upper < item.lower {
            return Err("bounds out of order");
        }
        let target = item.target.max(MIN_TARGET);
        low_sum += item.lower;
        high_sum += item.upper;
        target_sum += target;
        let (lb, ub) = (item.lower / target, item.upper / target);
        lb_min = lb_min.min(lb);
        lb_max = lb_max.max(lb);
        ub_min = ub_min.min(ub);
        ub_max = ub_max.max(ub);
        relative.push((target, lb, ub));
    }
    if lb_max > 1.0 {
        return Err("a lower bound above its target");
    }
    if low_sum - required > EPSILON {
        return Err("the lower bounds sum to more than the required sum");
    }
    if required - high_sum > EPSILON {
        return Err("the upper bounds sum to less than the required sum");
    }
    if required == 0.0 {
        return Ok((vec![0.0; items.len()], 0.0));
    }
    if low_sum - required > -EPSILON {
        return Ok((items.iter().map(|i| i.lower).collect(), lb_min));
    }
    if required - high_sum > -EPSILON {
        return Ok((items.iter().map(|i| i.upper).collect(), ub_max));
    }
    let mut fair = required / target_sum;
    if lb_max <= fair && fair <= ub_min {
        return Ok((relative.iter().map(|(t, _, _)| t * fair).collect(), fair));
    }
    // Some bounds matter: walk the bounds upwards from the lowest, keeping the sum of the
    // targets of the classes not held at a bound, until the sum reaches `required`.
    let mut bounds: Vec<(f64, usize, bool)> = relative
        .iter()
        .enumerate()
        .flat_map(|(index, &(_, lb, ub))| [(lb, index, true), (ub, index, false)])
        .collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut sum = low_sum;
    fair = lb_min;
    let (mut sensitive, mut delta) = (0.0, 0.0);
    let mut next = 0;
    while sum < required {
        let mut bound;
        loop {
            sensitive += delta;
            let Some(&(at, index, lower)) = bounds.get(next) else {
                return Err("ran out of bounds");
            };
            bound = at;
            delta = if lower {
                relative[index].0
            } else {
                -relative[index].0
            };
            next += 1;
            if bound > fair {
                break;
            }
        }
        if sensitive <= 0.0 {
            fair = bound;
            continue;
        }
        let step = (required - sum) / sensitive;
        if fair + step <= bound {
            fair += step;
            break;
        }
        sum += (bound - fair) * sensitive;
        fair = bound;
    }
    let allocs = items
        .iter()
        .zip(&relative)
        .map(|(item, &(target, _, _))| item.lower.max(item.upper.min(fair * target)))
        .collect();
    Ok((allocs, fair))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::apf::queues::DemandSample;

    fn limited(
        nominal: usize,
        lower: usize,
        upper: usize,
        smoothed: f64,
        hw: usize,
    ) -> LevelDemand {
        LevelDemand {
            exempt: false,
            nominal,
            lower,
            upper,
            current: nominal,
            stats: SeatDemandStats {
                smoothed,
                high_watermark: hw,
                ..SeatDemandStats::default()
            },
        }
    }

    #[test]
    fn demand_is_smoothed_as_kube_does() {
        let mut stats = SeatDemandStats::default();
        stats.update(DemandSample {
            duration: 10.0,
            average: 4.0,
            deviation: 1.0,
            max: 6.4,
        });
        // The envelope (5) is above the smoothed history (0.023 × 5).
        assert_eq!(stats.high_watermark, 6);
        assert!((stats.smoothed - 5.0).abs() < 1e-12);
        stats.update(DemandSample {
            duration: 10.0,
            average: 0.0,
            deviation: f64::NAN,
            max: 0.5,
        });
        // 0.977 × 5 + 0.023 × 0; 0.5 rounds away from zero as Go's math.Round.
        assert!((stats.smoothed - 4.885).abs() < 1e-12, "{stats:?}");
        assert_eq!(stats.high_watermark, 1);
        assert_eq!(stats.deviation, 0.0);
        // An empty period changes only the high watermark.
        stats.update(DemandSample {
            duration: 0.0,
            average: f64::NAN,
            deviation: f64::NAN,
            max: 2.0,
        });
        assert_eq!(stats.high_watermark, 2);
        assert!((stats.smoothed - 4.885).abs() < 1e-12);
    }

    #[test]
    fn without_demand_levels_keep_what_they_may_not_lend() {
        // Two levels of nominal 10: `a` lends 5 (lower 5), `b` nothing; both may borrow 10.
        // Idle, the targets are their lower limits (5 and 10): fair = 20 / 15, a 6.67 → 7,
        // b 13.33 → 13.
        let levels = [limited(10, 5, 20, 0.0, 0), limited(10, 10, 20, 0.0, 0)];
        let limits = current_limits(20, &levels);
        assert_eq!(limits.current, [7, 13]);
        assert!((limits.fair_frac - 20.0 / 15.0).abs() < 1e-12);
    }

    #[test]
    fn a_busy_level_borrows_what_idle_ones_lend() {
        // kube's configuration over 600 seats, with global-default (49 nominal, lends 50%:
        // lower 24, borrows up to 49: upper 98) asking 90 seats and workload-low (123
        // nominal, lends 90%: lower 12) idle; catch-all (13, lends 0) idle.
        let levels = [
            limited(49, 24, 98, 90.0, 95),
            limited(123, 12, 246, 0.0, 0),
            limited(13, 13, 26, 0.0, 0),
        ];
        // Sum 185. Lower bounds max(24, min(49, 95)) = 49, 12, 13; targets 90, 12, 13.
        // fair = 185 / 115 passes bounds, so kube walks them: global-default stops at its
        // upper 98 (fair 1.089), catch-all at 26 (fair 2), workload-low takes the rest at
        // fair 61 / 12: 61.
        let limits = current_limits(185, &levels);
        assert_eq!(limits.current, [98, 61, 26]);
        assert!((limits.fair_frac - 61.0 / 12.0).abs() < 1e-9, "{limits:?}");
        assert_eq!(limits.targets, [90.0, 12.0, 13.0]);
        // Idle workload-low lends to global-default and catch-all, each stopped by its
        // upper limit; workload-low keeps the rest (fair 61 / 12 again).
        let levels = [
            limited(49, 24, 98, 60.0, 49),
            limited(123, 12, 246, 0.0, 0),
            limited(13, 13, 26, 40.0, 30),
        ];
        let limits = current_limits(185, &levels);
        assert_eq!(limits.current, [98, 61, 26]);
        assert_eq!(limits.targets, [60.0, 12.0, 40.0]);
        // Demand everywhere: targets 30, 70 (its high watermark is its guaranteed lower
        // bound) and 20; catch-all stops at 26, the others share 159 at fair 1.59: 47.7 →
        // 48 and 111.3 → 111.
        let levels = [
            limited(49, 24, 98, 30.0, 30),
            limited(123, 12, 246, 60.0, 70),
            limited(13, 13, 26, 20.0, 20),
        ];
        let limits = current_limits(185, &levels);
        assert_eq!(limits.current, [48, 111, 26]);
        assert!((limits.fair_frac - 1.59).abs() < 1e-9, "{limits:?}");
    }

    #[test]
    fn an_exempt_level_takes_its_high_watermark_from_the_others() {
        let exempt = LevelDemand {
            exempt: true,
            stats: SeatDemandStats {
                high_watermark: 4,
                ..SeatDemandStats::default()
            },
            ..LevelDemand::default()
        };
        // Sum 10 less exempt's 4 = 6 ≤ the limited levels' lower limits (6): each at its
        // lower limit.
        let levels = [exempt, limited(5, 3, 10, 0.0, 0), limited(5, 3, 10, 0.0, 0)];
        assert_eq!(current_limits(10, &levels).current, [4, 3, 3]);
        // Between the lower limits (4) and the guaranteed seats (2 × 5): a share of the
        // difference in proportion.
        let levels = [exempt, limited(5, 2, 10, 5.0, 5), limited(5, 2, 10, 5.0, 5)];
        // remaining 6: share (6 - 4) / (10 - 4) = 1/3: 2 + round(3 / 3) = 3 each.
        assert_eq!(current_limits(10, &levels).current, [4, 3, 3]);
    }
}
