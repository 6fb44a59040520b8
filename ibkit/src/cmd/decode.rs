//! `ibkit decode`: read MADs as hex text (one 256-byte MAD per line) or from a
//! LINKTYPE_INFINIBAND pcap file, and dump every field.

use crate::dump::{mad_json, mad_text, Mad};
use crate::pcap;
use mad_core::MAD_SIZE;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;

/// One input item: where it came from and its MAD, or the problem with it.
pub struct Item {
    /// "line 3" / "packet 7".
    pub origin: String,
    /// The MAD or the error.
    pub mad: Result<[u8; MAD_SIZE], String>,
}

/// The longest text line read as one: a MAD written as `0xAB ` per byte
/// takes 1,280 characters, so anything near this is not a MAD. A longer
/// line is an error for that line, skipped without being held.
pub const MAX_LINE: usize = 16 * 1024;

/// Bad items named one by one on standard error; past these, only counted.
pub const MAX_ERRORS_SHOWN: u64 = 100;

/// Parses one text line into a MAD: whitespace and `0x` prefixes are ignored.
/// Empty lines and lines starting with `#` are not MADs (`Ok(None)`).
pub fn parse_hex_line(line: &str) -> Result<Option<[u8; MAD_SIZE]>, String> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let mut m = [0u8; MAD_SIZE];
    let mut n = 0usize;
    for tok in t.split_whitespace() {
        let tok = tok
            .strip_prefix("0x")
            .or_else(|| tok.strip_prefix("0X"))
            .unwrap_or(tok);
        for c in tok.chars() {
            // Debug escapes control characters: the error never carries
            // raw bytes from the input to a terminal.
            let d = c
                .to_digit(16)
                .ok_or_else(|| format!("{c:?} is not a hex digit"))?;
            if let Some(b) = m.get_mut(n / 2) {
                *b = (*b << 4) | d as u8;
            }
            n += 1;
        }
    }
    if n % 2 != 0 {
        return Err(format!("odd number of hex digits ({n})"));
    }
    if n != 2 * MAD_SIZE {
        return Err(format!("expected {MAD_SIZE} bytes, got {}", n / 2));
    }
    Ok(Some(m))
}

/// What a decoding run saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// MADs decoded.
    pub decoded: u64,
    /// Items that held no MAD.
    pub bad: u64,
}

