//! A retry path as an SVG chart: the one picture of a path that `rebound paths --svg`, the
//! admin API's `GET /v1/paths/{rule}.svg` and the console's Paths page all show
//! (`docs/spec/console.md`, "Charts outside the console").
//!
//! Delay against retry number, on a log-scale delay axis: the band is each retry's delay
//! range over jitter (min–max, after the `max` clamp), the line the cumulative worst case.
//! When the path's label redrives, each replay follows on the same axes after a dashed rule
//! that names it, its retries numbered from 1 again and its totals counting the `after`
//! waits. The foot says where the path ends, in the words of the table.
//!
//! The SVG is written by hand (`chart/svg.rs`) rather than drawn with plotters: it is one
//! fixed kind of chart, its ticks are durations that plotters' log axis does not choose by
//! itself (`chart/scale.rs`), the band, the redrive rules and the end labels would be
//! hand-drawn on top anyway, and this way every text goes through one escape and the
//! engine takes no dependency for it.

use super::{RetryPath, RetryRow};
use crate::duration::DurationDisplay;
use scale::{LogAxis, tick_label};
use std::time::Duration;
use svg::{Px, Svg};

mod scale;
mod svg;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 450.0;
/// The plot area: left of it the delay ticks, above it the title and legend, below it the
/// retry numbers, the axis label and the path's end.
const LEFT: f64 = 78.0;
const RIGHT: f64 = WIDTH - 24.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = HEIGHT - 106.0;
/// The longest line of the foot, in characters (about 6.5 px each at 12 px).
const FOOT_CHARS: usize = 100;
/// The fewest pixels between two retry-number labels.
const X_LABEL_GAP: f64 = 26.0;
/// How far inside the plot area the first and last ticks sit, so that nothing drawn at
/// them hides in an axis line.
const INSET: f64 = 10.0;
/// How far below the first tick the floor for zero delays sits.
const ZERO_GAP: f64 = 26.0;

const BAND: &str = "#4c78a8";
const LINE: &str = "#e45756";
const INK: &str = "#222";
const MUTED: &str = "#666";
const GRID: &str = "#e3e3e3";

/// One retry on the chart: which pass of the path it belongs to (0 for the path itself, n for
/// its n-th redrive) and its row.
struct Slot<'a> {
    pass: usize,
    row: &'a RetryRow,
}

impl RetryPath {
    /// The path as a standalone SVG document (no script, no external reference), titled
    /// with the rule's id; every text from the rule set is escaped.
    ///
    /// ```
    /// use rebound_engine::{SourceFile, compile, paths::retry_paths};
    /// let yaml = "version: 1\nrules:\n  - id: poll\n    retry: { max_retries: 2, backoff: { fixed: 100ms } }\n    dead_letter: L1\n";
    /// let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
    /// let svg = retry_paths(&set).paths[0].to_svg();
    /// assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    /// assert!(svg.contains("<title>poll</title>"));
    /// assert!(svg.contains("ends: L1 after 2 retries (max_retries)"));
    /// ```
    pub fn to_svg(&self) -> String {
        let slots: Vec<Slot<'_>> = std::iter::once(&self.retries)
            .chain(self.redrives.iter().map(|leg| &leg.retries))
            .enumerate()
            .flat_map(|(pass, rows)| rows.iter().map(move |row| Slot { pass, row }))
            .collect();
        let mut axis = LogAxis::covering(
            slots
                .iter()
                .flat_map(|s| [s.row.delay_min_ms, s.row.delay_max_ms, s.row.total_worst_ms]),
        );
        if slots.is_empty() {
            axis.ticks.clear(); // no delay to mark
        }
        let mut svg = Svg::new(WIDTH, HEIGHT, &self.rule);
        if !self.notes.is_empty() {
            svg.tag("desc").text(&self.notes.join("\n"));
        }
        svg.tag("rect")
            .attr("width", Px(WIDTH))
            .attr("height", Px(HEIGHT))
            .attr("fill", "#fff")
            .end();
        self.heading(&mut svg);
        let plot = Plot {
            slot_width: (RIGHT - LEFT) / slots.len().max(1) as f64,
            axis,
        };
        plot.delay_axis(&mut svg);
        plot.retry_axis(&mut svg, &slots, !self.redrives.is_empty());
        if slots.is_empty() {
            svg.tag("text")
                .px(&[("x", (LEFT + RIGHT) / 2.0), ("y", (TOP + BOTTOM) / 2.0)])
                .attr("text-anchor", "middle")
                .font(13, MUTED)
                .text("no retry: the first failure it decides is dead-lettered");
        } else {
            self.redrive_rules(&mut svg, &plot, &slots);
            plot.bands(&mut svg, &slots);
            plot.worst_case(&mut svg, &slots);
        }
        self.foot(&mut svg);
        svg.finish()
    }

