//! Reading MADs out of pcap files of link type LINKTYPE_INFINIBAND (247):
//! each frame is LRH, optional GRH, BTH, DETH, the 256-byte MAD, ICRC, VCRC.

use mad_core::MAD_SIZE;

/// The pcap link type for raw InfiniBand frames.
pub const LINKTYPE_INFINIBAND: u32 = 247;

/// True when `data` starts with a classic pcap magic number (either byte
/// order, micro- or nanosecond timestamps).
pub fn is_pcap(data: &[u8]) -> bool {
    matches!(
        data.get(..4),
        Some(
            [0xd4, 0xc3, 0xb2, 0xa1]
                | [0xa1, 0xb2, 0xc3, 0xd4]
                | [0x4d, 0x3c, 0xb2, 0xa1]
                | [0xa1, 0xb2, 0x3c, 0x4d]
        )
    )
}

/// One packet of the capture: the MAD it carries, or why it carries none.
pub type Packet = Result<[u8; MAD_SIZE], PcapError>;

/// What is wrong with a capture, or with one of its packets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PcapError {
    /// No pcap magic number.
    #[error("not a pcap file")]
    NotPcap,
    /// The file header is cut short.
    #[error("truncated pcap header")]
    TruncatedHeader,
    /// Not LINKTYPE_INFINIBAND.
    #[error("pcap link type {0}, expected {LINKTYPE_INFINIBAND} (LINKTYPE_INFINIBAND)")]
    LinkType(u32),
    /// Reading failed (the I/O error, in words).
    #[error("reading the capture: {0}")]
    Io(String),
    /// A record header is cut short.
    #[error("truncated packet header")]
    TruncatedRecord,
    /// A record claims more than any frame.
    #[error("packet claims {0} bytes, more than any frame ({MAX_RECORD})")]
    RecordTooLong(u32),
    /// A record claims more than the file holds.
    #[error("packet claims {claims} bytes, file has {has}")]
    RecordCut {
        /// Bytes claimed.
        claims: u32,
        /// Bytes there.
        has: usize,
    },
    /// The frame ends inside the LRH.
    #[error("frame shorter than the LRH")]
    NoLrh,
    /// The LRH does not announce an IBA transport header.
    #[error("LRH next header {0}: not an IBA transport packet")]
    NotTransport(u8),
    /// The frame ends inside the BTH.
    #[error("frame too short for the BTH")]
    NoBth,
    /// Not a UD SEND: no MAD.
    #[error("BTH opcode {0:#04x} is not UD SEND: no MAD")]
    NotUdSend(u8),
    /// Neither to QP0 or QP1 nor from QP1.
    #[error("destination QP {0}, not from QP1: MADs travel to QP0 or QP1, or from QP1")]
    NotManagementQp(u32),
    /// The frame ends inside the MAD.
    #[error("frame of {len} bytes too short for a 256-byte MAD at offset {offset}")]
    ShortMad {
        /// The frame's length.
        len: usize,
        /// Where the MAD starts.
        offset: usize,
    },
}

impl From<std::io::Error> for PcapError {
    fn from(e: std::io::Error) -> PcapError {
        PcapError::Io(e.to_string())
    }
}

/// The largest frame a record may claim: no InfiniBand frame comes near
/// it (a 4096-byte MTU frame is under 4200 bytes), and a record that
/// claims more is broken or hostile, so reading stops there.
pub const MAX_RECORD: u32 = 65_536;

/// Splits a capture into packets. A broken file header is an error for the
/// whole file; a broken packet is an error for that packet only.
pub fn read(data: &[u8]) -> Result<Vec<Packet>, PcapError> {
    Ok(Reader::new(data)?.collect())
}

/// Reads a capture one record at a time from any reader, holding one
/// record in memory: an iterator of packets. A record header that is cut
/// short, claims more than [`MAX_RECORD`] bytes or more than the input
/// holds ends the iteration with an error for that packet.
pub struct Reader<R> {
    input: R,
    le: bool,
    frame: Vec<u8>,
    done: bool,
}

