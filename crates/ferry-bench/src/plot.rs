//! Benchmark results as standalone SVG charts — latency percentiles, and
//! message rates and backlog over time — with one line per series (a broker,
//! say), so that brokers measured in the same run compare at a glance.
//!
//! The output is plain SVG 1.1 with no scripts, fonts or other external
//! resources: a chart looks the same in a browser, an image viewer or a
//! Markdown page. The three charts share one line-chart core (`Chart`);
//! they differ only in how their data becomes points and in what their axes
//! measure (`Measure`), which decides scale, ticks and tick labels.

use crate::histogram::CdfPoint;
use crate::timeline::{self, Tick};
use std::fmt::{self, Display, Formatter, Write};

/// One line of a chart: a label (a broker name, say) and its data.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a, T> {
    pub label: &'a str,
    pub data: &'a [T],
}

/// Latency percentile plot: x = percentile on a log scale of 1/(1-p), ticks
/// labelled "0%", "90%", "99%", "99.9%", "99.99%"…, y = latency (µs, log
/// scale, tick labels like "10 µs", "1 ms", "2 s"). One line per series,
/// legend.
pub fn latency_cdf(title: &str, series: &[Series<'_, CdfPoint>]) -> String {
    let lines = series
        .iter()
        .enumerate()
        .map(|(i, s)| Line::new(s.label.to_owned(), colour(i), false, cdf_points(s.data)))
        .collect();
    let x = Axis { measure: Measure::Percentile, title: "percentile" };
    let y = Axis { measure: Measure::Latency, title: "latency" };
    Chart { title, x, y, lines }.to_string()
}

/// Message rate over time: x = seconds, y = msg/s (linear, SI labels "50k",
/// "1.2M"). Per series: received rate as a solid line and sent rate as a
/// dashed line in the same colour; legend says "`<label>` received" /
/// "`<label>` sent".
pub fn rates(title: &str, series: &[Series<'_, Tick>]) -> String {
    let lines = series
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            // Each rate is over the interval that ends at the later tick.
            let intervals: Vec<(f64, (f64, f64))> = usable_ticks(s.data)
                .windows(2)
                .map(|w| (w[1].seconds, timeline::rates(&w[0], &w[1])))
                .collect();
            let received = intervals.iter().map(|&(t, (_, received))| (t, received));
            let sent = intervals.iter().map(|&(t, (sent, _))| (t, sent));
            [
                Line::new(format!("{} received", s.label), colour(i), false, received),
                Line::new(format!("{} sent", s.label), colour(i), true, sent),
            ]
        })
        .collect();
    let y = Axis { measure: Measure::Messages, title: "messages/s" };
    Chart { title, x: TIME, y, lines }.to_string()
}

/// Backlog over time: x = seconds, y = sent − received (messages in flight
/// or queued; saturating at 0), one line per series.
pub fn backlog(title: &str, series: &[Series<'_, Tick>]) -> String {
    let lines = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let ticks = usable_ticks(s.data);
            let points =
                ticks.iter().map(|t| (t.seconds, t.sent.saturating_sub(t.received) as f64));
            Line::new(s.label.to_owned(), colour(i), false, points)
        })
        .collect();
    let y = Axis { measure: Measure::Messages, title: "backlog (messages sent, not received)" };
    Chart { title, x: TIME, y, lines }.to_string()
}

/// How far past the last finite percentile the max is put when a series has
/// no gap between points to copy: a tenth of a nine, the spacing of
/// [`crate::histogram::Latency::cdf`].
const LONE_STEP: f64 = 0.1;

