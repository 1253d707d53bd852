//! The report's charts as inline SVG: axes with round ticks, axis titles, and every value
//! written as text beside its mark, so a printed or PDF report reads without hovering.
//!
//! Hand-built rather than through a plotting crate: the four charts need axes, bars,
//! points and labels only, the output must be byte-for-byte deterministic (reports are
//! snapshot-tested in users' CI), and plotters' SVG backend measures text with system
//! fonts, which would make the layout depend on the machine that compiled it. Text width
//! here is estimated from the character count ([`text_width`]), generously, and
//! `tests/report_html.rs` checks in Chromium that no label leaves its chart or overlaps
//! another.

use std::fmt::Write as _;

/// Font size of tick labels, values and legends (px).
pub const SMALL: f64 = 11.0;

/// The width `s` takes at `size` px: a generous average glyph width of 0.68 em (digits
/// and lower case in common sans-serif fonts are 0.5–0.6 em, `#` and capitals wider)
/// plus 2 px of slack.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.68 + 2.0
}

/// Escapes text for SVG/HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number as a tick or value label: thousands grouped, at most `decimals` decimals and
/// no trailing zeros (`1,250`, `12.5`, `0.25`).
pub fn num(v: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, v);
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    let (sign, s) = match s.strip_prefix('-') {
        Some(rest) => ("-", rest.to_string()),
        None => ("", s),
    };
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i.to_string(), format!(".{f}")),
        None => (s.clone(), String::new()),
    };
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if grouped == "0" && frac.is_empty() {
        return "0".into();
    }
    format!("{sign}{grouped}{frac}")
}

/// A linear axis from 0 to a round maximum at or above the data's, with its ticks.
#[derive(Debug, Clone)]
pub struct Axis {
    pub max: f64,
    pub step: f64,
}

impl Axis {
    /// Round ticks (1, 2, 2.5 or 5 × 10ᵏ) so that about `ticks` of them cover `0..=max`.
    pub fn to(max: f64, ticks: usize) -> Axis {
        let max = if max.is_finite() && max > 0.0 {
            max
        } else {
            1.0
        };
        let raw = max / ticks.max(1) as f64;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .into_iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw * 0.999)
            .unwrap_or(10.0 * mag);
        Axis {
            max: (max / step - 1e-9).ceil() * step,
            step,
        }
    }

    /// An axis whose maximum is exactly `max` (a GPU's memory), ticks round.
    pub fn fixed(max: f64, ticks: usize) -> Axis {
        Axis {
            max,
            ..Axis::to(max, ticks)
        }
    }

    pub fn ticks(&self) -> Vec<f64> {
        let n = (self.max / self.step + 1e-9).floor() as usize;
        (0..=n).map(|i| i as f64 * self.step).collect()
    }

    /// Decimals a tick label needs.
    pub fn decimals(&self) -> usize {
        if self.step >= 1.0 {
            0
        } else {
            (-self.step.log10()).ceil() as usize + 1
        }
    }

    /// Where `v` falls between `from` (0) and `to` (max), in pixels.
    pub fn at(&self, v: f64, from: f64, to: f64) -> f64 {
        from + (v / self.max).clamp(0.0, 1.0) * (to - from)
    }
}

/// Where a point's label goes, relative to the point.
#[derive(Debug, Clone, Copy)]
pub enum Side {
    Right,
    Left,
    Above,
    Below,
}

/// Every side, right first.
pub const AROUND: [Side; 4] = [Side::Right, Side::Left, Side::Above, Side::Below];

/// An SVG document under construction, in user units equal to CSS pixels.
pub struct Svg {
    out: String,
    /// The drawing's width, which no axis label crosses.
    width: f64,
    /// Boxes of the labels placed so far (x, y, w, h), for [`Svg::place_label`].
    labels: Vec<(f64, f64, f64, f64)>,
}

impl Svg {
    pub fn new(id: &str, width: f64, height: f64, label: &str) -> Svg {
        Svg {
            out: format!(
                "<svg class=\"chart\" id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" font-family=\"system-ui, sans-serif\" role=\"img\" aria-label=\"{}\">",
                esc(label)
            ),
            labels: Vec::new(),
            width,
        }
    }