impl<R: std::io::Read> Reader<R> {
    /// Reads and checks the file header: a pcap magic number and link type
    /// [`LINKTYPE_INFINIBAND`].
    pub fn new(mut input: R) -> Result<Reader<R>, PcapError> {
        let mut h = [0u8; 24];
        let got = read_full(&mut input, &mut h)?;
        if got < 4 || !is_pcap(&h) {
            return Err(PcapError::NotPcap);
        }
        if got < 24 {
            return Err(PcapError::TruncatedHeader);
        }
        let le = h[0] == 0xd4 || h[0] == 0x4d;
        let linktype = u32_of(le, &h[20..24]) & 0x0FFF_FFFF;
        if linktype != LINKTYPE_INFINIBAND {
            return Err(PcapError::LinkType(linktype));
        }
        Ok(Reader {
            input,
            le,
            frame: Vec::new(),
            done: false,
        })
    }
}

fn u32_of(le: bool, b: &[u8]) -> u32 {
    let b: [u8; 4] = [b[0], b[1], b[2], b[3]];
    if le {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    }
}

/// Reads until `buf` is full or the input ends; how many bytes came.
fn read_full(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: std::io::Read> Iterator for Reader<R> {
    type Item = Packet;

    fn next(&mut self) -> Option<Packet> {
        if self.done {
            return None;
        }
        let mut h = [0u8; 16];
        let got = match read_full(&mut self.input, &mut h) {
            Ok(n) => n,
            Err(e) => {
                self.done = true;
                return Some(Err(e.into()));
            }
        };
        if got == 0 {
            self.done = true;
            return None;
        }
        if got < 16 {
            self.done = true;
            return Some(Err(PcapError::TruncatedRecord));
        }
        let incl = u32_of(self.le, &h[8..12]);
        if incl > MAX_RECORD {
            self.done = true;
            return Some(Err(PcapError::RecordTooLong(incl)));
        }
        self.frame.resize(incl as usize, 0);
        match read_full(&mut self.input, &mut self.frame) {
            Ok(n) if n == incl as usize => Some(mad_of_frame(&self.frame)),
            Ok(n) => {
                self.done = true;
                Some(Err(PcapError::RecordCut {
                    claims: incl,
                    has: n,
                }))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e.into()))
            }
        }
    }
}

/// Extracts the MAD from one InfiniBand frame.
pub fn mad_of_frame(f: &[u8]) -> Packet {
    let lrh = f.get(..8).ok_or(PcapError::NoLrh)?;
    let lnh = lrh[1] & 0x3;
    let mut off = match lnh {
        2 => 8,
        3 => 8 + 40,
        _ => return Err(PcapError::NotTransport(lnh)),
    };
    let bth = f.get(off..off + 12).ok_or(PcapError::NoBth)?;
    let opcode = bth[0];
    let dest_qp = u32::from_be_bytes([0, bth[5], bth[6], bth[7]]);
    off += 12;
    // UD SEND only (0x64) or SEND only with immediate (0x65) carry a DETH.
    if opcode != 0x64 && opcode != 0x65 {
        return Err(PcapError::NotUdSend(opcode));
    }
    let deth = f.get(off..off + 8).ok_or(PcapError::NoBth)?;
    let src_qp = u32::from_be_bytes([0, deth[5], deth[6], deth[7]]);
    off += 8;
    if opcode == 0x65 {
        off += 4;
    }
    // To QP 0 or 1, or from QP 1: a GSI answers a requester on the QP it
    // asked from.
    if dest_qp > 1 && src_qp != 1 {
        return Err(PcapError::NotManagementQp(dest_qp));
    }
    let mad = f.get(off..off + MAD_SIZE).ok_or(PcapError::ShortMad {
        len: f.len(),
        offset: off,
    })?;
    let mut m = [0u8; MAD_SIZE];
    m.copy_from_slice(mad);
    Ok(m)
}

