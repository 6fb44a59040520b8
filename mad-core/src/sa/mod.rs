//! Subnet Administration (management class 0x03, IBA 15): the SA MAD —
//! the common header, the RMPP header (IBA 13.6.2), SM_Key,
//! AttributeOffset and ComponentMask before 200 bytes of data — and every
//! record an SM's SA serves, each declared once as a table of
//! `(bit offset, width)` like the SMP attributes, with the table of its
//! components (the fields a ComponentMask bit selects, reserved ones
//! included, in the spec's order).
//!
//! * [`records`] — ClassPortInfo and the records of SMP attributes:
//!   NodeRecord, PortInfoRecord, SwitchInfoRecord, the forwarding, P_Key,
//!   SL-to-VL, VL arbitration and GUIDInfo table records, LinkRecord and
//!   SMInfoRecord.
//! * [`path`] — PathRecord and MultiPathRecord.
//! * [`mcmember`] — MCMemberRecord.
//! * [`service`] — ServiceRecord.
//! * [`inform`] — InformInfo and InformInfoRecord (a Report carries the
//!   SMP [`crate::notice::Notice`]).

pub mod inform;
pub mod mcmember;
pub mod path;
pub mod records;
pub mod service;

use crate::error::{need, Error};
use crate::field::{FieldDesc, Fields, Value};
use crate::mad::{MadHeader, Method, MgmtClass, Status};
use crate::MAD_SIZE;
use zerocopy::IntoBytes;

pub use inform::{InformInfo, InformInfoRecord};
pub use mcmember::McMemberRecord;
pub use path::{MultiPathRecord, PathRecord};
pub use records::*;
pub use service::ServiceRecord;

/// Bytes of the SA data area (IBA 15.2.1.1).
pub const SA_DATA_SIZE: usize = 200;
/// Where the SA data area starts in the MAD.
pub const SA_DATA_OFFSET: usize = 56;
/// The SA's class version.
pub const SA_CLASS_VERSION: u8 = 2;

enum_with_unknown! {
    /// SA attribute IDs (IBA 15.2.5).
    pub enum SaAttributeId(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// Notice (the data of a Report).
        Notice = 0x0002,
        /// InformInfo (a subscription).
        InformInfo = 0x0003,
        /// NodeRecord.
        NodeRecord = 0x0011,
        /// PortInfoRecord.
        PortInfoRecord = 0x0012,
        /// SLtoVLMappingTableRecord.
        SlToVlMappingTableRecord = 0x0013,
        /// SwitchInfoRecord.
        SwitchInfoRecord = 0x0014,
        /// LinearForwardingTableRecord.
        LinearForwardingTableRecord = 0x0015,
        /// RandomForwardingTableRecord.
        RandomForwardingTableRecord = 0x0016,
        /// MulticastForwardingTableRecord.
        MulticastForwardingTableRecord = 0x0017,
        /// SMInfoRecord.
        SmInfoRecord = 0x0018,
        /// LinkRecord.
        LinkRecord = 0x0020,
        /// GUIDInfoRecord.
        GuidInfoRecord = 0x0030,
        /// ServiceRecord.
        ServiceRecord = 0x0031,
        /// P_KeyTableRecord.
        PKeyTableRecord = 0x0033,
        /// PathRecord.
        PathRecord = 0x0035,
        /// VLArbitrationTableRecord.
        VlArbitrationTableRecord = 0x0036,
        /// MCMemberRecord.
        McMemberRecord = 0x0038,
        /// TraceRecord.
        TraceRecord = 0x0039,
        /// MultiPathRecord.
        MultiPathRecord = 0x003A,
        /// ServiceAssociationRecord.
        ServiceAssociationRecord = 0x003B,
        /// InformInfoRecord.
        InformInfoRecord = 0x00F3,
    }
}

enum_with_unknown! {
    /// The SA's class-specific status, MAD status bits 14..8 (IBA 15.2.1.1).
    pub enum SaStatus(u8) {
        /// No error.
        Ok = 0,
        /// The SA has no resources to complete the request.
        NoResources = 1,
        /// The request is not valid.
        ReqInvalid = 2,
        /// No record matches.
        NoRecords = 3,
        /// Get matched more than one record.
        TooManyRecords = 4,
        /// A GID in the request is not valid.
        ReqInvalidGid = 5,
        /// The ComponentMask does not select what the request needs.
        ReqInsufficientComponents = 6,
        /// The requester may not do this.
        ReqDenied = 7,
    }
}

