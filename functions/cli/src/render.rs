//! Output for people: aligned tables, ages, status colours (only on a terminal, and
//! never with `NO_COLOR`), and progress lines on stderr so that nothing that waits is
//! silent. Output for scripts is `--json` on stdout; see [`crate::views`].

use std::io::{IsTerminal, Write};
use time::OffsetDateTime;

/// Whether stdout is a terminal that may get colour.
pub fn colour_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// One cell: its text and an optional ANSI colour applied after alignment, so escape
/// codes never count towards a column's width.
#[derive(Debug, Clone)]
pub struct Cell {
    text: String,
    colour: Option<&'static str>,
}

impl Cell {
    pub fn plain(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            colour: None,
        }
    }

    /// A status, coloured by what it means to an operator.
    pub fn status(text: impl Into<String>) -> Cell {
        let text = text.into();
        let colour = match text.as_str() {
            "running" | "idle" | "completed" => Some(GREEN),
            "active" | "in_progress" => Some(CYAN),
            "error" | "offline" | "unrouted" => Some(RED),
            "deleted" | "terminated" | "gone" => Some(DIM),
            "pending_create" | "creating" | "pending" | "queued" => Some(YELLOW),
            "pending_delete" | "pending_force_delete" | "deleting" => Some(MAGENTA),
            _ => None,
        };
        Cell { text, colour }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell::plain(text)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::plain(text)
    }
}

const GREEN: &str = "32";
const CYAN: &str = "36";
const RED: &str = "31";
const YELLOW: &str = "33";
const MAGENTA: &str = "35";
const DIM: &str = "2";

/// A table with a header row; columns are as wide as their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, two spaces between columns, no trailing spaces.
    pub fn render(&self, colour: bool) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.text.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self.header.iter().map(|h| Cell::plain(*h)).collect();
        for (r, row) in std::iter::once(&header).chain(&self.rows).enumerate() {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate().take(columns) {
                let pad = widths[i] - cell.text.chars().count();
                let last = i + 1 == columns.min(row.len());
                match cell.colour.filter(|_| colour) {
                    Some(code) => line.push_str(&format!("\x1b[{code}m{}\x1b[0m", cell.text)),
                    None if r == 0 && colour => {
                        line.push_str(&format!("\x1b[1m{}\x1b[0m", cell.text))
                    }
                    None => line.push_str(&cell.text),
                }
                if !last {
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `45s`, `12m`, `3h`, `2d`: how long ago `then` was.
pub fn age(then: OffsetDateTime, now: OffsetDateTime) -> String {
    let seconds = (now - then).whole_seconds().max(0);
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7199 => format!("{}m", seconds / 60),
        7200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86400),
    }
}

/// `0.4s`, `12.3s`, `2m03s`, `1h05m`, `-1.2s`: a gap between two stages, to the tenth of
/// a second while short; a negative one (clocks apart) keeps its sign.
pub fn gap(span: time::Duration) -> String {
    let sign = if span.is_negative() { "-" } else { "" };
    let tenths = (span.abs().whole_milliseconds() + 50) / 100;
    let seconds = tenths / 10;
    match seconds {
        0..=59 => format!("{sign}{}.{}s", seconds, tenths % 10),
        60..=3599 => format!("{sign}{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{sign}{}h{:02}m", seconds / 3600, seconds % 3600 / 60),
    }
}

/// A time for people: RFC 3339 in UTC, to the second.
pub fn when(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    let format =
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]Z");
    at.format(&format)
        .unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// `-` for nothing.
pub fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// Progress on stderr: one line per step of a command that changes something, and a
/// line that is wiped when done for reads on a terminal. Scripts read stdout only.
pub struct Progress {
    terminal: bool,
    transient: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            terminal: std::io::stderr().is_terminal(),
            transient: false,
        }
    }

    /// A step of a change: always shown.
    pub fn step(&mut self, message: impl AsRef<str>) {
        self.clear();
        eprintln!("» {}", message.as_ref());
    }

    /// A wait while reading: shown on a terminal only, and wiped by the next output.
    pub fn wait(&mut self, message: impl AsRef<str>) {
        if !self.terminal {
            return;
        }
        self.clear();
        eprint!("{}…", message.as_ref());
        let _ = std::io::stderr().flush();
        self.transient = true;
    }

    /// Wipes a wait line, if one is showing.
    pub fn clear(&mut self) {
        if self.transient {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
            self.transient = false;
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Progress::new()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn gaps_read_to_the_tenth_while_short_and_keep_their_sign() {
        let ms = time::Duration::milliseconds;
        assert_eq!(gap(ms(420)), "0.4s");
        assert_eq!(gap(ms(12_345)), "12.3s");
        assert_eq!(gap(ms(123_000)), "2m03s");
        assert_eq!(gap(ms(3_900_000)), "1h05m");
        assert_eq!(gap(ms(-1_200)), "-1.2s");
    }

    #[test]
    fn columns_align_and_lines_have_no_trailing_space() {
        let mut table = Table::new(&["NAME", "STATUS", "JOB"]);
        table.row(vec!["a".into(), Cell::status("running"), "-".into()]);
        table.row(vec![
            "longer-name".into(),
            Cell::status("deleted"),
            "7".into(),
        ]);
        let text = table.render(false);
        assert_eq!(
            text,
            "NAME         STATUS   JOB\na            running  -\nlonger-name  deleted  7\n"
        );
    }

    #[test]
    fn colour_does_not_change_alignment() {
        let mut table = Table::new(&["STATUS", "X"]);
        table.row(vec![Cell::status("running"), "1".into()]);
        let text = table.render(true);
        assert!(text.contains("\x1b[32mrunning\x1b[0m  1"), "{text:?}");
    }

    #[test]
    fn ages_are_short() {
        let now = datetime!(2025-01-02 00:00 UTC);
        assert_eq!(age(now - time::Duration::seconds(45), now), "45s");
        assert_eq!(age(now - time::Duration::minutes(12), now), "12m");
        assert_eq!(age(now - time::Duration::hours(3), now), "3h");
        assert_eq!(age(now - time::Duration::days(2), now), "2d");
        assert_eq!(age(now + time::Duration::seconds(5), now), "0s");
        assert_eq!(when(now), "2025-01-02 00:00:00Z");
    }
}