/// CRC-32 (IEEE 802.3 polynomial, reflected), as the ICRC uses.
fn crc32(data: impl Iterator<Item = u8>) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// CRC-16 with polynomial 0x100B (reflected), as the VCRC uses.
fn crc16(data: &[u8]) -> u16 {
    let mut c = 0xFFFFu16;
    for &b in data {
        c ^= u16::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xD008
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// Addressing for one MAD frame.
#[derive(Clone, Copy, Debug)]
pub struct FrameAddr {
    /// LRH destination LID (0xFFFF for directed-route SMPs).
    pub dlid: u16,
    /// LRH source LID.
    pub slid: u16,
    /// Destination QP (0 for SMPs, 1 for GSI).
    pub dest_qp: u32,
    /// Source QP.
    pub src_qp: u32,
}

/// Builds one InfiniBand frame carrying `mad`: LRH (VL15 for QP0), BTH (UD
/// SEND only), DETH, the MAD, ICRC and VCRC.
pub fn frame(mad: &[u8; MAD_SIZE], a: FrameAddr) -> Vec<u8> {
    let words = (8 + 12 + 8 + MAD_SIZE + 4) / 4; // PktLen counts LRH..ICRC in 4-byte words
    let vl: u8 = if a.dest_qp == 0 { 15 } else { 0 };
    let mut f = Vec::with_capacity(8 + 12 + 8 + MAD_SIZE + 6);
    f.push(vl << 4); // VL, LVer 0
    f.push(0x02); // SL 0, LNH 2: IBA local (BTH follows)
    f.extend_from_slice(&a.dlid.to_be_bytes());
    f.extend_from_slice(&(words as u16 & 0x07FF).to_be_bytes());
    f.extend_from_slice(&a.slid.to_be_bytes());
    // BTH: opcode UD SEND only, SE 0 M 0 Pad 0 TVer 0, P_Key default, resv8a, DestQP, A 0, PSN 0
    f.push(0x64);
    f.push(0x00);
    f.extend_from_slice(&0xFFFFu16.to_be_bytes());
    f.push(0x00);
    f.extend_from_slice(&a.dest_qp.to_be_bytes()[1..]);
    f.extend_from_slice(&[0, 0, 0, 0]);
    // DETH: Q_Key (0 for QP0, the well-known 0x80010000 for QP1), resv, SrcQP
    let qkey: u32 = if a.dest_qp == 0 { 0 } else { 0x8001_0000 };
    f.extend_from_slice(&qkey.to_be_bytes());
    f.push(0);
    f.extend_from_slice(&a.src_qp.to_be_bytes()[1..]);
    f.extend_from_slice(mad);
    // ICRC over the invariant fields: VL and BTH resv8a count as all ones.
    let icrc = crc32(f.iter().enumerate().map(|(i, &b)| match i {
        0 => b | 0xF0,
        12 => 0xFF,
        _ => b,
    }));
    f.extend_from_slice(&icrc.to_le_bytes());
    let vcrc = crc16(&f);
    f.extend_from_slice(&vcrc.to_le_bytes());
    f
}

/// A complete pcap file (microsecond timestamps, link type 247) of frames,
/// each with the given timestamp in nanoseconds.
pub fn write(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    write_with_linktype(frames, LINKTYPE_INFINIBAND)
}

/// As [`write()`] with another link type (tshark 4.0 reads InfiniBand only
/// through a user link type, 147–162, mapped to its `infiniband` dissector).
pub fn write_with_linktype(frames: &[(u64, Vec<u8>)], linktype: u32) -> Vec<u8> {
    let mut out = file_header(linktype).to_vec();
    for (ns, f) in frames {
        push_record(&mut out, *ns, f);
    }
    out
}

/// The 24-byte file header of a capture of `linktype` (microsecond
/// timestamps), for a writer that appends records as they come
/// ([`push_record`]).
pub fn file_header(linktype: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // Time zone 0, accuracy 0.
    h[16..20].copy_from_slice(&65535u32.to_le_bytes());
    h[20..24].copy_from_slice(&linktype.to_le_bytes());
    h
}

/// Appends one record, frame `f` at `ns` nanoseconds, to `out`.
pub fn push_record(out: &mut Vec<u8>, ns: u64, f: &[u8]) {
    out.extend_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
    out.extend_from_slice(&(((ns / 1000) % 1_000_000) as u32).to_le_bytes());
    out.extend_from_slice(&(f.len() as u32).to_le_bytes());
    out.extend_from_slice(&(f.len() as u32).to_le_bytes());
    out.extend_from_slice(f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_check_values() {
        // The standard check value of CRC-32/ISO-HDLC for "123456789".
        assert_eq!(crc32(b"123456789".iter().copied()), 0xCBF4_3926);
    }

    #[test]
    fn frames_round_trip_through_a_capture() {
        let mut m = [0u8; 256];
        m[0] = 1;
        m[1] = 0x81;
        m[255] = 0xAB;
        let f = frame(
            &m,
            FrameAddr {
                dlid: 0xFFFF,
                slid: 0xFFFF,
                dest_qp: 0,
                src_qp: 0,
            },
        );
        assert_eq!(f.len(), 8 + 12 + 8 + 256 + 4 + 2);
        let cap = write(&[(1_500_000_000, f.clone()), (0, f[..100].to_vec())]);
        assert!(is_pcap(&cap));
        let pkts = read(&cap).unwrap();
        assert_eq!(pkts.len(), 2);
        assert_eq!(pkts[0].as_ref().unwrap(), &m);
        assert_eq!(
            pkts[1],
            Err(PcapError::ShortMad {
                len: 100,
                offset: 28
            })
        );
        assert!(pkts[1]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("too short"));
    }

    /// A GSI's answer goes to the QP its requester asked from: read. A
    /// datagram between two other QPs carries no MAD: refused.
    #[test]
    fn an_answer_from_qp1_to_a_requesters_qp_is_a_mad() {
        let mut m = [0u8; 256];
        m[1] = 0x03;
        let at = |dest_qp, src_qp| {
            frame(
                &m,
                FrameAddr {
                    dlid: 2,
                    slid: 1,
                    dest_qp,
                    src_qp,
                },
            )
        };
        let cap = write(&[(0, at(0x5d6f, 1)), (0, at(1, 0x5d6f)), (0, at(7, 5))]);
        let pkts = read(&cap).unwrap();
        assert_eq!(pkts[0].as_ref().unwrap(), &m);
        assert_eq!(pkts[1].as_ref().unwrap(), &m);
        assert_eq!(pkts[2], Err(PcapError::NotManagementQp(7)));
        // Streamed as `ibkit sm --pcap` writes it: the same file.
        let mut streamed = file_header(LINKTYPE_INFINIBAND).to_vec();
        push_record(&mut streamed, 0, &at(0x5d6f, 1));
        push_record(&mut streamed, 0, &at(1, 0x5d6f));
        push_record(&mut streamed, 0, &at(7, 5));
        assert_eq!(streamed, cap);
    }

    #[test]
    fn a_capture_of_another_link_type_is_refused() {
        let mut cap = write(&[]);
        cap[20] = 1;
        assert_eq!(read(&cap).unwrap_err(), PcapError::LinkType(1));
        assert!(read(&cap).unwrap_err().to_string().contains("link type 1"));
        assert_eq!(read(&cap[..10]).unwrap_err(), PcapError::TruncatedHeader);
    }

    /// A record claiming a huge frame stops the reading with an error for
    /// that packet, without allocating what it claims.
    #[test]
    fn a_record_claiming_too_much_stops_the_reading() {
        let mut cap = write(&[(0, vec![0; 40])]);
        let hdr = 24 + 8;
        cap[hdr..hdr + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let pkts = read(&cap).unwrap();
        assert_eq!(pkts.len(), 1);
        assert_eq!(pkts[0], Err(PcapError::RecordTooLong(u32::MAX)));
        // One claiming more than the file holds.
        cap[hdr..hdr + 4].copy_from_slice(&1000u32.to_le_bytes());
        let pkts = read(&cap).unwrap();
        assert_eq!(
            pkts[0].as_ref().unwrap_err().to_string(),
            "packet claims 1000 bytes, file has 40"
        );
        // Cut inside a record header.
        let pkts = read(&cap[..24 + 7]).unwrap();
        assert_eq!(pkts[0], Err(PcapError::TruncatedRecord));
    }
}
