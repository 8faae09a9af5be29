//! Tables, the Markdown and JSON results, and the machine description.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use crate::Options;

/// One result table of a suite, with its raw figures.
#[derive(Clone, Debug)]
pub struct Table {
    /// The suite that produced it.
    pub suite: String,
    /// Heading.
    pub title: String,
    /// Column names.
    pub columns: Vec<String>,
    /// Formatted rows.
    pub rows: Vec<Vec<String>>,
    /// Notes printed under the table (method, caveats).
    pub notes: Vec<String>,
    /// Raw figures (every run), for results.json.
    pub raw: Value,
}

impl Table {
    /// An empty table.
    #[must_use]
    pub fn new(suite: &str, title: &str, columns: &[&str]) -> Table {
        Table {
            suite: suite.to_owned(),
            title: title.to_owned(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
            raw: Value::Array(Vec::new()),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Adds a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Appends one raw record.
    pub fn raw(&mut self, record: Value) {
        if let Value::Array(records) = &mut self.raw {
            records.push(record);
        }
    }

    /// The table as Markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "### {}\n", self.title);
        let _ = writeln!(out, "| {} |", self.columns.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.columns.len()));
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }
}

/// Everything one invocation measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// The command line.
    pub command: String,
    /// UTC date and time.
    pub date: String,
    /// `nproc` and CPU model.
    pub machine: String,
    /// /proc/loadavg when the run started (other work on the machine).
    pub load: String,
    /// Runs per figure.
    pub runs: usize,
    /// The suites run, in order.
    pub suites: Vec<String>,
    /// Smoke mode.
    pub smoke: bool,
    /// Tables in suite order.
    pub tables: Vec<Table>,
}

impl Report {
    /// A report header for `options`.
    #[must_use]
    pub fn new(options: &Options) -> Report {
        // The flags as given (a load, a grid, a pattern change what a table means), then
        // the suites and runs they resolved to.
        let mut command = String::from("watchkeeper-bench");
        for arg in &options.args {
            command.push(' ');
            command.push_str(arg);
        }
        Report {
            command,
            date: crate::sys::utc_now(),
            machine: crate::sys::machine(),
            load: std::fs::read_to_string("/proc/loadavg")
                .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
            runs: options.runs,
            suites: options.suites.clone(),
            smoke: options.smoke,
            tables: Vec::new(),
        }
    }

    /// The whole report as Markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Command: `{}` (suites: {}; runs: {})  ",
            self.command,
            self.suites.join(", "),
            self.runs
        );
        let _ = writeln!(out, "Date: {}  ", self.date);
        let _ = writeln!(out, "Machine: {}  ", self.machine);
        let _ = writeln!(
            out,
            "Load average when the run started (other work shares the machine): {}  ",
            self.load
        );
        let _ = writeln!(
            out,
            "Each figure is the median of {} run(s); each ratio is the median of per-pair ratios of runs interleaved A, B, A, B.\n",
            self.runs
        );
        for table in &self.tables {
            out.push_str(&table.markdown());
            out.push('\n');
        }
        out
    }

    /// The whole report as JSON.
    #[must_use]
    pub fn json(&self) -> Value {
        json!({
            "command": self.command,
            "date": self.date,
            "machine": self.machine,
            "load": self.load,
            "runs": self.runs,
            "smoke": self.smoke,
            "tables": self.tables.iter().map(|t| json!({
                "suite": t.suite,
                "title": t.title,
                "columns": t.columns,
                "rows": t.rows,
                "notes": t.notes,
                "raw": t.raw,
            })).collect::<Vec<_>>(),
        })
    }

    /// Writes `results.md` and `results.json` into `dir`.
    ///
    /// # Errors
    /// The files cannot be written.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let md = dir.join("results.md");
        std::fs::write(&md, self.markdown()).map_err(|e| format!("{}: {e}", md.display()))?;
        let js = dir.join("results.json");
        let text = serde_json::to_string_pretty(&self.json()).map_err(|e| e.to_string())?;
        std::fs::write(&js, text).map_err(|e| format!("{}: {e}", js.display()))?;
        eprintln!("wrote {} and {}", md.display(), js.display());
        Ok(())
    }
}

/// Formats a float with `digits` decimals.
#[must_use]
pub fn f(value: f64, digits: usize) -> String {
    format!("{value:.digits$}")
}

/// Formats a ratio as `1.23x`.
#[must_use]
pub fn x(value: f64) -> String {
    if value.is_finite() {
        format!("{value:.2}x")
    } else {
        "n/a".to_owned()
    }
}