    /// The title (the rule id), what the rule says, and the legend.
    fn heading(&self, svg: &mut Svg) {
        svg.tag("text")
            .attr("x", Px(LEFT))
            .attr("y", 26)
            .attr("font-size", 17)
            .attr("font-weight", "bold")
            .attr("fill", INK)
            .text(&self.rule);
        svg.tag("text")
            .attr("x", Px(LEFT))
            .attr("y", 45)
            .attr("font-size", 11)
            .attr("fill", MUTED)
            .text(&self.summary());
        legend(
            svg,
            RIGHT - 190.0,
            18.0,
            Swatch::Band,
            "delay, min–max over jitter",
        );
        legend(
            svg,
            RIGHT - 190.0,
            36.0,
            Swatch::Line,
            "cumulative worst case",
        );
        let passes = std::iter::once(&self.retries).chain(self.redrives.iter().map(|l| &l.retries));
        if passes.flatten().any(|r| !r.in_worst_case) {
            legend(
                svg,
                RIGHT - 190.0,
                54.0,
                Swatch::Hollow,
                "only when delays are short",
            );
        }
    }

    /// `exponential 1s ×2 max 1m, jitter full; max_retries 5, max_elapsed 10m`, or
    /// `give_up`.
    fn summary(&self) -> String {
        let Some(backoff) = &self.backoff else {
            return "give_up: dead-lettered at once".to_string();
        };
        let mut s = backoff.clone();
        if let Some(m) = self.max_retries {
            s.push_str(&format!("; max_retries {m}"));
        }
        if let Some(l) = self.max_elapsed_ms {
            s.push_str(&format!(", max_elapsed {}", duration(l)));
        }
        s
    }

    /// A dashed rule before each redrive's first retry, with the replay's number and wait.
    fn redrive_rules(&self, svg: &mut Svg, plot: &Plot, slots: &[Slot<'_>]) {
        for leg in &self.redrives {
            let Some(first) = slots.iter().position(|s| s.pass == leg.redrive as usize) else {
                continue;
            };
            let x = LEFT + first as f64 * plot.slot_width;
            svg.tag("line")
                .px(&[("x1", x), ("x2", x), ("y1", TOP), ("y2", BOTTOM)])
                .attr("stroke", MUTED)
                .attr("stroke-dasharray", "4 3")
                .end();
            let label = |svg: &mut Svg, y: f64, text: &str| {
                svg.tag("text")
                    .px(&[("x", x + 4.0), ("y", y)])
                    .font(10, MUTED)
                    .text(text);
            };
            label(
                svg,
                TOP + 12.0,
                &format!("redrive {}/{}", leg.redrive, leg.of),
            );
            label(
                svg,
                TOP + 24.0,
                &format!("after {}", duration(leg.after_ms)),
            );
        }
    }

    /// Where the path ends, and with redrives where the last replay leaves it; a long line
    /// is broken after its `;`.
    fn foot(&self, svg: &mut Svg) {
        let mut lines = Vec::new();
        let ends = format!("ends: {}", self.end_text());
        if ends.len() > FOOT_CHARS {
            let parts: Vec<&str> = ends.split("; ").collect();
            let last = parts.len() - 1;
            for (i, part) in parts.iter().enumerate() {
                let sep = if i < last { ";" } else { "" };
                let indent = if i > 0 { "  " } else { "" };
                lines.push(format!("{indent}{part}{sep}"));
            }
        } else {
            lines.push(ends);
        }
        if let (Some(last), Some(total)) = (self.redrives.last(), self.total_worst_ms) {
            lines.push(format!(
                "redriven {} × after {}, then the letter stays; worst-case total {}",
                last.of,
                duration(last.after_ms),
                duration(total)
            ));
        }
        for (i, line) in lines.iter().enumerate() {
            svg.tag("text")
                .px(&[("x", LEFT), ("y", BOTTOM + 62.0 + 15.0 * i as f64)])
                .font(12, INK)
                .text(line);
        }
    }
}

/// The plot area's scales.
struct Plot {
    /// The width of one retry, px.
    slot_width: f64,
    axis: LogAxis,
}

impl Plot {
    fn x(&self, slot: usize) -> f64 {
        LEFT + (slot as f64 + 0.5) * self.slot_width
    }

