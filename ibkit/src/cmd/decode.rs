//! `ibkit decode`: read MADs as hex text (one 256-byte MAD per line) or from a
//! LINKTYPE_INFINIBAND pcap file, and dump every field.

use crate::dump::{mad_json, mad_text, Mad};
use crate::pcap;
use std::io::{Read, Write};
use std::path::PathBuf;

/// One input item: where it came from and its MAD, or the problem with it.
pub struct Item {
    /// "line 3" / "packet 7".
    pub origin: String,
    /// The MAD or the error.
    pub mad: Result<[u8; 256], String>,
}

/// Parses one text line into a MAD: whitespace and `0x` prefixes are ignored.
/// Empty lines and lines starting with `#` are not MADs (`Ok(None)`).
pub fn parse_hex_line(line: &str) -> Result<Option<[u8; 256]>, String> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let mut digits = Vec::with_capacity(512);
    for tok in t.split_whitespace() {
        let tok = tok
            .strip_prefix("0x")
            .or_else(|| tok.strip_prefix("0X"))
            .unwrap_or(tok);
        for c in tok.chars() {
            let d = c
                .to_digit(16)
                .ok_or_else(|| format!("'{c}' is not a hex digit"))?;
            digits.push(d as u8);
        }
    }
    if digits.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    if digits.len() != 512 {
        return Err(format!("expected 256 bytes, got {}", digits.len() / 2));
    }
    let mut m = [0u8; 256];
    for (i, b) in m.iter_mut().enumerate() {
        *b = (digits[2 * i] << 4) | digits[2 * i + 1];
    }
    Ok(Some(m))
}

/// Splits an input (text or pcap, detected by the magic number) into items.
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
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match parse_hex_line(line) {
            Ok(None) => {}
            Ok(Some(m)) => items.push(Item {
                origin: format!("line {}", i + 1),
                mad: Ok(m),
            }),
            Err(e) => items.push(Item {
                origin: format!("line {}", i + 1),
                mad: Err(e),
            }),
        }
    }
    Ok(items)
}

/// Decodes every item to `out`, reporting bad items on `err`; returns how
/// many items could not be decoded.
pub fn decode_items(
    items: &[Item],
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<usize> {
    let mut bad = 0;
    let mut n = 0;
    for it in items {
        match &it.mad {
            Ok(bytes) => {
                n += 1;
                let m = Mad {
                    bytes,
                    origin: it.origin.clone(),
                };
                if json {
                    writeln!(out, "{}", mad_json(&m))?;
                } else {
                    writeln!(out, "{}", mad_text(&m, n))?;
                }
            }
            Err(e) => {
                bad += 1;
                writeln!(err, "ibkit decode: {}: {e}", it.origin)?;
            }
        }
    }
    Ok(bad)
}

/// Runs `ibkit decode [--json] [FILE|-]`.
pub fn run(json: bool, input: Option<PathBuf>) -> super::Outcome {
    let data = match input.as_deref() {
        None => read_stdin()?,
        Some(p) if p.as_os_str() == "-" => read_stdin()?,
        Some(p) => std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
    };
    let items = read_items(&data)?;
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    match decode_items(&items, json, &mut stdout.lock(), &mut stderr.lock()) {
        Ok(bad) => super::check(bad == 0, || {
            format!(
                "{bad} of {} MADs could not be decoded (each is named above)",
                items.len()
            )
        }),
        Err(e) => quiet_broken_pipe(e),
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

fn read_stdin() -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    std::io::stdin()
        .read_to_end(&mut v)
        .map_err(|e| e.to_string())?;
    Ok(v)
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
        let bad = decode_items(&items, true, &mut out, &mut err).unwrap();
        assert_eq!(bad, 2);
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("line 2: 'z' is not a hex digit"), "{err}");
        assert!(err.contains("line 3: expected 256 bytes, got 2"), "{err}");
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().count(), 2, "both good lines decoded");
    }
}
