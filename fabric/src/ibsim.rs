//! ibsim's client protocol, as `libumad2sim.so` speaks it, so that every
//! libibumad program (OpenSM, infiniband-diags) runs against ibkit's
//! fabric. This module is the codec only (no I/O); `ibkit fabric serve`
//! puts it on sockets.
//!
//! The facts, read from ibsim's `include/ibsim.h` and `umad2sim`:
//! * Sockets are Unix datagram sockets in the abstract namespace, named
//!   from a base (`IBSIM_SOCKNAME`, default `sim`): the server binds
//!   `<base>:ctl` and `<base>:out<i>` for each of its client slots; a client
//!   binds `<base>:ctl<pid>` and `<base>:in<pid>`, and the server connects
//!   slot `i` to the client's `in` socket when it attaches. Both sides
//!   count the name's terminating NUL in the address length, so the NUL is
//!   part of every abstract name.
//! * Control messages ([`SimCtl`]) are 80 bytes in host byte order: magic
//!   0xdeadbeef, client id, type, length and 64 bytes of data, answered in
//!   place (type [`CtlType::Error`] on failure).
//! * A packet ([`SimRequest`]) is 288 bytes: DLID, SLID, destination and
//!   source QP, status (32-bit fields), a 64-bit length and the 256-byte MAD.
//!   The LIDs hold a big-endian 16-bit LID in their first two bytes; QPs,
//!   status and length are big-endian. Status 110 (ETIMEDOUT) reports a
//!   request that got no response.
//! * The server puts the client's slot in the top 16 bits of a request's
//!   transaction ID, so that responses find their way back.

use mad_core::MAD_SIZE;
use std::fmt;

/// `SIM_MAGIC`.
pub const SIM_MAGIC: u32 = 0xdead_beef;
/// Client slots a server offers (`IBSIM_MAX_CLIENTS`).
pub const MAX_CLIENTS: usize = 10;
/// Size of a control message.
pub const CTL_SIZE: usize = 80;
/// Size of a packet.
pub const REQ_SIZE: usize = 288;
/// The status of a request nobody answered.
pub const ETIMEDOUT: u32 = 110;

/// Why bytes from a client are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// The datagram has the wrong size.
    Size {
        /// What it should be.
        want: usize,
        /// What it was.
        got: usize,
    },
    /// A control message without SIM_MAGIC.
    Magic(u32),
    /// An unknown control type.
    Type(u32),
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoError::Size { want, got } => write!(f, "{got} bytes, expected {want}"),
            ProtoError::Magic(m) => write!(f, "bad magic {m:#x}"),
            ProtoError::Type(t) => write!(f, "unknown control type {t}"),
        }
    }
}

impl std::error::Error for ProtoError {}

/// The control requests (`SIM_CTL_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtlType {
    /// The reply to a request that failed.
    Error = 0,
    /// Attach to a node ([`ClientInfo`]).
    Connect = 1,
    /// Detach.
    Disconnect = 2,
    /// The port's LID and state.
    GetPort = 3,
    /// Vendor, part, hardware and firmware versions.
    GetVendor = 4,
    /// The port's GID.
    GetGid = 5,
    /// The node GUID.
    GetGuid = 6,
    /// The NodeInfo attribute.
    GetNodeInfo = 7,
    /// The PortInfo attribute of the port in `data[0]` (0: the client's).
    GetPortInfo = 8,
    /// Claim or release the SM role (data: a host-order int).
    SetIsSm = 9,
    /// The P_Key table.
    GetPkeys = 10,
}

impl CtlType {
    fn from_u32(v: u32) -> Option<CtlType> {
        use CtlType::*;
        Some(match v {
            0 => Error,
            1 => Connect,
            2 => Disconnect,
            3 => GetPort,
            4 => GetVendor,
            5 => GetGid,
            6 => GetGuid,
            7 => GetNodeInfo,
            8 => GetPortInfo,
            9 => SetIsSm,
            10 => GetPkeys,
            _ => return None,
        })
    }
}

/// A control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimCtl {
    /// The client's slot (for Connect: unused).
    pub client: u32,
    /// The request, or Error in a reply.
    pub kind: CtlType,
    /// Length of the meaningful data.
    pub len: u32,
    /// The data.
    pub data: [u8; 64],
}

