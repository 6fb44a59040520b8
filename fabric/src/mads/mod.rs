//! MADs from outside, as `ibkit decode` reads them: hex text (one 256-byte
//! MAD per line) or a LINKTYPE_INFINIBAND capture, told apart by the magic
//! number, read one at a time in bounded memory whatever the input's size.
//! A bad line or record is an item with its error, named by where it was;
//! the items after it are read.

use crate::pcap;

pub mod decode;
pub mod dissect;
use mad_core::MAD_SIZE;
use std::fmt;
use std::io::{BufRead, Read};

/// The longest text line read as one: a MAD written as `0xAB ` per byte
/// takes 1,280 characters, so anything near this is not a MAD. A longer
/// line is an error for that line, skipped without being held.
pub const MAX_LINE: usize = 16 * 1024;

/// Why an input item holds no MAD.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    /// A character that is not a hex digit (shown escaped: the error
    /// never carries raw bytes from the input to a terminal).
    #[error("{0:?} is not a hex digit")]
    NotHex(char),
    /// An odd number of hex digits.
    #[error("odd number of hex digits ({0})")]
    OddDigits(usize),
    /// Not 256 bytes.
    #[error("expected {MAD_SIZE} bytes, got {0}")]
    Length(usize),
    /// A line longer than [`MAX_LINE`], skipped.
    #[error("line longer than {MAX_LINE} bytes")]
    LineTooLong,
    /// A capture record without a MAD.
    #[error(transparent)]
    Pcap(#[from] pcap::PcapError),
}

/// Parses one text line into a MAD: whitespace and `0x` prefixes are ignored.
/// Empty lines and lines starting with `#` are not MADs (`Ok(None)`).
pub fn parse_hex_line(line: &str) -> Result<Option<[u8; MAD_SIZE]>, ItemError> {
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
            let d = c.to_digit(16).ok_or(ItemError::NotHex(c))?;
            if let Some(b) = m.get_mut(n / 2) {
                *b = (*b << 4) | d as u8;
            }
            n += 1;
        }
    }
    if n % 2 != 0 {
        return Err(ItemError::OddDigits(n));
    }
    if n != 2 * MAD_SIZE {
        return Err(ItemError::Length(n / 2));
    }
    Ok(Some(m))
}

/// A MAD as one text line of hex digits, the form [`parse_hex_line`]
/// reads (`ibkit sample` prints its samples so).
pub fn hex_line(mad: &[u8; MAD_SIZE]) -> String {
    mad.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where an item was in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A text line, from 1.
    Line(u64),
    /// A capture record, from 1.
    Packet(u64),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Line(n) => write!(f, "line {n}"),
            Origin::Packet(n) => write!(f, "packet {n}"),
        }
    }
}

/// One input item: where it came from and its MAD, or the problem with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// Where it was.
    pub origin: Origin,
    /// The MAD or the error.
    pub mad: Result<[u8; MAD_SIZE], ItemError>,
}

/// Why an input cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It starts like a capture and is not one.
    #[error(transparent)]
    Input(pcap::PcapError),
    /// Reading it failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The items of an input, one at a time.
pub struct MadReader<R> {
    inner: Inner<R>,
}

enum Inner<R> {
    Pcap(pcap::Reader<R>, u64),
    Text { input: R, line: Vec<u8>, no: u64 },
}

/// A prefix of a pcap magic number (an input shorter than one).
fn is_pcap_start(head: &[u8]) -> bool {
    !head.is_empty()
        && [[0xd4, 0xc3], [0xa1, 0xb2], [0x4d, 0x3c]]
            .iter()
            .any(|m| head[0] == m[0] && head.get(1).is_none_or(|&b| b == m[1]))
}

impl<R: BufRead> MadReader<R> {
    /// Looks at the start of `input`: a capture's header is read (and an
    /// input that starts like one and is not is refused); anything else is
    /// hex text.
    pub fn new(mut input: R) -> Result<MadReader<R>, ReadError> {
        let head = input.fill_buf()?;
        let inner = if pcap::is_pcap(head) || (head.len() < 4 && is_pcap_start(head)) {
            Inner::Pcap(pcap::Reader::new(input).map_err(ReadError::Input)?, 0)
        } else {
            Inner::Text {
                input,
                line: Vec::with_capacity(2048),
                no: 0,
            }
        };
        Ok(MadReader { inner })
    }
}