impl SaStatus {
    /// The MAD status word with this code in bits 14..8.
    pub fn status(self) -> Status {
        Status(u16::from(u8::from(self)) << 8)
    }
    /// The SA code of a MAD status word.
    pub fn of(s: Status) -> SaStatus {
        SaStatus::from(s.class_specific() as u8)
    }
}

enum_with_unknown! {
    /// RMPPType (IBA 13.6.2.1).
    pub enum RmppType(u8) {
        /// Not an RMPP packet.
        None = 0,
        /// A segment of data.
        Data = 1,
        /// Acknowledges segments and opens the window.
        Ack = 2,
        /// The receiver stops the transfer.
        Stop = 3,
        /// Either side aborts the transfer.
        Abort = 4,
    }
}

/// RMPPFlags bit: RMPP is active in this MAD.
pub const RMPP_ACTIVE: u8 = 1;
/// RMPPFlags bit: the first segment of a transfer.
pub const RMPP_FIRST: u8 = 2;
/// RMPPFlags bit: the last segment of a transfer.
pub const RMPP_LAST: u8 = 4;
/// RRespTime meaning "no time given".
pub const RMPP_NO_RESP_TIME: u8 = 0x1F;

enum_with_unknown! {
    /// RMPPStatus (IBA 13.6.2.1, Table 166).
    pub enum RmppStatus(u8) {
        /// Normal.
        Ok = 0,
        /// Resources exhausted (Stop).
        ResourcesExhausted = 1,
        /// Total time too long.
        TotalTimeTooLong = 118,
        /// Inconsistent last and payload length.
        BadLength = 119,
        /// Inconsistent first and segment number.
        BadSegment = 120,
        /// Bad RMPPType.
        BadType = 121,
        /// NewWindowLast too small.
        WindowTooSmall = 122,
        /// SegmentNumber too big.
        SegmentTooBig = 123,
        /// Illegal status.
        IllegalStatus = 124,
        /// Unsupported version.
        UnsupportedVersion = 125,
        /// Too many retries.
        TooManyRetries = 126,
        /// Unspecified.
        Unspecified = 127,
    }
}

bitstruct! {
    /// The RMPP header: 12 bytes after the common MAD header.
    pub struct RmppHeader("RMPP header", 12) {
        /// RMPPVersion (1; 0 when RMPP is not used).
        version: u8 = 0, 8;
        /// RMPPType.
        rmpp_type: RmppType = 8, 8;
        /// RRespTime: 4.096 µs × 2^value the sender's response may take.
        resp_time: u8 = 16, 5;
        /// RMPPFlags: [`RMPP_ACTIVE`], [`RMPP_FIRST`], [`RMPP_LAST`].
        flags: u8 = 21, 3;
        /// RMPPStatus.
        status: RmppStatus = 24, 8;
        /// Data1: SegmentNumber (DATA and ACK).
        segment_number: u32 = 32, 32;
        /// Data2: PayloadLength (DATA, first and last) or NewWindowLast (ACK).
        payload_length_or_window: u32 = 64, 32;
    }
}

impl RmppHeader {
    /// RMPP is active.
    pub fn active(&self) -> bool {
        self.flags & RMPP_ACTIVE != 0
    }
    /// The first segment.
    pub fn first(&self) -> bool {
        self.flags & RMPP_FIRST != 0
    }
    /// The last segment.
    pub fn last(&self) -> bool {
        self.flags & RMPP_LAST != 0
    }
}

bitstruct! {
    /// What follows the RMPP header in an SA MAD (20 bytes).
    pub struct SaHeader("SA header", 20) {
        /// SM_Key: the requester's proof of trust (0 from untrusted ones).
        sm_key: u64 = 0, 64;
        /// AttributeOffset: the size of each record of a table, in 8-byte
        /// words.
        attribute_offset: u16 = 64, 16;
        /// ComponentMask: bit i selects component i of the record.
        component_mask: u64 = 96, 64;
    }
}

