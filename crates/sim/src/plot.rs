//! Plots of a report, as PNG and SVG, with an embedded font (no system fonts needed): latency
//! CDFs per group, unsynced watchers over time, terminations over time, and resync time against
//! read rate next to the fluid bound. Variants share each plot.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::SimError;
use crate::report::Report;

static FONT: Once = Once::new();

fn ensure_font() {
    FONT.call_once(|| {
        // The embedded DejaVu Sans is a valid font; failure would be a build defect.
        let _ = register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

struct Series {
    label: String,
    points: Vec<(f64, f64)>,
    /// Points instead of a line.
    scatter: bool,
}

struct Chart {
    title: String,
    x_label: String,
    y_label: String,
    /// x values are log10 of the real value.
    log_x: bool,
    series: Vec<Series>,
}

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn bounds(chart: &Chart) -> ((f64, f64), (f64, f64)) {
    let mut x = (f64::INFINITY, f64::NEG_INFINITY);
    let mut y = (f64::INFINITY, f64::NEG_INFINITY);
    for s in &chart.series {
        for &(a, b) in &s.points {
            if a.is_finite() && b.is_finite() {
                x = (x.0.min(a), x.1.max(a));
                y = (y.0.min(b), y.1.max(b));
            }
        }
    }
    if !x.0.is_finite() {
        x = (0.0, 1.0);
        y = (0.0, 1.0);
    }
    if x.1 <= x.0 {
        x.1 = x.0 + 1.0;
    }
    if y.1 <= y.0 {
        y.1 = y.0 + 1.0;
    }
    let pad = (y.1 - y.0) * 0.05;
    ((x.0, x.1), (y.0.min(0.0), y.1 + pad))
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("{e:?}");
    root.fill(&WHITE).map_err(e)?;
    let ((x0, x1), (y0, y1)) = bounds(chart);
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    let log_x = chart.log_x;
    let x_fmt = move |v: &f64| {
        if log_x {
            let real = 10f64.powf(*v);
            if real >= 1.0 {
                format!("{real:.0}")
            } else {
                format!("{real:.3}")
            }
        } else {
            format!("{v:.2}")
        }
    };
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .collect();
        if s.scatter {
            ctx.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(e)?
                .label(s.label.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        } else {
            ctx.draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(e)?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

fn write_chart(dir: &Path, name: &str, chart: &Chart) -> Result<(), SimError> {
    ensure_font();
    let png = dir.join(format!("{name}.png"));
    let svg = dir.join(format!("{name}.svg"));
    draw(
        BitMapBackend::new(&png, (1000, 640)).into_drawing_area(),
        chart,
    )
    .map_err(|e| SimError::Io(format!("{}: {e}", png.display())))?;
    draw(
        SVGBackend::new(&svg, (1000, 640)).into_drawing_area(),
        chart,
    )
    .map_err(|e| SimError::Io(format!("{}: {e}", svg.display())))?;
    Ok(())
}

/// Writes every plot of `report` into `dir`.
pub(crate) fn write_all(report: &Report, dir: &Path) -> Result<(), SimError> {
    let many = report.variants.len() > 1;
    let label = |variant: &str, rest: &str| {
        if many {
            format!("{variant}: {rest}")
        } else {
            rest.to_owned()
        }
    };
    let mut cdf = Vec::new();
    for v in &report.variants {
        for g in &v.groups {
            if g.latency_cdf_ms.is_empty() {
                continue;
            }
            cdf.push(Series {
                label: label(&v.name, &g.name),
                points: g
                    .latency_cdf_ms
                    .iter()
                    .map(|&(ms, p)| (ms.max(1e-4).log10(), p))
                    .collect(),
                scatter: false,
            });
        }
    }
    write_chart(
        dir,
        "latency_cdf",
        &Chart {
            title: format!("{}: delivery latency CDF", report.scenario),
            x_label: "latency (ms, log scale)".into(),
            y_label: "fraction of events".into(),
            log_x: true,
            series: cdf,
        },
    )?;
    let over_time = |f: &dyn Fn(&crate::report::Sample) -> f64| -> Vec<Series> {
        report
            .variants
            .iter()
            .map(|v| Series {
                label: v.name.clone(),
                points: v.series.iter().map(|s| (s.time_s, f(s))).collect(),
                scatter: false,
            })
            .collect()
    };
    write_chart(
        dir,
        "unsynced",
        &Chart {
            title: format!("{}: unsynced watchers", report.scenario),
            x_label: "time (s)".into(),
            y_label: "unsynced watchers".into(),
            log_x: false,
            series: over_time(&|s| s.unsynced as f64),
        },
    )?;
    write_chart(
        dir,
        "terminations",
        &Chart {
            title: format!("{}: terminations (cumulative)", report.scenario),
            x_label: "time (s)".into(),
            y_label: "terminated watches".into(),
            log_x: false,
            series: over_time(&|s| s.terminations as f64),
        },
    )?;
    write_chart(
        dir,
        "queued",
        &Chart {
            title: format!("{}: items queued across all queues", report.scenario),
            x_label: "time (s)".into(),
            y_label: "items".into(),
            log_x: false,
            series: over_time(&|s| s.queued_items as f64),
        },
    )?;
    let mut resync = Vec::new();
    for v in &report.variants {
        let measured: Vec<(f64, f64)> = v
            .resync_episodes
            .iter()
            .filter_map(|e| e.after_resume_s.map(|t| (e.read_rate, t)))
            .collect();
        let bound: Vec<(f64, f64)> = v
            .resync_episodes
            .iter()
            .filter_map(|e| {
                e.after_resume_s?;
                e.fluid_bound_s.map(|b| (e.read_rate, b))
            })
            .collect();
        if !measured.is_empty() {
            resync.push(Series {
                label: label(&v.name, "measured"),
                points: measured,
                scatter: true,
            });
            resync.push(Series {
                label: label(&v.name, "fluid bound"),
                points: bound,
                scatter: true,
            });
        }
    }
    write_chart(
        dir,
        "resync",
        &Chart {
            title: format!("{}: resync time after a stall", report.scenario),
            x_label: "read rate (events/s; 0 = unlimited)".into(),
            y_label: "stall end to synced (s)".into(),
            log_x: false,
            series: resync,
        },
    )?;
    Ok(())
}
