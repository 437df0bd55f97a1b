//! What a headless run prints at the end: a few lines for a person, or
//! with `--json` one JSON object on one line for a program (the examples'
//! tests and the benchmark scripts read that).

use std::fmt::Write;

/// A headless run's summary: sentences for people ([`Summary::line`]) and
/// named values for programs ([`Summary::field`]).
pub struct Summary {
    example: String,
    lines: Vec<String>,
    fields: Vec<(String, Json)>,
}

/// A value as JSON writes it.
pub enum Json {
    /// A number, `true`, `false` or `null`, written as it is.
    Literal(String),
    /// A string, written quoted.
    Text(String),
}

/// What a summary's field may hold: numbers, flags, text, and `None`
/// (JSON's `null`: not measured, or not in this run).
pub trait SummaryValue {
    fn to_json(&self) -> Json;
}

macro_rules! whole_numbers {
    ($($t:ty),*) => {$(
        impl SummaryValue for $t {
            fn to_json(&self) -> Json {
                Json::Literal(self.to_string())
            }
        }
    )*};
}
whole_numbers!(u32, u64, usize, bool);

impl SummaryValue for f64 {
    fn to_json(&self) -> Json {
        // JSON has no NaN or infinity: not measured.
        Json::Literal(if self.is_finite() {
            format!("{self:.4}")
        } else {
            "null".into()
        })
    }
}

impl SummaryValue for &str {
    fn to_json(&self) -> Json {
        Json::Text(self.to_string())
    }
}

impl SummaryValue for String {
    fn to_json(&self) -> Json {
        Json::Text(self.clone())
    }
}

impl SummaryValue for Vec<u32> {
    /// A JSON array.
    fn to_json(&self) -> Json {
        let items: Vec<String> = self.iter().map(u32::to_string).collect();
        Json::Literal(format!("[{}]", items.join(",")))
    }
}

impl SummaryValue for std::collections::BTreeMap<String, f64> {
    /// A JSON object of numbers (`null` where one is not finite).
    fn to_json(&self) -> Json {
        let mut out = String::from("{");
        for (i, (key, value)) in self.iter().enumerate() {
            let value = match value.to_json() {
                Json::Literal(v) | Json::Text(v) => v,
            };
            let comma = if i == 0 { "" } else { "," };
            let _ = write!(out, "{comma}{}:{value}", quoted(key));
        }
        out.push('}');
        Json::Literal(out)
    }
}

impl<T: SummaryValue> SummaryValue for Option<T> {
    fn to_json(&self) -> Json {
        self.as_ref().map_or(Json::Literal("null".into()), T::to_json)
    }
}

impl Summary {
    /// An empty summary of `example`'s run.
    pub fn new(example: &str) -> Self {
        Self {
            example: example.into(),
            lines: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// A sentence for people (not in the JSON form).
    pub fn line(&mut self, text: impl Into<String>) -> &mut Self {
        self.lines.push(text.into());
        self
    }

    /// A named value for programs (not in the human form).
    pub fn field(&mut self, key: &str, value: impl SummaryValue) -> &mut Self {
        self.fields.push((key.into(), value.to_json()));
        self
    }

    /// Prints the sentences, the first after the example's name; with
    /// `json`, one JSON object instead: `{"example": NAME, FIELDS...}`.
    pub fn print(&self, json: bool) {
        if json {
            println!("{}", self.to_json());
        } else {
            for (i, line) in self.lines.iter().enumerate() {
                if i == 0 {
                    println!("{}: {line}", self.example);
                } else {
                    println!("  {line}");
                }
            }
        }
    }

    /// The JSON object, on one line.
    pub fn to_json(&self) -> String {
        let mut out = format!("{{\"example\":{}", quoted(&self.example));
        for (key, value) in &self.fields {
            let value = match value {
                Json::Literal(v) => v.clone(),
                Json::Text(t) => quoted(t),
            };
            let _ = write!(out, ",{}:{value}", quoted(key));
        }
        out.push('}');
        out
    }
}

/// `text` as a JSON string.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