fn ne32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl SimCtl {
    /// Parses a control datagram.
    pub fn parse(b: &[u8]) -> Result<SimCtl, ProtoError> {
        if b.len() != CTL_SIZE {
            return Err(ProtoError::Size {
                want: CTL_SIZE,
                got: b.len(),
            });
        }
        let magic = ne32(b, 0);
        if magic != SIM_MAGIC {
            return Err(ProtoError::Magic(magic));
        }
        let t = ne32(b, 8);
        let kind = CtlType::from_u32(t).ok_or(ProtoError::Type(t))?;
        let mut data = [0u8; 64];
        data.copy_from_slice(&b[16..80]);
        Ok(SimCtl {
            client: ne32(b, 4),
            kind,
            len: ne32(b, 12),
            data,
        })
    }

    /// The datagram.
    pub fn encode(&self) -> [u8; CTL_SIZE] {
        let mut b = [0u8; CTL_SIZE];
        b[0..4].copy_from_slice(&SIM_MAGIC.to_ne_bytes());
        b[4..8].copy_from_slice(&self.client.to_ne_bytes());
        b[8..12].copy_from_slice(&(self.kind as u32).to_ne_bytes());
        b[12..16].copy_from_slice(&self.len.to_ne_bytes());
        b[16..80].copy_from_slice(&self.data);
        b
    }
}

/// The data of a Connect (`struct sim_client_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientInfo {
    /// In the request, the client's pid (its socket names end in it); in
    /// the reply, its slot.
    pub id: u32,
    /// The QP it serves (0: SMI/GSI).
    pub qp: u32,
    /// Whether it claims the SM role.
    pub issm: bool,
    /// The node it asks for (`SIM_HOST`; empty: the default node); in the
    /// reply, the node it got.
    pub nodeid: String,
}

impl ClientInfo {
    /// Reads it from a control message's data.
    pub fn parse(d: &[u8; 64]) -> ClientInfo {
        let name = &d[12..44];
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        ClientInfo {
            id: ne32(d, 0),
            qp: ne32(d, 4),
            issm: ne32(d, 8) != 0,
            nodeid: String::from_utf8_lossy(&name[..end]).into_owned(),
        }
    }

    /// Writes it into a control message's data.
    pub fn encode(&self, d: &mut [u8; 64]) {
        d[0..4].copy_from_slice(&self.id.to_ne_bytes());
        d[4..8].copy_from_slice(&self.qp.to_ne_bytes());
        d[8..12].copy_from_slice(&u32::from(self.issm).to_ne_bytes());
        d[12..44].fill(0);
        let n = self.nodeid.len().min(31);
        d[12..12 + n].copy_from_slice(&self.nodeid.as_bytes()[..n]);
    }
}

/// A packet between a client and the fabric (`struct sim_request`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRequest {
    /// Destination LID (0xFFFF: directed route).
    pub dlid: u16,
    /// Source LID (0: the sender's port LID).
    pub slid: u16,
    /// Destination QP.
    pub dqp: u32,
    /// Source QP.
    pub sqp: u32,
    /// 0, or ETIMEDOUT for a request nobody answered.
    pub status: u32,
    /// Bytes of MAD.
    pub length: u64,
    /// The MAD.
    pub mad: [u8; MAD_SIZE],
}

impl SimRequest {
    /// A client's request carrying `smp` to `dlid` (0xFFFF: by directed
    /// route), with status 0 and the whole MAD.
    pub fn new(smp: &mad_core::Smp, dlid: u16) -> SimRequest {
        SimRequest {
            dlid,
            slid: 0,
            dqp: 0,
            sqp: 0,
            status: 0,
            length: mad_core::MAD_SIZE as u64,
            mad: *smp.as_wire(),
        }
    }

    /// Parses a packet datagram.
    pub fn parse(b: &[u8]) -> Result<SimRequest, ProtoError> {
        if b.len() != REQ_SIZE {
            return Err(ProtoError::Size {
                want: REQ_SIZE,
                got: b.len(),
            });
        }
        let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let mut mad = [0u8; MAD_SIZE];
        mad.copy_from_slice(&b[32..288]);
        Ok(SimRequest {
            dlid: u16::from_be_bytes([b[0], b[1]]),
            slid: u16::from_be_bytes([b[4], b[5]]),
            dqp: be32(8),
            sqp: be32(12),
            status: be32(16),
            length: u64::from_be_bytes(b[24..32].try_into().unwrap_or([0; 8])),
            mad,
        })
    }