/// An SA record: its attribute ID, size and components.
pub trait SaRecord: Sized + Fields + core::fmt::Debug + PartialEq + Default {
    /// The SA attribute ID.
    const ID: SaAttributeId;
    /// The record's bytes (without the padding to 8-byte words).
    const SIZE: usize;
    /// The components a ComponentMask bit selects, bit i at index i,
    /// reserved ones included (named `reserved`).
    const COMPONENTS: &'static [FieldDesc];
    /// Decodes from the first `SIZE` bytes.
    fn decode(buf: &[u8]) -> Result<Self, Error>;
    /// Encodes into the first `SIZE` bytes.
    fn encode(&self, buf: &mut [u8]) -> Result<(), Error>;
    /// AttributeOffset for a table of these: `SIZE` in 8-byte words,
    /// rounded up.
    fn attribute_offset() -> u16 {
        Self::SIZE.div_ceil(8) as u16
    }
    /// The ComponentMask bit of the component named `name`.
    fn component(name: &str) -> Option<u64> {
        Self::COMPONENTS
            .iter()
            .position(|c| c.name == name)
            .map(|i| 1u64 << i)
    }
}

macro_rules! sa_record {
    ($t:ty, $id:ident, [$( ($name:literal, $off:expr, $width:expr) ),* $(,)?]) => {
        impl $crate::sa::SaRecord for $t {
            const ID: $crate::sa::SaAttributeId = $crate::sa::SaAttributeId::$id;
            const SIZE: usize = <$t>::SIZE;
            const COMPONENTS: &'static [$crate::field::FieldDesc] = &[
                $( $crate::field::FieldDesc { name: $name, offset: $off, width: $width }, )*
            ];
            fn decode(buf: &[u8]) -> Result<Self, $crate::error::Error> {
                <$t>::decode(buf)
            }
            fn encode(&self, buf: &mut [u8]) -> Result<(), $crate::error::Error> {
                <$t>::encode(self, buf)
            }
        }
    };
}
pub(crate) use sa_record;

/// An SA MAD, decoded: the common header, the RMPP header, the SA header
/// and the data area (a record, a segment of a table, or nothing).
#[derive(Clone, PartialEq, Eq)]
pub struct SaMad {
    /// The common MAD header.
    pub header: MadHeader,
    /// The RMPP header.
    pub rmpp: RmppHeader,
    /// SM_Key, AttributeOffset, ComponentMask.
    pub sa: SaHeader,
    /// The data area.
    pub data: [u8; SA_DATA_SIZE],
}

impl core::fmt::Debug for SaMad {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SaMad")
            .field("method", &self.method())
            .field("attribute", &self.attribute_id())
            .field("status", &self.header.status())
            .field("rmpp", &self.rmpp)
            .field("sa", &self.sa)
            .finish()
    }
}

impl SaMad {
    /// A request of `method` for `attr` with transaction ID `tid`: class
    /// 0x03, class version 2, no RMPP, zero SM_Key and mask.
    pub fn request(method: Method, attr: SaAttributeId, tid: u64) -> SaMad {
        let mut header = <MadHeader as zerocopy::FromZeros>::new_zeroed();
        header.base_version = 1;
        header.mgmt_class = MgmtClass::SubnAdm.into();
        header.class_version = SA_CLASS_VERSION;
        header.method = method.into();
        header.transaction_id.set(tid);
        header.attribute_id.set(attr.into());
        SaMad {
            header,
            rmpp: RmppHeader::default(),
            sa: SaHeader::default(),
            data: [0; SA_DATA_SIZE],
        }
    }

