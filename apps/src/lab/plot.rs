//! PNG line plots (plotters, bitmap backend) and CSV files for the lab.

use std::io::Write;
use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

/// Where the plots' font comes from (Debian's `fonts-dejavu-core`).
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut err = None;
    ONCE.call_once(|| match std::fs::read(FONT) {
        Ok(b) => {
            // Leaked once per process: plotters keeps the font for the program's life.
            let b: &'static [u8] = Box::leak(b.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, b).is_err() {
                err = Some(anyhow!("{FONT}: not a font plotters can read"));
            }
        }
        Err(e) => err = Some(anyhow!("{FONT}: {e} (install fonts-dejavu-core)")),
    });
    err.map_or(Ok(()), Err)
}

/// One line of a plot: a name and its points.
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line plot with log or linear axes.
pub struct LinePlot<'a> {
    /// Title above the plot.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// Logarithmic x axis (non-positive x values are drawn at the axis' low end).
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
    /// Horizontal reference lines: `(y, label)`.
    pub hlines: Vec<(f64, String)>,
    /// Vertical reference lines: `(x, label)`.
    pub vlines: Vec<(f64, String)>,
}

fn range(v: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for x in v.filter(|x| x.is_finite() && (!log || *x > 0.0)) {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).min(0.0_f64.max(lo - pad)), hi + pad)
    }
}

impl LinePlot<'_> {
    /// Draws the plot into a PNG of 900x540 pixels at `path`.
    pub fn draw(&self, path: &Path) -> Result<()> {
        register_font()?;
        let xs = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
        };
        let ys = || {
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
        };
        let (x0, x1) = range(xs().chain(self.vlines.iter().map(|v| v.0)), self.log_x);
        let (y0, y1) = range(ys().chain(self.hlines.iter().map(|h| h.0)), self.log_y);
        let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
        let clamp_x = |x: f64| if self.log_x { x.max(x0) } else { x };
        let clamp_y = |y: f64| if self.log_y { y.max(y0) } else { y };
        macro_rules! body {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(self.x_label)
                    .y_desc(self.y_label)
                    .draw()
                    .map_err(|e| anyhow!("{e:?}"))?;
                for (i, s) in self.series.iter().enumerate() {
                    let c = Palette99::pick(i).to_rgba();
                    let pts: Vec<(f64, f64)> = s
                        .points
                        .iter()
                        .map(|p| (clamp_x(p.0), clamp_y(p.1)))
                        .collect();
                    chart
                        .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                        .map_err(|e| anyhow!("{e:?}"))?
                        .label(s.name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                        });
                    chart
                        .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                        .map_err(|e| anyhow!("{e:?}"))?;
                }
                for (y, label) in &self.hlines {
                    let y = clamp_y(*y);
                    chart
                        .draw_series(LineSeries::new(vec![(x0, y), (x1, y)], BLACK.mix(0.5)))
                        .map_err(|e| anyhow!("{e:?}"))?
                        .label(label.clone())
                        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
                }
                for (x, label) in &self.vlines {
                    let x = clamp_x(*x);
                    chart
                        .draw_series(LineSeries::new(vec![(x, y0), (x, y1)], RED.mix(0.6)))
                        .map_err(|e| anyhow!("{e:?}"))?
                        .label(label.clone())
                        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()
                    .map_err(|e| anyhow!("{e:?}"))?;
            }};
        }
        let mut b = ChartBuilder::on(&root);
        b.caption(self.title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(75);
        match (self.log_x, self.log_y) {
            (true, true) => body!(b
                .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
                .map_err(|e| anyhow!("{e:?}"))?),
            (true, false) => body!(b
                .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                .map_err(|e| anyhow!("{e:?}"))?),
            (false, true) => body!(b
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(|e| anyhow!("{e:?}"))?),
            (false, false) => body!(b
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| anyhow!("{e:?}"))?),
        }
        root.present()
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }
}

/// Writes `rows` under `header` as CSV at `path` (values are numbers or plain words).
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> Result<()> {
    let mut f =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    writeln!(f, "{}", header.join(","))?;
    for r in rows {
        writeln!(f, "{}", r.join(","))?;
    }
    Ok(())
}