/// Points of a latency plot: (nines, µs). p100 would be infinitely many
/// nines, yet the max is the number readers look for, so it goes one step
/// (the last gap between points) past the last finite percentile, at the
/// right edge of the line.
fn cdf_points(data: &[CdfPoint]) -> Vec<(f64, f64)> {
    let placeable =
        |p: &&CdfPoint| p.latency_us.is_finite() && (0.0..=100.0).contains(&p.percentile);
    let mut points: Vec<(f64, f64)> = data
        .iter()
        .filter(placeable)
        .filter(|p| p.percentile < 100.0)
        .map(|p| (nines(p.percentile), p.latency_us))
        .collect();
    let step = match points[..] {
        [.., (before, _), (last, _)] => last - before,
        _ => LONE_STEP,
    };
    let edge = points.last().map_or(0.0, |&(x, _)| x) + step;
    points.extend(
        data.iter()
            .filter(placeable)
            .filter(|p| p.percentile >= 100.0)
            .map(|p| (edge, p.latency_us)),
    );
    points
}

/// A percentile as its number of nines, log10(1 / (1 − p)): 90% is 1, 99%
/// is 2, 99.9% is 3, so each decade of the tail gets the same width.
fn nines(percentile: f64) -> f64 {
    -(1.0 - percentile / 100.0).log10()
}

/// Ticks in time order with finite times. A tick no later than the one kept
/// before it would give a rate over no time, and draw a line backwards.
fn usable_ticks(ticks: &[Tick]) -> Vec<Tick> {
    let mut kept: Vec<Tick> = Vec::with_capacity(ticks.len());
    for tick in ticks.iter().filter(|t| t.seconds.is_finite()) {
        if kept.last().is_none_or(|last| tick.seconds > last.seconds) {
            kept.push(*tick);
        }
    }
    kept
}

// ---------------------------------------------------------------- chart core

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
const PLOT_LEFT: f64 = 70.0;
const PLOT_RIGHT: f64 = 540.0;
const PLOT_TOP: f64 = 40.0;
const PLOT_BOTTOM: f64 = 370.0;
/// The legend sits right of the plot, where it can never hide a line.
const LEGEND_LEFT: f64 = 556.0;
const LEGEND_ROW: f64 = 18.0;

/// Okabe–Ito colours, which stay distinct under the common colour
/// blindnesses; their yellow is left out, too faint on white. Series past
/// the seventh reuse colours.
const PALETTE: [&str; 7] =
    ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"];

fn colour(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

const TIME: Axis = Axis { measure: Measure::Seconds, title: "time (s)" };

/// A line chart: axes fitted to the data of all its lines, and a legend.
struct Chart<'a> {
    title: &'a str,
    x: Axis,
    y: Axis,
    lines: Vec<Line>,
}

struct Axis {
    measure: Measure,
    title: &'static str,
}

/// What an axis measures.
#[derive(Clone, Copy)]
enum Measure {
    /// Percentiles as nines ([`nines`]): linear in nines, a tick per nine.
    Percentile,
    /// Microseconds on a log scale: latencies span from a few µs on loopback
    /// to the seconds of a saturated broker.
    Latency,
    Seconds,
    /// Messages or messages per second, with SI suffixes.
    Messages,
}

struct Line {
    label: String,
    colour: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

impl Line {
    /// A line through the finite points given; the others cannot be placed.
    fn new(
        label: String,
        colour: &'static str,
        dashed: bool,
        points: impl IntoIterator<Item = (f64, f64)>,
    ) -> Line {
        let points = points.into_iter().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
        Line { label, colour, dashed, points }
    }