    /// Decodes a 256-byte MAD of the SA class.
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<SaMad, Error> {
        need("SA MAD", buf, MAD_SIZE)?;
        let header = *MadHeader::ref_from(buf)?;
        if header.mgmt_class != u8::from(MgmtClass::SubnAdm) {
            return Err(Error::InvalidField {
                what: "SA MAD",
                field: "mgmt_class",
                value: header.mgmt_class.into(),
                expected: "0x03 (subnet administration)",
            });
        }
        let rmpp = RmppHeader::decode(&buf[24..36])?;
        let sa = SaHeader::decode(&buf[36..56])?;
        // Copied once, where the SaMad is built (`need` checked the size).
        let mut m = SaMad {
            header,
            rmpp,
            sa,
            data: [0; SA_DATA_SIZE],
        };
        m.data.copy_from_slice(&buf[SA_DATA_OFFSET..MAD_SIZE]);
        Ok(m)
    }

    /// The 256 bytes on the wire.
    pub fn to_bytes(&self) -> [u8; MAD_SIZE] {
        let mut b = [0u8; MAD_SIZE];
        b[..24].copy_from_slice(self.header.as_bytes());
        // Every field of the two headers fits its width by construction
        // of their types but for the 5- and 3-bit ones, which are masked.
        let mut r = self.rmpp;
        r.resp_time &= 0x1F;
        r.flags &= 0x7;
        let _ = r.encode(&mut b[24..36]);
        let _ = self.sa.encode(&mut b[36..56]);
        b[SA_DATA_OFFSET..].copy_from_slice(&self.data);
        b
    }

    /// The 256 bytes of a response to this request, written without a
    /// copy of it: `method` and `status`, no RMPP, SM_Key 0,
    /// AttributeOffset `stride` (8-byte words), the request's
    /// ComponentMask, and `data` at the start of the data area (what does
    /// not fit is cut, the rest is zero).
    pub fn response_bytes(
        &self,
        method: Method,
        status: u16,
        stride: u16,
        data: &[u8],
    ) -> [u8; MAD_SIZE] {
        let mut b = [0u8; MAD_SIZE];
        self.write_response(&mut b, method, status, stride, data);
        b
    }

    /// [`SaMad::response_bytes`] written into `b`, which must be zero
    /// (a buffer already where it is going).
    #[inline]
    pub fn write_response(
        &self,
        b: &mut [u8; MAD_SIZE],
        method: Method,
        status: u16,
        stride: u16,
        data: &[u8],
    ) {
        let mut h = self.header;
        h.method = method.into();
        h.status.set(status);
        b[..24].copy_from_slice(h.as_bytes());
        let sa = SaHeader {
            sm_key: 0,
            attribute_offset: stride,
            component_mask: self.sa.component_mask,
        };
        let _ = sa.encode(&mut b[36..56]);
        let n = data.len().min(SA_DATA_SIZE);
        b[SA_DATA_OFFSET..SA_DATA_OFFSET + n].copy_from_slice(&data[..n]);
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.header.method()
    }
    /// The attribute.
    pub fn attribute_id(&self) -> SaAttributeId {
        SaAttributeId::from(self.header.attribute_id.get())
    }
    /// The SA status of a response.
    pub fn sa_status(&self) -> SaStatus {
        SaStatus::of(self.header.status())
    }
    /// The record in the data area.
    pub fn record<R: SaRecord>(&self) -> Result<R, Error> {
        R::decode(&self.data)
    }
    /// Puts `r` in the data area (the rest zero).
    pub fn set_record<R: SaRecord>(&mut self, r: &R) -> Result<(), Error> {
        self.data = [0; SA_DATA_SIZE];
        r.encode(&mut self.data)
    }
}

impl Fields for SaMad {
    fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
        self.rmpp.visit(f);
        self.sa.visit(f);
    }
}

macro_rules! any_record {
    ($( $var:ident($t:ty) ),* $(,)?) => {
        /// Any SA record, decoded by its attribute ID.
        #[derive(Clone, Debug, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum AnyRecord {
            $(
                #[doc = concat!("A ", stringify!($var), ".")]
                $var($t),
            )*
        }

        impl AnyRecord {
            /// Decodes the record of attribute `id` at the start of `buf`;
            /// `None` for an attribute without a record layout here.
            pub fn decode(id: SaAttributeId, buf: &[u8]) -> Option<Result<AnyRecord, Error>> {
                match id {
                    $( SaAttributeId::$var => Some(<$t as SaRecord>::decode(buf).map(AnyRecord::$var)), )*
                    _ => None,
                }
            }
            /// The record's fields, for dumps.
            pub fn fields(&self) -> &dyn Fields {
                match self {
                    $( AnyRecord::$var(r) => r, )*
                }
            }
            /// The record's bytes.
            pub fn size(&self) -> usize {
                match self {
                    $( AnyRecord::$var(_) => <$t as SaRecord>::SIZE, )*
                }
            }
            /// The spec name of the record.
            pub fn name(&self) -> &'static str {
                match self {
                    $( AnyRecord::$var(_) => <$t>::NAME, )*
                }
            }
        }
    };
}