    /// The datagram.
    pub fn encode(&self) -> [u8; REQ_SIZE] {
        let mut b = [0u8; REQ_SIZE];
        b[0..2].copy_from_slice(&self.dlid.to_be_bytes());
        b[4..6].copy_from_slice(&self.slid.to_be_bytes());
        b[8..12].copy_from_slice(&self.dqp.to_be_bytes());
        b[12..16].copy_from_slice(&self.sqp.to_be_bytes());
        b[16..20].copy_from_slice(&self.status.to_be_bytes());
        b[24..32].copy_from_slice(&self.length.to_be_bytes());
        b[32..288].copy_from_slice(&self.mad);
        b
    }

    /// True for a response (the R bit of the method).
    pub fn is_response(&self) -> bool {
        self.mad[3] & 0x80 != 0
    }

    /// The management class.
    pub fn class(&self) -> u8 {
        self.mad[1]
    }

    /// The transaction ID.
    pub fn tid(&self) -> u64 {
        u64::from_be_bytes(self.mad[8..16].try_into().unwrap_or([0; 8]))
    }

    /// Replaces the transaction ID.
    pub fn set_tid(&mut self, tid: u64) {
        self.mad[8..16].copy_from_slice(&tid.to_be_bytes());
    }
}

/// The abstract socket name of the server's control socket.
pub fn ctl_name(base: &str) -> String {
    format!("{base}:ctl")
}

/// The abstract socket name of the server's socket for client slot `i`.
pub fn out_name(base: &str, i: usize) -> String {
    format!("{base}:out{i}")
}

/// The abstract socket name a client with `pid` receives packets on.
pub fn in_name(base: &str, pid: u32) -> String {
    format!("{base}:in{pid}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip_and_bad_ones_are_refused() {
        let mut c = SimCtl {
            client: 3,
            kind: CtlType::GetPortInfo,
            len: 64,
            data: [0; 64],
        };
        c.data[0] = 2;
        let b = c.encode();
        assert_eq!(&b[0..4], &SIM_MAGIC.to_ne_bytes());
        assert_eq!(SimCtl::parse(&b).unwrap(), c);
        assert_eq!(
            SimCtl::parse(&b[..79]),
            Err(ProtoError::Size { want: 80, got: 79 })
        );
        let mut bad = b;
        bad[0] ^= 1;
        assert!(matches!(SimCtl::parse(&bad), Err(ProtoError::Magic(_))));
        let mut bad = b;
        bad[8..12].copy_from_slice(&77u32.to_ne_bytes());
        assert_eq!(SimCtl::parse(&bad), Err(ProtoError::Type(77)));
    }

    #[test]
    fn client_info_is_the_c_layout() {
        let mut d = [0u8; 64];
        d[0..4].copy_from_slice(&4242u32.to_ne_bytes());
        d[8..12].copy_from_slice(&1u32.to_ne_bytes());
        d[12..15].copy_from_slice(b"H-7");
        let ci = ClientInfo::parse(&d);
        assert_eq!(
            ci,
            ClientInfo {
                id: 4242,
                qp: 0,
                issm: true,
                nodeid: "H-7".into()
            }
        );
        let mut e = [0xEEu8; 64];
        ci.encode(&mut e);
        assert_eq!(&e[..44], &d[..44]);
    }

    #[test]
    fn packets_are_big_endian_with_lids_in_the_first_bytes() {
        let mut b = [0u8; REQ_SIZE];
        // As umad2sim writes them: the LID as a __be16 stored in a u32.
        b[0..2].copy_from_slice(&0x1234u16.to_be_bytes());
        b[4..6].copy_from_slice(&0xFFFFu16.to_be_bytes());
        b[8..12].copy_from_slice(&1u32.to_be_bytes());
        b[16..20].copy_from_slice(&ETIMEDOUT.to_be_bytes());
        b[24..32].copy_from_slice(&256u64.to_be_bytes());
        b[32 + 3] = 0x81;
        b[32 + 8..32 + 16].copy_from_slice(&0x0003_0000_0000_0042u64.to_be_bytes());
        let r = SimRequest::parse(&b).unwrap();
        assert_eq!(
            (r.dlid, r.slid, r.dqp, r.status, r.length),
            (0x1234, 0xFFFF, 1, 110, 256)
        );
        assert!(r.is_response());
        assert_eq!(r.tid() >> 48, 3);
        assert_eq!(r.encode(), b);
        assert!(SimRequest::parse(&b[..287]).is_err());
    }
}