impl<R: BufRead> Iterator for MadReader<R> {
    /// An item, or the read error that ends the input.
    type Item = Result<Item, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Pcap(r, no) => {
                let mad = r.next()?;
                *no += 1;
                Some(Ok(Item {
                    origin: Origin::Packet(*no),
                    mad: mad.map_err(ItemError::Pcap),
                }))
            }
            Inner::Text { input, line, no } => loop {
                line.clear();
                *no += 1;
                let n = match input.take(MAX_LINE as u64 + 1).read_until(b'\n', line) {
                    Ok(n) => n,
                    Err(e) => return Some(Err(e)),
                };
                if n == 0 {
                    return None;
                }
                let origin = Origin::Line(*no);
                if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
                    // Skip the rest of the line, a bounded piece at a time.
                    loop {
                        line.clear();
                        match input.take(MAX_LINE as u64).read_until(b'\n', line) {
                            Ok(k) if k == 0 || line.last() == Some(&b'\n') => break,
                            Ok(_) => {}
                            Err(e) => return Some(Err(e)),
                        }
                    }
                    return Some(Ok(Item {
                        origin,
                        mad: Err(ItemError::LineTooLong),
                    }));
                }
                match parse_hex_line(&String::from_utf8_lossy(line)) {
                    Ok(None) => continue,
                    Ok(Some(m)) => return Some(Ok(Item { origin, mad: Ok(m) })),
                    Err(e) => {
                        return Some(Ok(Item {
                            origin,
                            mad: Err(e),
                        }))
                    }
                }
            },
        }
    }
}

/// Every item of an input held in memory.
pub fn read_all(data: &[u8]) -> Result<Vec<Item>, ReadError> {
    MadReader::new(data)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(ReadError::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_and_0x_are_ignored() {
        let mut b = [0u8; 256];
        b[0] = 1;
        b[1] = 0x81;
        let spaced: String = b.iter().map(|x| format!("{x:02x} ")).collect();
        let prefixed: String = b.iter().map(|x| format!("0x{x:02X} ")).collect();
        let packed = hex_line(&b);
        for l in [spaced, prefixed, packed] {
            assert_eq!(parse_hex_line(&l).unwrap(), Some(b));
        }
        assert_eq!(parse_hex_line("   ").unwrap(), None);
        assert_eq!(parse_hex_line("# comment").unwrap(), None);
    }

    #[test]
    fn items_keep_their_line_numbers_past_comments_and_long_lines() {
        let good = hex_line(&[7u8; 256]);
        let input = format!("# head\n{good}\n{}\nzz\n\n{good}", "1".repeat(3 * MAX_LINE));
        let items = read_all(input.as_bytes()).unwrap();
        let origins: Vec<Origin> = items.iter().map(|i| i.origin).collect();
        assert_eq!(
            origins,
            [2, 3, 4, 6].map(Origin::Line).to_vec(),
            "{items:?}"
        );
        assert_eq!(items[0].mad, Ok([7u8; 256]));
        assert_eq!(items[1].mad, Err(ItemError::LineTooLong));
        assert_eq!(items[2].mad, Err(ItemError::NotHex('z')));
        assert_eq!(
            items[2].mad.as_ref().unwrap_err().to_string(),
            "'z' is not a hex digit"
        );
        assert_eq!(items[3].mad, Ok([7u8; 256]));
    }

    #[test]
    fn captures_are_read_record_by_record_and_a_false_magic_is_refused() {
        let m = [3u8; 256];
        let f = pcap::frame(
            &m,
            pcap::FrameAddr {
                dlid: 1,
                slid: 2,
                dest_qp: 0,
                src_qp: 0,
            },
        );
        let cap = pcap::write(&[(0, f), (0, Vec::new())]);
        let items = read_all(&cap).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].origin, Origin::Packet(1));
        assert_eq!(items[0].mad, Ok(m));
        assert!(items[1].mad.is_err());
        assert!(matches!(read_all(&[0xd4, 0xc3]), Err(ReadError::Input(_))));
    }
}