any_record! {
    ClassPortInfo(ClassPortInfo),
    InformInfo(InformInfo),
    NodeRecord(NodeRecord),
    PortInfoRecord(PortInfoRecord),
    SlToVlMappingTableRecord(SlToVlMappingTableRecord),
    SwitchInfoRecord(SwitchInfoRecord),
    LinearForwardingTableRecord(LinearForwardingTableRecord),
    MulticastForwardingTableRecord(MulticastForwardingTableRecord),
    SmInfoRecord(SmInfoRecord),
    LinkRecord(LinkRecord),
    GuidInfoRecord(GuidInfoRecord),
    ServiceRecord(ServiceRecord),
    PKeyTableRecord(PKeyTableRecord),
    PathRecord(PathRecord),
    VlArbitrationTableRecord(VlArbitrationTableRecord),
    McMemberRecord(McMemberRecord),
    MultiPathRecord(MultiPathRecord),
    InformInfoRecord(InformInfoRecord),
}

impl SaMad {
    /// The records wholly in this MAD's data area: the one record of a
    /// Get, Set or their responses; for a segment of a table, one every
    /// AttributeOffset words (from where the first whole record of this
    /// segment starts, records running across segments) while whole
    /// records fit. A Report's Notice is an SMP attribute, not listed.
    pub fn records(&self) -> impl Iterator<Item = Result<AnyRecord, Error>> + '_ {
        let id = self.attribute_id();
        let step = usize::from(self.sa.attribute_offset) * 8;
        let table = matches!(
            self.method(),
            Method::GetTableResp | Method::GetMultiResp | Method::GetTraceTableResp
        ) && step > 0;
        let seg = self.rmpp.segment_number as usize;
        let first = if table && self.rmpp.active() && seg > 1 {
            let into = ((seg - 1) * SA_DATA_SIZE) % step;
            (step - into) % step
        } else {
            0
        };
        let count = if table {
            SA_DATA_SIZE.saturating_sub(first).div_ceil(step)
        } else {
            1
        };
        (0..count).filter_map(move |i| {
            let at = first + i * step;
            let r = AnyRecord::decode(id, self.data.get(at..)?)?;
            // A record cut by the end of the segment is not whole here.
            if matches!(r, Err(Error::Truncated { .. })) && table {
                return None;
            }
            Some(r)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::{NodeInfo, PortInfo};
    use crate::types::{Gid, Lid, PKey};

    /// Every component lies inside its record, in order, without overlap.
    fn components_are_a_partition_prefix<R: SaRecord>() {
        let mut end = 0;
        for c in R::COMPONENTS {
            assert!(
                c.width > 0,
                "{}: {} has no width",
                R::ID.name().unwrap_or("?"),
                c.name
            );
            assert!(c.offset >= end, "{:?}.{} overlaps", R::ID, c.name);
            end = c.offset + c.width;
            assert!(end <= R::SIZE * 8, "{:?}.{} lies outside", R::ID, c.name);
        }
        assert!(
            R::COMPONENTS.len() <= 64,
            "{:?}: more than a mask holds",
            R::ID
        );
    }

    /// A response written by `response_bytes` is the request, changed as
    /// a responder changes it: method, status, RMPP and SM_Key cleared,
    /// AttributeOffset and data set; TID, attribute and mask kept.
    #[test]
    fn response_bytes_are_the_request_turned_round() {
        let mut q = SaMad::request(
            Method::GetTable,
            SaAttributeId::PathRecord,
            0x1234_5678_9abc,
        );
        q.sa.sm_key = 77;
        q.sa.component_mask = 0x30;
        q.header.attribute_modifier.set(5);
        q.rmpp.rmpp_type = RmppType::Data;
        q.rmpp.flags = RMPP_ACTIVE | RMPP_FIRST | RMPP_LAST;
        q.data[..3].copy_from_slice(&[9, 9, 9]);
        let rec = [1u8, 2, 3, 4];
        let b = q.response_bytes(Method::GetTableResp, 0x0300, 2, &rec);
        let mut want = q.clone();
        want.header.method = Method::GetTableResp.into();
        want.header.status.set(0x0300);
        want.rmpp = RmppHeader::default();
        want.sa.sm_key = 0;
        want.sa.attribute_offset = 2;
        want.data = [0; SA_DATA_SIZE];
        want.data[..4].copy_from_slice(&rec);
        assert_eq!(b, want.to_bytes());
        // Data longer than the area is cut, not a panic.
        let long = [7u8; 300];
        let b = q.response_bytes(Method::GetResp, 0, 0, &long);
        assert_eq!(&b[SA_DATA_OFFSET..], &[7u8; SA_DATA_SIZE][..]);
    }

    #[test]
    fn components_partition_every_record() {
        components_are_a_partition_prefix::<ClassPortInfo>();
        components_are_a_partition_prefix::<NodeRecord>();
        components_are_a_partition_prefix::<PortInfoRecord>();
        components_are_a_partition_prefix::<SwitchInfoRecord>();
        components_are_a_partition_prefix::<LinearForwardingTableRecord>();
        components_are_a_partition_prefix::<MulticastForwardingTableRecord>();
        components_are_a_partition_prefix::<SlToVlMappingTableRecord>();
        components_are_a_partition_prefix::<VlArbitrationTableRecord>();
        components_are_a_partition_prefix::<PKeyTableRecord>();
        components_are_a_partition_prefix::<GuidInfoRecord>();
        components_are_a_partition_prefix::<LinkRecord>();
        components_are_a_partition_prefix::<SmInfoRecord>();
        components_are_a_partition_prefix::<PathRecord>();
        components_are_a_partition_prefix::<MultiPathRecord>();
        components_are_a_partition_prefix::<McMemberRecord>();
        components_are_a_partition_prefix::<ServiceRecord>();
        components_are_a_partition_prefix::<InformInfoRecord>();
    }

    /// The mask bits OpenSM's headers (ib_types.h) give, a few per record.
    #[test]
    fn component_bits_are_the_ones_sms_use() {
        assert_eq!(PathRecord::component("dgid"), Some(1 << 2));
        assert_eq!(PathRecord::component("dlid"), Some(1 << 4));
        assert_eq!(PathRecord::component("numb_path"), Some(1 << 12));
        assert_eq!(PathRecord::component("sl"), Some(1 << 15));
        assert_eq!(PathRecord::component("preference"), Some(1 << 22));
        assert_eq!(NodeRecord::component("node_guid"), Some(1 << 7));
        assert_eq!(NodeRecord::component("node_description"), Some(1 << 14));
        assert_eq!(
            PortInfoRecord::component("link_width_active"),
            Some(1 << 13)
        );
        assert_eq!(PortInfoRecord::component("lmc"), Some(1 << 20));
        assert_eq!(
            PortInfoRecord::component("client_reregister"),
            Some(1 << 43)
        );
        assert_eq!(PortInfoRecord::component("capability_mask2"), Some(1 << 53));
        assert_eq!(
            PortInfoRecord::component("link_speed_ext_enabled"),
            Some(1 << 57)
        );
        assert_eq!(McMemberRecord::component("join_state"), Some(1 << 16));
        assert_eq!(McMemberRecord::component("proxy_join"), Some(1 << 17));
        assert_eq!(GuidInfoRecord::component("guid0"), Some(1 << 4));
        assert_eq!(MultiPathRecord::component("sgid_count"), Some(1 << 19));
        assert_eq!(MultiPathRecord::component("service_id_lsb"), Some(1 << 21));
        assert_eq!(SmInfoRecord::component("sm_state"), Some(1 << 6));
        assert_eq!(InformInfoRecord::component("qpn"), Some(1 << 11));
        assert_eq!(
            InformInfoRecord::component("producer_type_or_vendor_id"),
            Some(1 << 15)
        );
        assert_eq!(ServiceRecord::component("service_name"), Some(1 << 6));
        assert_eq!(ServiceRecord::component("service_data64.2"), Some(1 << 36));
        assert_eq!(LinkRecord::component("to_lid"), Some(1 << 3));
        assert_eq!(PathRecord::component("nonsense"), None);
    }

    /// Where a record embeds an SMP attribute, its components are the
    /// attribute's fields, shifted by where it sits.
    #[test]
    fn embedded_attributes_agree_with_their_declarations() {
        let mut seen = 0;
        for f in PortInfo::FIELDS {
            if let Some(c) = PortInfoRecord::COMPONENTS.iter().find(|c| c.name == f.name) {
                assert_eq!((c.offset, c.width), (f.offset + 32, f.width), "{}", f.name);
                seen += 1;
            }
        }
        assert!(seen >= 50, "{seen} PortInfo fields matched");
        let mut seen = 0;
        for f in NodeInfo::FIELDS {
            if let Some(c) = NodeRecord::COMPONENTS.iter().find(|c| c.name == f.name) {
                assert_eq!((c.offset, c.width), (f.offset + 32, f.width), "{}", f.name);
                seen += 1;
            }
        }
        assert_eq!(seen, NodeInfo::FIELDS.len());
        for (i, c) in InformInfoRecord::COMPONENTS.iter().enumerate().skip(3) {
            if let Some(f) = InformInfo::FIELDS.iter().find(|f| f.name == c.name) {
                assert_eq!((c.offset, c.width), (f.offset + 192, f.width), "{i}");
            }
        }
    }

    /// Sizes and the AttributeOffset a table of each uses (8-byte words).
    #[test]
    fn sizes_and_attribute_offsets() {
        assert_eq!(PathRecord::attribute_offset(), 8);
        assert_eq!(NodeRecord::attribute_offset(), 14);
        assert_eq!(PortInfoRecord::attribute_offset(), 9);
        assert_eq!(McMemberRecord::attribute_offset(), 7);
        assert_eq!(ServiceRecord::attribute_offset(), 22);
        assert_eq!(SmInfoRecord::attribute_offset(), 4);
        assert_eq!(LinkRecord::attribute_offset(), 1);
        assert_eq!(InformInfoRecord::attribute_offset(), 8);
        assert_eq!(ClassPortInfo::SIZE, 72);
    }

    /// An SA MAD round-trips, with each header field at its byte.
    #[test]
    fn an_sa_mad_round_trips_with_its_headers_in_place() {
        let mut m = SaMad::request(Method::GetTable, SaAttributeId::PathRecord, 0x1234);
        m.rmpp = RmppHeader {
            version: 1,
            rmpp_type: RmppType::Data,
            resp_time: RMPP_NO_RESP_TIME,
            flags: RMPP_ACTIVE | RMPP_FIRST,
            status: RmppStatus::Ok,
            segment_number: 1,
            payload_length_or_window: 640,
        };
        m.sa.sm_key = 0x0102_0304_0506_0708;
        m.sa.attribute_offset = PathRecord::attribute_offset();
        m.sa.component_mask = PathRecord::component("dlid").unwrap();
        let pr = PathRecord {
            dgid: Gid::new(
                Gid::DEFAULT_PREFIX,
                crate::types::Guid(0x2c9_0000_0000_0007),
            ),
            dlid: Lid(7),
            slid: Lid(1),
            reversible: true,
            numb_path: 1,
            pkey: PKey(0xffff),
            sl: 3,
            mtu_selector: 2,
            mtu: 4,
            rate: 3,
            packet_life_time: 18,
            ..PathRecord::default()
        };
        m.set_record(&pr).unwrap();
        let b = m.to_bytes();
        assert_eq!((b[1], b[2], b[3]), (0x03, 2, 0x12));
        assert_eq!(&b[24..28], &[1, 1, (0x1F << 3) | 3, 0]);
        assert_eq!(&b[28..36], &[0, 0, 0, 1, 0, 0, 2, 0x80]);
        assert_eq!(&b[36..44], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[44..46], &[0, 8]);
        assert_eq!(&b[48..56], &[0, 0, 0, 0, 0, 0, 0, 0x10]);
        assert_eq!(&b[56 + 40..56 + 44], &[0, 7, 0, 1], "DLID, SLID");
        assert_eq!(b[56 + 49], 0x81, "reversible, one path");
        assert_eq!(b[56 + 53], 3, "SL in the low nibble after QoSClass");
        assert_eq!(b[56 + 54], 0x84, "MTU selector 2, MTU 4");
        let back = SaMad::parse(&b).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.record::<PathRecord>().unwrap(), pr);
        assert_eq!(pr.mtu_bytes(), 2048);
        assert!(back.rmpp.active() && back.rmpp.first() && !back.rmpp.last());
    }

    #[test]
    fn the_sa_status_codes_sit_in_the_class_specific_bits() {
        assert_eq!(SaStatus::NoRecords.status(), Status(0x0300));
        assert_eq!(SaStatus::ReqDenied.status(), Status(0x0700));
        assert_eq!(
            SaStatus::of(Status(0x0600)),
            SaStatus::ReqInsufficientComponents
        );
        assert_eq!(SaStatus::of(Status(0)), SaStatus::Ok);
    }

    #[test]
    fn not_an_sa_mad_is_refused() {
        let mut b = SaMad::request(Method::Get, SaAttributeId::NodeRecord, 1).to_bytes();
        assert!(SaMad::parse(&b[..255]).is_err());
        b[1] = 0x81;
        assert!(matches!(
            SaMad::parse(&b),
            Err(Error::InvalidField {
                field: "mgmt_class",
                ..
            })
        ));
    }
}

#[cfg(test)]
mod record_tests {
    extern crate std;
    use super::*;
    use crate::types::Lid;
    use std::vec::Vec;

