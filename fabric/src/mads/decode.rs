//! `ibkit decode`'s stream: MADs read one at a time ([`MadReader`]), each
//! dissected ([`super::dissect`]) as text or JSON to one writer and each bad
//! item named on another, with the errors shown bounded and memory bounded
//! whatever the input's size.

use super::dissect::{mad_json, mad_text, Mad};
use super::{MadReader, ReadError};
use mad_core::MAD_SIZE;
use std::io::{BufRead, Write};

/// Bad items named one by one on standard error; past these, only counted.
pub const MAX_ERRORS_SHOWN: u64 = 100;

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
    input: impl BufRead,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Summary, DecodeError> {
    let mut sum = Summary::default();
    let mut item = |origin: &dyn Fn() -> String,
                    mad: Result<[u8; MAD_SIZE], super::ItemError>|
     -> std::io::Result<()> {
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
    for it in MadReader::new(input).map_err(|e| match e {
        ReadError::Input(s) => DecodeError::Input(s),
        ReadError::Io(e) => DecodeError::Io(e),
    })? {
        let it = it.map_err(DecodeError::Io)?;
        item(&|| it.origin.to_string(), it.mad).map_err(DecodeError::Io)?;
    }
    Ok(sum)
}

/// Why a decoding run stopped.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The input is not a capture it claims to be.
    #[error(transparent)]
    Input(crate::pcap::PcapError),
    /// Reading the input or writing the output failed.
    #[error(transparent)]
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap;
    use crate::samples::samples;

    #[test]
    fn bad_lines_name_the_problem_and_the_rest_is_decoded() {
        let good = super::super::hex_line(&samples()[0].1);
        let input = format!("{good}\nzz\n0102\n{good}\n");
        let items = super::super::read_all(input.as_bytes()).unwrap();
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
        let good = super::super::hex_line(&samples()[0].1);
        let mut input = "z".repeat(10 * super::super::MAX_LINE);
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
            "ibkit decode: line 1: line longer than {} bytes",
            super::super::MAX_LINE
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
        let m = samples()[0].1;
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
