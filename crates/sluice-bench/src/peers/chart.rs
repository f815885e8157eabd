//! The SVG chart of the peers scenario: one panel per message size and client count, one bar
//! per system with its max-rate throughput, coloured by what an acknowledged write survives.
//! Drawn with plotters' SVG backend alone, so text is left to the SVG viewer's fonts.

use std::path::Path;

use plotters::prelude::*;

use super::system::{Durability, System};
use super::{Facts, Mode, Row};

/// Width of one panel and height of one bar, in pixels.
const PANEL_WIDTH_PX: u32 = 560;
const BAR_HEIGHT_PX: u32 = 26;
/// Room for the panel's caption and axis.
const PANEL_EXTRA_PX: u32 = 90;
const TITLE_HEIGHT_PX: u32 = 40;

const PER_WRITE: RGBColor = RGBColor(31, 90, 160);
const DEFERRED: RGBColor = RGBColor(230, 140, 30);
const MEMORY: RGBColor = RGBColor(150, 150, 150);

/// One bar: a system's max-rate messages per second in one shape.
struct Bar {
    system: System,
    rate: f64,
    durability: Durability,
}

/// The bars of each (size, clients) shape, in the order the rows came.
fn panels(rows: &[Row], facts: &[Facts]) -> Vec<((usize, usize), Vec<Bar>)> {
    let class = |s: System| facts.iter().find(|f| f.system == s).map_or(s.durability(), |f| f.durability);
    let mut panels: Vec<((usize, usize), Vec<Bar>)> = Vec::new();
    for row in rows.iter().filter(|r| r.mode == Mode::MaxRate) {
        let shape = (row.body_bytes, row.clients);
        let bar = Bar { system: row.system, rate: row.measured.rate(), durability: class(row.system) };
        match panels.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, bars)) => bars.push(bar),
            None => panels.push((shape, vec![bar])),
        }
    }
    for (_, bars) in &mut panels {
        bars.sort_by_key(|b| b.system);
    }
    panels.sort_by_key(|(shape, _)| *shape);
    panels
}

pub(crate) fn draw(path: &Path, rows: &[Row], facts: &[Facts]) -> anyhow::Result<()> {
    let panels = panels(rows, facts);
    if panels.is_empty() {
        anyhow::bail!("no max-rate results to draw");
    }
    let columns = panels.len().min(2) as u32;
    let panel_rows = panels.len().div_ceil(2) as u32;
    let bars_max = panels.iter().map(|(_, bars)| bars.len()).max().unwrap_or(1) as u32;
    let panel_height = bars_max * BAR_HEIGHT_PX + PANEL_EXTRA_PX;
    let size = (columns * PANEL_WIDTH_PX, TITLE_HEIGHT_PX + panel_rows * panel_height);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let root = root
        .titled(
            "Max-rate messages/s (blue: synced per write; orange: synced on a timer; grey: memory only)",
            ("sans-serif", 18),
        )
        .map_err(plot_error)?;
    let areas = root.split_evenly((panel_rows as usize, columns as usize));
    for (((body_bytes, clients), bars), area) in panels.iter().zip(areas) {
        let top = bars.iter().map(|b| b.rate).fold(0.0, f64::max).max(1.0) * 1.25;
        let names: Vec<&str> = bars.iter().map(|b| b.system.name()).collect();
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("{body_bytes} B, {clients} producers / {clients} consumers"), ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(125)
            .build_cartesian_2d(0.0..top, (0..bars.len()).into_segmented())
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_labels(5)
            .x_label_formatter(&|v| crate::report::thousands(*v))
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).copied().unwrap_or_default().to_owned(),
                _ => String::new(),
            })
            .draw()
            .map_err(plot_error)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, bar)| {
                let color = match bar.durability {
                    Durability::PerWrite => PER_WRITE,
                    Durability::Deferred => DEFERRED,
                    Durability::Memory => MEMORY,
                };
                let mut rect = Rectangle::new(
                    [(0.0, SegmentValue::Exact(i)), (bar.rate, SegmentValue::Exact(i + 1))],
                    color.filled(),
                );
                rect.set_margin(4, 4, 0, 0);
                rect
            }))
            .map_err(plot_error)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, bar)| {
                Text::new(
                    format!(" {}", crate::report::thousands(bar.rate)),
                    (bar.rate, SegmentValue::CenterOf(i)),
                    TextStyle::from(("sans-serif", 12).into_font()).pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Left,
                        plotters::style::text_anchor::VPos::Center,
                    )),
                )
            }))
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// plotters' errors carry the backend's error type; the report only needs the words.
fn plot_error<E: std::error::Error + Send + Sync>(error: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {error}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::peers::load::Measured;
    use crate::stats::Tally;

    #[test]
    fn the_chart_has_a_bar_and_a_label_per_system() {
        let row = |system, clients, count| {
            let mut received = Tally::new();
            received.count = count;
            let measured =
                Measured { window: Duration::from_secs(1), sent: Tally::new(), received, loaded: None, complete: true };
            Row { system, body_bytes: 256, clients, batch: 100, mode: Mode::MaxRate, measured }
        };
        let rows = [
            row(System::SluiceFsync, 4, 42_000),
            row(System::Postgres, 4, 9_000),
            row(System::SluiceFsync, 16, 50_000),
        ];
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("chart.svg");
        draw(&path, &rows, &[]).expect("the chart is drawn");
        let svg = std::fs::read_to_string(&path).expect("the chart was written");
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        for text in ["sluice-fsync", "postgres", "42,000", "9,000", "50,000", "256 B, 16 producers / 16 consumers"] {
            assert!(svg.contains(text), "{text} is not in the chart");
        }
    }
}