    /// Stroke attributes, shared by the line and its legend sample.
    fn stroke(&self) -> String {
        let dash = if self.dashed { r#" stroke-dasharray="6 4""# } else { "" };
        format!(r#"stroke="{}" stroke-width="2"{dash}"#, self.colour)
    }

    fn draw(&self, f: &mut Formatter<'_>, x: &Scale, y: &Scale) -> fmt::Result {
        if self.points.is_empty() {
            return Ok(());
        }
        let at = |&(vx, vy): &(f64, f64)| {
            (x.pixel(vx, PLOT_LEFT, PLOT_RIGHT), y.pixel(vy, PLOT_BOTTOM, PLOT_TOP))
        };
        write!(f, r#"<polyline fill="none" stroke-linejoin="round" {} points=""#, self.stroke())?;
        for (i, (px, py)) in self.points.iter().map(at).enumerate() {
            let separator = if i == 0 { "" } else { " " };
            write!(f, "{separator}{px:.1},{py:.1}")?;
        }
        f.write_str("\"/>\n")?;
        // A polyline through one point draws nothing: mark the point.
        if let [point] = &self.points[..] {
            let (px, py) = at(point);
            writeln!(f, r#"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{}"/>"#, self.colour)?;
        }
        Ok(())
    }
}

impl Display for Chart<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            r#"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
        )?;
        writeln!(f, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#)?;
        let title_style = r#"text-anchor="middle" font-size="15" font-weight="bold""#;
        text(f, (WIDTH / 2.0, 24.0), title_style, self.title)?;
        let xs: Vec<f64> = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).collect();
        let ys: Vec<f64> = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).collect();
        match (self.x.measure.scale(&xs), self.y.measure.scale(&ys)) {
            (Some(x), Some(y)) => self.plot(f, &x, &y)?,
            _ => {
                frame(f)?;
                let centre = ((PLOT_LEFT + PLOT_RIGHT) / 2.0, (PLOT_TOP + PLOT_BOTTOM) / 2.0);
                text(f, centre, r##"text-anchor="middle" font-size="14" fill="#666""##, "no data")?;
            }
        }
        f.write_str("</svg>\n")
    }
}

impl Chart<'_> {
    fn plot(&self, f: &mut Formatter<'_>, x: &Scale, y: &Scale) -> fmt::Result {
        self.grid(f, x, y)?;
        frame(f)?;
        for line in &self.lines {
            line.draw(f, x, y)?;
        }
        self.legend(f)?;
        self.axis_titles(f)
    }