    /// Text at (x, y) (baseline), anchored `start`, `middle` or `end`.
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, size: f64, s: &str) {
        let _ = write!(
            self.out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" fill=\"#1d232b\">{}</text>",
            esc(s)
        );
    }

    /// Like [`Svg::text`], in another colour (on a dark bar).
    pub fn text_fill(&mut self, x: f64, y: f64, anchor: &str, size: f64, fill: &str, s: &str) {
        let _ = write!(
            self.out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" fill=\"{fill}\">{}</text>",
            esc(s)
        );
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = write!(
            self.out,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\"/>"
        );
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, title: &str) {
        let _ = write!(
            self.out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\"><title>{}</title></rect>",
            esc(title)
        );
    }

    pub fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str, title: &str) {
        let _ = write!(
            self.out,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" fill=\"{fill}\"><title>{}</title></circle>",
            esc(title)
        );
    }

    pub fn path(&mut self, d: &str, stroke: &str) {
        let _ = write!(
            self.out,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"1.5\"/>"
        );
    }

    /// A label for the point (x, y) on the first of `sides` where it neither overlaps a
    /// label placed before nor leaves `bounds` (x0, y0, x1, y1); returns false (nothing
    /// drawn) when none fits — the table beside the chart has the value.
    pub fn place_label(
        &mut self,
        x: f64,
        y: f64,
        s: &str,
        sides: &[Side],
        bounds: (f64, f64, f64, f64),
    ) -> bool {
        let w = text_width(s, SMALL);
        let h = SMALL + 5.0;
        for side in sides {
            let (bx, by) = match side {
                Side::Right => (x + 7.0, y - h / 2.0),
                Side::Left => (x - 7.0 - w, y - h / 2.0),
                Side::Above => (x - w / 2.0, y - 9.0 - h),
                Side::Below => (x - w / 2.0, y + 9.0),
            };
            let inside =
                bx >= bounds.0 && by >= bounds.1 && bx + w <= bounds.2 && by + h <= bounds.3;
            let free = self.labels.iter().all(|&(lx, ly, lw, lh)| {
                bx + w <= lx || lx + lw <= bx || by + h <= ly || ly + lh <= by
            });
            if inside && free {
                self.labels.push((bx, by, w, h));
                self.text(bx, by + SMALL + 1.0, "start", SMALL, s);
                return true;
            }
        }
        false
    }

    /// Reserves a box already drawn (e.g. a legend) so that labels avoid it.
    pub fn reserve(&mut self, x: f64, y: f64, w: f64, h: f64) {
        self.labels.push((x, y, w, h));
    }

    /// A horizontal value axis along `y` from `x0` to `x1`: grid lines up to `top`, tick
    /// labels below, and the title under the middle.
    pub fn x_axis(&mut self, a: &Axis, x0: f64, x1: f64, y: f64, top: f64, title: &str) {
        for t in a.ticks() {
            let x = a.at(t, x0, x1);
            self.line(x, top, x, y, "#e4e7ee");
            self.line(x, y, x, y + 4.0, "#889");
            // Centred under its tick, but moved in where a wide label at either end would
            // leave the drawing (300,000 under the last tick of a 680-wide chart).
            let label = num(t, a.decimals());
            let half = text_width(&label, SMALL) / 2.0;
            let centre = x.min(self.width - half - 2.0).max(half + 2.0);
            self.text(centre, y + 16.0, "middle", SMALL, &label);
        }
        self.line(x0, y, x1, y, "#889");
        self.text((x0 + x1) / 2.0, y + 32.0, "middle", SMALL, title);
    }

    /// A vertical value axis along `x` from `y0` (bottom, 0) to `y1` (top): grid lines to
    /// `right`, tick labels left of it, the title above it.
    pub fn y_axis(&mut self, a: &Axis, x: f64, y0: f64, y1: f64, right: f64, title: &str) {
        for t in a.ticks() {
            let y = a.at(t, y0, y1);
            self.line(x, y, right, y, "#e4e7ee");
            self.line(x - 4.0, y, x, y, "#889");
            self.text(x - 7.0, y + 4.0, "end", SMALL, &num(t, a.decimals()));
        }
        self.line(x, y0, x, y1, "#889");
        self.text(x - 7.0, y1 - 12.0, "start", SMALL, title);
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_at_the_ends_stay_inside_the_drawing() {
        let mut s = Svg::new("t", 680.0, 275.0, "t");
        s.x_axis(
            &Axis::to(300_000.0, 6),
            60.0,
            660.0,
            230.0,
            30.0,
            "TTFT (ms)",
        );
        let svg = s.finish();
        let last = svg
            .split("<text ")
            .find(|t| t.contains(">300,000<"))
            .expect("the last tick's label");
        let x: f64 = last
            .split("x=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .expect("its x");
        let half = text_width("300,000", SMALL) / 2.0;
        assert!(x + half <= 680.0 && x < 660.0, "centred at {x}");
    }

    #[test]
    fn axes_end_on_a_round_tick_at_or_above_the_data() {
        let a = Axis::to(1188.3, 5);
        assert_eq!((a.step, a.max), (250.0, 1250.0));
        assert_eq!(a.ticks().len(), 6);
        let a = Axis::to(0.37, 4);
        assert_eq!((a.step, a.max), (0.1, 0.4));
        assert_eq!(num(0.30000000000000004, a.decimals()), "0.3");
        let a = Axis::to(26.4, 5);
        assert_eq!((a.step, a.max), (10.0, 30.0));
        // A GPU's memory: the axis ends at the card's size, ticks stay round.
        let a = Axis::fixed(79.1, 5);
        assert_eq!(a.max, 79.1);
        assert_eq!(a.ticks().last(), Some(&60.0));
        // Degenerate data still gives an axis.
        assert_eq!(Axis::to(0.0, 5).max, 1.0);
    }

    #[test]
    fn numbers_are_grouped_and_trimmed() {
        assert_eq!(num(1250.0, 0), "1,250");
        assert_eq!(num(1234567.0, 0), "1,234,567");
        assert_eq!(num(12.50, 2), "12.5");
        assert_eq!(num(-1500.0, 0), "-1,500");
        assert_eq!(num(0.0, 2), "0");
        assert_eq!(num(999.96, 1), "1,000");
    }

    #[test]
    fn labels_move_aside_and_give_up_rather_than_overlap() {
        let mut s = Svg::new("t", 100.0, 100.0, "t");
        let bounds = (0.0, 0.0, 100.0, 100.0);
        for _ in AROUND {
            assert!(s.place_label(40.0, 50.0, "abc", &AROUND, bounds));
        }
        // Nowhere left.
        assert!(!s.place_label(40.0, 50.0, "abc", &AROUND, bounds));
        // Never outside the chart.
        assert!(!s.place_label(99.0, 99.0, "a long label", &AROUND, bounds));
    }
}