    fn y(&self, ms: u64) -> f64 {
        let floor = BOTTOM - INSET;
        let first = if self.axis.zero {
            floor - ZERO_GAP
        } else {
            floor
        };
        match self.axis.fraction(ms) {
            Some(f) => first - f * (first - TOP - INSET),
            None => floor,
        }
    }

    /// Grid lines, tick labels and the axis's name, on the left; with a zero, its floor.
    fn delay_axis(&self, svg: &mut Svg) {
        let zero = self.axis.zero.then_some(0);
        for tick in zero.into_iter().chain(self.axis.ticks.iter().copied()) {
            let y = self.y(tick);
            svg.tag("line")
                .px(&[("x1", LEFT), ("x2", RIGHT), ("y1", y), ("y2", y)])
                .attr("stroke", GRID)
                .end();
            svg.tag("text")
                .px(&[("x", LEFT - 8.0), ("y", y + 4.0)])
                .attr("text-anchor", "end")
                .font(11, INK)
                .text(&if tick == 0 {
                    "0".to_string()
                } else {
                    tick_label(tick)
                });
        }
        let mid = (TOP + BOTTOM) / 2.0;
        svg.tag("text")
            .attr("x", 16)
            .attr("y", Px(mid))
            .attr("transform", format!("rotate(-90 16 {})", Px(mid)))
            .attr("text-anchor", "middle")
            .font(12, INK)
            .text("delay and total wait (log scale)");
        axis_line(svg, LEFT, TOP, LEFT, BOTTOM);
    }