/// Reads MADs from `input` (a pcap or hex lines, told apart by the magic
/// number) one at a time, writes each decoded to `out` and each bad item
/// to `err` (the first [`MAX_ERRORS_SHOWN`]); memory stays bounded
/// whatever the input's size.
pub fn decode_stream(
    mut input: impl BufRead,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Summary, DecodeError> {
    let mut sum = Summary::default();
    let mut item =
        |origin: &dyn Fn() -> String, mad: Result<[u8; MAD_SIZE], String>| -> std::io::Result<()> {
            match mad {
                Ok(bytes) => {
                    sum.decoded += 1;
                    let m = Mad {
                        bytes: &bytes,
                        origin: origin(),
                    };
                    if json {
                        writeln!(out, "{}", mad_json(&m))
                    } else {
                        writeln!(out, "{}", mad_text(&m, sum.decoded as usize))
                    }
                }
                Err(e) => {
                    sum.bad += 1;
                    if sum.bad <= MAX_ERRORS_SHOWN {
                        writeln!(err, "ibkit decode: {}: {e}", origin())?;
                    }
                    if sum.bad == MAX_ERRORS_SHOWN {
                        writeln!(err, "ibkit decode: further bad items are only counted")?;
                    }
                    Ok(())
                }
            }
        };
    let head = input.fill_buf().map_err(DecodeError::Io)?;
    if pcap::is_pcap(head) || (head.len() < 4 && is_pcap_start(head)) {
        let reader = pcap::Reader::new(input).map_err(DecodeError::Input)?;
        for (i, p) in reader.enumerate() {
            item(&|| format!("packet {}", i + 1), p).map_err(DecodeError::Io)?;
        }
        return Ok(sum);
    }
    let mut line = Vec::with_capacity(2048);
    let mut no = 0u64;
    loop {
        line.clear();
        no += 1;
        let n = (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(DecodeError::Io)?;
        if n == 0 {
            break;
        }
        let origin = || format!("line {no}");
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            // Skip the rest of the line, a bounded piece at a time.
            loop {
                line.clear();
                let k = (&mut input)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut line)
                    .map_err(DecodeError::Io)?;
                if k == 0 || line.last() == Some(&b'\n') {
                    break;
                }
            }
            item(&origin, Err(format!("line longer than {MAX_LINE} bytes")))
                .map_err(DecodeError::Io)?;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        match parse_hex_line(&text) {
            Ok(None) => {}
            Ok(Some(m)) => item(&origin, Ok(m)).map_err(DecodeError::Io)?,
            Err(e) => item(&origin, Err(e)).map_err(DecodeError::Io)?,
        }
    }
    Ok(sum)
}

/// A prefix of a pcap magic number (an input shorter than one).
fn is_pcap_start(head: &[u8]) -> bool {
    !head.is_empty()
        && [[0xd4, 0xc3], [0xa1, 0xb2], [0x4d, 0x3c]]
            .iter()
            .any(|m| head[0] == m[0] && head.get(1).is_none_or(|&b| b == m[1]))
}

/// Why a decoding run stopped.
#[derive(Debug)]
pub enum DecodeError {
    /// The input is not a capture it claims to be.
    Input(String),
    /// Reading the input or writing the output failed.
    Io(std::io::Error),
}

/// Splits an input held in memory (text or pcap) into items; for tests
/// and small inputs.
pub fn read_items(data: &[u8]) -> Result<Vec<Item>, String> {
    if pcap::is_pcap(data) {
        return Ok(pcap::read(data)?
            .into_iter()
            .enumerate()
            .map(|(i, mad)| Item {
                origin: format!("packet {}", i + 1),
                mad,
            })
            .collect());
    }
    let text = String::from_utf8_lossy(data);
    Ok(text
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            parse_hex_line(line).transpose().map(|mad| Item {
                origin: format!("line {}", i + 1),
                mad,
            })
        })
        .collect())
}

/// Runs `ibkit decode [--json] [FILE|-]`.
/// Options of `ibkit decode`.
#[derive(Clone, Debug, clap::Args)]
pub struct DecodeArgs {
    /// One JSON object per MAD instead of the text dump.
    #[arg(long)]
    pub json: bool,
    /// Input file; `-` or nothing reads standard input.
    pub input: Option<PathBuf>,
}

/// Runs `ibkit decode`.
pub fn main(a: &DecodeArgs) -> super::Outcome {
    run(a.json, a.input.clone())
}

/// Decodes `input` (standard input when `None` or `-`) as text or JSON.
pub fn run(json: bool, input: Option<PathBuf>) -> super::Outcome {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let (mut out, mut err) = (BufWriter::new(stdout.lock()), stderr.lock());
    let res = match input.as_deref() {
        None => decode_stream(std::io::stdin().lock(), json, &mut out, &mut err),
        Some(p) if p.as_os_str() == "-" => {
            decode_stream(std::io::stdin().lock(), json, &mut out, &mut err)
        }
        Some(p) => {
            let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            decode_stream(BufReader::new(f), json, &mut out, &mut err)
        }
    };
    let res = res.and_then(|s| out.flush().map(|()| s).map_err(DecodeError::Io));
    match res {
        Ok(s) => super::check(s.bad == 0, || {
            format!(
                "{} of {} MADs could not be decoded ({} named above)",
                s.bad,
                s.bad + s.decoded,
                if s.bad <= MAX_ERRORS_SHOWN {
                    "each is".to_string()
                } else {
                    format!("the first {MAX_ERRORS_SHOWN} are")
                }
            )
        }),
        Err(DecodeError::Input(e)) => Err(e.into()),
        Err(DecodeError::Io(e)) => quiet_broken_pipe(e),
    }
}