    fn link(i: u16) -> LinkRecord {
        LinkRecord {
            from_lid: Lid(i),
            from_port_num: 1,
            to_port_num: 2,
            to_lid: Lid(i + 100),
        }
    }

    /// A GetTableResp segment lists its whole records; a later segment
    /// starts where the first whole record in it begins.
    #[test]
    fn table_segments_list_their_whole_records() {
        let mut m = SaMad::request(Method::GetTableResp, SaAttributeId::PortInfoRecord, 1);
        m.sa.attribute_offset = PortInfoRecord::attribute_offset();
        for (i, at) in [0usize, 72].into_iter().enumerate() {
            let r = PortInfoRecord {
                endport_lid: Lid(i as u16 + 1),
                port_num: 1,
                ..PortInfoRecord::default()
            };
            r.encode(&mut m.data[at..]).unwrap();
        }
        let recs: Vec<_> = m.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 2, "the third would run past 200 bytes");
        assert!(matches!(&recs[1], AnyRecord::PortInfoRecord(r) if r.endport_lid == Lid(2)));

        // Segment 2 of a table of 72-byte records: 200 % 72 = 56 bytes of
        // the third record came first, so the fourth starts at 16.
        m.rmpp.flags = RMPP_ACTIVE;
        m.rmpp.segment_number = 2;
        m.data = [0; SA_DATA_SIZE];
        let r = PortInfoRecord {
            endport_lid: Lid(4),
            ..PortInfoRecord::default()
        };
        r.encode(&mut m.data[16..]).unwrap();
        let first = m.records().next().unwrap().unwrap();
        assert!(matches!(first, AnyRecord::PortInfoRecord(r) if r.endport_lid == Lid(4)));

        // A Get response: one record at the start.
        let mut g = SaMad::request(Method::GetResp, SaAttributeId::LinkRecord, 2);
        g.set_record(&link(5)).unwrap();
        let recs: Vec<_> = g.records().collect();
        assert_eq!(recs, [Ok(AnyRecord::LinkRecord(link(5)))]);
        assert_eq!(recs[0].as_ref().unwrap().name(), "LinkRecord");
        // An attribute without a layout here: nothing.
        let t = SaMad::request(Method::GetResp, SaAttributeId::TraceRecord, 3);
        assert_eq!(t.records().count(), 0);
    }
}