    /// The retry numbers (thinned to stay readable; each pass's first always shown) and the
    /// axis's name, below.
    fn retry_axis(&self, svg: &mut Svg, slots: &[Slot<'_>], redrives: bool) {
        let every = (X_LABEL_GAP / self.slot_width).ceil().max(1.0) as u32;
        for (i, slot) in slots.iter().enumerate() {
            let first_of_pass = i == 0 || slots[i - 1].pass != slot.pass;
            if !first_of_pass && (slot.row.retry - 1) % every != 0 {
                continue;
            }
            svg.tag("text")
                .px(&[("x", self.x(i)), ("y", BOTTOM + 16.0)])
                .attr("text-anchor", "middle")
                .font(11, INK)
                .text(&slot.row.retry.to_string());
        }
        let name = if redrives {
            "retry number (each redrive counts from 1 again)"
        } else {
            "retry number"
        };
        svg.tag("text")
            .px(&[("x", (LEFT + RIGHT) / 2.0), ("y", BOTTOM + 36.0)])
            .attr("text-anchor", "middle")
            .font(12, INK)
            .text(name);
        axis_line(svg, LEFT, BOTTOM, RIGHT, BOTTOM);
    }

    /// One band per pass: each retry's delay range across its slot. Its outline is drawn too,
    /// so a delay without jitter (min = max) still shows as a line.
    fn bands(&self, svg: &mut Svg, slots: &[Slot<'_>]) {
        let mut start = 0;
        while start < slots.len() {
            let pass = slots[start].pass;
            let end = start + slots[start..].iter().take_while(|s| s.pass == pass).count();
            let edge = |i: usize| LEFT + i as f64 * self.slot_width;
            let mut points = Vec::new();
            for (i, s) in slots.iter().enumerate().take(end).skip(start) {
                let y = self.y(s.row.delay_max_ms);
                points.push((edge(i), y));
                points.push((edge(i + 1), y));
            }
            for (i, s) in slots.iter().enumerate().take(end).skip(start).rev() {
                let y = self.y(s.row.delay_min_ms);
                points.push((edge(i + 1), y));
                points.push((edge(i), y));
            }
            svg.tag("polygon")
                .attr("class", "band")
                .attr("points", point_list(&points))
                .attr("fill", BAND)
                .attr("fill-opacity", "0.3")
                .attr("stroke", BAND)
                .attr("stroke-width", "1.5")
                .end();
            start = end;
        }
    }

    /// The cumulative worst case through every retry, redrives included; a retry that happens
    /// only when delays are short (long ones reach `max_elapsed` first) is a hollow dot.
    fn worst_case(&self, svg: &mut Svg, slots: &[Slot<'_>]) {
        let points: Vec<(f64, f64)> = slots
            .iter()
            .enumerate()
            .map(|(i, s)| (self.x(i), self.y(s.row.total_worst_ms)))
            .collect();
        svg.tag("polyline")
            .attr("class", "worst-case")
            .attr("points", point_list(&points))
            .attr("fill", "none")
            .attr("stroke", LINE)
            .attr("stroke-width", "2")
            .end();
        if slots.len() > 60 {
            return; // dots would merge into the line
        }
        for (&(x, y), s) in points.iter().zip(slots) {
            dot(svg, x, y, s.row.in_worst_case);
        }
    }
}

fn point_list(points: &[(f64, f64)]) -> String {
    let list: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{},{}", Px(*x), Px(*y)))
        .collect();
    list.join(" ")
}

fn axis_line(svg: &mut Svg, x1: f64, y1: f64, x2: f64, y2: f64) {
    svg.tag("line")
        .px(&[("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2)])
        .attr("stroke", INK)
        .end();
}

/// What a legend entry shows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Swatch {
    Band,
    Line,
    /// The dot of a retry that happens only when delays are short.
    Hollow,
}

/// A legend entry at (`x`, `y`): a swatch of the band or the line, and its meaning.
fn legend(svg: &mut Svg, x: f64, y: f64, swatch: Swatch, text: &str) {
    match swatch {
        Swatch::Band => svg
            .tag("rect")
            .px(&[("x", x), ("y", y - 9.0)])
            .attr("width", 18)
            .attr("height", 10)
            .attr("fill", BAND)
            .attr("fill-opacity", "0.3")
            .attr("stroke", BAND)
            .end(),
        Swatch::Line => svg
            .tag("line")
            .px(&[
                ("x1", x),
                ("x2", x + 18.0),
                ("y1", y - 4.0),
                ("y2", y - 4.0),
            ])
            .attr("stroke", LINE)
            .attr("stroke-width", "2")
            .end(),
        Swatch::Hollow => dot(svg, x + 9.0, y - 4.0, false),
    }
    svg.tag("text")
        .px(&[("x", x + 24.0), ("y", y)])
        .font(11, INK)
        .text(text);
}

/// A retry's dot on the worst-case line at (`x`, `y`): filled when the retry is in the worst
/// case, hollow when it happens only when delays are short.
fn dot(svg: &mut Svg, x: f64, y: f64, filled: bool) {
    svg.tag("circle")
        .px(&[("cx", x), ("cy", y)])
        .attr("r", 3)
        .attr("fill", if filled { LINE } else { "#fff" })
        .attr("stroke", LINE)
        .end();
}

fn duration(ms: u64) -> DurationDisplay {
    DurationDisplay(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests;