    /// Grid lines and tick labels.
    fn grid(&self, f: &mut Formatter<'_>, x: &Scale, y: &Scale) -> fmt::Result {
        f.write_str("<g stroke=\"#e4e4e4\">\n")?;
        for &tick in &x.ticks {
            let px = x.pixel(tick, PLOT_LEFT, PLOT_RIGHT);
            writeln!(f, r#"<line x1="{px:.1}" y1="{PLOT_TOP}" x2="{px:.1}" y2="{PLOT_BOTTOM}"/>"#)?;
        }
        for &tick in &y.ticks {
            let py = y.pixel(tick, PLOT_BOTTOM, PLOT_TOP);
            writeln!(f, r#"<line x1="{PLOT_LEFT}" y1="{py:.1}" x2="{PLOT_RIGHT}" y2="{py:.1}"/>"#)?;
        }
        f.write_str("</g>\n<g fill=\"#333\">\n")?;
        for &tick in &x.ticks {
            let at = (x.pixel(tick, PLOT_LEFT, PLOT_RIGHT), PLOT_BOTTOM + 16.0);
            text(f, at, r#"text-anchor="middle""#, &self.x.measure.label(tick))?;
        }
        for &tick in &y.ticks {
            let at = (PLOT_LEFT - 6.0, y.pixel(tick, PLOT_BOTTOM, PLOT_TOP));
            text(f, at, r#"text-anchor="end" dy=".35em""#, &self.y.measure.label(tick))?;
        }
        f.write_str("</g>\n")
    }

    fn legend(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (row, line) in self.lines.iter().enumerate() {
            let y = PLOT_TOP + 6.0 + LEGEND_ROW * row as f64;
            let (x1, x2) = (LEGEND_LEFT, LEGEND_LEFT + 24.0);
            writeln!(f, r#"<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" {}/>"#, line.stroke())?;
            let missing = if line.points.is_empty() { " (no data)" } else { "" };
            text(f, (x2 + 6.0, y), r#"dy=".35em""#, &format!("{}{missing}", line.label))?;
        }
        Ok(())
    }

    fn axis_titles(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let below = ((PLOT_LEFT + PLOT_RIGHT) / 2.0, HEIGHT - 12.0);
        text(f, below, r#"text-anchor="middle""#, self.x.title)?;
        let (cx, cy) = (18.0, (PLOT_TOP + PLOT_BOTTOM) / 2.0);
        let turned = format!(r#"text-anchor="middle" transform="rotate(-90 {cx} {cy})""#);
        text(f, (cx, cy), &turned, self.y.title)
    }
}

fn frame(f: &mut Formatter<'_>) -> fmt::Result {
    let (width, height) = (PLOT_RIGHT - PLOT_LEFT, PLOT_BOTTOM - PLOT_TOP);
    writeln!(
        f,
        r##"<rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{width}" height="{height}" fill="none" stroke="#999"/>"##
    )
}

fn text(f: &mut Formatter<'_>, (x, y): (f64, f64), attributes: &str, content: &str) -> fmt::Result {
    writeln!(f, r#"<text x="{x:.1}" y="{y:.1}" {attributes}>{}</text>"#, Escaped(content))
}

/// Text made safe as XML character data.
struct Escaped<'a>(&'a str);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '&' => f.write_str("&amp;")?,
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&apos;")?,
                // XML 1.0 cannot hold other control characters at all.
                c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => {}
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------- scales, ticks

/// Roughly how many intervals a linear axis is split into.
const LINEAR_INTERVALS: f64 = 8.0;

/// Most decades a log axis labels one by one; wider ranges label every
/// other decade (or every third…) so labels do not crowd.
const LOG_TICK_DECADES: u32 = 8;

/// Where values of one axis go: the range `lo..hi` shown (both on ticks
/// where the scale allows) and the tick values.
struct Scale {
    lo: f64,
    hi: f64,
    /// Some for a log scale: the smallest positive value, where values that
    /// are not positive (a latency of 0) are drawn.
    log_floor: Option<f64>,
    ticks: Vec<f64>,
}

impl Scale {
    /// The pixel of `value` when `lo` is at pixel `from` and `hi` at `to`.
    fn pixel(&self, value: f64, from: f64, to: f64) -> f64 {
        let fraction = match self.log_floor {
            Some(floor) => {
                let value = if value > 0.0 { value } else { floor };
                (value / self.lo).ln() / (self.hi / self.lo).ln()
            }
            None => (value - self.lo) / (self.hi - self.lo),
        };
        from + fraction * (to - from)
    }

    /// Whether every tick, and so every value between the ends, has a
    /// finite pixel: values near the limits of f64 (rates over a
    /// femtosecond, say) can widen a range past them.
    fn is_drawable(&self) -> bool {
        let ends = [self.lo, self.hi];
        ends.iter().chain(&self.ticks).all(|&v| self.pixel(v, 0.0, 1.0).is_finite())
    }
}

impl Measure {
    /// A scale that shows every value, or None without values or when they
    /// span more than f64 can draw. Values are finite ([`Line::new`] keeps
    /// no others).
    fn scale(self, values: &[f64]) -> Option<Scale> {
        let max = values.iter().copied().reduce(f64::max)?;
        let min = values.iter().copied().reduce(f64::min)?;
        let scale = match self {
            Measure::Percentile => nines_scale(max),
            Measure::Latency => {
                // With nothing positive there is no decade to start from;
                // any will do for a line along the bottom.
                let floor = values.iter().copied().filter(|&v| v > 0.0).reduce(f64::min);
                let floor = floor.unwrap_or(1.0);
                log_scale(floor, max.max(floor))
            }
            // Counts, rates and times start at zero: a rate that looks halved
            // should be halved.
            Measure::Seconds | Measure::Messages => linear_scale(min.min(0.0), max.max(0.0)),
        };
        Some(scale).filter(Scale::is_drawable)
    }

    fn label(self, value: f64) -> String {
        match self {
            Measure::Percentile => nines_label(value),
            Measure::Latency => {
                with_unit(value, &[(1e6, " s"), (1e3, " ms"), (1.0, " µs"), (1e-3, " ns")])
            }
            Measure::Seconds => with_unit(value, &[(1.0, "")]),
            Measure::Messages => with_unit(value, &[(1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]),
        }
    }
}

/// From 0% to the largest percentile, and to 90% at least, with a tick per nine.
fn nines_scale(max: f64) -> Scale {
    let hi = max.max(1.0);
    let ticks = (0..=hi.floor() as u32).map(f64::from).collect();
    Scale { lo: 0.0, hi, log_floor: None, ticks }
}

/// "0%", "90%", "99%", "99.9%"… for 0, 1, 2, 3… nines.
fn nines_label(nines: f64) -> String {
    let nines = nines.round() as i32;
    let decimals = (nines - 2).max(0) as usize;
    format!("{:.*}%", decimals, 100.0 - 10f64.powi(2 - nines))
}

/// Ticks 1, 2 or 5 times a power of ten apart, the range widened to ticks.
fn linear_scale(lo: f64, hi: f64) -> Scale {
    let hi = if hi > lo { hi } else { lo + 1.0 };
    let rough = (hi - lo) / LINEAR_INTERVALS;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&step| step >= rough)
        .unwrap_or(10.0 * magnitude);
    let (first, last) = ((lo / step).floor(), (hi / step).ceil());
    let ticks = (first as i64..=last as i64).map(|i| i as f64 * step).collect();
    Scale { lo: first * step, hi: last * step, log_floor: None, ticks }
}

/// Ticks at powers of ten — and at 2 and 5 times them when the range is
/// narrow — the range widened to ticks.
fn log_scale(floor: f64, max: f64) -> Scale {
    let first = floor.log10().floor() as i32;
    let decades = (max.log10().ceil() - f64::from(first)).max(1.0) as u32;
    let stride = decades.div_ceil(LOG_TICK_DECADES);
    let mantissas: &[f64] = if decades <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    let candidates: Vec<f64> = (0..=decades.div_ceil(stride))
        .flat_map(|k| {
            let exponent = first + (k * stride) as i32;
            mantissas.iter().map(move |&m| decimal(m, exponent))
        })
        .collect();
    let lo = candidates.iter().rev().copied().find(|&c| c <= floor).unwrap_or(floor);
    let hi = candidates.iter().copied().find(|&c| c >= max && c > lo).unwrap_or(max * 10.0);
    let ticks = candidates.into_iter().filter(|c| (lo..=hi).contains(c)).collect();
    Scale { lo, hi, log_floor: Some(floor), ticks }
}

/// `mantissa` × 10^`exponent`, rounded as the literal would be (1e-3 is the
/// f64 nearest 0.001): a tick a hair above a latency of exactly 0.001 µs
/// would leave the axis starting at no tick.
fn decimal(mantissa: f64, exponent: i32) -> f64 {
    match exponent {
        e if e >= 0 => mantissa * 10f64.powi(e),
        e => mantissa / 10f64.powi(-e),
    }
}

/// `value` in the largest unit (size, suffix) it reaches, the last unit if
/// none: 1500 µs is "1.5 ms".
fn with_unit(value: f64, units: &[(f64, &str)]) -> String {
    let fallback = units.last().copied().unwrap_or((1.0, ""));
    let (size, suffix) =
        units.iter().copied().find(|&(size, _)| value.abs() >= size).unwrap_or(fallback);
    format!("{}{suffix}", short_number(value / size))
}

/// Two decimals at most, enough for ticks 1, 2 or 5 times a power of ten
/// in a unit that keeps them from 1 to 999, without trailing zeros.
fn short_number(value: f64) -> String {
    let text = format!("{value:.2}");
    match text.trim_end_matches('0').trim_end_matches('.') {
        "-0" => "0".to_owned(),
        short => short.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks what a viewer needs to parse the SVG: one root element, every
    /// tag closed in order or self-closed, text with no markup characters
    /// but entities, and no NaN or infinite number anywhere.
    fn assert_well_formed(svg: &str) {
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        let mut open: Vec<&str> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            assert_text(&rest[..start]);
            let end = start + rest[start..].find('>').expect("a tag is closed by '>'");
            let tag = &rest[start + 1..end];
            rest = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop(), Some(name), "closing tag in order");
                if open.is_empty() {
                    assert!(rest.trim().is_empty(), "nothing after the root: {rest}");
                }
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().expect("a tag has a name");
                assert!(!open.is_empty() || name == "svg", "the root is <svg>");
                open.push(name);
            }
        }
        assert_text(rest);
        assert!(open.is_empty(), "unclosed: {open:?}");
    }

    fn assert_text(text: &str) {
        assert!(!text.contains('>'), "raw '>' in text: {text}");
        for (i, _) in text.match_indices('&') {
            let entity = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"];
            assert!(entity.iter().any(|e| text[i..].starts_with(e)), "raw '&' in text: {text}");
        }
    }

    /// The points of every polyline, in pixels.
    fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.lines()
            .filter(|l| l.starts_with("<polyline"))
            .map(|l| {
                let points = l.split("points=\"").nth(1).and_then(|p| p.split('"').next());
                let pair = |p: &str| {
                    let (x, y) = p.split_once(',').expect("x,y");
                    (x.parse().expect("x"), y.parse().expect("y"))
                };
                points.expect("points").split(' ').map(pair).collect()
            })
            .collect()
    }

    /// The y pixel of the y-axis tick labelled `label`.
    fn tick_y(svg: &str, label: &str) -> f64 {
        let y_tick = |l: &&str| l.contains(r#"text-anchor="end""#);
        let line = svg
            .lines()
            .filter(y_tick)
            .find(|l| l.starts_with("<text") && l.ends_with(&format!(">{label}</text>")))
            .unwrap_or_else(|| panic!("no tick {label}: {svg}"));
        let y = line.split(" y=\"").nth(1).and_then(|y| y.split('"').next());
        y.expect("y").parse().expect("a number")
    }

    fn tick(seconds: f64, sent: u64, received: u64) -> Tick {
        Tick { seconds, sent, received }
    }

    fn point(percentile: f64, latency_us: f64) -> CdfPoint {
        CdfPoint { percentile, latency_us }
    }

    #[test]
    fn every_chart_is_well_formed_svg() {
        let cdf = [point(0.0, 0.0), point(50.0, 80.0), point(99.0, 900.0), point(100.0, 2e6)];
        let ticks = [tick(0.0, 0, 0), tick(0.1, 500, 400), tick(0.3, 9_000, 8_000)];
        for svg in [
            latency_cdf("latency", &[Series { label: "ferry", data: &cdf }]),
            rates("rates", &[Series { label: "ferry", data: &ticks }]),
            backlog("backlog", &[Series { label: "ferry", data: &ticks }]),
        ] {
            assert_well_formed(&svg);
            assert!(svg.contains(r#"xmlns="http://www.w3.org/2000/svg""#));
            assert!(!svg.contains("<script") && !svg.contains("href"), "self-contained");
            assert_eq!(polylines(&svg).len(), svg.matches("<polyline").count());
        }
    }

    #[test]
    fn titles_and_labels_are_escaped() {
        let ticks = [tick(0.0, 0, 0), tick(1.0, 10, 10)];
        let svg = backlog("<b>Q&A</b> \"1\" 'x'", &[Series { label: "a<b>&c", data: &ticks }]);
        assert_well_formed(&svg);
        assert!(svg.contains("&lt;b&gt;Q&amp;A&lt;/b&gt; &quot;1&quot; &apos;x&apos;"), "{svg}");
        assert!(svg.contains("a&lt;b&gt;&amp;c"), "{svg}");
        assert!(!svg.contains("<b>") && !svg.contains("a<b"), "{svg}");
    }

    #[test]
    fn a_polyline_has_a_point_per_finite_input() {
        let ticks = [
            tick(0.0, 0, 0),
            tick(f64::NAN, 5, 5),
            tick(0.1, 10, 5),
            tick(f64::INFINITY, 20, 10),
            tick(0.2, 30, 20),
        ];
        let svg = backlog("b", &[Series { label: "x", data: &ticks }]);
        assert_well_formed(&svg);
        assert_eq!(polylines(&svg)[0].len(), 3);

        let svg = rates("r", &[Series { label: "x", data: &ticks }]);
        assert_well_formed(&svg);
        let lines = polylines(&svg);
        assert_eq!(
            (lines.len(), lines[0].len(), lines[1].len()),
            (2, 2, 2),
            "rates between 3 ticks"
        );
        assert!(svg.contains("stroke-dasharray"), "sent is dashed");

        let cdf = [
            point(0.0, 1.0),
            point(f64::NAN, 2.0),
            point(90.0, f64::INFINITY),
            point(99.0, 3.0),
            point(100.0, 4.0),
        ];
        let svg = latency_cdf("l", &[Series { label: "x", data: &cdf }]);
        assert_well_formed(&svg);
        assert_eq!(polylines(&svg)[0].len(), 3);
    }

    #[test]
    fn nines_put_each_decade_of_the_tail_at_the_same_width() {
        let sweep: Vec<f64> = (0..=99_999).map(|i| f64::from(i) / 1_000.0).collect();
        assert!(sweep.windows(2).all(|w| nines(w[0]) < nines(w[1])), "monotonic");
        assert!((nines(99.0) - (nines(90.0) + nines(99.9)) / 2.0).abs() < 1e-9);

        let cdf = [
            point(0.0, 5.0),
            point(90.0, 10.0),
            point(99.0, 20.0),
            point(99.9, 40.0),
            point(100.0, 80.0),
        ];
        let svg = latency_cdf("l", &[Series { label: "x", data: &cdf }]);
        let xs: Vec<f64> = polylines(&svg)[0].iter().map(|p| p.0).collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
        let gap = |i: usize| xs[i + 1] - xs[i];
        assert!((gap(1) - gap(2)).abs() < 0.11, "99% halfway between 90% and 99.9%: {xs:?}");
        assert!((gap(3) - gap(2)).abs() < 0.11, "the max one step past p99.9: {xs:?}");
        for label in ["0%", "90%", "99%", "99.9%"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}: {svg}");
        }
    }

    #[test]
    fn zero_latency_sits_on_the_smallest_positive_one() {
        let cdf = [point(0.0, 0.0), point(50.0, 0.003), point(99.0, 2_000.0), point(100.0, 2e6)];
        let svg = latency_cdf("l", &[Series { label: "x", data: &cdf }]);
        assert_well_formed(&svg);
        let line = &polylines(&svg)[0];
        assert_eq!(line.len(), 4);
        assert_eq!(line[0].1, line[1].1, "0 µs is drawn at 3 ns");
        let one_ns = tick_y(&svg, "1 ns");
        assert_eq!(one_ns, PLOT_BOTTOM, "ticks are not clamped, only values");
        assert!(line[0].1 < one_ns - 10.0, "3 ns is well above 1 ns: {line:?}");
    }

    #[test]
    fn rates_of_a_thousand_a_second_are_drawn_at_1k() {
        // 100 messages every 0.1 s, with one tick missed (a doubled interval).
        let mut ticks: Vec<Tick> = (0..20u32)
            .filter(|&i| i != 7)
            .map(|i| tick(f64::from(i) / 10.0, u64::from(i) * 100, u64::from(i) * 100))
            .collect();
        ticks.push(tick(2.0, 2_000, 2_000));
        let svg = rates("r", &[Series { label: "x", data: &ticks }]);
        assert_well_formed(&svg);
        let y = tick_y(&svg, "1k");
        let lines = polylines(&svg);
        assert_eq!(lines.len(), 2);
        for point in lines.iter().flatten() {
            assert!((point.1 - y).abs() < 0.06, "{point:?} is not at 1k (y = {y})");
        }
        assert!(svg.contains(">x received</text>") && svg.contains(">x sent</text>"));
    }

    #[test]
    fn backlog_is_never_negative() {
        let ticks = [tick(0.0, 0, 0), tick(1.0, 100, 40), tick(2.0, 100, 130), tick(3.0, 50, 200)];
        let svg = backlog("b", &[Series { label: "x", data: &ticks }]);
        assert_well_formed(&svg);
        let zero = tick_y(&svg, "0");
        let line = &polylines(&svg)[0];
        assert!(line.iter().all(|p| p.1 <= zero + 0.06), "{line:?} dips below 0 at y = {zero}");
        assert_eq!((line[2].1, line[3].1), (zero, zero), "more received than sent is no backlog");
        assert!(line[1].1 < zero);
    }

    #[test]
    fn empty_input_is_valid_svg_saying_no_data() {
        let one_tick = [tick(0.0, 1, 1)];
        for svg in [
            latency_cdf("Latency", &[]),
            latency_cdf("Latency", &[Series { label: "x", data: &[] }]),
            rates("Latency", &[Series { label: "x", data: &one_tick }]),
            backlog("Latency", &[Series { label: "x", data: &[] }]),
        ] {
            assert_well_formed(&svg);
            assert!(svg.contains(">Latency</text>") && svg.contains(">no data</text>"), "{svg}");
            assert!(!svg.contains("<polyline"));
        }
    }

    #[test]
    fn values_at_the_limits_of_f64_draw_no_nan_or_infinity() {
        let cdf = [point(0.0, 5e-324), point(100.0, 1.7e308)];
        let ticks = [tick(0.0, 0, 0), tick(1.7e308, u64::MAX, 0)];
        for svg in [
            latency_cdf("l", &[Series { label: "x", data: &cdf }]),
            backlog("b", &[Series { label: "x", data: &ticks }]),
            rates("r", &[Series { label: "x", data: &ticks }]),
        ] {
            assert_well_formed(&svg);
        }
    }

    #[test]
    fn an_empty_series_beside_others_is_marked_in_the_legend() {
        let cdf = [point(0.0, 1.0), point(100.0, 2.0)];
        let series = [Series { label: "a", data: &cdf[..] }, Series { label: "b", data: &[] }];
        let svg = latency_cdf("l", &series);
        assert_well_formed(&svg);
        assert_eq!(polylines(&svg).len(), 1);
        assert!(svg.contains(">b (no data)</text>"), "{svg}");
    }

    #[test]
    fn tick_labels() {
        let latency = |us| Measure::Latency.label(us);
        assert_eq!(
            [latency(0.001), latency(10.0), latency(1e3), latency(2e6)],
            ["1 ns", "10 µs", "1 ms", "2 s"]
        );
        let messages = |n| Measure::Messages.label(n);
        assert_eq!([messages(0.0), messages(50e3), messages(1.2e6)], ["0", "50k", "1.2M"]);
        let percentiles: Vec<String> = (0..=5).map(|n| nines_label(f64::from(n))).collect();
        assert_eq!(percentiles, ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]);
    }

    #[test]
    fn scales_cover_their_values_with_ticks() {
        let linear = linear_scale(0.0, 1_234.0);
        assert_eq!((linear.lo, linear.hi), (0.0, 1_400.0));
        assert_eq!(linear.ticks.len(), 8);
        let log = log_scale(0.001, 2e6);
        assert_eq!((log.lo, log.hi), (0.001, 1e7));
        assert!(log.ticks.len() <= 1 + LOG_TICK_DECADES as usize, "{:?}", log.ticks);
        let narrow = log_scale(130.0, 700.0);
        assert_eq!(
            (narrow.lo, narrow.hi, narrow.ticks),
            (100.0, 1_000.0, vec![100.0, 200.0, 500.0, 1_000.0])
        );
    }
}