/// A closed output pipe (`ibkit decode | head`) ends the run quietly.
pub fn quiet_broken_pipe(e: std::io::Error) -> super::Outcome {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(e.to_string().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hexline(b: &[u8; 256]) -> String {
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn whitespace_and_0x_are_ignored() {
        let mut b = [0u8; 256];
        b[0] = 1;
        b[1] = 0x81;
        let spaced = hexline(&b);
        let prefixed: String = b.iter().map(|x| format!("0x{x:02X} ")).collect();
        let packed: String = b.iter().map(|x| format!("{x:02x}")).collect();
        for l in [spaced, prefixed, packed] {
            assert_eq!(parse_hex_line(&l).unwrap(), Some(b));
        }
        assert_eq!(parse_hex_line("   ").unwrap(), None);
        assert_eq!(parse_hex_line("# comment").unwrap(), None);
    }

    #[test]
    fn bad_lines_name_the_problem_and_the_rest_is_decoded() {
        let good = hexline(&crate::cmd::sample::samples()[0].1);
        let input = format!("{good}\nzz\n0102\n{good}\n");
        let items = read_items(input.as_bytes()).unwrap();
        assert_eq!(items.len(), 4);
        let mut out = Vec::new();
        let mut err = Vec::new();
        let s = decode_stream(input.as_bytes(), true, &mut out, &mut err).unwrap();
        assert_eq!((s.decoded, s.bad), (2, 2));
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("line 2: 'z' is not a hex digit"), "{err}");
        assert!(err.contains("line 3: expected 256 bytes, got 2"), "{err}");
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().count(), 2, "both good lines decoded");
    }

    /// A line far longer than any MAD is one error, skipped without being
    /// held, and the lines after it are read; past the first errors shown,
    /// the rest are counted.
    #[test]
    fn long_lines_and_many_errors_stay_bounded() {
        let good = hexline(&crate::cmd::sample::samples()[0].1);
        let mut input = "z".repeat(10 * MAX_LINE);
        input.push('\n');
        input.push_str(&good);
        input.push('\n');
        for _ in 0..500 {
            input.push_str("\u{1b}]0;owned\u{7}\n");
        }
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let s = decode_stream(input.as_bytes(), false, &mut out, &mut err).unwrap();
        assert_eq!((s.decoded, s.bad), (1, 501));
        let err = String::from_utf8(err).unwrap();
        assert!(err.starts_with(&format!(
            "ibkit decode: line 1: line longer than {MAX_LINE} bytes"
        )));
        assert_eq!(err.lines().count() as u64, MAX_ERRORS_SHOWN + 1, "{err}");
        assert!(
            !err.contains('\u{1b}') && err.contains("'\\u{1b}' is not a hex digit"),
            "{err}"
        );
    }

    /// A capture is read a record at a time, its bad records named.
    #[test]
    fn captures_stream_and_their_bad_records_are_named() {
        let m = crate::cmd::sample::samples()[0].1;
        let f = pcap::frame(
            &m,
            pcap::FrameAddr {
                dlid: 1,
                slid: 2,
                dest_qp: 0,
                src_qp: 0,
            },
        );
        let frames: Vec<(u64, Vec<u8>)> = (0..300)
            .map(|i| (0, if i % 2 == 0 { f.clone() } else { Vec::new() }))
            .collect();
        let cap = pcap::write(&frames);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let s = decode_stream(&cap[..], true, &mut out, &mut err).unwrap();
        assert_eq!((s.decoded, s.bad), (150, 150));
        let err = String::from_utf8(err).unwrap();
        assert!(
            err.starts_with("ibkit decode: packet 2: frame shorter than the LRH"),
            "{err}"
        );
        // Two bytes of a magic number and nothing more: not a capture.
        let e = decode_stream(&[0xd4u8, 0xc3][..], true, &mut out, &mut Vec::new());
        assert!(matches!(e, Err(DecodeError::Input(_))));
    }
}
