//! Just enough SVG for the chart: elements with attributes and text, every value escaped, so
//! that what a rule file holds (an id, a label, a script's source) can never become markup.
//!
//! Styling is written as presentation attributes (`fill`, `stroke`), never as `style`
//! attributes or a `<style>` element: a page that inlines the chart under
//! `Content-Security-Policy: default-src 'self'` would drop those.

use std::fmt::{self, Display, Write as _};

/// An SVG document being written.
pub(crate) struct Svg {
    out: String,
}

/// A number of pixels, written with one decimal.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Px(pub f64);

impl Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1}", self.0)
    }
}

impl Svg {
    /// A `width`×`height` document whose accessible name (`<title>`) is `title`.
    pub(crate) fn new(width: f64, height: f64, title: &str) -> Svg {
        let mut svg = Svg { out: String::new() };
        svg.tag("svg")
            .attr("xmlns", "http://www.w3.org/2000/svg")
            .attr("width", Px(width))
            .attr("height", Px(height))
            .attr("viewBox", format!("0 0 {} {}", Px(width), Px(height)))
            .attr("role", "img")
            .attr("font-family", "sans-serif")
            .open();
        svg.tag("title").text(title);
        svg
    }

    /// Starts element `name`; add attributes, then end it with [`Tag::end`], [`Tag::text`]
    /// or [`Tag::open`].
    pub(crate) fn tag(&mut self, name: &'static str) -> Tag<'_> {
        self.out.push('<');
        self.out.push_str(name);
        Tag { svg: self, name }
    }

    /// Closes an element begun with [`Tag::open`].
    pub(crate) fn close(&mut self, name: &'static str) {
        let _ = writeln!(self.out, "</{name}>");
    }

    /// The document, closed.
    pub(crate) fn finish(mut self) -> String {
        self.close("svg");
        self.out
    }
}

/// An element being written: its attributes come next.
pub(crate) struct Tag<'a> {
    svg: &'a mut Svg,
    name: &'static str,
}

impl Tag<'_> {
    /// Adds `name="value"`, the value escaped.
    pub(crate) fn attr(self, name: &str, value: impl Display) -> Self {
        let out = &mut self.svg.out;
        let _ = write!(out, " {name}=\"");
        escape_into(&value.to_string(), out);
        out.push('"');
        self
    }

    /// Adds `name="value"` for each pair of `attrs`, in order, the values as [`Px`].
    pub(crate) fn px(self, attrs: &[(&str, f64)]) -> Self {
        attrs
            .iter()
            .fold(self, |tag, &(name, value)| tag.attr(name, Px(value)))
    }

    /// Adds how a text is set: its `font-size` (px) and its colour, `fill`.
    pub(crate) fn font(self, size: u32, fill: &str) -> Self {
        self.attr("font-size", size).attr("fill", fill)
    }

    /// Ends an empty element: `<rect … />`.
    pub(crate) fn end(self) {
        self.svg.out.push_str("/>\n");
    }

    /// Ends the element with `content` (escaped) as its text.
    pub(crate) fn text(self, content: &str) {
        let out = &mut self.svg.out;
        out.push('>');
        escape_into(content, out);
        let _ = writeln!(out, "</{}>", self.name);
    }

    /// Leaves the element open for children; [`Svg::close`] ends it.
    pub(crate) fn open(self) {
        self.svg.out.push_str(">\n");
    }
}

/// Appends `s` to `out` as XML text or attribute content: the five markup characters as
/// entities, and characters XML 1.0 cannot hold at all (most control characters) as U+FFFD,
/// so the document always parses.
pub(crate) fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_become_entities_and_control_characters_go() {
        let mut out = String::new();
        escape_into("a<b>&\"c\" 'd'\u{1}\u{7}\tok", &mut out);
        assert_eq!(
            out,
            "a&lt;b&gt;&amp;&quot;c&quot; &apos;d&apos;\u{FFFD}\u{FFFD}\tok"
        );
    }

    #[test]
    fn attributes_and_text_are_escaped() {
        let mut svg = Svg::new(10.0, 10.0, "<t>");
        svg.tag("text").attr("data-x", "\"&\"").text("<&>");
        let doc = svg.finish();
        assert!(doc.contains("<title>&lt;t&gt;</title>"), "{doc}");
        assert!(
            doc.contains("<text data-x=\"&quot;&amp;&quot;\">&lt;&amp;&gt;</text>"),
            "{doc}"
        );
        assert!(doc.ends_with("</svg>\n"));
    }
}
